"""The lab on a 3-tier rail-plane fabric (the bundled 16K example, Cumulus NVUE) and routed RDMA pod
addresses on its L3 rails, proven with the real CNI plugins.

Root tests need FRR, lldpd, ping, tc, the CNI plugins and ansible-playbook; off CI those skip, under CI=true
their absence fails. Expected next hops, groups and pod addresses come from the plan.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from ipaddress import ip_address, ip_interface
from pathlib import Path

import pytest
import yaml

from railforge.lab.checks import expected_fib
from railforge.lab.memory import memory_problems
from railforge.lab.scope import ScopeError, lab_topology
from railforge.nos.cumulus.lab import NvueError, frr_conf_text, frr_config
from tests.conftest import ROOT, plan_of, require_tool, run_cli
from tests.helpers import cni

CLUSTER = "inventory/roce-16k-railplane"
NAME = "roce-16k-railplane"
PREFIX = "rf3-"
SIZE = ("--spines", "2", "--superspines", "2", "--parallel", "2", "--hosts-per-su", "1")
TOOLS = ("root", "/usr/lib/frr/zebra", "/usr/lib/frr/bgpd", "/usr/lib/frr/bfdd", "vtysh", "lldpd", "lldpcli",
         "ping", "tc", "/usr/lib/cni/macvlan", "/usr/lib/cni/host-local", "/usr/lib/cni/sbr", "ansible-playbook")


@pytest.fixture(scope="module")
def plan():
    return plan_of(NAME)


@pytest.fixture(scope="module")
def topo(plan):
    return lab_topology(plan, sus=2, spines="2", hosts_per_su=1, prefix=PREFIX, superspines="2", parallel="2")


def test_scope_keeps_every_tier(plan, topo) -> None:
    assert len(topo.leaves()) == 16 and len(topo.spines()) == 16 and len(topo.superspines()) == 4
    assert {s.group for s in topo.spines()} == {f"rail{r}" for r in range(8)}
    assert sorted(s.name for s in topo.superspines()) == ["superspine-p01-01", "superspine-p01-02",
                                                          "superspine-p02-01", "superspine-p02-02"]
    # the kept spine j of every rail joins plane j, as planned
    for link in topo.links:
        if link.tier == "spine-superspine":
            assert link.a.device.endswith(link.b.device.split("-")[1].replace("p", "spine"))
    assert {(lk.tier, n) for lk in topo.links for n in [sum(1 for x in topo.links if (x.a.device, x.b.device)
                                                            == (lk.a.device, lk.b.device))]
            if lk.tier != "node-leaf"} == {("leaf-spine", 2), ("spine-superspine", 2)}
    with pytest.raises(ScopeError, match="--superspines must be 'all' or 1..4"):
        lab_topology(plan, superspines="5")
    with pytest.raises(ScopeError, match="--sus"):
        lab_topology(plan, sus="0,40")


def test_expected_paths_follow_the_planned_groups(topo) -> None:
    full = expected_fib(topo, set())
    uplinks = {lk.a.port for lk in topo.uplinks("su001-leaf-r0")}
    assert len(uplinks) == 4
    assert all(ports == uplinks for ports in full["su001-leaf-r0"].values())
    r0 = "100.64.0.0/22"  # su001-leaf-r0's host subnet in the plan
    to_spine = {lk.b.port for lk in topo.links if lk.a.device == "rail0-spine01" and lk.b.device == "superspine-p01-01"}
    assert full["superspine-p01-01"][r0] == to_spine and len(to_spine) == 2
    dead = {lk.id for lk in topo.links if "rail0-spine01" in (lk.a.device, lk.b.device)}
    assert expected_fib(topo, dead)["superspine-p01-01"][r0] == set()  # no valley through another rail
    assert len(expected_fib(topo, dead)["su002-leaf-r1"][r0]) == 2  # only the plane-2 uplinks remain


def test_memory_preflight_names_need_and_knobs(topo) -> None:
    assert memory_problems(topo, available=64 * 1024) == []
    [msg] = memory_problems(topo, available=1500)
    assert "36 switches" in msg and "476 MiB is available" in msg and "--superspines, --parallel" in msg


def test_nvue_translation(plan, built) -> None:
    out = built(NAME)
    text = frr_conf_text(out / "configs" / "su001-leaf-r0" / "startup.yaml")
    leaf = next(d for d in plan.devices if d.name == "su001-leaf-r0")
    assert f"router bgp {leaf.asn}\n bgp router-id {leaf.loopback.split('/')[0]}\n" in text
    assert " neighbor swp33s0 interface peer-group SPINE\n" in text and " network 100.64.0.0/22\n" in text
    spine = next(d for d in plan.devices if d.name == "rail0-spine01")
    assert f" neighbor swp33s0 remote-as {spine.asn}\n" in text  # the planned AS per neighbour, as on SONiC
    assert " neighbor SPINE bfd profile RF-SPINE\n" in text and "  detect-multiplier 3\n" in text  # 5.18 profile
    doc = yaml.safe_load((out / "configs" / "rail0-spine01" / "startup.yaml").read_text())
    bgp = doc[1]["set"]["vrf"]["default"]["router"]["bgp"]
    assert "remote-as" not in bgp["peer-group"]["LEAF"]  # FRR refuses a member's remote-as under a group's
    bgp["peer-group"]["LEAF"]["remote-as"] = "external"
    bgp["neighbor"]["swp1s0"]["remote-as"] = 4200000001  # its own AS
    with pytest.raises(NvueError, match="swp1s0 remote-as 4200000001 contradicts peer-group LEAF remote-as external"):
        frr_config(doc)
    doc[1]["set"]["router"]["ospf"] = {"enable": True}
    with pytest.raises(NvueError, match="cannot translate ospf"):
        frr_config(doc)


def test_each_node_has_its_own_pod_range(plan) -> None:
    nets = {n.leaf: n for n in plan.pod_networks}
    per_node = 8
    for node in (d for d in plan.devices if d.role == "node" and d.su in (1, 32)):
        for r in node.rails:
            net = nets[r.leaf]
            first, last = ip_address(r.pod_first), ip_address(r.pod_last)
            assert int(last) - int(first) + 1 == per_node
            assert ip_address(net.range_start) + (node.slot - 1) * per_node == first
            assert first in ip_interface(r.address).network and ip_address(net.range_end) >= last


def lab(*args: str, out: Path, check: bool = True) -> subprocess.CompletedProcess:
    return run_cli("lab", *args[:1], CLUSTER, *args[1:], "--out", str(out), "--prefix", PREFIX, check=check)


@pytest.fixture(scope="module")
def running(built):
    require_tool(*TOOLS)
    out = built(NAME)
    t0 = time.monotonic()
    proc = lab("up", *SIZE, out=out, check=False)
    try:
        assert proc.returncode == 0, proc.stdout + proc.stderr
        print(f"lab up: {time.monotonic() - t0:.1f} s, {proc.stdout.strip().splitlines()[-1]}")
        yield out
    finally:
        lab("down", out=out, check=False)


@pytest.mark.root
@pytest.mark.slow
def test_rail_plane_lab_checks_and_superspine_failure(running: Path, tmp_path: Path) -> None:
    report = tmp_path / "check.json"
    proc = lab("check", "--fail", "spine=superspine-p01-01", "--bfd", "on", "--json", str(report), out=running,
               check=False)
    result = json.loads(report.read_text())
    bad = [r for r in result["rows"] if not r["ok"]]
    assert proc.returncode == 0 and not bad, bad or proc.stdout[-3000:]
    kinds = {}
    for r in result["rows"]:
        kinds[r["check"]] = kinds.get(r["check"], 0) + 1
    assert kinds == {"frr.conf": 36, "bgp": 36, "ecmp": 36, "plane": 8, "super-spine": 8, "ping": 16, "lldp": 1}
    [m] = result["failures"]
    print(f"silent super-spine failure with BFD: {m['converge_s']:.2f} s, restored {m['restore_s']:.2f} s")
    assert m["converge_s"] < 3 and m["restore_s"] is not None


def _pod_conf(running: Path, tmp: Path, nodes: list[str]) -> Path:
    """The rails role's pod_cni entry point, run locally for the lab's nodes, writing under tmp/<node>/."""
    play = tmp / "pods.yml"
    play.write_text(yaml.safe_dump([{
        "name": "Routed pod CNI configurations of lab nodes", "hosts": ",".join(nodes), "connection": "local",
        "gather_facts": False, "tasks": [{"name": "Rails role, pod CNI part", "ansible.builtin.include_role": {
            "name": "rails", "tasks_from": "pod_cni"}, "vars": {
            "rails_pod_cni_dir": f"{tmp}/{{{{ inventory_hostname }}}}/net.d",
            "rails_pod_cni_data_dir": f"{tmp}/{{{{ inventory_hostname }}}}/ipam"}}]}]))
    inventory = running / "ansible"  # groups-only hosts.yml: Ansible reads host_vars of the targeted hosts only
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory),
                           str(play), "-e", f"ansible_python_interpreter={sys.executable}"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:]
    return tmp


@pytest.mark.root
@pytest.mark.slow
def test_routed_pods_get_planned_addresses_and_reach_each_other(running: Path, plan, tmp_path: Path) -> None:
    nodes = {d.name: d for d in plan.devices if d.name in ("su001-gpu01", "su002-gpu01")}
    conf = _pod_conf(running, tmp_path, sorted(nodes))
    pods = {name: f"{PREFIX}pod-{name}" for name in nodes}
    added: list[tuple[str, dict, str, str]] = []
    try:
        for node, pod in pods.items():
            subprocess.run(["ip", "netns", "add", pod], check=True)
            for r in nodes[node].rails:
                conflist = json.loads((conf / node / "net.d" / f"50-{r.ifname}-routed.conflist").read_text())
                ifname = f"net{r.rail + 1}"
                result = cni.add(f"{PREFIX}{node}", conflist, pod, ifname, pod)
                added.append((node, conflist, pod, ifname))
                [ip] = result["ips"]
                assert ip["address"] == f"{r.pod_first}/{ip_interface(r.address).network.prefixlen}", (node, r.ifname)
                assert ip["gateway"] == r.gateway
        a, b = (nodes[n] for n in sorted(nodes))
        for ra, rb in zip(a.rails, b.rails, strict=True):
            ping = subprocess.run(["ip", "netns", "exec", pods[a.name], "ping", "-n", "-q", "-c", "2", "-W", "2",
                                   "-I", ra.pod_first, rb.pod_first], capture_output=True, text=True)
            assert ping.returncode == 0, f"pod {a.name} {ra.pod_first} -> pod {b.name} {rb.pod_first}: {ping.stdout}"
        rules = subprocess.run(["ip", "-n", pods[a.name], "rule"], capture_output=True, text=True).stdout
        assert all(f"from {r.pod_first} lookup" in rules for r in a.rails), rules
        node, conflist, pod, ifname = added[0]
        rail0 = nodes[node].rails[0]
        size = int(ip_address(rail0.pod_last)) - int(ip_address(rail0.pod_first)) + 1
        for extra in range(1, size):  # the rest of this node's rail-0 range, then one too many
            cni.add(f"{PREFIX}{node}", conflist, pod, f"x{extra}", f"{pod}-{extra}")
            added.append((node, conflist, pod, f"x{extra}"))
        with pytest.raises(cni.CniError, match=f"no IP addresses available in range set: "
                                                f"{rail0.pod_first}-{rail0.pod_last}"):
            cni.add(f"{PREFIX}{node}", conflist, pod, f"x{size}", f"{pod}-{size}")
        state = conf / node / "ipam" / conflist["name"]
        first = nodes[node].rails[0].pod_first
        assert (state / first).exists()
        cni.delete(f"{PREFIX}{node}", conflist, pod, ifname, pod)
        added.pop(0)
        assert not (state / first).exists()  # DEL freed the address
    finally:
        for node, conflist, pod, ifname in added:
            container = pod if ifname.startswith("net") else f"{pod}-{ifname[1:]}"
            with contextlib.suppress(cni.CniError):
                cni.delete(f"{PREFIX}{node}", conflist, pod, ifname, container)
        for pod in pods.values():
            subprocess.run(["ip", "netns", "delete", pod], check=False)


def test_clos_pods_meet_only_through_super_spines() -> None:
    from railforge.planner import build_plan
    from railforge.spec.loader import load_spec

    path = ROOT / "tests" / "specs" / "tiny-clos.yaml"
    spec, lines = load_spec(path)
    plan = build_plan(spec, lines, str(path))
    topo = lab_topology(plan, sus="1,2", prefix=PREFIX)
    assert {lf.group for lf in topo.leaves()} == {"pod01", "pod02"} and len(topo.superspines()) == 2
    full = expected_fib(topo, set())
    far = next(str(ip_interface(lf.host_subnets[0].prefix).network) for lf in topo.leaves() if lf.group == "pod02")
    up = {lk.b.port if lk.b.device == "pod01-spine01" else lk.a.port for lk in topo.links
          if lk.tier == "spine-superspine" and "pod01-spine01" in (lk.a.device, lk.b.device)}
    assert full["pod01-spine01"][far] == up and up  # a pod spine reaches the other pod only upwards
    assert full["su001-leaf-r0"][far] == {lk.a.port for lk in topo.uplinks("su001-leaf-r0")}
