"""The acceptance plan as data (`acceptance/plan.json`): rounds -> tests -> the two NICs (rail, HCA, address),
the cables each test is certain to cross and the ECMP bundles it spreads over; the bound and whether it is met,
flows per pair, thresholds and durations. Written once, deterministic: same plan, same bytes."""

from __future__ import annotations

import gc
from collections import Counter
from dataclasses import dataclass

import orjson

from railforge.acceptance.fabric import Fabric, Nic, read_fabric
from railforge.acceptance.ibroutes import cover
from railforge.acceptance.lft import Lfts
from railforge.acceptance.paths import Path as TestPath
from railforge.acceptance.paths import Paths, flows_for, unreachable
from railforge.acceptance.rounds import Bound, Test, bound, plan_rounds
from railforge.acceptance.thresholds import Durations, thresholds
from railforge.plan.model import Plan

KIND = "railforge-acceptance-plan"
VERSION = 1
DEFAULT_CONFIDENCE = 0.99


@dataclass(slots=True)
class AcceptancePlan:
    fabric: Fabric
    rounds: list[list[Test]]
    bound: Bound
    doc: dict


def _nic(n: Nic) -> dict:
    return {"node": n.node, "rail": n.rail, "hca": n.hca, "ifname": n.ifname, "address": n.address, "leaf": n.leaf,
            "cable": n.cable}


def _nodes_by_su(fabric: Fabric) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for n in fabric.nics.get(min(fabric.nics), []) if fabric.nics else []:
        out.setdefault(n.su, []).append(n.node)
    return out


def build(plan: Plan, confidence: float = DEFAULT_CONFIDENCE, durations: Durations | None = None,
          lfts: Lfts | None = None) -> AcceptancePlan:
    """The acceptance plan of `plan`; with `lfts` (an InfiniBand fabric's forwarding tables) every test's upper
    cables are traced and pairs are added until every upper cable is on a path (`ibroutes`). The collector is
    paused: ~10^5 small objects per 16K GPUs would otherwise make it walk the whole plan again and again."""
    was = gc.isenabled()
    gc.disable()
    try:
        return _build(plan, confidence, durations or Durations(), lfts)
    finally:
        if was:
            gc.enable()


def _build(plan: Plan, confidence: float, durations: Durations, lfts: Lfts | None) -> AcceptancePlan:
    fabric = read_fabric(plan)
    rounds = plan_rounds(fabric)
    b = bound(fabric)
    base_rounds = len(rounds)
    traced = None
    if lfts is not None:
        if plan.cluster.fabric != "infiniband":
            raise ValueError(f"{lfts.source}: forwarding tables are InfiniBand's; {plan.cluster.name} has a "
                             f"{plan.cluster.fabric} compute fabric")
        traced = cover(plan, fabric, rounds, lfts)
        rounds = traced.rounds
    paths = Paths(fabric)
    uses: Counter = Counter()
    tests_out = []
    node_cables_tested: Counter = Counter()
    for tests in rounds:
        rows = []
        for t in tests:
            p = paths.path(t)
            if traced is not None:
                p = TestPath((t.a.cable, t.b.cable, *traced.paths[t.id]), ())
            for bd in p.bundles:
                uses[bd.key] += 1
            node_cables_tested[t.a.cable] += 1
            node_cables_tested[t.b.cable] += 1
            rows.append({"id": t.id, "a": _nic(t.a), "b": _nic(t.b), "cables": list(p.certain),
                         "bundles": [bd.key for bd in p.bundles]})
        tests_out.append({"round": len(tests_out) + 1, "tests": rows})
    bundles = paths.bundles()
    ecmp = plan.cluster.fabric != "infiniband"
    if ecmp:
        flows, miss = flows_for(uses, bundles, confidence)
        routing = {"kind": "ecmp", "confidence": confidence, "flows_per_pair": flows,
                   "miss_probability_bound": round(miss, 6),
                   "formula": "P(miss) <= sum over bundles 2*W*(1-1/W)^(m*flows); W cables, m tests per bundle"}
    elif traced is not None:
        flows = 1
        routing = {"kind": "infiniband-lft", "flows_per_pair": 1, "upper_cables": traced.upper,
                   "upper_cables_on_a_path": traced.covered, "not_on_any_path": list(traced.uncovered),
                   "upper_cables_nameable": traced.identifiable, "not_nameable": traced.not_identifiable,
                   "added_tests": traced.added_tests, "added_rounds": traced.added_rounds,
                   "choice": "rounds' tests traced through the switches' forwarding tables (both directions); "
                             "then greedy multi-cover (the same-class pair on different leaves whose paths carry "
                             "the most upper cables still on fewer than 2 paths) and one pair per cable whose "
                             "tests equal another cable's: a bad upper cable is then on >= 2 slow paths and "
                             "alone on them, which the analysis needs to name it",
                   "note": "paths are the forwarding tables at the time of the dump: re-plan after OpenSM "
                           "re-routes (a link down, a new LID)"}
    else:
        flows = 1
        routing = {"kind": "infiniband", "flows_per_pair": 1,
                   "note": "OpenSM routes each destination LID over one path; which upper cable a pair crosses "
                           "is in the switches' forwarding tables, which this plan does not read: upper-tier "
                           "coverage is not proven for InfiniBand (docs/acceptance.md)"}
    speed = max((n.speed_mbps for n in fabric.all_nics()), default=0) / 1000
    all_nics = fabric.all_nics()
    node_cables = {n.cable for n in all_nics}
    gone = list(traced.uncovered) if traced is not None else unreachable(fabric, bundles)
    doc = {
        "kind": KIND, "version": VERSION, "cluster": plan.cluster.name, "fabric": plan.cluster.fabric,
        "tiers": plan.cluster.tiers, "mode": plan.cluster.mode, "gpus_per_node": plan.cluster.gpus_per_node,
        "rails": plan.cluster.rails,
        "bound": {"rounds": b.rounds, "tests_per_nic": b.tests_per_nic, "odd_classes": list(b.odd_classes),
                  "upper": b.upper, "explain": b.explain()},
        "rounds_planned": len(rounds), "meets_bound": base_rounds == b.rounds,
        "routing": routing,
        "link_gbps": speed,
        "thresholds": thresholds(plan, speed),
        "durations": {"pair_s": durations.pair_s, "round_overhead_s": durations.round_overhead_s,
                      "nccl_su_s": durations.nccl_su_s, "nccl_cluster_s": durations.nccl_cluster_s,
                      "dcgm_s": durations.dcgm_s, "dcgm_level": durations.dcgm_level,
                      "total_s": durations.total(len(rounds))},
        "coverage": {"nics": len(all_nics), "tests": sum(len(r) for r in rounds),
                     "node_cables": len(node_cables), "node_cables_tested": len(set(node_cables_tested)),
                     "node_cables_tested_twice": sum(1 for c in node_cables if node_cables_tested[c] >= 2),
                     "upper_cables": len(fabric.upper_links()), "upper_cables_reachable":
                         len(fabric.upper_links()) - len(gone),
                     "unreachable": gone, "not_node_cables": dict(sorted(fabric.uncovered.items()))},
        "nccl": {"per_su": [{"su": su, "nodes": nodes} for su, nodes in sorted(_nodes_by_su(fabric).items())]},
        "bundles": {k: {"tier": v.tier, "cables": list(v.cables)} for k, v in sorted(bundles.items())},
        "rounds": tests_out,
    }
    return AcceptancePlan(fabric, rounds, b, doc)


def dumps(doc: dict) -> bytes:
    """One test per line inside `rounds`, like plan.json: large plans stream and diff well."""
    head = {k: v for k, v in doc.items() if k != "rounds"}
    out = [orjson.dumps(head, option=orjson.OPT_SORT_KEYS)[:-1], b',\n"rounds":[']
    for i, r in enumerate(doc["rounds"]):
        out.append((b"\n" if i == 0 else b",\n") + b'{"round":' + str(r["round"]).encode() + b',"tests":[\n')
        out.append(b",\n".join(orjson.dumps(t, option=orjson.OPT_SORT_KEYS) for t in r["tests"]))
        out.append(b"\n]}")
    out.append(b"\n]}\n")
    return b"".join(out)
