"""The out-of-band checks: the generated `oob-reach.sh` run for real (iputils ping, in a network namespace of
its own where only loopback answers), its output read by the strict reader and judged (an unanswered address
names its access cable; an OOB leaf none of whose addresses answers is named instead of its cables); the LLDP
check through `railforge verify cabling`'s comparison; and the storage ring's spread of partners."""

from __future__ import annotations

import shutil
import subprocess
from collections import Counter
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from railforge.acceptance.document import build
from railforge.acceptance.fabric import Nic
from railforge.acceptance.jobs import write
from railforge.acceptance.oob import judge_reach, lldp_findings
from railforge.acceptance.results import Reader, read_acceptance_plan
from railforge.acceptance.rounds import ring_edges, spread
from tests.acceptance.lldplab import LldpPair
from tests.conftest import plan_of, require_tool

NAME = "roce-a800-4nic"


@pytest.mark.root
def test_reach_script_pings_and_names_the_silent_cables(tmp_path: Path) -> None:
    """One address behind each OOB leaf but the first answers (127.0.0.x on the namespace's loopback), the
    others do not (nothing routes there): the lost ones are named by cable, the answering ones are not; the first
    OOB leaf, none of whose addresses answers, is named as the switch, its cables are not listed one by one."""
    require_tool("root", "ping", "unshare", "xargs")
    acc = tmp_path / "acc"
    write(build(plan_of(NAME)), acc)
    tsv = acc / "jobs" / "oob-reach.tsv"
    rows = [line.split("\t") for line in tsv.read_text().splitlines()[1:]]
    doc = orjson.loads((acc / "plan.json").read_bytes())
    switch = {c["id"]: c["switch"] for c in doc["oob"]["reach"]}
    first_leaf = switch[rows[0][0]]
    answer = [next(r[0] for r in rows if switch[r[0]] == sw) for sw in sorted(set(switch.values()) - {first_leaf})]
    for i, r in enumerate(rows):
        r[3] = f"127.0.0.{i + 1}" if r[0] in answer else f"192.0.2.{i + 1}"
    tsv.write_text("# check\tdevice\tport\taddress\tcable\n" + "".join("\t".join(r) + "\n" for r in rows))
    results = tmp_path / "results"
    proc = subprocess.run(["unshare", "--net", "sh", "-c", f"ip link set lo up && {acc}/jobs/oob-reach.sh {results}"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(answer) >= 2 and f"{len(answer)} of {len(rows)} addresses answered" in proc.stdout
    accdoc = read_acceptance_plan(acc / "plan.json")
    res = Reader(accdoc).read(results)
    assert res.skipped == [] and len(res.reach) == len(rows)
    verdict = judge_reach(accdoc.oob.reach, res.reach)
    behind_first = [r for r in rows if switch[r[0]] == first_leaf]
    assert verdict.dark == [(first_leaf, len(behind_first))]
    cable = {r[0]: r[4] for r in rows}
    assert {x["cable"] for x in verdict.lost} == {cable[r[0]] for r in rows if r[0] not in answer
                                                  and switch[r[0]] != first_leaf}
    assert verdict.answered == len(answer) and verdict.missing == 0
    text = (results / "oob" / "reach.txt").read_text().splitlines()
    (results / "oob" / "reach.txt").write_text("\n".join(text[:-1] + ["o999999 ok"]) + "\n")
    again = Reader(accdoc).read(results)
    assert again.reach == {} and [s.reason for s in again.skipped] == ["malformed"]


@pytest.mark.root
def test_lldp_check_names_swapped_storage_peer_links(tmp_path: Path) -> None:
    """Real lldpd on two namespaces wired as an MLAG pair's two peer links (the ports the plan names); the
    tables `collect-lldp.sh` would fetch, read as `railforge verify cabling` reads them: as planned, both
    cables match (and the speed check names both: a veth is not the planned 400G); with the veth ends swapped,
    both are named."""
    require_tool("root", "lldpd", "lldpcli")
    plan = plan_of("dgx-h100-4su")
    peers = [lk for lk in plan.links if lk.tier == "storage-peer"][:2]
    a, b = peers[0].a.device, peers[0].b.device
    assert all((lk.a.device, lk.b.device) == (a, b) for lk in peers)
    with LldpPair("i38b-", a, b) as pair:
        pair.wire([(lk.a.port, lk.b.port) for lk in peers])
        folder = pair.collect(tmp_path / "lldp")
        ids = [lk.id for lk in peers]
        assert lldp_findings(plan, folder, ids, check_speed=False) == (2, 2, [])
        checked, matched, findings = lldp_findings(plan, folder, ids)
        assert matched == 0 and sorted((k, c) for k, c, _ in findings) == [("wrong-speed", [x]) for x in ids], (
            "lldpd reports a veth's speed, not the planned 400G: the speed check sees it")
        pair.wire([(peers[0].a.port, peers[1].b.port), (peers[1].a.port, peers[0].b.port)])
        shutil.rmtree(folder)
        folder = pair.collect(tmp_path / "lldp")
        checked, matched, findings = lldp_findings(plan, folder, ids, check_speed=False)
        assert matched == 0 and [(k, sorted(c)) for k, c, _ in findings] == [("swapped", sorted(ids))]


def _nic(i: int, leaf: str) -> Nic:
    return Nic(f"h{i:03d}", None, "mlx5_bond_0", "bond0", f"10.0.0.{i}", leaf, None, 1, 100000)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 12), min_size=1, max_size=8))
def test_spread_keeps_neighbours_on_other_leaves(sizes: list[int]) -> None:
    """Hosts of leaf pairs of any sizes: when no leaf pair holds more than half the hosts, no ring edge joins two
    hosts of one leaf pair; otherwise only the largest pair's surplus does. Every host has two ring partners."""
    nics = [_nic(sum(sizes[:g]) + i, f"pair{g}") for g, n in enumerate(sizes) for i in range(n)]
    ring = spread(nics)
    assert sorted(n.node for n in ring) == sorted(n.node for n in nics)
    edges = ring_edges(ring)
    same = [(a.leaf, b.leaf) for _, a, b in edges if a.leaf == b.leaf]
    total, largest = len(nics), max(sizes)
    if total > 2 and largest * 2 <= total:
        assert same == [], (sizes, same)
    elif total > 2:
        assert len(same) <= 2 * largest - total, (sizes, same)
        assert {x for x, _ in same} <= {f"pair{sizes.index(largest)}"}
    degree = Counter(n.node for _, a, b in edges for n in (a, b))
    assert total < 3 or set(degree.values()) == {2}
