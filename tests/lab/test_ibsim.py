"""The generated OpenSM files on a simulated fabric: real ibsim 0.10 simulates the planned compute fabric
(`railforge.lab.ibsim`), real OpenSM 3.3.23 runs with the generated opensm.conf and the root GUID and
partition files the generated scripts make from real ibnetdiscover output, and the verifier reads the
real ibnetdiscover output of the simulated fabric. ibsim links train at SDR: speed is not judged here."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from railforge.lab import ibsim
from railforge.plan.io import read_plan
from railforge.render import ibnetdiscover
from railforge.spec import load_spec
from railforge.verify.cabling import compare
from railforge.verify.ibnet import parse_ibnetdiscover
from tests.conftest import ROOT, example_spec, run_cli

SPECS = {"dgx-h100-4su": example_spec("dgx-h100-4su"), "configs-ib": ROOT / "tests" / "specs" / "configs-ib.yaml"}


def _require_sim() -> None:
    missing = ibsim.missing_tools()
    if missing:
        msg = f"needs {', '.join(missing)} (apt-get install ibsim-utils libumad2sim0 opensm infiniband-diags)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{msg}, and CI=true forbids skipping")
        pytest.skip(msg)


def _build(name: str, tmp: Path) -> Path:
    out = tmp / name
    run_cli("build", str(SPECS[name]), "--out", str(out), "--only", "plan,opensm")
    return out


def _sim(plan, work: Path, swaps=()) -> ibsim.IbSim:
    work.mkdir(parents=True, exist_ok=True)
    (work / "net").write_text(ibsim.net_file(plan, swaps))
    sim = ibsim.IbSim(work, f"railforge-test-{os.getpid()}-{work.parent.name}", ibsim.sm_host(plan))
    sim.start(work / "net")
    return sim


@pytest.fixture(scope="module", params=list(SPECS))
def fabric(request, tmp_path_factory):
    """One simulated fabric per spec, run as a site would on day 1: ibnetdiscover, make-root-guids,
    make-partitions, OpenSM with the generated opensm.conf, then ibnetdiscover and smpquery."""
    _require_sim()
    name = request.param
    tmp = tmp_path_factory.mktemp(f"ibsim-{name}")
    out = _build(name, tmp)
    plan = read_plan(out / "plan.json")
    osm = out / "configs" / "opensm"
    sim = _sim(plan, tmp / "run")
    try:
        run = ibsim.day_one(sim, osm)
        yield {"name": name, "out": out, "plan": plan, "log": run.log, "dump": run.after,
               "fabric": ibnetdiscover.parse(run.after.read_text()), "sminfo": sim.run("sminfo").stdout, "sim": sim}
    finally:
        sim.stop()


def test_opensm_becomes_master_with_the_generated_priority(fabric):
    assert "Entering MASTER state" in fabric["log"] and "SUBNET UP" in fabric["log"]
    assert re.search(r"priority 15 state 3 SMINFO_MASTER", fabric["sminfo"]), fabric["sminfo"]


def test_ftree_routes_on_the_planned_spines_with_no_fallback(fabric):
    log, plan = fabric["log"], fabric["plan"]
    engines = re.findall(r"building routing with '(\w+)' routing algorithm", log)
    assert engines and set(engines) == {"ftree"}, engines
    assert "ftree tables configured on all switches" in log
    assert not re.search(r"(ftree|routing).*(failed|fall)", log, re.I)
    block = log.split("- Root switches:", 1)[1].split("- Leaf switches", 1)[0]
    roots = set(re.findall(r"GUID: 0x([0-9a-f]+)", block))
    top = max(d.role for d in plan.devices if d.fabric == "compute" and d.role in ("spine", "superspine"))
    planned = {d.name for d in plan.devices if d.fabric == "compute" and d.role == top}
    guid_of = {n.name: f"{int(n.guid, 16):x}" for n in fabric["fabric"].nodes.values() if n.kind == "Switch"}
    assert roots == {guid_of[s] for s in planned} and len(planned) == {"dgx-h100-4su": 16, "configs-ib": 2}[
        fabric["name"]]
    assert f"Fabric has {len(planned)} switches at rank 0 (roots)" in log


def _tenant_hosts(name: str, plan) -> dict[int, set[str]]:
    """Expected members per PKey, from the spec as written (SUs and node names), not from the output."""
    spec, _ = load_spec(SPECS[name])
    out = {}
    for t in spec.tenants:
        out[t.pkey] = {d.name for d in plan.devices if d.role == "node" and d.su in t.sus} | set(t.nodes)
    return out


def _pkeys(sim: ibsim.IbSim, port_guid: str) -> set[int]:
    text = sim.run("smpquery", "pkeys", "-G", port_guid).stdout
    return {int(x, 16) for x in re.findall(r"0x([0-9a-f]{4})", text)} - {0}


def test_hca_ports_carry_their_tenants_pkeys_and_no_other(fabric):
    plan, sim = fabric["plan"], fabric["sim"]
    tenants = _tenant_hosts(fabric["name"], plan)
    assert all(tenants.values())
    cas = {n.description: n for n in fabric["fabric"].nodes.values() if n.kind == "Ca"}
    hosts = sorted({d.split()[0] for d in cas})
    if fabric["name"] == "dgx-h100-4su":  # every HCA of a sample of hosts: members of each tenant and none
        hosts = ["su001-gpu01", "su002-gpu32", "su003-gpu05", "su004-gpu01", "su004-gpu03", "ufm01"]
    checked = 0
    for desc, node in sorted(cas.items()):
        host = desc.split()[0]
        if host not in hosts:
            continue
        got = _pkeys(sim, "0x" + node.port_guids[1])
        want = {0xFFFF} | {0x8000 | pkey for pkey, members in tenants.items() if host in members}
        assert got == want, f"{desc}: {sorted(map(hex, got))} != {sorted(map(hex, want))}"
        checked += 1
    assert checked >= 16
    leaf = next(n for n in fabric["fabric"].nodes.values() if n.kind == "Switch")
    assert {0x8000 | p for p in tenants} <= _pkeys(sim, f"0x{leaf.guid}")


def test_verifier_finds_the_simulated_fabric_cabled_as_planned(fabric):
    links = [lk for lk in fabric["plan"].links if lk.fabric == "compute"]
    out, dump = str(fabric["out"]), str(fabric["dump"])
    args = ("verify", "cabling", out, "--out", out, "--ibnetdiscover", dump)
    proc = run_cli(*args, "--no-speed", check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{len(links)} planned cables in view, {len(links)} match, 0 findings" in " ".join(proc.stdout.split())
    rates = {c.rate for c in fabric["fabric"].cables}
    assert rates == {"4xSDR"}  # the planned 4 lanes per port; ibsim 0.10 trains every link at SDR
    with_speed = compare(links, parse_ibnetdiscover(fabric["dump"].read_text(), fabric["plan"]), check_speed=True)
    assert {f.kind for f in with_speed.findings} == {"wrong-speed"} and len(with_speed.findings) == len(links)


def test_seeded_swaps_are_named_by_cable_label(tmp_path):
    _require_sim()
    out = _build("configs-ib", tmp_path)
    plan = read_plan(out / "plan.json")
    swaps = [("CMP-000001", "CMP-000002"), ("CMP-000017", "CMP-000021")]
    sim = _sim(plan, tmp_path / "run", swaps)
    try:
        dump = tmp_path / "ibnetdiscover.txt"
        dump.write_text(sim.run("ibnetdiscover").stdout)
    finally:
        sim.stop()
    assert sim.ibsim.returncode is not None and not Path(f"/proc/{sim.ibsim.pid}").exists()
    proc = run_cli("verify", "cabling", str(out), "--out", str(out), "--ibnetdiscover", str(dump), "--no-speed",
                   check=False)
    assert proc.returncode == 1
    findings = [r.split("│")[1:3] for r in proc.stdout.splitlines() if re.match(r"│ \S", r)]
    assert sorted((kind.strip(), cables.strip()) for kind, cables in findings) == [
        ("swapped", ", ".join(pair)) for pair in swaps], proc.stdout


def test_lab_ibsim_command_runs_the_day_one_checks(tmp_path):
    _require_sim()
    out = _build("configs-ib", tmp_path)
    proc = run_cli("lab", "ibsim", str(out), "--out", str(out), "--workdir", str(tmp_path / "run"), check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = {r.split("│")[1].strip(): r.split("│")[2].strip() for r in proc.stdout.splitlines() if re.match(r"│ \w", r)}
    assert rows == {"master": "ok", "routing": "ok", "roots": "ok", "cabling": "ok"}
    assert (tmp_path / "run" / "partitions.conf").read_text().count("ALL_SWITCHES=full,\n") == 2
    bad = run_cli("lab", "ibsim", str(out), "--out", str(out), "--swap", "CMP-000017,CMP-000021", check=False)
    assert bad.returncode == 1 and "swapped │ CMP-000017, CMP-000021" in bad.stdout

