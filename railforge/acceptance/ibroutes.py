"""InfiniBand upper-tier coverage from the switches' forwarding tables: each pair's path, cable by cable, and
the fewest extra pairs that put every upper cable on some path.

InfiniBand forwards by destination LID: a switch sends a packet for LID d out of the one port its linear
forwarding table names (LMC 0, no adaptive routing). So the path of a -> b is fixed: start at a's leaf, follow
`table[lid(b)]` through the plan's cables until b's own cable. perftest's `-b` runs both directions, so a test
crosses the cables of a -> b and of b -> a.

Tracing maps the dump to the plan by names only: a switch by its node description (`MF0;<hostname>:...`), an
out port by its InfiniBand port number on that planned switch, a LID by the HCA description in its row. A
route that leaves the plan (a port with no planned cable, a host that is not b, a loop) is an error naming the
switch and port: run `railforge verify cabling` on the same fabric first.

Choosing pairs: the analysis names a cable only when it is on at least two slow paths and no other cable is
on exactly the same tests (`analysis`), so coverage here means the same: every upper cable on MIN_SLOW_PATHS
traced paths, with a set of tests no other cable has. The rounds' own tests are traced first. Then greedy
multi-cover over every pair of NICs of one pairing class on different leaves: take the pair that crosses the
most upper cables still on fewer than two paths (ties: the first pair in NIC order), evaluated lazily (a pair's
gain only shrinks); greedy set cover is within ln(n) + 1 of the fewest pairs. Then, for an upper cable whose
tests are exactly another cable's (its "twin"), the first pair that crosses it and none of its twins (adding a
test never makes two different test sets equal, so one pass suffices). The extra tests go first-fit into the
rounds where both NICs are free, then into new rounds.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from dataclasses import dataclass

from railforge.acceptance.fabric import Fabric, Nic
from railforge.acceptance.lft import Lfts
from railforge.acceptance.rounds import Test, pairing_classes
from railforge.plan.model import Link, Plan
from railforge.verify.ibnet import device_of

MAX_HOPS = 8
MIN_SLOW_PATHS = 2  # analysis.MIN_SLOW_PATHS (not imported: analysis reads the document this feeds)
MAX_ROUNDS = 64


class TraceError(ValueError):
    """A forwarding table that does not lead from a NIC to another along planned cables."""


@dataclass(frozen=True, slots=True)
class Coverage:
    rounds: list[list[Test]]
    paths: dict[str, tuple[str, ...]]  # test id -> upper cables on its paths (both directions)
    added_tests: int
    added_rounds: int
    upper: int
    covered: int
    uncovered: tuple[str, ...]
    identifiable: int
    not_identifiable: dict[str, str]  # cable -> why: on fewer than two paths, or on exactly another cable's


class Router:
    """The dump's tables keyed by planned switch name, and the plan's cable at each (switch, IB port)."""

    def __init__(self, plan: Plan, fabric: Fabric, lfts: Lfts):
        self.f = fabric
        devices = {d.name: d for d in plan.devices if d.fabric == "compute" and d.role != "node"}
        switches = {n: d for n, d in devices.items() if d.role in ("leaf", "spine", "superspine")}
        self.tables: dict[str, dict[int, int]] = {}
        for t in lfts.switches.values():
            dev = device_of(t.description, switches)
            if dev is None:
                continue  # a switch outside the plan's view (a lab's cut): no planned path may reach it
            if dev.name in self.tables:
                raise TraceError(f"{lfts.source}:{t.line}: a second table for {dev.name} ({t.description!r})")
            self.tables[dev.name] = t.routes
        missing = sorted(set(switches) - set(self.tables))
        if missing:
            raise TraceError(f"{lfts.source}: no forwarding table for {len(missing)} planned switches "
                             f"({', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''})")
        number = {(d.name, p.name): p.ib_number() for d in switches.values() for p in d.ports}
        self.cable: dict[tuple[str, int], Link] = {}
        for lk in fabric.links.values():
            for end in (lk.a, lk.b):
                if end.device in switches and (end.device, end.port) in number:
                    self.cable[(end.device, number[(end.device, end.port)])] = lk
        self.lid: dict[tuple[str, str], int] = {}
        for lid, desc in sorted(lfts.hcas.items()):
            host, _, hca = desc.partition(" ")
            self.lid.setdefault((host, hca.strip()), lid)
        self._memo: dict[tuple[str, str], tuple[str, ...]] = {}

    def lid_of(self, nic: Nic) -> int:
        lid = self.lid.get((nic.node, nic.hca))
        if lid is None:
            raise TraceError(f"no LID for {nic.node} {nic.hca} in the dump: it names no 'Channel Adapter ...: "
                             f"'{nic.node} {nic.hca}'' destination (dump_fts without -n, subnet up?)")
        return lid

    def upper(self, src: Nic, dst: Nic) -> tuple[str, ...]:
        """The upper cables from src's leaf to dst's leaf along the tables (destination routing: the path
        depends only on src's leaf and dst)."""
        key = (src.leaf, dst.key)
        hit = self._memo.get(key)
        if hit is None:
            hit = self._memo[key] = self._walk(src, dst)
        return hit

    def _walk(self, src: Nic, dst: Nic) -> tuple[str, ...]:
        lid, sw, out = self.lid_of(dst), src.leaf, []
        for _ in range(MAX_HOPS):
            port = self.tables[sw].get(lid)
            if port is None or port == 0 or port == 255:
                raise TraceError(f"{sw} has no route to LID 0x{lid:04x} ({dst.node} {dst.hca})")
            lk = self.cable.get((sw, port))
            if lk is None:
                raise TraceError(f"{sw} sends LID 0x{lid:04x} ({dst.node} {dst.hca}) out of port {port}, which has "
                                 "no planned cable")
            if lk.id == dst.cable:
                return tuple(out)
            peer = lk.b.device if lk.a.device == sw else lk.a.device
            if peer not in self.tables:
                raise TraceError(f"{sw} port {port} ({lk.id}) leads to {peer}, not to {dst.node} {dst.hca}")
            out.append(lk.id)
            sw = peer
        raise TraceError(f"the route from {src.leaf} to {dst.node} {dst.hca} has more than {MAX_HOPS} hops: a loop")

    def test_upper(self, a: Nic, b: Nic) -> tuple[str, ...]:
        return tuple(sorted(set(self.upper(a, b)) | set(self.upper(b, a))))


def cover(plan: Plan, fabric: Fabric, rounds: list[list[Test]], lfts: Lfts) -> Coverage:
    r = Router(plan, fabric, lfts)
    upper = {lk.id for lk in fabric.upper_links()}
    tests = [(t.a, t.b) for ts in rounds for t in ts]
    candidates = _candidates(fabric)
    on: dict[str, set[int]] = defaultdict(set)  # cable -> indexes into `tests`
    for i, (a, b) in enumerate(tests):
        for c in _cables(r, a, b):
            on[c].add(i)
    pack = Packer(rounds)
    _multicover(r, candidates, upper, on, tests, pack)
    _separate(r, candidates, upper, on, tests, pack)
    out = pack.rounds
    paths = {t.id: r.test_upper(t.a, t.b) for ts in out for t in ts}
    by_set: dict[frozenset, list[str]] = defaultdict(list)
    for c, ts in on.items():
        by_set[frozenset(ts)].append(c)
    why = {}
    for c in sorted(upper & set(on)):
        twins = sorted(set(by_set[frozenset(on[c])]) - {c})
        if len(on[c]) < MIN_SLOW_PATHS:
            why[c] = f"on {len(on[c])} traced path: the routes cross it for one pair only"
        elif twins:
            why[c] = (f"on exactly the paths of {', '.join(twins[:3])}: no route crosses one and not the other, "
                      "a fault on either looks the same")
    return Coverage(out, paths, pack.added, len(out) - len(rounds), len(upper), len(upper & set(on)),
                    tuple(sorted(upper - set(on))), len(upper & set(on)) - len(why), why)


class Packer:
    """The rounds, growing: an added test goes into the first round where both NICs are free, else a new one."""

    def __init__(self, rounds: list[list[Test]]):
        self.rounds = [list(ts) for ts in rounds]
        self.busy = [{n.key for t in ts for n in (t.a, t.b)} for ts in self.rounds]
        self.n = sum(len(ts) for ts in self.rounds)
        self.added = 0

    def slot(self, a: Nic, b: Nic) -> int | None:
        return next((i for i, keys in enumerate(self.busy) if a.key not in keys and b.key not in keys), None)

    def place(self, a: Nic, b: Nic) -> None:
        slot = self.slot(a, b)
        if slot is None:
            if len(self.rounds) >= MAX_ROUNDS:
                raise TraceError(f"covering the upper cables needs more than {MAX_ROUNDS} rounds")
            self.rounds.append([])
            self.busy.append(set())
            slot = len(self.rounds) - 1
        self.n += 1
        self.added += 1
        self.rounds[slot].append(Test(f"t{self.n:06d}", slot + 1, a, b))
        self.busy[slot] |= {a.key, b.key}


def _cables(r: Router, a: Nic, b: Nic) -> tuple[str, ...]:
    return (a.cable, b.cable, *r.test_upper(a, b))


def _candidates(fabric: Fabric) -> list[tuple[Nic, Nic]]:
    out: list[tuple[Nic, Nic]] = []
    for rails in pairing_classes(fabric).values():
        nics = [n for rail in rails for n in fabric.nics.get(rail, [])]
        out += [(a, b) for i, a in enumerate(nics) for b in nics[i + 1:] if a.leaf != b.leaf]
    return out


def _add(r: Router, on: dict[str, set[int]], tests: list, pair: tuple[Nic, Nic], pack: Packer) -> None:
    pack.place(*pair)
    tests.append(pair)
    for c in _cables(r, *pair):
        on[c].add(len(tests) - 1)


def _multicover(r: Router, candidates: list, upper: set[str], on: dict, tests: list, pack: Packer) -> None:
    """Greedy, lazily evaluated: until every upper cable any candidate reaches is on MIN_SLOW_PATHS paths. Key:
    most cables gained, then a pair that fits an existing round, then NIC order."""
    def key(i: int) -> tuple[int, int, int]:
        g = sum(1 for c in r.test_upper(*candidates[i]) if c in upper and len(on[c]) < MIN_SLOW_PATHS)
        return (-g, 0 if pack.slot(*candidates[i]) is not None else 1, i)

    heap = [k for i in range(len(candidates)) if (k := key(i))[0]]
    heapq.heapify(heap)
    while heap:
        old = heapq.heappop(heap)
        new = key(old[2])
        if new[0] == 0:
            continue
        if new != old and heap and new > heap[0]:
            heapq.heappush(heap, new)
            continue
        _add(r, on, tests, candidates[new[2]], pack)


def _separate(r: Router, candidates: list, upper: set[str], on: dict, tests: list, pack: Packer) -> None:
    """An upper cable whose tests are exactly another cable's cannot be told from it: add, for each, the first
    candidate that crosses it and none of its twins (a new test never makes two distinct sets equal)."""
    through: dict[str, list[int]] = defaultdict(list)
    for i, (a, b) in enumerate(candidates):
        for c in r.test_upper(a, b):
            through[c].append(i)
    groups: dict[frozenset, set[str]] = defaultdict(set)
    for c, ts in on.items():
        groups[frozenset(ts)].add(c)
    for x in sorted(upper):
        if not on.get(x):
            continue
        twins = {c for c in groups[frozenset(on[x])] if c != x and on[c] == on[x]}
        if not twins:
            continue
        apart = [i for i in through[x] if not twins & set(_cables(r, *candidates[i]))]
        pick = next((i for i in apart if pack.slot(*candidates[i]) is not None), apart[0] if apart else None)
        if pick is not None:
            _add(r, on, tests, candidates[pick], pack)
