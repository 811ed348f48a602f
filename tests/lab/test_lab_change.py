"""Hitless growth and an RMA on real FRR in network namespaces (root): the A800 example at 2 SUs grows to 3
with frr-reload.py on the running switches, then a spine is replaced. Every figure asserted here is read from
FRR's own session counters, ping's own counts and the kernel FIBs by `railforge lab grow / rma / check`."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml

from railforge.lab.scope import lab_topology
from railforge.plan.io import read_plan
from tests.conftest import example_spec, require_tool, run_cli

PREFIX = "rfr-"
CLUSTER = "inventory/roce-a800-4nic"
NAME = "roce-a800-4nic"


def _lab(*args: str, out: Path, check: bool = True):
    return run_cli("lab", args[0], CLUSTER, *args[1:], "--out", str(out), "--prefix", PREFIX, check=check)


def _pids(device: str) -> dict[str, int]:
    d = Path(f"/run/railforge-lab/{PREFIX}{NAME}/{device}")
    return {n: int((d / f"{n}.pid").read_text()) for n in ("zebra", "bgpd", "bfdd")}


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    require_tool("root", "vtysh", "lldpd", "/usr/lib/frr/frr-reload.py")
    tmp = tmp_path_factory.mktemp("grow")
    data = yaml.safe_load(example_spec(NAME).read_text())
    assert data["scalable_units"]["count"] == 2 and data["scalable_units"]["max"] >= 3
    data["scalable_units"]["count"] = 3
    (tmp / "grown").mkdir()
    (tmp / "grown" / "cluster.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    del data["scalable_units"]["max"]
    (tmp / "resized").mkdir()
    (tmp / "resized" / "cluster.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    two, three, resized = tmp / "two", tmp / "three", tmp / "resized" / "out"
    run_cli("build", str(example_spec(NAME)), "--out", str(two))
    run_cli("build", str(tmp / "grown" / "cluster.yaml"), "--out", str(three))
    run_cli("build", str(tmp / "resized" / "cluster.yaml"), "--out", str(resized))
    yield two, three, resized
    _lab("down", out=three, check=False)
    _lab("down", out=two, check=False)


def test_grow_by_an_su_then_rma_a_spine_without_touching_the_rest(builds, tmp_path):
    two, three, resized = builds
    t0 = time.monotonic()
    _lab("up", "--sus", "2", "--hosts-per-su", "1", out=two)
    up_s = time.monotonic() - t0
    old_topo = lab_topology(read_plan(two / "plan.json"), 2, "all", 1, PREFIX)
    sessions = 2 * sum(1 for link in old_topo.links if link.tier == "leaf-spine")
    pids = {sw.name: _pids(sw.name) for sw in old_topo.switches}

    refused = _lab("grow", "--to", str(resized), out=two, check=False)
    assert refused.returncode == 2 and "growth must only add" in refused.stderr

    t0 = time.monotonic()
    proc = _lab("grow", "--to", str(three), "--json", str(tmp_path / "grow.json"), out=two, check=False)
    grow_s = time.monotonic() - t0
    assert (tmp_path / "grow.json").is_file(), proc.stdout + proc.stderr
    grow = json.loads((tmp_path / "grow.json").read_text())
    print(f"lab up {up_s:.1f} s, grow {grow_s:.1f} s: {json.dumps(grow)}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert grow["sessions_reset"] == [] and grow["sessions_kept"] == sessions
    assert grow["pings_sent"] > 0 and grow["pings_lost"] == 0
    assert grow["new_su_pairs"] > 0 and grow["new_su_unreachable"] == []
    assert grow["reloaded_switches"] == len(old_topo.spines())
    assert {sw: _pids(sw) for sw in pids} == pids, "a daemon was restarted"
    new_topo = lab_topology(read_plan(three / "plan.json"), 3, "all", 1, PREFIX)
    # the running spines' new sessions: one per new uplink cable
    assert grow["sessions_new"] == sum(1 for link in new_topo.links if link.tier == "leaf-spine") - sessions // 2
    spine = "spine01"
    frr = Path(f"/run/railforge-lab/{PREFIX}{NAME}/{spine}/frr.conf").read_bytes()
    assert frr == (three / "configs" / spine / "frr.conf").read_bytes()

    check = _lab("check", "--json", str(tmp_path / "c1.json"), out=three, check=False)
    rows = json.loads((tmp_path / "c1.json").read_text())["rows"]
    assert check.returncode == 0, [r for r in rows if not r["ok"]][:5]

    t0 = time.monotonic()
    proc = _lab("rma", "spine02", "--json", str(tmp_path / "rma.json"), out=three, check=False)
    assert (tmp_path / "rma.json").is_file(), f"exit {proc.returncode}: {proc.stdout}{proc.stderr}"
    rma = json.loads((tmp_path / "rma.json").read_text())
    print(f"rma {time.monotonic() - t0:.1f} s: {json.dumps(rma)}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert rma["other_sessions_reset"] == [] and rma["other_sessions_kept"] == rma["other_sessions"] > 0
    assert rma["its_sessions"] == sum(1 for link in new_topo.links if "spine02" in (link.a.device, link.b.device))
    others = [sw.name for sw in new_topo.switches if sw.name != "spine02" and sw.name in pids]
    assert {sw: _pids(sw) for sw in others} == {sw: pids[sw] for sw in others}
    check = _lab("check", "--json", str(tmp_path / "c2.json"), out=three, check=False)
    rows = json.loads((tmp_path / "c2.json").read_text())["rows"]
    assert check.returncode == 0, [r for r in rows if not r["ok"]][:5]
    _lab("down", out=three)
    assert not Path(f"/run/railforge-lab/{PREFIX}{NAME}").exists()
