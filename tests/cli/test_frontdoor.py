"""What a new user meets first: `--version`, commands in the order of the work, `--only` naming the families,
`railforge init` writing a starter spec that validates and builds, and the growth note of validate/build."""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from railforge.cli.main import WORK_ORDER
from railforge.render import families
from tests.conftest import ROOT

MINIMAL = ROOT / "inventory" / "minimal" / "cluster.yaml"


def rf(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "200", "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "railforge", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=300)


def test_version():
    proc = rf("--version")
    assert proc.returncode == 0
    assert proc.stdout == f"railforge {importlib.metadata.version('railforge')}\n"


def test_commands_are_listed_in_the_order_of_the_work():
    help_text = rf("--help").stdout
    listed = re.findall(r"^│ (\w[\w-]*) ", help_text.split("Commands")[1], flags=re.M)
    known = [c for c in listed if c in WORK_ORDER]
    assert known == [c for c in WORK_ORDER if c in listed]
    assert listed[: len(known)] == known
    assert {"init", "validate", "build", "diff", "ztp", "lab", "verify"} <= set(listed)


def test_only_help_lists_every_family():
    help_text = " ".join(rf("build", "--help").stdout.replace("│", " ").split())
    for fam in families():
        assert re.search(rf"\b{re.escape(fam.name)}\b", help_text.split("--only", 1)[1].split("--limit")[0]), fam.name


def test_init_writes_the_starter_that_validates_and_builds(tmp_path):
    folder = tmp_path / "inventory" / "acme-pod1"
    proc = rf("init", str(folder), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    spec = folder / "cluster.yaml"
    text = spec.read_text()
    assert "\nname: acme-pod1\n" in text and "yaml-language-server" not in text
    expected = [line for line in MINIMAL.read_text().splitlines() if "yaml-language-server" not in line]
    assert text.splitlines() == [line.replace("my-cluster", "acme-pod1") if line.startswith("name:") else line
                                 for line in expected]
    assert rf("validate", str(spec), cwd=tmp_path).returncode == 0
    build = rf("build", str(spec), cwd=tmp_path)
    assert build.returncode == 0, build.stderr
    plan = json.loads((folder / "generated" / "plan.json").read_text())
    assert (plan["cluster"]["name"], plan["cluster"]["gpus"], plan["cluster"]["sus"]) == ("acme-pod1", 256, 1)


def test_init_never_overwrites_and_names_a_bad_name(tmp_path):
    spec = tmp_path / "c1" / "cluster.yaml"
    spec.parent.mkdir()
    spec.write_text("mine\n")
    proc = rf("init", str(spec.parent))
    assert proc.returncode == 2 and "already exists" in proc.stderr and "Traceback" not in proc.stderr
    assert spec.read_text() == "mine\n"
    proc = rf("init", str(tmp_path / "Not_Valid"))
    assert proc.returncode == 2 and "'Not_Valid' is not a valid cluster name" in proc.stderr
    assert not (tmp_path / "Not_Valid").exists()
    assert rf("init", str(tmp_path / "Not_Valid"), "--name", "ok-name").returncode == 0


def test_packaged_starter_is_the_minimal_example():
    packaged = ROOT / "railforge" / "spec" / "templates" / "minimal.yaml"
    assert packaged.read_bytes() == MINIMAL.read_bytes()


@pytest.mark.parametrize(("count", "maximum", "says"), [
    (1, 4, "1 of 4 SUs built (scalable_units.max: 4); growing to 4 SUs only adds"),
    (2, 2, "2 of 2 SUs built, the design maximum"),
])
def test_validate_and_build_say_what_max_is_and_what_growing_past_it_costs(tmp_path, count, maximum, says):
    spec = tmp_path / "cluster.yaml"
    spec.write_text(MINIMAL.read_text().replace("count: 1", f"count: {count}").replace("max: 4", f"max: {maximum}"))
    shown = " ".join(rf("validate", str(spec)).stdout.split())
    assert says in shown and "--allow-renumber" in shown
    build = rf("build", str(spec), "--out", str(tmp_path / "out"))
    assert says in " ".join(build.stderr.split())


def test_lab_lldp_help_says_how_verify_reads_its_files():
    help_text = " ".join(rf("lab", "lldp", "--help").stdout.replace("│", " ").split())
    assert "railforge verify cabling CLUSTER --lldp FOLDER --partial --no-speed" in help_text


def test_ztp_hint_names_a_mac_file_that_exists(tmp_path):
    cluster = tmp_path / "c1"
    cluster.mkdir()
    (cluster / "cluster.yaml").write_text((ROOT / "tests" / "specs" / "tiny-roce.yaml").read_text())
    assert rf("build", str(cluster / "cluster.yaml"), "--only", "plan,ztp,sonic").returncode == 0
    proc = rf("ztp", str(cluster), "--server", "http://10.250.0.5/")
    assert proc.returncode == 0, proc.stderr
    note = " ".join(proc.stderr.split())
    named = re.findall(r"(/\S+switch-macs\.csv)", note)
    assert named, note
    assert Path(named[0]).is_file(), f"the hint's first file does not exist: {named[0]}"
    assert "--macs FILE" in note
