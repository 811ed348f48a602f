"""`railforge verify fabric` on what FRR really prints: dumps taken live from the lab, healthy and with faults.

The lab runs the generated frr.conf on FRR 8.4 (the routing suite SONiC and Cumulus run); `railforge lab
dump` saves each switch's `show bgp summary json`, `show ip route json` and lldpcli JSON as the collection
playbook does. Three faults are injected at once on different cables (a session shut on one leaf, a cable
whose port goes down, a wrong remote ASN configured on a third leaf) and each must be named with its
cable label, and nothing else blamed. Bad input (a folder for a switch the plan lacks, a file that is not
JSON, a summary of another shape) is reported per switch.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from railforge.lab import daemons
from railforge.lab.state import load_state
from railforge.plan.model import Plan
from railforge.verify.fabric import expected_routes, planned_sessions
from railforge.verify.fabric_check import verify_fabric
from tests.conftest import ROOT, plan_of, require_tool, run_cli, tool_path

CLUSTER = "inventory/roce-a800-4nic"
NAME = "roce-a800-4nic"
PREFIX = "rfd-"
TOOLS = ("root", "/usr/lib/frr/zebra", "/usr/lib/frr/bgpd", "/usr/lib/frr/bfdd", "vtysh", "lldpd", "lldpcli")
WRONG_ASN = 4200000999


def _cable(plan: Plan, device: str, port: str):
    return next(lk for lk in plan.links if (device, port) in ((lk.a.device, lk.a.port), (lk.b.device, lk.b.port)))


def _far_address(plan: Plan, link, me: str) -> str:
    far = link.b if link.a.device == me else link.a
    port = next(p for d in plan.devices if d.name == far.device for p in d.ports if p.name == far.port)
    return port.address.split("/")[0]


def test_expectations_count_what_the_plan_cables() -> None:
    """Sessions per switch = its uplink/downlink cables; a leaf reaches another leaf over every uplink."""
    plan = plan_of(NAME)
    switches = plan.switches()
    sessions = planned_sessions(switches, plan.links)
    leaf = "su001-leaf-r0"
    uplinks = [lk for lk in plan.links if lk.tier == "leaf-spine" and leaf in (lk.a.device, lk.b.device)]
    assert {s.cable for s in sessions[leaf].values()} == {lk.id for lk in uplinks}
    want = expected_routes(switches, plan.links, loopbacks=True)
    other = next(d for d in plan.devices if d.name == "su002-leaf-r3")
    subnet = other.host_subnets[0].prefix
    assert want[leaf][subnet] == {lk.a.port if lk.a.device == leaf else lk.b.port for lk in uplinks}
    spine = next(d for d in plan.devices if d.role == "spine" and d.fabric == "compute")
    to_spine = {lk.a.port if lk.a.device == leaf else lk.b.port for lk in uplinks if spine.name in
                (lk.a.device, lk.b.device)}
    assert want[leaf][spine.loopback.replace("/32", "") + "/32"] == to_spine
    other_spine = next(d for d in plan.devices if d.role == "spine" and d.name != spine.name)
    assert other_spine.loopback not in want[spine.name]  # leaves do not carry spine-to-spine routes


def _write(folder: Path, device: str, bgp: str, route: str = "{}") -> None:
    (folder / device).mkdir(parents=True, exist_ok=True)
    (folder / device / "bgp-summary.json").write_text(bgp)
    (folder / device / "ip-route.json").write_text(route)


def test_bad_dumps_are_reported_not_crashed_on(tmp_path: Path, built) -> None:
    plan = plan_of(NAME)
    _write(tmp_path, "not-a-switch", "{}")
    _write(tmp_path, "su001-gpu01", "{}")
    _write(tmp_path, "spine01", '{"ipv4Unicast": {"as": 1, "peers": ', "[]")
    _write(tmp_path, "spine02", '["a list"]', '{"10.0.0.0/32": "x"}')
    (tmp_path / "spine03").mkdir()
    result = verify_fabric(plan, tmp_path)
    by_kind = {(f.kind, f.device) for f in result.report.findings}
    assert ("unknown-switch", "not-a-switch") in by_kind and ("unknown-switch", "su001-gpu01") in by_kind
    unreadable = [f for f in result.report.findings if f.kind == "unreadable"]
    msgs: dict[str, list[str]] = {}
    for f in unreadable:
        msgs.setdefault(f.device, []).append(f.message)
    assert any("spine01/bgp-summary.json:1: not valid JSON at column 36" in m for m in msgs["spine01"])
    assert any("ip-route.json: expected the object" in m for m in msgs["spine01"])
    assert any("bgp-summary.json: expected the object" in m for m in msgs["spine02"])
    assert any("'10.0.0.0/32': 'x': input should be a valid list" in m for m in msgs["spine02"])
    assert any("spine03/bgp-summary.json: missing" in m for m in msgs["spine03"])
    proc = run_cli("verify", "fabric", CLUSTER, "--out", str(built(NAME)), "--frr", str(tmp_path / "nowhere"),
                   check=False)
    assert proc.returncode == 2 and "not a folder" in " ".join(proc.stderr.split())


@pytest.fixture(scope="module")
def lab_dumps(built, tmp_path_factory):
    require_tool(*TOOLS)
    generated = built(NAME)
    dumps = tmp_path_factory.mktemp("dumps")

    def lab(*args: str, check: bool = True) -> subprocess.CompletedProcess:
        return run_cli("lab", args[0], CLUSTER, *args[1:], "--out", str(generated), "--prefix", PREFIX, check=check)

    lab("up", "--hosts-per-su", "1")
    try:
        yield generated, dumps, lambda name: lab("dump", str(dumps / name))
    finally:
        lab("down", check=False)


def _verify(generated: Path, folder: Path) -> subprocess.CompletedProcess:
    return run_cli("verify", "fabric", CLUSTER, "--out", str(generated), "--frr", str(folder), "--partial",
                   "--no-speed", check=False)


@pytest.mark.root
@pytest.mark.slow
def test_collection_playbook_output_is_what_verify_reads(lab_dumps, tmp_path: Path) -> None:
    """playbooks/collect_fabric.yml on two lab switches (local connection; the show commands are swapped for the
    lab's `ip netns exec … vtysh`, the only part a lab cannot run as on a switch): its folder is judged clean."""
    require_tool("ansible-playbook")
    generated, _, _ = lab_dumps
    run = f"/run/railforge-lab/{PREFIX}{NAME}"
    vtysh = f"ip netns exec {PREFIX}{{{{ inventory_hostname }}}} vtysh --vty_socket {run}/{{{{ inventory_hostname }}}}"
    extra = {"collect_fabric_dest": str(tmp_path / "dump"), "ansible_become": False,
             "collect_fabric_commands": [{"file": "bgp-summary.json", "cumulus": f"{vtysh} -c 'show bgp summary json'"},
                                         {"file": "ip-route.json", "cumulus": f"{vtysh} -c 'show ip route json'"}]}
    (tmp_path / "extra.json").write_text(json.dumps(extra))
    inventory = {"all": {"vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable},
                         "children": {"compute_leaf": {"hosts": {"su001-leaf-r0": {}}},
                                      "compute_spine": {"hosts": {"spine01": {}}}}}}
    (tmp_path / "inventory.json").write_text(json.dumps(inventory))
    proc = subprocess.run([tool_path("ansible-playbook"), "-i", str(tmp_path / "inventory.json"),
                           str(ROOT / "playbooks" / "collect_fabric.yml"), "-e", f"@{tmp_path / 'extra.json'}"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert sorted(p.name for p in (tmp_path / "dump").iterdir()) == ["spine01", "su001-leaf-r0"]
    result = verify_fabric(plan_of(NAME), tmp_path / "dump")
    assert result.switches == 2 and result.report.ok, [f.message for f in result.report.findings]
    assert result.report.sessions_up == result.report.sessions_checked > 0


@pytest.mark.root
@pytest.mark.slow
def test_live_lab_healthy_then_three_faults_each_named(lab_dumps) -> None:
    generated, dumps, dump = lab_dumps
    plan = plan_of(NAME)
    dump("healthy")
    healthy = _verify(generated, dumps / "healthy")
    assert healthy.returncode == 0, healthy.stdout
    compute = {d.name for d in plan.switches() if d.fabric == "compute"}
    planned = sum(len(v) for k, v in planned_sessions(plan.switches(), plan.links).items() if k in compute)
    text = " ".join(healthy.stdout.split())
    assert f"{len(compute)} switches read, {planned} of {planned} planned sessions Established" in text
    assert "0 findings" in text

    shut, missing, wrong = (_cable(plan, "su001-leaf-r1", "Ethernet64"), _cable(plan, "su001-leaf-r2", "Ethernet64"),
                            _cable(plan, "su002-leaf-r0", "Ethernet68"))
    state = load_state(NAME, PREFIX)
    asn = {d.name: d.asn for d in plan.devices}
    daemons.vtysh(state, "su001-leaf-r1", "configure terminal", f"router bgp {asn['su001-leaf-r1']}",
                  f"neighbor {_far_address(plan, shut, 'su001-leaf-r1')} shutdown")
    subprocess.run(["ip", "-n", f"{PREFIX}su001-leaf-r2", "link", "set", "Ethernet64", "down"], check=True)
    daemons.vtysh(state, "su002-leaf-r0", "configure terminal", f"router bgp {asn['su002-leaf-r0']}",
                  f"neighbor {_far_address(plan, wrong, 'su002-leaf-r0')} remote-as {WRONG_ASN}")
    faulty = {shut.id, missing.id, wrong.id}
    deadline = time.monotonic() + 40
    while True:
        folder = dumps / f"faults-{int(time.monotonic() * 1000)}"
        dump(folder.name)
        result = verify_fabric(plan, folder, check_speed=False, partial=True)
        down = {c for f in result.report.of("session-down") for c in f.cables}
        if down == faulty and result.cabling and result.cabling.count("missing") == 1:
            break
        assert time.monotonic() < deadline, [f.message for f in result.report.findings][:10]
        time.sleep(1)
    report = result.report
    per_cable = {c: {f.device for f in report.of("session-down") if c in f.cables} for c in faulty}
    assert per_cable == {shut.id: {shut.a.device, shut.b.device}, missing.id: {missing.a.device, missing.b.device},
                         wrong.id: {wrong.a.device, wrong.b.device}}
    assert [(f.device, f.cables) for f in report.of("wrong-asn")] == [("su002-leaf-r0", [wrong.id])]
    assert str(WRONG_ASN) in report.of("wrong-asn")[0].message
    assert [f.cables for f in result.cabling.findings] == [[missing.id]]
    narrowed = {c for f in report.of("ecmp-narrow") for c in f.cables}
    assert narrowed == faulty
    assert not report.of("prefix-missing") and not report.of("prefix-unexpected")
    assert not report.of("session-missing") and not report.of("unexpected-peer")

    shutil.copytree(folder, dumps / "bad")
    (dumps / "bad" / "spine04" / "ip-route.json").write_text("{oops")
    shutil.copytree(folder / "spine04", dumps / "bad" / "spine99")
    proc = _verify(generated, dumps / "bad")
    assert proc.returncode == 1, proc.stderr
    text = " ".join(proc.stdout.split())
    assert "unknown-switch" in text and "spine99" in text and "unreadable" in text
    assert json.loads((dumps / "bad" / "spine04" / "bgp-summary.json").read_text())  # still judged
