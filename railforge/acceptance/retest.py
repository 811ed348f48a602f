"""The re-test round: what the first rounds' results make suspicious, tested again before anything is blamed.

As burn-ins are run by hand: a pair that measured slow is run again as it was (a transient, such as a loaded
round, does not come back), and each NIC whose cable no healthy test cleared is paired with two new partners
that passed everything and that it has not met, on other leaves, so its cable is judged against cables known to
be good. Each suspicious upper cable or ECMP bundle gets two pairs of healthy NICs whose paths cross it (the
plan's paths; on InfiniBand the forwarding tables', `--lfts`). A candidate nothing can be paired for is listed
in `retest.not_retested` with the reason, and the analysis judges it on the first rounds alone.

The new tests go first-fit into new rounds (a NIC at most once per round; compute and storage apart, as their
runners and pass marks differ), numbered after the last round, marked `retest`, a re-run carrying `retest_of`.
Planning again after a re-test round re-tests only what is new.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from railforge.acceptance.analysis import analyse
from railforge.acceptance.document import _nic
from railforge.acceptance.fabric import Nic, read_fabric, read_storage
from railforge.acceptance.ibroutes import Router
from railforge.acceptance.lft import Lfts
from railforge.acceptance.paths import Paths
from railforge.acceptance.results import AcceptanceDoc, Results
from railforge.acceptance.rounds import Test, leaf_local, pairing_classes
from railforge.plan.model import Plan

PARTNERS = 2  # new partners per suspicious NIC, pairs per suspicious upper cable: two slow paths name a cable
MAX_SEARCH = 200_000  # pairs whose paths are computed while looking for ones over a suspicious upper cable


class RetestError(ValueError):
    pass


class _Classes:
    """The endpoints of the burn-in as the plan has them now, by pairing class, and their paths."""

    def __init__(self, plan: Plan, doc: dict, lfts: Lfts | None):
        self.compute = read_fabric(plan)
        self.storage = read_storage(plan, doc.get("storage", {}).get("hca", "mlx5_bond_0"))
        self.nic: dict[str, Nic] = {}
        self.cls: dict[str, str] = {}
        self.members: dict[str, list[Nic]] = {}
        self.local: dict[str, bool] = {}
        for name, rails in pairing_classes(self.compute).items():
            key = f"compute {name}"
            self.members[key] = [n for r in rails for n in self.compute.nics.get(r, [])]
            self.local[key] = leaf_local(self.compute, rails)
        if self.storage.nics:
            self.members["storage"] = self.storage.nics[0]
            self.local["storage"] = False
        for key, nics in self.members.items():
            for n in nics:
                self.nic[n.key] = n
                self.cls[n.key] = key
        self.paths = {"compute": Paths(self.compute), "storage": Paths(self.storage)}
        self.router = None
        if doc["routing"]["kind"] == "infiniband-lft":
            if lfts is None:
                raise RetestError("this acceptance plan traced its paths through the forwarding tables: give the "
                                  "same dump again with --lfts (dump_fts output)")
            self.router = Router(plan, self.compute, lfts)

    def kind(self, key: str) -> str:
        return "storage" if self.cls[key] == "storage" else "compute"

    def path(self, a: Nic, b: Nic) -> tuple[list[str], list[str], dict[str, dict]]:
        """Certain cables and bundle keys of a test a-b, and the bundles' definitions."""
        kind = self.kind(a.key)
        if self.router is not None and kind == "compute":
            return [a.cable, b.cable, *self.router.test_upper(a, b)], [], {}
        paths = self.paths[kind]
        p = paths.path(Test("t", 0, a, b))
        defs = {bd.key: {"tier": bd.tier, "cables": list(bd.cables)} for bd in p.bundles}
        return list(p.certain), [bd.key for bd in p.bundles], defs


def plan_retest(plan: Plan, raw: dict, doc: AcceptanceDoc, results: Results, lfts: Lfts | None = None) -> dict:
    """Append the re-test rounds to `raw` (the acceptance plan as written) and return a summary."""
    c = _Classes(plan, raw, lfts)
    tests = {t.id: t for r in doc.rounds for t in r.tests}
    for t in tests.values():
        for n in (t.a, t.b):
            if n.key not in c.nic:
                raise RetestError(f"{t.id}: {n.key} is not a NIC of this build: plan the burn-in again")
    kind_of = {t.id: r.kind for r in doc.rounds for t in r.tests}
    in_retest = {t.id for r in doc.rounds if r.retest for t in r.tests}
    rerun = {t.retest_of for t in tests.values() if t.retest_of}
    bad = sorted(tid for tid, res in results.pairs.items() if res.status != "ok" and tid not in in_retest
                 and tid not in rerun)
    ok = [tid for tid, res in results.pairs.items() if res.status == "ok"]
    healthy_cables = {x for tid in ok for x in tests[tid].cables}
    status: dict[str, set[str]] = defaultdict(set)
    partners: dict[str, set[str]] = defaultdict(set)
    for t in tests.values():
        partners[t.a.key].add(t.b.key)
        partners[t.b.key].add(t.a.key)
    for tid, res in results.pairs.items():
        for n in (tests[tid].a, tests[tid].b):
            status[n.key].add(res.status)
    healthy = {k for k, s in status.items() if s == {"ok"}}
    retested = {x for t in tests.values() if t.retest_of for x in (t.a.key, t.b.key)}
    new: list[tuple[str, Nic, Nic, str | None]] = []  # (kind, a, b, retest_of)
    for tid in bad:
        t = tests[tid]
        new.append((kind_of[tid], c.nic[t.a.key], c.nic[t.b.key], tid))
    suspicious = sorted({n.key for tid in bad for n in (tests[tid].a, tests[tid].b)
                         if n.own not in healthy_cables and n.key not in retested})
    why: dict[str, str] = {}
    used: dict[str, int] = defaultdict(int)
    for key in suspicious:
        x = c.nic[key]
        found = _partners(c, x, healthy, partners[key], used)
        for y in found:
            partners[key].add(y.key)
            used[y.key] += 1
            new.append((c.kind(key), *_client_first(x, y), None))
        if not found:
            why[x.cable or x.bond] = (f"no healthy partner for {key} on another leaf that it has not met "
                                      f"({c.cls[key]})")
    own = {n.own for t in tests.values() for n in (t.a, t.b)}
    evidence = analyse(doc, results)
    first = set(bad)
    named = {s.cable for s in evidence.suspects + evidence.bundles if first & set(s.tests)}
    weak = {x for u in evidence.unexplained if u.test in first for x in (*u.bundles, *u.weak)}
    upper = sorted((named | weak) - own)
    crossed: dict[str, int] = defaultdict(int)
    for _, a, b, _ in new:
        certain, bundles, _ = c.path(a, b)
        for x in (*certain, *bundles):
            crossed[x] += 1
    for item in upper:
        if crossed[item] >= PARTNERS:
            continue
        pairs = _pairs_over(c, item, raw["bundles"].get(item, {}).get("cables"), healthy, partners,
                            PARTNERS - crossed[item])
        for a, b in pairs:
            partners[a.key].add(b.key)
            partners[b.key].add(a.key)
            new.append((c.kind(a.key), *_client_first(a, b), None))
        if not pairs:
            why[item] = "no pair of healthy NICs it has not tested crosses it"
    return _append(raw, c, new, why)


def _client_first(x: Nic, y: Nic) -> tuple[Nic, Nic]:
    """A compute appliance has no address on the rails: it is the client (side a)."""
    return (y, x) if x.appliance and x.rail is not None and not y.appliance else (x, y)


def _candidates(c: _Classes, x: Nic, healthy: set[str], met: set[str]) -> list[Nic]:
    key = c.cls[x.key]
    return [y for y in c.members[key] if y.key in healthy and y.key not in met and y.node != x.node
            and (y.leaf != x.leaf or c.local[key])
            and not (x.appliance and y.appliance and x.rail is not None)]


def _partners(c: _Classes, x: Nic, healthy: set[str], met: set[str], used: dict[str, int]) -> list[Nic]:
    """Two healthy partners x has not met, on other leaves, the least used in this re-test first, on two
    different leaves where there are two."""
    cands = sorted(_candidates(c, x, healthy, met), key=lambda y: used[y.key])
    out: list[Nic] = []
    for y in cands:
        if len(out) < PARTNERS and all(y.leaf != z.leaf for z in out):
            out.append(y)
    for y in cands:
        if len(out) < PARTNERS and y not in out:
            out.append(y)
    return out


def _pairs_over(c: _Classes, item: str, cables: Iterable[str] | None, healthy: set[str],
                partners: dict[str, set[str]], want: int) -> list[tuple[Nic, Nic]]:
    """Up to `want` pairs of healthy NICs, not tested together before, whose path crosses `item` (a cable or a
    bundle key); the first NIC on a switch below it, searched in NIC order."""
    links = c.compute.links | c.storage.links
    ends = {links[x].a.device for x in (cables or [item]) if x in links}
    spines = c.compute.spine_of_leaf | c.storage.spine_of_leaf

    def below(n: Nic) -> bool:
        return bool(ends & ({n.leaf, *n.leaf.split("+")} | spines.get(n.leaf, set())))

    out: list[tuple[Nic, Nic]] = []
    taken: set[str] = set()
    tried = 0
    for key, members in c.members.items():
        for a in members:
            if a.key not in healthy or a.key in taken or not below(a):
                continue
            for b in members:
                if b.key not in healthy or b.key in taken or b.key in partners[a.key] or b.node == a.node:
                    continue
                if b.leaf == a.leaf and not c.local[key]:
                    continue
                tried += 1
                if tried > MAX_SEARCH:
                    return out
                certain, bundles, _ = c.path(a, b)
                if item in certain or item in bundles:
                    out.append((a, b))
                    taken |= {a.key, b.key}
                    break
            if len(out) == want:
                return out
    return out


def _append(raw: dict, c: _Classes, new: list[tuple[str, Nic, Nic, str | None]], why: dict[str, str]) -> dict:
    rounds = raw["rounds"]
    first = max((r["round"] for r in rounds), default=0) + 1
    n = max((int(t["id"][1:]) for r in rounds for t in r["tests"]), default=0)
    added: list[dict] = []
    busy: list[set[str]] = []
    for kind in ("compute", "storage"):
        mine = [(a, b, of) for k, a, b, of in new if k == kind]
        start = len(added)
        for a, b, of in mine:
            slot = next((i for i in range(start, len(added)) if a.key not in busy[i] and b.key not in busy[i]), None)
            if slot is None:
                added.append({"round": first + len(added), "kind": kind, "retest": True, "tests": []})
                busy.append(set())
                slot = len(added) - 1
            n += 1
            certain, bundles, defs = c.path(a, b)
            for k, v in defs.items():
                raw["bundles"].setdefault(k, v)
            row = {"id": f"t{n:06d}", "a": _nic(a), "b": _nic(b), "cables": certain, "bundles": bundles}
            if of:
                row["retest_of"] = of
            added[slot]["tests"].append(row)
            busy[slot] |= {a.key, b.key}
    rounds += added
    raw["rounds_planned"] = len(rounds)
    old = raw.get("retest") or {"rounds": [], "not_retested": {}}
    raw["retest"] = {"rounds": old["rounds"] + [r["round"] for r in added],
                     "not_retested": dict(sorted((old["not_retested"] | why).items()))}
    raw["bundles"] = dict(sorted(raw["bundles"].items()))
    return {"rounds": [r["round"] for r in added], "tests": sum(len(r["tests"]) for r in added),
            "reruns": sum(1 for _, _, _, of in new if of), "not_retested": why}
