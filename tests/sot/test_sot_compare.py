"""`compare`'s ASN and BGP rules without a server: what `sot diff` reports and `sot push` refuses when the ASNs
or a switch's routing instance differ from the plan (the live proof is in test_nautobot.py)."""

from __future__ import annotations

from types import SimpleNamespace

from railforge.sot.desired import Bgp, Desired
from railforge.sot.sync import State, compare

OURS = "railforge-x"


def rec(owned: bool = True):
    return SimpleNamespace(tags=[SimpleNamespace(slug=OURS if owned else "someone")])


def state(asns: dict, bgp: dict | None) -> State:
    st = State(None, owned=lambda r: any(t.slug == OURS for t in r.tags))
    st.asns, st.bgp = asns, bgp
    return st


def want() -> Desired:
    w = Desired("x", "")
    w.asns = [65001, 65002]
    w.bgp = [Bgp("leaf1", 65001, "10.0.0.1/32"), Bgp("leaf2", 65002, "10.0.0.2/32")]
    return w


def test_in_step_reports_nothing():
    st = state({65001: rec(), 65002: rec()},
               {"leaf1": (rec(), 65001, "10.0.0.1/32"), "leaf2": (rec(), 65002, "10.0.0.2/32")})
    assert compare(want(), st) == []


def test_renumbered_asn_names_the_missing_number_the_stray_one_and_the_switch():
    st = state({65001: rec(), 64999: rec()},
               {"leaf1": (rec(), 65001, "10.0.0.1/32"), "leaf2": (rec(), 64999, "10.0.0.2/32")})
    got = {(c.kind, c.cls, c.key) for c in compare(want(), st)}
    assert got == {("create", "ASN", "65002"), ("update", "ASN", "64999"), ("update", "BGP instance", "leaf2")}


def test_router_id_moved_and_instance_missing():
    st = state({65001: rec(), 65002: rec()}, {"leaf1": (rec(), 65001, "10.9.9.9/32")})
    changes = {(c.kind, c.key): c.detail for c in compare(want(), st)}
    assert set(changes) == {("update", "leaf1"), ("create", "leaf2")}
    assert "10.9.9.9/32" in changes[("update", "leaf1")] and "10.0.0.1/32" in changes[("update", "leaf1")]


def test_foreign_asn_with_a_planned_number_is_used_a_foreign_instance_is_in_the_way():
    st = state({65001: rec(owned=False), 65002: rec(), 1: rec(owned=False)},
               {"leaf1": (rec(owned=False), 65001, "10.0.0.1/32"), "leaf2": (rec(), 65002, "10.0.0.2/32")})
    assert [(c.kind, c.cls, c.key) for c in compare(want(), st)] == [("conflict", "BGP instance", "leaf1")]


def test_a_product_without_per_device_asns_compares_numbers_only():
    assert compare(want(), state({65001: rec(), 65002: rec()}, None)) == []
