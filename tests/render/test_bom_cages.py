"""One plug per split switch cage: copper splitters and twin-port cables in the BOM, and the planner's rule that a
cage's links share one media. Expected counts are worked out by hand from tests/specs/tiny-roce.yaml and, for the
SuperPOD example, counted from the plan's ports by code that shares nothing with the BOM."""

from __future__ import annotations

import csv
from collections import defaultdict

import pytest

from railforge.plan.model import SWITCH_ROLES
from railforge.planner import build_plan
from railforge.render.bom import bill_of_materials
from railforge.render.report import report_markdown
from railforge.spec import load_spec
from tests.conftest import ROOT, plan_of, run_cli


def _rows(path):
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    out = tmp_path_factory.mktemp("tiny-roce") / "out"
    run_cli("build", str(ROOT / "tests" / "specs" / "tiny-roce.yaml"), "--out", str(out), "--only", "plan,bom")
    return _rows(out / "bom.csv")


def _split_cages(plan):
    """(switch, cage) -> the links of its split ports, from the plan's ports alone."""
    cages = defaultdict(list)
    links = {link.id: link for link in plan.links}
    for d in plan.devices:
        if d.role in SWITCH_ROLES:
            for p in d.ports:
                if p.link and p.breakout[:1].isdigit() and int(p.breakout.split("x")[0]) > 1:
                    cages[(d.name, p.index)].append(links[p.link])
    return cages


def test_tiny_roce_orders_one_acc_splitter_per_node_facing_cage(tiny):
    """tiny-roce: 2 SUs x 4 nodes x 2 rails = 16 node links at 400G, SN5600 cages split 2 x 400G, so the 4 leaves
    use 16 / 2 = 8 cages toward the nodes, each one 1:2 ACC splitter (MCA7J60) and no straight 800G ACC."""
    cables = {(r["item"], r["part"]): int(r["quantity"]) for r in tiny if r["category"] == "cable"}
    assert cables[("ACC splitter 1:2", "MCA7J60-N005")] == 8
    assert not [k for k in cables if k[1] == "MCA4J80-N005"]


def test_tiny_roce_uplinks_between_unpaired_split_cages_take_twin_port_optics(tiny):
    """Each leaf's uplink cage serves spine01 and spine02 (one port each), so no copper cable fits it: 4 leaves x 4
    uplinks = 16 links, 32 ends all on split cages (leaf and spine SN5600, 2 x 400G) = 16 twin-port modules and no
    single-port transceivers."""
    xcvr = {(r["item"], r["part"]): int(r["quantity"]) for r in tiny if r["category"] == "transceiver"}
    assert xcvr.get(("SR4 MMF twin-port", "MMA4Z00-NS")) == 16
    assert "MMA4Z00-NS400" not in {part for _, part in xcvr}


@pytest.fixture(scope="module")
def dgx():
    return plan_of("dgx-h100-4su")


def test_every_split_cage_holds_one_media(dgx):
    """The SuperPOD had 40 leaf cages with an ACC and an SR4 link side by side (a plug that does not exist)."""
    cages = _split_cages(dgx)
    assert len(cages) > 1000
    mixed = {k: {link.media for link in v} for k, v in cages.items() if len({link.media for link in v}) > 1}
    assert mixed == {}


def test_splitters_and_cables_of_the_superpod_counted_from_its_ports(dgx):
    """Copper links on split cages: one splitter per cage whose other ends are not split cages; every copper link
    is ordered once, as a cable of its own or as a leg or lane of a shared one."""
    cages = _split_cages(dgx)
    split_ends = {(link.id) for v in cages.values() for link in v}
    splitters = sum(1 for v in cages.values() if all(not link.transceivers and link.media == "ACC" for link in v)
                    and all(sum(1 for w in cages.values() if link in w) == 1 for link in v))
    assert splitters > 0
    bom = bill_of_materials(dgx)
    rows = [r for r in bom.rows if r[0] == "cable"]
    assert sum(r[5] for r in rows if r[1] == "ACC splitter 1:2") == splitters
    legs = sum(1 for v in cages.values() for link in v if link.media == "ACC" and not link.transceivers)
    acc_links = sum(1 for link in dgx.links if link.media == "ACC")
    single_acc = sum(r[5] for r in rows if r[1] == "ACC")
    assert single_acc == acc_links - legs  # ACC links on no split cage (storage 1 x 400G) stay one cable each
    assert all(link.id not in split_ends for link in dgx.links if link.media == "ACC" and link.tier.startswith(
        "storage"))


def test_tiny_clos_paired_spine_cages_take_one_twin_port_dac_each():
    """tiny-clos: each spine cage (2 x 400G) carries both its links to one super-spine cage, all DAC: 16
    spine-super-spine links = 8 straight twin-port DACs, none ordered per link; the pairs counted from the ports
    agree."""
    spec_path = ROOT / "tests" / "specs" / "tiny-clos.yaml"
    spec, lines = load_spec(spec_path)
    plan = build_plan(spec, lines, str(spec_path))
    ss = [link for link in plan.links if link.tier == "spine-superspine"]
    assert len(ss) == 16 and {link.media for link in ss} == {"DAC"}
    cages = _split_cages(plan)
    pairs = set()
    for key, v in cages.items():
        if all(link.tier == "spine-superspine" for link in v):
            others = [k for k, w in cages.items() if k != key and {x.id for x in w} == {x.id for x in v}]
            assert len(others) == 1, key
            pairs.add(frozenset({key, *others}))
    rows = [r for r in bill_of_materials(plan).rows if r[0] == "cable" and r[2] == "MCP4Y10-N003"]
    assert {r[1] for r in rows} == {"DAC twin-port"}
    assert sum(r[5] for r in rows) == len(pairs) == 8
    # with its 16 node links on 8 node-facing leaf cages (8 ACC splitters): 32 links in 16 shared cables
    acc = [link for link in plan.links if link.tier == "node-leaf"]
    assert len(acc) == 16 and {link.media for link in acc} == {"ACC"}
    assert "(32 of them carried in 16 copper splitter or twin-port cables" in report_markdown(plan)
