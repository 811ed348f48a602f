"""`compare`'s rules without a server: what `sot diff` reports and `sot push` refuses, field by field, for every
class both adapters write (the live proof, an edit per field class in a real NetBox and Nautobot, is in
test_netbox.py and test_nautobot.py)."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest

from railforge.change.sides import read_side
from railforge.plan.model import SWITCH_ROLES, Plan
from railforge.plan.switch_model import MGMT_MTU, PlanIndex, build_switch
from railforge.sot import rest
from railforge.sot.desired import Desired, Device, desired
from railforge.sot.nautobot import Nautobot
from railforge.sot.netbox import READS, NetBox
from railforge.sot.sync import WRITTEN_NOT_COMPARED, Field, Kind, Live, State, compare
from tests.conftest import ROOT


def kinds(shared: bool = False) -> list[Kind]:
    return [Kind("device", "dcim/devices", lambda w: w.devices, lambda d: d.name,
                 (Field("rack", lambda d: d.rack, ref="rack"), Field("position", lambda d: d.position)),
                 shared=shared)]


def want() -> Desired:
    w = Desired("x", "")
    w.devices = [Device("leaf1", "leaf", "SN4700", "r1", 10, ""), Device("leaf2", "leaf", "SN4700", "r1", 12, "")]
    return w


def state(**devices: Live) -> State:
    st = State()
    st.of("device").update(devices)
    return st


def test_in_step_reports_nothing():
    st = state(leaf1=Live(1, True, {"rack": "r1", "position": 10}), leaf2=Live(2, True, {"rack": "r1", "position": 12}))
    assert compare(kinds(), want(), st) == []


def test_each_differing_field_is_one_change_with_both_values():
    st = state(leaf1=Live(1, True, {"rack": "r2", "position": 40}), leaf2=Live(2, True, {"rack": "r1", "position": 12}))
    got = [(c.kind, c.key, c.field, c.have, c.want) for c in compare(kinds(), want(), st)]
    assert got == [("update", "leaf1", "rack", "r2", "r1"), ("update", "leaf1", "position", 40, 10)]


def test_missing_foreign_and_unexpected():
    st = state(leaf1=Live(1, False, {"rack": "r9", "position": 1}), spare=Live(3, False, {}), old=Live(4, True, {}))
    got = {(c.kind, c.key, c.owned) for c in compare(kinds(), want(), st)}
    assert got == {("conflict", "leaf1", False), ("create", "leaf2", True), ("unexpected", "spare", False),
                   ("unexpected", "old", True)}


def test_a_shared_object_railforge_does_not_own_is_used_not_compared():
    st = state(leaf1=Live(1, False, {"rack": "r9", "position": 1}), leaf2=Live(2, True, {"rack": "r1", "position": 12}))
    assert compare(kinds(shared=True), want(), st) == []


def test_requests_keep_a_group_whole_and_never_share_it():
    groups = ["a"] * 150 + ["b"] * 30 + ["c"] * 60 + ["d"] * 20
    chunks = rest._chunk_positions(len(groups), groups, 100)
    assert sorted(i for c in chunks for i in c) == list(range(len(groups)))
    owners = [{groups[i] for i in c} for c in chunks]
    assert all(not (x & y) for n, x in enumerate(owners) for y in owners[n + 1:])
    assert [len(c) for c in chunks] == [150, 90, 20]


def built(spec: str) -> Plan:
    out = Path(tempfile.mkdtemp(prefix="rf-sot-compare-")) / "plan"
    subprocess.run([sys.executable, "-m", "railforge", "build", str(ROOT / "tests" / "specs" / spec), "--out",
                    str(out)], check=True, capture_output=True)
    return read_side(out).plan


@pytest.fixture(scope="module")
def tiny_plan() -> Plan:
    return built("tiny-roce.yaml")


@pytest.fixture(scope="module")
def tiny(tiny_plan) -> Desired:
    return desired(tiny_plan)


def adapter(cls):
    client = cls.__new__(cls)
    client.cluster, client.tag, client.tag_id, client.bgp_app = "tiny-roce", "railforge-tiny-roce", "t", True
    client.status_id = {name: f"status-{name}" for name in ("planned", "active", "reserved")}
    return client


def in_step(ks: list[Kind], want: Desired) -> State:
    """A source of truth holding exactly the plan, every object owned."""
    st = State()
    for k in ks:
        for r in k.records(want):
            st.of(k.cls)[k.key(r)] = Live(f"{k.cls}-{len(st.of(k.cls))}", True, {g.api: g.want(r) for g in k.fields})
    return st


@pytest.mark.parametrize("product", [NetBox, Nautobot])
def test_every_key_a_push_writes_is_compared_or_said_why_not(product, tiny):
    """The request body `push` sends for every class: each key is written by a compared `Field`, or declared in
    WRITTEN_NOT_COMPARED with the reason. A field added to a body without a `Field` (so `diff` would be blind to
    it, as MTU was) fails here."""
    client = adapter(product)
    ks = client.kinds()
    st = in_step(ks, tiny)
    seen = set()
    for kind in ks:
        for rec in kind.records(tiny)[:50]:
            compared = set()
            for f in kind.fields:
                compared |= set(f.write(rec, st)) if f.write is not None else {f.api}
            body = client.body(kind, rec, st)
            assert compared <= set(body), (kind.cls, compared - set(body))
            loose = {k for k in set(body) - compared
                     if k not in WRITTEN_NOT_COMPARED and (kind.cls, k) not in WRITTEN_NOT_COMPARED}
            assert not loose, f"{product.product} {kind.cls} writes {sorted(loose)} but diff does not compare it"
            seen.add(kind.cls)
    assert {"device", "interface", "cable", "rack", "IP address", "prefix", "VLAN"} <= seen


def test_netbox_reads_every_field_it_compares():
    """NetBox is asked for named fields only (`?fields=`): a compared field missing from the read would read as
    None and show as drift on every object."""
    derived = {("cable", "terminations"): ("interface", {"cable", "cable_end"}),
               ("IP address", "assigned_object"): ("IP address", {"assigned_object_type", "assigned_object_id"})}
    for kind in adapter(NetBox).kinds():
        for f in kind.fields:
            cls, need = derived.get((kind.cls, f.api), (kind.cls, {f.api}))
            assert need <= set(READS[cls].split(",")), (kind.cls, f.api)


def test_interface_mtu_is_the_switch_configs_and_the_hosts(tiny_plan, tiny):
    """Every switch port's MTU is the one its switch configuration sets (the same plan, through
    railforge.plan.switch_model), a host's rail ports carry the plan's host MTU, its bond and bond members the
    bond's, and virtual interfaces none."""
    idx = PlanIndex(tiny_plan)
    mtu = {(i.device, i.name): i.mtu for i in tiny.interfaces}
    switches = [d for d in tiny_plan.devices if d.role in SWITCH_ROLES]
    assert switches
    for d in switches:
        cfg = build_switch(d, idx)
        assert {(d.name, i.name): i.mtu for i in cfg.interfaces} == \
            {(d.name, p.name): mtu[(d.name, p.name)] for p in d.ports}, d.name
    assert {mtu[(d.name, p.name)] for d in switches for p in d.ports} == {tiny_plan.qos.switch_mtu, MGMT_MTU}
    hosts = [d for d in tiny_plan.devices if d.role == "node"]
    assert hosts and all(mtu[(d.name, r.ifname)] == tiny_plan.qos.host_mtu for d in hosts for r in d.rails)
    bonded = [d for d in hosts if d.bond]
    assert bonded and all(mtu[(d.name, name)] == d.bond.mtu for d in bonded
                          for name in [d.bond.name, *(m.ifname for m in d.bond.members)])
    assert all(i.mtu is None for i in tiny.interfaces if i.type == "virtual")


def test_infiniband_ports_have_no_planned_mtu():
    plan = built("configs-ib.yaml")
    want = desired(plan)
    ib = [i for i in want.interfaces if i.type.startswith("infiniband")]
    assert ib and all(i.mtu is None for i in ib)
    assert any(i.mtu for i in want.interfaces if not i.type.startswith("infiniband"))


@pytest.mark.parametrize("product", [NetBox, Nautobot])
def test_every_field_a_push_writes_is_compared(product, tiny):
    """For every class and every field it sets, a state equal to the plan but for that field shows exactly that
    field as `update`, with the live and the planned value."""
    client = adapter(product)
    ks = client.kinds()
    for kind in ks:
        records = kind.records(tiny)
        if not records or not kind.fields:
            continue
        rec = records[0]
        for f in kind.fields:
            st = in_step(ks, tiny)
            st.of(kind.cls)[kind.key(rec)].values[f.api] = "edited by hand"
            got = [(c.kind, c.cls, c.field, c.have) for c in compare(ks, tiny, st)]
            assert got == [("update", kind.cls, f.api, "edited by hand")], (kind.cls, f.api)


def test_desired_records_carry_the_plan_values(tiny):
    cable = tiny.cables[0]
    assert cable.ends == ((cable.a_device, cable.a_port), (cable.b_device, cable.b_port))
    assert replace(cable, status="active") != cable


def test_docs_table_lists_every_compared_field():
    """docs/sot.md's "What `diff` compares" table names, per class and product, exactly the fields the adapters'
    `Kind` tables compare, and which classes list objects in scope that the plan does not know."""
    text = (ROOT / "docs" / "sot.md").read_text()
    table = text[text.index("| class | NetBox: fields compared |"):]
    rows = {}
    for line in table.splitlines()[2:]:
        if not line.startswith("|"):
            break
        cls, netbox, nautobot, scope = (c.strip() for c in line.strip("|").split("|"))
        rows[cls] = (netbox, nautobot, scope)
    documented: dict[str, list] = {cls: [None, None, scope == "listed"] for cls, (_, _, scope) in rows.items()}
    for n in range(2):
        for cls, cells in rows.items():
            documented[cls][n] = None if cells[n] == "(not written)" else \
                [] if cells[n] == "(none)" else [c.strip().strip("`") for c in cells[n].split(",")]
    actual: dict[str, list] = {}
    for n, product in enumerate((NetBox, Nautobot)):
        for kind in adapter(product).kinds():
            entry = actual.setdefault(kind.cls, [None, None, False])
            entry[n] = [f.api for f in kind.fields]
            entry[2] = entry[2] or kind.scoped
    assert documented == actual
