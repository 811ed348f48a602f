"""Live: FRR lab -> exporters -> Prometheus -> Alertmanager -> `railforge health serve` -> Slurm.

The health-roce plan (tests/specs: the roce-a800-4nic design, 2 SUs x 4 nodes, with Slurm) runs twice: its
SU 1 with two spines and two GPU nodes in network namespaces on the generated frr.conf (the FRR lab), and its
8 GPU nodes as slurmd under a real slurmctld (tests/helpers/slurm_cluster.py, issue 26's harness) from the
generated slurm.conf; prometheus-frr-exporter and node-exporter run inside those namespaces and Prometheus scrapes them
every 5 s with the generated rules; Alertmanager routes with the generated config to the receiver. Faults are
real: a BGP session shut on a leaf, a cable's leaf end taken down. Times are measured from the fault and
printed (pytest -s shows them); the targets are asserted (fault -> drain <= 30 s).
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from railforge.lab.daemons import vtysh
from railforge.lab.scope import lab_topology
from railforge.lab.state import load_state, run_dir
from railforge.plan.io import read_plan
from railforge.render import grafana
from railforge.render.health import Expected, alertmanager_text, rules_text
from tests.conftest import ROOT, require_tool, run_cli
from tests.helpers import prom_stack
from tests.helpers.slurm_cluster import TOOLS as SLURM_TOOLS
from tests.helpers.slurm_cluster import SlurmCluster, SlurmClusterConfig

T = TypeVar("T")
NAME = "health-roce"
CLUSTER = str(ROOT / "tests" / "specs" / "health-roce.yaml")
PREFIX = "rfh-"
SLURM_PORTS = {"prefix": "i27", "subnet": "10.227.0.0/24", "slurmctld_port": 27817, "slurmd_port": 27818,
               "slurmdbd_port": 27819, "mariadb_port": 27306}
HEALTH_CHECK = """#!/bin/sh
# Slurm's HealthCheckProgram in this test. On a real node it is the node check itself with --drain; here the
# node's rails live in the FRR lab's namespace {prefix}<node> while its slurmd lives in the Slurm harness's
# namespace (the one that reaches slurmctld): the check runs in the first, the drain happens from the second.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin  # slurmd runs it with an almost empty environment
ns="{prefix}$SLURMD_NODENAME"
[ -e "/run/netns/$ns" ] || exit 0
out=$(ip netns exec "$ns" env PYTHONPATH={root} {python} -m railforge.health.nodecheck \\
  --host-vars {out}/ansible/host_vars/$SLURMD_NODENAME.json --gpus 0 --mtu 9000 \\
  --skip bond,peermem,xid,pcie,speed --lldp-socket {lab_run}/$SLURMD_NODENAME/lldpd.socket) && exit 0
export SLURM_CONF={conf}
case "$(scontrol -o show node "$SLURMD_NODENAME")" in *" State="*DRAIN*) exit 1 ;; esac
scontrol update NodeName="$SLURMD_NODENAME" State=DRAIN Reason="railforge-node-health: $(echo "$out" | head -n 1)"
exit 1
"""


def node_check(out: Path, node: str = "{node}") -> str:
    """The node check as the receiver runs it before a resume: in the node's lab namespace."""
    return (f"ip netns exec {PREFIX}{node} {sys.executable} -m railforge.health.nodecheck "
            f"--host-vars {out}/ansible/host_vars/{node}.json --gpus 0 --mtu 9000 "
            f"--skip bond,peermem,xid,pcie,speed --lldp-socket {run_dir(NAME, PREFIX)}/{node}/lldpd.socket")
LAB_TOOLS = ("root", "/usr/lib/frr/zebra", "/usr/lib/frr/bgpd", "vtysh", "lldpd", "lldpcli", "ip")


def wait_for(probe: Callable[[], T], timeout: float, what: str, every: float = 0.5) -> tuple[T, float]:
    t0 = time.monotonic()
    while True:
        got = probe()
        if got:
            return got, time.monotonic() - t0
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"{what}: not within {timeout:.0f} s")
        time.sleep(every)


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    require_tool(*LAB_TOOLS, *prom_stack.TOOLS, *SLURM_TOOLS)
    out = tmp_path_factory.mktemp("health-roce") / "out"
    run_cli("build", CLUSTER, "--out", str(out))
    return out


@pytest.fixture(scope="module")
def lab(generated: Path):
    out = generated
    args = ("--out", str(out), "--prefix", PREFIX)
    run_cli("lab", "down", CLUSTER, *args, check=False)
    proc = run_cli("lab", "up", CLUSTER, *args, "--sus", "1", "--spines", "2", "--hosts-per-su", "2", check=False)
    try:
        assert proc.returncode == 0, proc.stdout + proc.stderr
        plan = read_plan(out / "plan.json")
        topo = lab_topology(plan, sus=1, spines="2", hosts_per_su=2, prefix=PREFIX)
        state = load_state(NAME, PREFIX)
        yield out, plan, topo, state
    finally:
        run_cli("lab", "down", CLUSTER, *args, check=False)


@pytest.fixture(scope="module")
def receiver_port() -> int:
    return prom_stack.free_port()


@pytest.fixture(scope="module")
def stack(lab, receiver_port, tmp_path_factory):
    out, plan, topo, state = lab
    lab_plan = dataclasses.replace(plan, devices=topo.devices(), links=topo.links, views={})
    work = tmp_path_factory.mktemp("prom")
    switches = {sw.name: Path(state.run_dir) / sw.name for sw in topo.switches}
    hosts = {h.name: topo.ns(h.name) for h in topo.hosts}
    t0 = time.monotonic()
    s = prom_stack.start(work, switches, hosts, Expected(lab_plan).text(), rules_text(plan),
                         alertmanager_text(plan, f"http://127.0.0.1:{receiver_port}/alerts"))
    print(f"monitoring stack up in {time.monotonic() - t0:.1f} s: {s.targets_up()} targets")
    try:
        wait_for(lambda: not s.prom_alerts("firing") and not s.prom_alerts("pending") and
                 s.query("railforge:expected_bgp_session"), 60, "a quiet, healthy fabric")
        yield s
    finally:
        s.stop()


def firing(stack: prom_stack.Stack, name: str, **labels: str) -> list[dict]:
    return [a for a in stack.prom_alerts() if a["labels"]["alertname"] == name
            and all(a["labels"].get(k) == v for k, v in labels.items())]


@pytest.mark.root
@pytest.mark.slow
def test_every_planned_session_is_seen_established(stack, lab) -> None:
    _, _, topo, _ = lab
    sessions = stack.query("railforge:expected_bgp_session")
    assert len(sessions) == 2 * len(topo.fabric_links())
    up = stack.query("railforge:expected_bgp_session and on(device, peer) (frr_bgp_peer_state == 1)")
    assert len(up) == len(sessions)
    carriers = stack.query('railforge:expected_link{role="node"} and on(device, port) '
                           'label_replace(node_network_carrier == 1, "port", "$1", "exported_device", "(.+)")')
    assert len(carriers) == sum(len(h.rails) for h in topo.hosts)


@pytest.mark.root
@pytest.mark.slow
def test_dashboard_queries_read_the_live_exporters(stack, lab) -> None:
    """The Grafana panels' own queries (variables as Grafana sets them for SU 1, all rails) against the live
    exporters: established = planned, one link-error series per host rail under node-exporter 1.5.0's real netdev
    names, and no PFC series: the ethtool collector runs on the rails, but a veth has no per-priority pause
    counters (as the panel says)."""
    _, plan, topo, _ = lab
    query = {(p["title"], t["refId"]): t["expr"].replace("$su", "1").replace("$rail", ".*")
             .replace("$__rate_interval", "1m")
             for board in grafana.dashboards(plan).values() for p in json.loads(grafana.encode(board))["panels"]
             for t in p.get("targets", [])}

    def values(title: str, ref: str = "A") -> dict[str, float]:
        return {json.dumps(r["metric"], sort_keys=True): float(r["value"][1]) for r in stack.query(query[title, ref])}

    ends = 2 * len(topo.fabric_links())
    assert values("Sessions established / planned", "B") == values("Sessions established / planned") == {"{}": ends}
    assert values("Sessions established / planned, by tier", "A") == values("Sessions established / planned, by tier",
                                                                             "B") == {'{"tier": "leaf-spine"}': ends}
    rails = {(h.name, r.ifname) for h in topo.hosts for r in h.rails}
    # rate() needs two scrapes of each node's exporter: wait for all of them, then compare
    errors, took = wait_for(lambda: len(got := values("Link errors per cable end")) >= len(rails) and got, 60,
                            "link-error series of every host rail")
    assert {(json.loads(k)["device"], json.loads(k)["port"]) for k in errors} == rails and set(errors.values()) == {0}
    ethtool = stack.query('node_ethtool_info{driver="veth"}')
    assert {(r["metric"]["device"], r["metric"]["exported_device"]) for r in ethtool} >= rails
    assert values(f"PFC pause frames, priority {plan.qos.lossless_priority}") == {}
    print(f"dashboard queries: {ends} session ends established, {len(errors)} link-error series in {took:.1f} s")


@pytest.mark.root
@pytest.mark.slow
def test_session_shut_raises_the_cable_alert_from_both_ends(stack, lab) -> None:
    _, plan, topo, state = lab
    link = next(lk for lk in topo.fabric_links() if lk.a.device == "su001-leaf-r2" and lk.b.device == "spine02")
    assert link.su == 1 and link.rail == 2
    leaf = plan.device_index()[link.a.device]
    peer_ip = next(p.address for d in topo.switches if d.name == link.b.device for p in d.ports
                   if p.name == link.b.port).split("/")[0]
    t0 = time.monotonic()
    vtysh(state, leaf.name, "configure terminal", f"router bgp {leaf.asn}", f"neighbor {peer_ip} shutdown")
    try:
        alerts, took = wait_for(lambda: len(firing(stack, "RailforgeFabricCableDown", cable=link.id)) == 2 and
                                firing(stack, "RailforgeFabricCableDown", cable=link.id), 60, "FabricCableDown")
        print(f"session shut -> RailforgeFabricCableDown firing in Prometheus: {took:.1f} s")
        assert {a["labels"]["device"] for a in alerts} == {link.a.device, link.b.device}
        assert all(a["labels"]["su"] == "1" and a["labels"]["rail"] == "2" and a["labels"]["leaf"] == leaf.name
                   for a in alerts)
        assert not firing(stack, "RailforgeLeafIsolated") and not firing(stack, "RailforgeNodeRailDown")
        _, took_am = wait_for(lambda: [a for a in stack.am_alerts() if a["labels"].get("cable") == link.id], 60,
                              "the alert at Alertmanager")
        print(f"session shut -> alert at Alertmanager: {time.monotonic() - t0:.1f} s")
    finally:
        vtysh(state, leaf.name, "configure terminal", f"router bgp {leaf.asn}", f"no neighbor {peer_ip} shutdown")
    _, took = wait_for(lambda: not firing(stack, "RailforgeFabricCableDown"), 90, "the alert to clear")
    print(f"session restored -> alert cleared: {took:.1f} s")


@pytest.fixture(scope="module")
def slurm(generated: Path, lab, tmp_path_factory):
    work = tmp_path_factory.mktemp("slurm")
    check = work / "railforge-node-health"
    check.write_text(HEALTH_CHECK.format(prefix=PREFIX, root=ROOT, python=sys.executable, out=generated,
                                         lab_run=run_dir(NAME, PREFIX), conf=work / "etc" / "slurm.conf"))
    check.chmod(0o755)
    config = SlurmClusterConfig(**SLURM_PORTS, overrides={"HealthCheckProgram": str(check),
                                                          "HealthCheckInterval": "5", "HealthCheckNodeState": "ANY"})
    cluster = SlurmCluster(generated / "slurm", work, config)
    t0 = time.monotonic()
    cluster.start()
    print(f"slurm up in {time.monotonic() - t0:.1f} s: {len(cluster.nodes)} slurmd")
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def receiver(generated: Path, lab, slurm, stack, receiver_port: int, tmp_path_factory):
    state = tmp_path_factory.mktemp("receiver")
    check = node_check(generated)
    log = (state / "receiver.out").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "railforge", "health", "serve", CLUSTER, "--out", str(generated),
                             "--listen", f"127.0.0.1:{receiver_port}", "--state-dir", str(state),
                             "--node-check", check], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                            env={**os.environ, **slurm.env, "PYTHONPATH": str(ROOT)})
    try:
        wait_for(lambda: (state / "actions.log").exists() and "listening" in (state / "actions.log").read_text(),
                 30, "the receiver to listen")
        yield state
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()


def actions(state: Path) -> list[dict]:
    return [json.loads(x) for x in (state / "actions.log").read_text().splitlines()]


@pytest.mark.root
@pytest.mark.slow
def test_node_check_as_health_check_program_drains_with_the_cable(lab, slurm) -> None:
    """slurmd runs the node check every 5 s: a rail's cable down drains the node with the check's first line."""
    _, _, topo, _ = lab
    node = topo.hosts[0]
    rail = next(r for r in node.rails if r.rail == 0)
    assert slurm.node(node.name)["State"] == "IDLE"

    def drained() -> dict | None:
        now = slurm.node(node.name)
        return now if "DRAIN" in now["State"] else None

    subprocess.run(["ip", "-n", topo.ns(rail.leaf), "link", "set", rail.leaf_port, "down"], check=True)
    try:
        state, took = wait_for(drained, 60, f"{node.name} drained by its HealthCheckProgram")
        print(f"cable {rail.cable} down -> drained by HealthCheckProgram in {took:.1f} s: {state['Reason']!r}")
        assert state["Reason"].startswith(f"railforge-node-health: rail0 {rail.cable}: no carrier (cable to "
                                          f"{rail.leaf}:{rail.leaf_port})")
    finally:
        subprocess.run(["ip", "-n", topo.ns(rail.leaf), "link", "set", rail.leaf_port, "up"], check=True)
    wait_for(lambda: subprocess.run(node_check(lab[0]).replace("{node}", node.name).split(),
                                    capture_output=True).returncode == 0, 60, "the node check to pass again")
    slurm.scontrol("update", f"NodeName={node.name}", "State=RESUME")
    wait_for(lambda: "DRAIN" not in slurm.node(node.name)["State"], 30, f"{node.name} back")
    time.sleep(6)  # one more health-check round: a healthy node stays in service
    assert "DRAIN" not in slurm.node(node.name)["State"]


@pytest.mark.root
@pytest.mark.slow
def test_cable_fault_drains_the_node_and_repair_resumes_it(lab, stack, slurm, receiver: Path) -> None:
    """A node's rail cable fails at the leaf: Slurm drains that node with the cable in the reason, a work order
    names the cable; the cable comes back: the node check passes in the node's namespace and Slurm resumes it."""
    _, plan, topo, _ = lab
    node = topo.hosts[1]
    rail = next(r for r in node.rails if r.rail == 1)
    assert slurm.node(node.name)["State"] == "IDLE"

    def drained() -> dict | None:  # by the loop (the HealthCheckProgram may drain it first, with its own reason)
        now = slurm.node(node.name)
        return now if "DRAIN" in now["State"] and now["Reason"].startswith("railforge:") else None

    subprocess.run(["ip", "-n", topo.ns(rail.leaf), "link", "set", rail.leaf_port, "down"], check=True)
    try:
        state, fault_to_drain = wait_for(drained, 60, f"{node.name} drained by the receiver")
        print(f"cable {rail.cable} down -> {node.name} drained in Slurm: {fault_to_drain:.1f} s "
              f"(reason {state['Reason']!r})")
        assert rail.cable in state["Reason"] and state["Reason"].startswith("railforge:")
        assert fault_to_drain <= 30
        others = [h.name for h in topo.hosts if h.name != node.name]
        assert all("DRAIN" not in slurm.node(n)["State"] for n in others)
        orders = list((receiver / "workorders").glob(f"repair-cable-{rail.cable}-*.xlsx"))  # one per incident
        assert len(orders) == 1, orders
    finally:
        t1 = time.monotonic()
        subprocess.run(["ip", "-n", topo.ns(rail.leaf), "link", "set", rail.leaf_port, "up"], check=True)
    _, repair_to_resume = wait_for(lambda: "DRAIN" not in slurm.node(node.name)["State"], 120,
                                   f"{node.name} resumed")
    print(f"cable {rail.cable} back -> {node.name} resumed: {time.monotonic() - t1:.1f} s")
    done = [a for a in actions(receiver) if a["action"] in ("drain", "resume") and a.get("node") == node.name]
    assert [a["action"] for a in done] == ["drain", "resume"]
    assert done[1]["check"].startswith("OK:")
    assert repair_to_resume <= 90


@pytest.mark.root
@pytest.mark.slow
def test_two_rails_on_one_leaf_escalate_and_the_share_guard_holds(lab, stack, slurm, receiver: Path) -> None:
    """Both lab nodes lose rail 2 at the same leaf: the receiver makes one leaf action (every node behind the leaf,
    4 of the plan's 8) and, that being over the 25 % share, holds it for a human instead of draining."""
    out, plan, topo, _ = lab
    rails = [next(r for r in h.rails if r.rail == 2) for h in topo.hosts]
    leaf = rails[0].leaf
    assert {r.leaf for r in rails} == {leaf}
    behind = sorted(d.name for d in plan.devices if d.role == "node" and any(r.leaf == leaf for r in d.rails))
    before = len(actions(receiver))
    for r in rails:
        subprocess.run(["ip", "-n", topo.ns(leaf), "link", "set", r.leaf_port, "down"], check=True)
    try:
        held, took = wait_for(lambda: [a for a in actions(receiver)[before:] if a["action"] == "held"], 90,
                              "the leaf action held for a human")
        print(f"two rails down on {leaf} -> one leaf action held for a human: {took:.1f} s")
        new = actions(receiver)[before:]
        # alerts arrive one group (cable) at a time: the first node may be drained alone before the second
        # alert makes it a leaf action; the rest of the leaf's nodes are then held, never drained
        drained = [a["node"] for a in new if a["action"] == "drain"]
        assert set(drained) <= {h.name for h in topo.hosts} and len(drained) <= 1
        # a lab node Slurm's HealthCheckProgram drained first (its own reason) is already out: not held again
        acted = set(held[0]["nodes"] + drained)
        already = {n for n in set(behind) - acted if "DRAIN" in slurm.node(n)["State"]}
        assert len(behind) == 4 and acted <= set(behind) and acted | already == set(behind), (held, drained, already)
        assert already <= {h.name for h in topo.hosts}, already
        assert "of 8, over the 25% share" in held[0]["why"], held
        assert any(a["action"] == "escalated" and leaf in a["why"] for a in new)
        bystanders = [n for n in behind if n not in {h.name for h in topo.hosts}]
        assert all("DRAIN" not in slurm.node(n)["State"] for n in bystanders)
    finally:
        for r in rails:
            subprocess.run(["ip", "-n", topo.ns(leaf), "link", "set", r.leaf_port, "up"], check=True)
    for h in topo.hosts:  # the HealthCheckProgram drained the two faulty nodes on its own; a human resumes them
        wait_for(lambda h=h: subprocess.run(node_check(out).replace("{node}", h.name).split(),
                                            capture_output=True).returncode == 0, 60, f"{h.name} healthy")
        if "DRAIN" in slurm.node(h.name)["State"]:
            slurm.slurm("scontrol", "update", f"NodeName={h.name}", "State=RESUME", check=False)
