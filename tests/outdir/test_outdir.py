"""railforge/plan/outdir.py owns the generated folder: where it is, plan.json read with the schema check, and
artifact paths; every tool takes them from it (parsed here, so a new spelling elsewhere fails)."""

from __future__ import annotations

import ast
from pathlib import Path

import orjson
import pytest

from railforge.plan import outdir
from railforge.plan.model import SCHEMA_VERSION
from tests.conftest import ROOT, run_cli

PACKAGE = ROOT / "railforge"
SPEC = ROOT / "tests" / "specs" / "tiny-roce.yaml"


@pytest.fixture(scope="module")
def build(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("outdir") / "generated"
    run_cli("build", str(SPEC), "--out", str(out), "--only", "plan,sonic")
    return out


def test_locate_from_cluster_folder_spec_or_out(build, tmp_path):
    cluster = build.parent
    (cluster / "cluster.yaml").write_text("")
    assert outdir.locate(cluster) == outdir.locate(cluster / "cluster.yaml") == outdir.locate(tmp_path, build) == build
    with pytest.raises(outdir.MissingBuild, match=f"{tmp_path / 'generated' / 'plan.json'} not found: run"):
        outdir.locate(tmp_path)
    assert outdir.default_out(tmp_path / "cluster.yaml") == tmp_path / "generated"


def test_read_checks_the_schema_version(build, tmp_path):
    plan, folder = outdir.load(build.parent, build)
    assert folder == build and plan.cluster.name == "tiny-roce"
    raw = orjson.loads((build / "plan.json").read_bytes())
    raw["schema_version"] = SCHEMA_VERSION + 1
    (tmp_path / "plan.json").write_bytes(orjson.dumps(raw))
    with pytest.raises(outdir.PlanFileError, match=rf"plan.json: plan schema_version {SCHEMA_VERSION + 1}; this "
                                                    rf"railforge reads schema_version {SCHEMA_VERSION}"):
        outdir.read(tmp_path / "plan.json")
    (tmp_path / "plan.json").write_text("[1]")
    with pytest.raises(outdir.PlanFileError, match="not a railforge plan"):
        outdir.read(tmp_path / "plan.json")
    raw["schema_version"] = SCHEMA_VERSION
    del raw["devices"]
    (tmp_path / "plan.json").write_bytes(orjson.dumps(raw))
    with pytest.raises(outdir.PlanFileError, match="not a valid railforge plan: devices is required but missing"):
        outdir.read(tmp_path / "plan.json")


def test_tools_refuse_a_plan_of_another_schema_version(build, tmp_path):
    """verify read the plan without the version check before; now every tool names the file and version."""
    raw = orjson.loads((build / "plan.json").read_bytes())
    raw["schema_version"] = 99
    (tmp_path / "plan.json").write_bytes(orjson.dumps(raw))
    lldp = tmp_path / "lldp"
    lldp.mkdir()
    for args in (("verify", "cabling", str(tmp_path), "--lldp", str(lldp), "--out", str(tmp_path)),
                 ("ztp", str(tmp_path), "--server", "http://10.0.0.1", "--out", str(tmp_path))):
        proc = run_cli(*args, check=False)
        assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr
        assert "schema_version 99" in proc.stderr, (args, proc.stderr)


def test_artifact_paths(build):
    assert outdir.config_file("su001-leaf-r0", "frr.conf") == "configs/su001-leaf-r0/frr.conf"
    assert outdir.ztp_file("s", "ztp.json") == "ztp/s/ztp.json" and outdir.KEA == "ztp/kea-dhcp4.conf"
    sonic_switches = {p.parent.name for p in (build / outdir.CONFIGS).glob("*/config_db.json")}
    assert sonic_switches and all((build / outdir.config_file(s, "frr.conf")).is_file() for s in sonic_switches)


def _spellings(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    found = []
    for node in ast.walk(tree):
        text = None
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            text = node.value
        elif isinstance(node, ast.JoinedStr):
            text = "".join(v.value for v in node.values if isinstance(v, ast.Constant))
        prefixes = ("configs/", "ztp/", "generated/", "grafana/")
        if text is not None and (text == "plan.json" or text.startswith(prefixes)):
            found.append(f"{node.lineno}: {text!r}")
        if (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and isinstance(node.right, ast.Constant)
                and node.right.value in (outdir.GENERATED, outdir.CONFIGS, outdir.ZTP, outdir.PLAN)):
            found.append(f"{node.lineno}: / {node.right.value!r}")
    return found


def test_only_outdir_spells_generated_paths():
    found = {str(p.relative_to(PACKAGE)): s for p in sorted(PACKAGE.rglob("*.py"))
             if p.name != "outdir.py" and (s := _spellings(p))}
    assert found == {}


def test_the_spelling_scan_sees_each_form(tmp_path):
    f = tmp_path / "m.py"
    f.write_text('"""configs/x in a docstring is prose"""\na = folder / "configs"\nb = f"ztp/{name}/x"\n'
                 'c = "plan.json"\n')
    assert {int(s.split(":")[0]) for s in _spellings(f)} == {2, 3, 4}
