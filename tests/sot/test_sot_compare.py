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
from railforge.sot import rest
from railforge.sot.desired import Desired, Device, desired
from railforge.sot.nautobot import Nautobot
from railforge.sot.netbox import NetBox
from railforge.sot.sync import Field, Kind, Live, State, compare
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


@pytest.fixture(scope="module")
def tiny() -> Desired:
    out = Path(tempfile.mkdtemp(prefix="rf-sot-compare-")) / "tiny"
    subprocess.run([sys.executable, "-m", "railforge", "build", str(ROOT / "tests" / "specs" / "tiny-roce.yaml"),
                    "--out", str(out)], check=True, capture_output=True)
    return desired(read_side(out).plan)


def adapter(cls):
    client = cls.__new__(cls)
    client.cluster, client.tag, client.tag_id, client.bgp_app = "tiny-roce", "railforge-tiny-roce", "t", True
    client.status_id = {}
    return client


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
            st = State()
            for k in ks:
                for r in k.records(tiny):
                    st.of(k.cls)[k.key(r)] = Live(len(st.of(k.cls)), True, {g.api: g.want(r) for g in k.fields})
            st.of(kind.cls)[kind.key(rec)].values[f.api] = "edited by hand"
            got = [(c.kind, c.cls, c.field, c.have) for c in compare(ks, tiny, st)]
            assert got == [("update", kind.cls, f.api, "edited by hand")], (kind.cls, f.api)


def test_desired_records_carry_the_plan_values(tiny):
    cable = tiny.cables[0]
    assert cable.ends == ((cable.a_device, cable.a_port), (cable.b_device, cable.b_port))
    assert replace(cable, status="active") != cable
