"""`railforge diff`, the work order and the renumbering guard of `build`, on the A800 example grown and re-sized."""

from __future__ import annotations

import copy
import csv
import hashlib
import subprocess
from pathlib import Path

import openpyxl
import orjson
import pytest
import yaml

from railforge.change.compare import compare
from railforge.change.workorder import steps
from railforge.plan.io import read_plan
from railforge.plan.model import SCHEMA_VERSION
from tests.conftest import example_spec, plan_of, require_tool, run_cli

NAME = "roce-a800-4nic"


def _spec(tmp: Path, name: str, count: int, max_sus: int | None, cluster: str | None = None) -> Path:
    data = yaml.safe_load(example_spec("roce-a800-4nic").read_text())
    data["scalable_units"]["count"] = count
    data["scalable_units"].pop("max", None)
    if max_sus is not None:
        data["scalable_units"]["max"] = max_sus
    if cluster:
        data["name"] = cluster
    folder = tmp / name
    folder.mkdir()
    (folder / "cluster.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return folder / "cluster.yaml"


def _build(spec: Path, out: Path, *extra: str, check: bool = True):
    return run_cli("build", str(spec), "--out", str(out), "--jobs", "1", *extra, check=check)


def _digest(folder: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(folder.rglob("*")):
        if f.is_file():
            h.update(str(f.relative_to(folder)).encode() + f.read_bytes())
    return h.hexdigest()


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("diff")
    out = {}
    for name, count, max_sus in (("two", 2, 4), ("three", 3, 4), ("three-nomax", 3, None)):
        out[name] = tmp / f"out-{name}"
        _build(_spec(tmp, name, count, max_sus), out[name])
    return out


def _sheet(path: Path, name: str) -> list[dict]:
    book = openpyxl.load_workbook(path, read_only=True)
    rows = list(book[name].iter_rows(values_only=True))
    return [dict(zip(rows[0], r, strict=True)) for r in rows[1:]]


def test_growth_within_max_only_adds_and_the_work_order_lays_every_new_cable(builds, tmp_path):
    wo = tmp_path / "wo.xlsx"
    proc = run_cli("diff", str(builds["two"]), str(builds["three"]), "--work-order", str(wo))
    assert "only additions" in proc.stdout
    old, new = read_plan(builds["two"] / "plan.json"), read_plan(builds["three"] / "plan.json")
    new_cables = {link.id for link in new.links} - {link.id for link in old.links}
    new_devices = {d.name for d in new.devices} - {d.name for d in old.devices}
    assert new_cables and new_devices
    rows = _sheet(wo, "work-order")
    assert [r["step"] for r in rows] == list(range(1, len(rows) + 1))
    assert {r["cable"] for r in rows if r["action"] == "lay"} == new_cables
    assert {r["device"] for r in rows if r["action"] == "install"} == new_devices
    assert not [r for r in rows if r["action"] in ("pull", "remove", "unrack")]
    phases = [r["phase"] for r in rows]
    assert max(i for i, p in enumerate(phases) if p == "install") < min(i for i, p in enumerate(phases) if p == "lay")
    devs = new.device_index()
    for r in rows:
        if r["action"] == "lay":
            link = new.link_index()[r["cable"]]
            assert (r["device"], r["port"], r["to_device"], r["to_port"]) == (
                link.a.device, link.a.port, link.b.device, link.b.port)
            assert (r["rack"], r["u"]) == (devs[link.a.device].rack, devs[link.a.device].u)
            assert r["length_m"] == link.length_m and r["media"] == link.media
            assert r["elevation"].startswith("elevations/row-") and (builds["three"] / r["elevation"]).is_file()
    # spines gain neighbours: their configs are reloaded, and only switches that exist in both plans are reloaded
    reloads = {r["device"] for r in rows if r["action"] == "reload"}
    assert {d.name for d in old.devices if d.role == "spine"} <= reloads
    assert not reloads & new_devices
    for name in reloads:
        a = (builds["two"] / "configs" / name / "frr.conf").read_bytes() if devs[name].nos == "sonic" else b""
        b = (builds["three"] / "configs" / name / "frr.conf").read_bytes() if devs[name].nos == "sonic" else b"x"
        assert a != b or (builds["two"] / "configs" / name / "config_db.json").read_bytes() != (
            builds["three"] / "configs" / name / "config_db.json").read_bytes()


def test_growth_past_the_design_renumbers_and_diff_says_so(builds, tmp_path):
    wo = tmp_path / "wo.xlsx"
    proc = run_cli("diff", str(builds["two"]), str(builds["three-nomax"]), "--work-order", str(wo), check=False)
    assert proc.returncode == 1, proc.stderr
    head = proc.stdout.split("\n\n")[0]
    assert "re-cabled" in head and "count" in head
    old, new = read_plan(builds["two"] / "plan.json"), read_plan(builds["three-nomax"] / "plan.json")
    old_l, new_l = old.link_index(), new.link_index()
    moved = {i for i in old_l if i in new_l and (old_l[i].a, old_l[i].b) != (new_l[i].a, new_l[i].b)}
    gone = set(old_l) - set(new_l)
    assert moved
    rows = _sheet(wo, "work-order")
    assert {r["cable"] for r in rows if r["action"] == "pull"} == moved | gone
    first_lay = min(i for i, r in enumerate(rows) if r["action"] == "lay")
    assert max(i for i, r in enumerate(rows) if r["action"] == "pull") < first_lay
    summary = {(r["kind"], r["action"]): r["count"] for r in _sheet(wo, "summary")}
    assert summary[("cable", "re-cabled")] >= len(moved)


def test_build_refuses_to_renumber_and_leaves_the_output(builds, tmp_path):
    out = tmp_path / "out"
    _build(_spec(tmp_path, "a", 2, 4), out)
    before = _digest(out)
    spec = _spec(tmp_path, "b", 3, None)
    proc = _build(spec, out, check=False)
    assert proc.returncode == 1
    assert "railforge diff" in proc.stderr and "--allow-renumber" in proc.stderr and "re-cabled" in proc.stderr
    assert _digest(out) == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out")]
    _build(spec, out, "--allow-renumber")
    assert read_plan(out / "plan.json").cluster.sus == 3


def test_build_growing_within_max_passes_quietly(tmp_path):
    out = tmp_path / "out"
    _build(_spec(tmp_path, "a", 2, 4), out)
    proc = _build(_spec(tmp_path, "b", 3, 4), out)
    assert "error" not in proc.stderr
    assert read_plan(out / "plan.json").cluster.sus == 3


def test_build_refuses_another_clusters_output(builds, tmp_path):
    out = tmp_path / "out"
    _build(_spec(tmp_path, "a", 2, 4), out)
    proc = _build(_spec(tmp_path, "b", 2, 4, cluster="other"), out, check=False)
    assert proc.returncode == 1 and "'roce-a800-4nic', not 'other'" in proc.stderr


def test_bad_input_says_what_and_writes_nothing(builds, tmp_path):
    wo = tmp_path / "wo.xlsx"
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = run_cli("diff", str(empty), str(builds["three"]), "--work-order", str(wo), check=False)
    assert proc.returncode == 2 and f"{empty}: build folder without a plan" in proc.stderr

    raw = orjson.loads((builds["two"] / "plan.json").read_bytes())
    raw["schema_version"] = 99
    (tmp_path / "v99.json").write_bytes(orjson.dumps(raw))
    proc = run_cli("diff", str(tmp_path / "v99.json"), str(builds["three"]), "--work-order", str(wo), check=False)
    assert proc.returncode == 2 and "schema_version 99" in proc.stderr

    raw["schema_version"] = SCHEMA_VERSION
    raw["cluster"]["name"] = "other"
    (tmp_path / "other.json").write_bytes(orjson.dumps(raw))
    proc = run_cli("diff", str(tmp_path / "other.json"), str(builds["three"]), "--work-order", str(wo), check=False)
    assert proc.returncode == 2 and "different clusters" in proc.stderr

    (tmp_path / "junk.json").write_text("{not json")
    proc = run_cli("diff", str(tmp_path / "junk.json"), str(builds["three"]), "--work-order", str(wo), check=False)
    assert proc.returncode == 2 and "not a railforge plan" in proc.stderr
    assert not wo.exists()

    proc = run_cli("diff", str(builds["two"]), str(builds["three"]), "--work-order",
                   str(tmp_path / "missing" / "wo.xlsx"), check=False)
    assert proc.returncode == 2 and "cannot write the work order" in proc.stderr
    assert not list(tmp_path.glob("**/.wo.xlsx.tmp-*"))


def test_libreoffice_opens_the_work_order(builds, tmp_path):
    """The workbook's consumer, a spreadsheet application, reads the same steps openpyxl does."""
    require_tool("soffice")
    wo = tmp_path / "wo.xlsx"
    run_cli("diff", str(builds["two"]), str(builds["three"]), "--work-order", str(wo))
    filt = "csv:Text - txt - csv (StarCalc):44,34,76,1,,0,false,true,false,false,false,-1"
    subprocess.run(["soffice", f"-env:UserInstallation=file://{tmp_path}/profile", "--headless", "--convert-to",
                    filt, "--outdir", str(tmp_path), str(wo)], check=True, capture_output=True, timeout=300)
    with (tmp_path / "wo-work-order.csv").open(newline="") as fh:
        got = list(csv.reader(fh))
    want = _sheet(wo, "work-order")
    assert got[0] == list(want[0])
    assert len(got) - 1 == len(want)
    for g, w in zip(got[1:], want, strict=True):
        assert [_norm(x) for x in g] == [_norm("" if v is None else str(v)) for v in w.values()]


def _norm(cell: str) -> str:
    try:
        return f"{float(cell):g}"
    except ValueError:
        return cell


def test_a_moved_switch_is_unplugged_moved_and_replugged_in_that_order():
    old = plan_of(NAME)
    new = copy.deepcopy(old)
    leaf = next(d for d in new.devices if d.role == "leaf")
    leaf.u -= 10
    cs = compare(old, new)
    assert {(i.kind, i.action) for i in cs.breaking()} == {("device", "moved")}
    rows = steps(cs)
    assert {"pull", "unrack", "rerack", "lay"} <= {r[1] for r in rows}
    first = {}
    for r in rows:
        first.setdefault((r[1], r[5]), r[0])
    mine = [link.id for link in new.links if leaf.name in (link.a.device, link.b.device)]
    pulls = [r[0] for r in rows if r[1] == "pull" and r[8] in mine]
    lays = [r[0] for r in rows if r[1] == "lay" and r[8] in mine]
    assert len(pulls) == len(lays) == len(mine)
    assert max(pulls) < first[("unrack", leaf.name)] < first[("rerack", leaf.name)] < min(lays)
    rerack = next(r for r in rows if r[1] == "rerack")
    assert (rerack[4], rerack[5]) == (leaf.u, leaf.name)
