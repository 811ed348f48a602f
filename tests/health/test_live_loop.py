"""Live: FRR lab -> exporters -> Prometheus -> Alertmanager -> `railforge health serve` -> Slurm.

The roce-a800-4nic plan's SU 1 with two spines and two GPU nodes runs in network namespaces on its generated
frr.conf; prometheus-frr-exporter and node-exporter run inside those namespaces and Prometheus scrapes them
every 5 s with the generated rules; Alertmanager routes with the generated config to the receiver. Faults are
real: a BGP session shut on a leaf, a cable's leaf end taken down. Times are measured from the fault and
printed (pytest -s shows them); the targets are asserted (fault -> drain <= 30 s).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from railforge.lab.daemons import vtysh
from railforge.lab.scope import lab_topology
from railforge.lab.state import load_state
from railforge.render.health import Expected, alertmanager_text, rules_text
from tests.conftest import plan_of, require_tool, run_cli
from tests.helpers import prom_stack

T = TypeVar("T")
NAME = "roce-a800-4nic"
CLUSTER = f"inventory/{NAME}"
PREFIX = "rfh-"
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
def lab(built, tmp_path_factory):
    require_tool(*LAB_TOOLS, *prom_stack.TOOLS)
    out = built(NAME)
    args = ("--out", str(out), "--prefix", PREFIX)
    run_cli("lab", "down", CLUSTER, *args, check=False)
    proc = run_cli("lab", "up", CLUSTER, *args, "--sus", "1", "--spines", "2", "--hosts-per-su", "2", check=False)
    try:
        assert proc.returncode == 0, proc.stdout + proc.stderr
        plan = plan_of(NAME)
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
def test_session_shut_raises_the_cable_alert_from_both_ends(stack, lab) -> None:
    _, plan, topo, state = lab
    link = next(lk for lk in topo.fabric_links() if lk.a.device == "su001-leaf-r2" and lk.b.device == "spine02")
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
