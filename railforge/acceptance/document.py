"""The acceptance plan as data (`acceptance/plan.json`): rounds -> tests -> the two NICs (rail, HCA, address),
the cables each test is certain to cross and the ECMP bundles it spreads over; the storage fabric's rounds (host
pairs over their storage bonds); the out-of-band checks (reachability, LLDP); the bound and whether it is met,
flows per pair, thresholds, durations, and every cable of the plan with the check that covers it or the reason
none can. Written once, deterministic: same plan, same bytes."""

from __future__ import annotations

import gc
from collections import Counter
from dataclasses import dataclass

import orjson

from railforge.acceptance.fabric import Fabric, Nic, read_fabric, read_storage
from railforge.acceptance.ibroutes import cover
from railforge.acceptance.lft import Lfts
from railforge.acceptance.oob import lldp_cables, lldp_switches, reach_checks
from railforge.acceptance.paths import Path as TestPath
from railforge.acceptance.paths import Paths, flows_for, unreachable
from railforge.acceptance.rounds import Bound, Test, bound, plan_rounds, plan_storage_rounds, storage_bound
from railforge.acceptance.thresholds import Durations, thresholds
from railforge.plan.model import Plan

KIND = "railforge-acceptance-plan"
VERSION = 2
DEFAULT_CONFIDENCE = 0.99
STORAGE_HCA = "mlx5_bond_0"  # a ConnectX bond's RDMA device (RoCE LAG); `acceptance plan --storage-hca` if not
CLASSES = ("compute pair", "storage pair", "oob reach", "lldp")


@dataclass(slots=True)
class AcceptancePlan:
    fabric: Fabric
    rounds: list[list[Test]]
    bound: Bound
    doc: dict


def _nic(n: Nic) -> dict:
    out = {"node": n.node, "rail": n.rail, "hca": n.hca, "ifname": n.ifname, "address": n.address, "leaf": n.leaf,
           "cable": n.cable}
    if n.appliance:
        out["appliance"] = True
    return out


def _nodes_by_su(fabric: Fabric) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for n in fabric.nics.get(min(fabric.nics), []) if fabric.nics else []:
        if not n.appliance:
            out.setdefault(n.su, []).append(n.node)
    return out


def build(plan: Plan, confidence: float = DEFAULT_CONFIDENCE, durations: Durations | None = None,
          lfts: Lfts | None = None, storage_hca: str = STORAGE_HCA) -> AcceptancePlan:
    """The acceptance plan of `plan`; with `lfts` (an InfiniBand fabric's forwarding tables) every test's upper
    cables are traced and pairs are added until every upper cable is on a path (`ibroutes`). The collector is
    paused: ~10^5 small objects per 16K GPUs would otherwise make it walk the whole plan again and again."""
    was = gc.isenabled()
    gc.disable()
    try:
        return _build(plan, confidence, durations or Durations(), lfts, storage_hca)
    finally:
        if was:
            gc.enable()


def _rows(rounds: list[list[Test]], paths: Paths, traced, kind: str) -> tuple[list[dict], Counter, Counter]:
    uses: Counter = Counter()
    own: Counter = Counter()
    out = []
    for tests in rounds:
        rows = []
        for t in tests:
            p = paths.path(t)
            if traced is not None:
                p = TestPath((t.a.cable, t.b.cable, *traced.paths[t.id]), ())
            for bd in p.bundles:
                uses[bd.key] += 1
            for n in (t.a, t.b):
                own[n.cable or n.bond] += 1
            rows.append({"id": t.id, "a": _nic(t.a), "b": _nic(t.b), "cables": list(p.certain),
                         "bundles": [bd.key for bd in p.bundles]})
        out.append({"round": tests[0].round if tests else 0, "kind": kind, "tests": rows})
    return out, uses, own


def _build(plan: Plan, confidence: float, durations: Durations, lfts: Lfts | None, storage_hca: str) -> AcceptancePlan:
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
    compute_rows, uses, node_cables_tested = _rows(rounds, paths, traced, "compute")
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
    storage = read_storage(plan, storage_hca)
    s_rounds = plan_storage_rounds(storage, len(rounds) + 1, sum(len(r) for r in rounds))
    s_paths = Paths(storage)
    storage_rows, s_uses, s_own = _rows(s_rounds, s_paths, None, "storage")
    s_bundles = s_paths.bundles()
    s_flows, s_miss = flows_for(s_uses, s_bundles, confidence) if s_uses else (1, 0.0)
    for k, v in s_bundles.items():
        bundles.setdefault(k, v)
    all_nics = fabric.all_nics()
    speed = max((n.speed_mbps for n in all_nics), default=0) / 1000
    s_speed = max((n.speed_mbps for n in storage.all_nics()), default=0) / 1000
    node_cables = {n.cable for n in all_nics}
    gone = list(traced.uncovered) if traced is not None else unreachable(fabric, paths.bundles())
    reach, reach_why = reach_checks(plan)
    lldp = lldp_cables(plan)
    every_round = compute_rows + storage_rows
    total_rounds = len(every_round)
    s_bound = storage_bound(storage)
    doc = {
        "kind": KIND, "version": VERSION, "cluster": plan.cluster.name, "fabric": plan.cluster.fabric,
        "tiers": plan.cluster.tiers, "mode": plan.cluster.mode, "gpus_per_node": plan.cluster.gpus_per_node,
        "rails": plan.cluster.rails,
        "bound": {"rounds": b.rounds, "tests_per_nic": b.tests_per_nic, "odd_classes": list(b.odd_classes),
                  "upper": b.upper, "explain": b.explain()},
        "rounds_planned": total_rounds,
        "meets_bound": base_rounds == b.rounds and len(s_rounds) == s_bound,
        "routing": routing,
        "link_gbps": speed,
        "thresholds": thresholds(plan, speed, s_speed),
        "durations": {"pair_s": durations.pair_s, "round_overhead_s": durations.round_overhead_s,
                      "nccl_su_s": durations.nccl_su_s, "nccl_cluster_s": durations.nccl_cluster_s,
                      "dcgm_s": durations.dcgm_s, "dcgm_level": durations.dcgm_level,
                      "total_s": durations.total(total_rounds)},
        "coverage": {"nics": len(all_nics), "tests": sum(len(r) for r in rounds),
                     "node_cables": len(node_cables), "node_cables_tested": len(node_cables & set(node_cables_tested)),
                     "node_cables_tested_twice": sum(1 for c in node_cables if node_cables_tested[c] >= 2),
                     "upper_cables": len(fabric.upper_links()), "upper_cables_reachable":
                         len(fabric.upper_links()) - len(gone),
                     "unreachable": gone, "not_node_cables": dict(sorted(fabric.uncovered.items()))},
        "storage": {"hca": storage_hca, "hosts": len(storage.all_nics()), "tests": sum(len(r) for r in s_rounds),
                    "rounds": len(s_rounds), "bound": s_bound, "link_gbps": s_speed,
                    "flows_per_pair": s_flows, "miss_probability_bound": round(s_miss, 6),
                    "hosts_tested_twice": sum(1 for n in storage.all_nics() if s_own[n.cable or n.bond] >= 2)},
        "oob": {"reach": [r.row() for r in reach], "lldp": {"switches": lldp_switches(plan), "cables": lldp}},
        "nccl": {"per_su": [{"su": su, "nodes": nodes} for su, nodes in sorted(_nodes_by_su(fabric).items())]},
        "bundles": {k: {"tier": v.tier, "cables": list(v.cables)} for k, v in sorted(bundles.items())},
        "rounds": every_round,
    }
    doc["cables"] = cable_coverage(plan, doc, fabric, storage, s_paths, reach_why)
    return AcceptancePlan(fabric, rounds, b, doc)


def cable_coverage(plan: Plan, doc: dict, fabric: Fabric, storage: Fabric, s_paths: Paths,
                   reach_why: dict[str, str]) -> dict:
    """Every cable of the plan: the check class that covers it, or the reason none can. ECMP bundles count as
    covered at the plan's confidence (every cable crossed, both ways, by the flows per pair); InfiniBand upper
    cables only on traced paths (`--lfts`)."""
    certain: dict[str, str] = {}
    crossed: dict[str, str] = {}
    for r in doc["rounds"]:
        cls = f"{r['kind']} pair"
        for t in r["tests"]:
            for c in t["cables"]:
                certain.setdefault(c, cls)
            for k in t["bundles"]:
                crossed.setdefault(k, cls)
    ib_untraced = doc["routing"]["kind"] == "infiniband"
    by_bundle: dict[str, str] = {}
    for key, cls in crossed.items():
        for c in doc["bundles"][key]["cables"]:
            by_bundle.setdefault(c, cls)
    reach = {r["cable"] for r in doc["oob"]["reach"]}
    lldp = set(doc["oob"]["lldp"]["cables"])
    why = dict(fabric.uncovered) | dict(storage.uncovered) | reach_why
    for c in doc["coverage"]["unreachable"]:
        why[c] = ("no pair of NICs can cross it: nothing between two NICs of one pairing class goes through it "
                  "(a 3-tier fabric of one pod reaches the super-spines only once a second pod exists)")
    by_class: Counter = Counter()
    by_tier: dict[str, Counter] = {}
    not_covered: dict[str, str] = {}
    for lk in plan.links:
        cls = certain.get(lk.id)
        if cls is None and lk.id in by_bundle:
            if ib_untraced and lk.fabric == "compute":
                why.setdefault(lk.id, "InfiniBand: which upper cable a pair crosses is in the forwarding tables; "
                                      "plan with --lfts (dump_fts) to put it on a traced path")
            else:
                cls = by_bundle[lk.id]
        if cls is None and lk.id in reach:
            cls = "oob reach"
        if cls is None and lk.id in lldp:
            cls = "lldp"
        tier = by_tier.setdefault(f"{lk.fabric} {lk.tier}", Counter())
        if cls is None:
            not_covered[lk.id] = why.get(lk.id, f"no burn-in check covers a {lk.fabric} {lk.tier} cable here: "
                                                "no test's path crosses it")
            tier["not covered"] += 1
        else:
            by_class[cls] += 1
            tier[cls] += 1
    return {"total": len(plan.links), "covered": len(plan.links) - len(not_covered),
            "by_class": dict(sorted(by_class.items())),
            "by_tier": {k: dict(sorted(v.items())) for k, v in sorted(by_tier.items())},
            "not_covered": dict(sorted(not_covered.items()))}


def dumps(doc: dict) -> bytes:
    """One test per line inside `rounds`, like plan.json: large plans stream and diff well."""
    head = {k: v for k, v in doc.items() if k != "rounds"}
    out = [orjson.dumps(head, option=orjson.OPT_SORT_KEYS)[:-1], b',\n"rounds":[']
    for i, r in enumerate(doc["rounds"]):
        head_r = {k: v for k, v in r.items() if k != "tests"}
        out.append((b"\n" if i == 0 else b",\n") + orjson.dumps(head_r, option=orjson.OPT_SORT_KEYS)[:-1]
                   + b',"tests":[\n')
        out.append(b",\n".join(orjson.dumps(t, option=orjson.OPT_SORT_KEYS) for t in r["tests"]))
        out.append(b"\n]}")
    out.append(b"\n]}\n")
    return b"".join(out)
