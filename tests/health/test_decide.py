"""What the receiver decides for each alert, on the roce-a800-4nic plan (2 SUs x 16 nodes, 4 rails)."""

from __future__ import annotations

import pytest

from railforge.health.decide import Policy, decide
from railforge.health.topology import HealthIndex
from railforge.health.webhook import parse_webhook
from tests.conftest import plan_of
from tests.health.alerts import alert, body


@pytest.fixture(scope="module")
def idx() -> HealthIndex:
    return HealthIndex.of(plan_of("roce-a800-4nic"))


def _alerts(*alerts: dict):
    return parse_webhook(body(*alerts)).alerts


def _rail(idx: HealthIndex, node: str, rail: int):
    return next(r for r in idx.devices[node].rails if r.rail == rail)


def test_one_node_rail_drains_that_node_and_orders_the_cable(idx: HealthIndex) -> None:
    r = _rail(idx, "su001-gpu05", 2)
    d = decide(_alerts(alert("RailforgeNodeRailDown", cable=r.cable, device=r.leaf, port=r.leaf_port)), idx)
    assert list(d.drains) == ["su001-gpu05"] and r.cable in d.drains["su001-gpu05"]
    assert d.drains["su001-gpu05"].startswith("railforge:")
    assert [(w.kind, w.subject) for w in d.work.values()] == [("cable", r.cable)]
    assert not d.escalations and not d.ignored


def test_several_rails_of_one_leaf_become_one_leaf_action(idx: HealthIndex) -> None:
    cables = [_rail(idx, n, 1) for n in ("su002-gpu01", "su002-gpu07", "su002-gpu09")]
    leaf = cables[0].leaf
    assert {c.leaf for c in cables} == {leaf}
    d = decide(_alerts(*[alert("RailforgeNodeRailDown", cable=c.cable, device=n) for c, n in
                         zip(cables, ("su002-gpu01", "su002-gpu07", "su002-gpu09"), strict=True)]), idx)
    assert sorted(d.drains) == idx.nodes_of_leaf[leaf] and len(d.drains) == 16
    assert [(w.kind, w.subject) for w in d.work.values()] == [("device", leaf)]
    assert len(d.escalations) == 1 and leaf in d.escalations[0]
    single = decide(_alerts(alert("RailforgeNodeRailDown", cable=cables[0].cable)), idx,
                    Policy(leaf_escalation_nodes=5))
    assert list(single.drains) == ["su002-gpu01"]


def test_two_leaves_of_one_su_become_one_su_action(idx: HealthIndex) -> None:
    leaves = idx.leaves_of_su[1][:2]
    d = decide(_alerts(*[alert("RailforgeLeafIsolated", device=lf, su="1") for lf in leaves]), idx)
    assert sorted(d.drains) == sorted(idx.nodes_of_su[1])
    assert [(w.kind, w.subject) for w in d.work.values()] == [("su", "su1")]
    assert any("SU 1" in e for e in d.escalations)
    assert all("SU 1" in r for r in d.drains.values())


def test_spine_and_uplink_alerts_drain_nothing(idx: HealthIndex) -> None:
    uplink = next(lk for lk in idx.plan.links if lk.tier == "leaf-spine")
    d = decide(_alerts(alert("RailforgeSpineIsolated", device="spine02", bisection_share="0.2500"),
                       alert("RailforgeFabricCableDown", cable=uplink.id, device=uplink.a.device, port=uplink.a.port),
                       alert("RailforgeExporterDown", device="spine03")), idx)
    assert d.drains == {}
    assert {(w.kind, w.subject) for w in d.work.values()} == {("device", "spine02"), ("cable", uplink.id)}
    assert d.notes and "spine03" in d.notes[0]


def test_unknown_cable_device_and_su_are_ignored(idx: HealthIndex) -> None:
    d = decide(_alerts(alert("RailforgeNodeRailDown", cable="CMP-999999", device="su001-gpu01"),
                       alert("RailforgeLeafIsolated", device="su009-leaf-r0"),
                       alert("RailforgeSuIsolated", su="7"),
                       alert("RailforgeNodeCheckFailed", device="nosuchnode", component="gpu"),
                       alert("SomethingElse", device="su001-gpu01")), idx)
    assert d.drains == {} and d.work == {}
    assert len(d.ignored) == 5
    assert any("CMP-999999" in x for x in d.ignored) and any("su009-leaf-r0" in x for x in d.ignored)


def test_resolved_alerts_want_nothing(idx: HealthIndex) -> None:
    r = _rail(idx, "su001-gpu01", 0)
    d = decide(_alerts(alert("RailforgeNodeRailDown", status="resolved", cable=r.cable)), idx)
    assert d.drains == {} and d.work == {}


def test_cable_errors_order_the_cable_and_a_dead_fabric_scan_drains_nothing(idx: HealthIndex) -> None:
    """A degrading cable (RailforgeCableErrors, even on a node's rail) is a work order, not a drain; a fabric scan
    that stopped is a note: monitoring is blind, no node is at fault."""
    r = _rail(idx, "su001-gpu03", 0)
    d = decide(_alerts(alert("RailforgeCableErrors", cable=r.cable, device=r.leaf, port=r.leaf_port),
                       alert("RailforgeFabricScanDown", device="su001-gpu01")), idx)
    assert d.drains == {}
    assert [(w.kind, w.subject) for w in d.work.values()] == [("cable", r.cable)]
    assert d.notes and "su001-gpu01" in d.notes[0] and not d.ignored
