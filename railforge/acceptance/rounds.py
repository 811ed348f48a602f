"""Rounds of NIC pairs: every NIC in two tests with two different partners on other leaves, at most one test per
NIC per round, in the fewest rounds the topology allows.

Construction: the NICs that may be paired (one rail; in a rail-plane design a pair of rails, because there only
traffic between rails reaches the super-spines) are laid out as a ring in which neighbours sit on different
leaves (SUs interleaved, pods alternating, so neighbours in a 3-tier clos sit in different pods). Each ring edge
is one test; colouring the edges alternately gives two rounds, and a ring of odd length needs a third colour for
its closing edge. A ring is a 2-regular graph, so every NIC gets exactly two partners.

The bound (see `bound`): a NIC takes part in at most one test per round and needs `TESTS_PER_NIC` tests, so
rounds >= TESTS_PER_NIC; when a pairing class has an odd number of NICs, a round can pair at most (N-1)/2 of
them, N*2/2 tests are needed and N > 2*(N-1)/2, so rounds >= TESTS_PER_NIC + 1 (a 2-regular graph on an odd
number of vertices has chromatic index 3). The upper tiers add ceil(U / n) per switch (U uplinks, n NICs below
it, one flow each per round): 1 in every design with uplinks <= downlinks.

Why two tests per NIC: a slow test names two node cables; the second test of each NIC, with another partner,
clears the healthy one ("a suspect is on several slow paths and on no healthy one").
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

from railforge.acceptance.fabric import Fabric, Nic

TESTS_PER_NIC = 2


class RoundsError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class Test:
    id: str
    round: int
    a: Nic
    b: Nic


@dataclass(frozen=True, slots=True)
class Bound:
    rounds: int
    tests_per_nic: int
    odd_classes: tuple[str, ...]
    upper: int
    upper_switch: str

    def explain(self) -> str:
        parts = [f"{self.tests_per_nic} tests per NIC, one per round: >= {self.tests_per_nic}"]
        if self.odd_classes:
            parts.append(f"odd NIC count in {', '.join(self.odd_classes)}: >= {self.tests_per_nic + 1}")
        parts.append(f"upper tiers: >= {self.upper}" + (f" ({self.upper_switch})" if self.upper_switch else ""))
        return "; ".join(parts)


def pairing_classes(fabric: Fabric) -> dict[str, list[int]]:
    """Which rails share a ring: each rail alone; in a rail-plane 3-tier design rail pairs (0,1), (2,3), ...
    (there only traffic between rails reaches the super-spines); and a rail whose NICs all sit on one leaf (one
    SU) paired with the next such rail when the two leaves reach each other over the spines, so its tests cross
    both leaves' uplinks. A single-leaf rail with no such partner is a class of its own: its tests stay on its
    leaf (they burn in the node cables, and only those)."""
    rails = sorted(fabric.nics)
    if fabric.mode == "rail-plane" and fabric.tiers >= 3 and len(rails) >= 2:
        out = {f"rails {a}+{b}": [a, b] for a, b in zip(rails[0::2], rails[1::2], strict=False)}
        if len(rails) % 2:
            out[f"rail {rails[-1]}"] = [rails[-1]]
        return out
    classes: list[list[int]] = []
    single = [r for r in rails if len({n.leaf for n in fabric.nics[r]}) < 2]
    classes += [[r] for r in rails if r not in single]
    while single:
        a = single.pop(0)
        b = next((x for x in single if _joined(fabric, a, x)), None)
        if b is None:
            classes.append([a])
        else:
            single.remove(b)
            classes.append([a, b])
    return {(f"rails {c[0]}+{c[1]}" if len(c) == 2 else f"rail {c[0]}"): c for c in sorted(classes)}


def _joined(fabric: Fabric, a: int, b: int) -> bool:
    """Whether the (single) leaves of rails a and b reach each other through the upper tiers."""
    la, lb = fabric.nics[a][0].leaf, fabric.nics[b][0].leaf
    sa, sb = fabric.spine_of_leaf.get(la, set()), fabric.spine_of_leaf.get(lb, set())
    return bool(sa & sb) or (fabric.tiers >= 3 and bool(sa) and bool(sb))


def leaf_local(fabric: Fabric, rails: list[int]) -> bool:
    """A class whose NICs all sit on one leaf: its tests cross that leaf only."""
    return len({n.leaf for r in rails for n in fabric.nics[r]}) < 2


def _su_sequence(nics: list[Nic], group_of: dict[str, str]) -> list[int]:
    """SUs in an order where neighbours differ in pod: round-robin over pods (the leaves' groups)."""
    pods: dict[str, list[int]] = defaultdict(list)
    seen: set[int] = set()
    for n in nics:
        if n.su not in seen:
            seen.add(n.su)
            pods[group_of.get(n.leaf, "")].append(n.su)
    lists = [sorted(v) for _, v in sorted(pods.items())]
    out: list[int] = []
    for i in range(max((len(x) for x in lists), default=0)):
        out += [x[i] for x in lists if i < len(x)]
    return out


def interleaved(nics: list[Nic], group_of: dict[str, str]) -> list[Nic]:
    """NIC i of every SU in turn (SUs in pod-alternating order): ring neighbours sit on different leaves."""
    by_su: dict[int, list[Nic]] = defaultdict(list)
    for n in nics:
        by_su[n.su].append(n)
    order = _su_sequence(nics, group_of)
    out: list[Nic] = []
    for i in range(max((len(v) for v in by_su.values()), default=0)):
        out += [by_su[su][i] for su in order if i < len(by_su[su])]
    return out


def ring(fabric: Fabric, rails: list[int]) -> list[Nic]:
    first = interleaved(fabric.nics[rails[0]], fabric.group)
    if len(rails) == 1:
        return first
    second = interleaved(fabric.nics[rails[1]], fabric.group)
    shift = len(second) // 2  # the other rail's NIC half a ring away: never the same node as its neighbours
    second = second[shift:] + second[:shift]
    out: list[Nic] = []
    for i in range(max(len(first), len(second))):
        out += ([first[i]] if i < len(first) else []) + ([second[i]] if i < len(second) else [])
    return out


def ring_edges(nics: list[Nic]) -> list[tuple[int, Nic, Nic]]:
    """(colour, a, b) for every edge of the ring; colours alternate, an odd ring's closing edge gets colour 2."""
    n = len(nics)
    if n < 2:
        return []
    if n == 2:
        return [(0, nics[0], nics[1])]
    edges = [(i % 2, nics[i], nics[i + 1]) for i in range(n - 1)]
    edges.append((1 if n % 2 == 0 else 2, nics[-1], nics[0]))
    return edges


def bound(fabric: Fabric) -> Bound:
    """The fewest rounds any plan with TESTS_PER_NIC tests per NIC can have on this fabric (module docstring)."""
    odd = tuple(name for name, rails in pairing_classes(fabric).items()
                if sum(len(fabric.nics[r]) for r in rails) % 2 and sum(len(fabric.nics[r]) for r in rails) > 2)
    upper, worst = 1, ""
    for sw, ups in sorted(fabric.up.items()):
        below = fabric.down_count.get(sw, 0)
        need = math.ceil(len(ups) / below) if below else 1
        if need > upper:
            upper, worst = need, sw
    base = TESTS_PER_NIC + (1 if odd else 0)
    return Bound(rounds=max(base, upper), tests_per_nic=TESTS_PER_NIC, odd_classes=odd, upper=upper,
                 upper_switch=worst)


def plan_rounds(fabric: Fabric) -> list[list[Test]]:
    """Every test of the burn-in, grouped by round; tests are numbered in round order."""
    by_colour: dict[int, list[tuple[Nic, Nic]]] = defaultdict(list)
    for _, rails in pairing_classes(fabric).items():
        local = leaf_local(fabric, rails)
        for colour, a, b in ring_edges(ring(fabric, rails)):
            if a.node == b.node or (a.leaf == b.leaf and not local):
                raise RoundsError(f"cannot pair {a.key} with {b.key}: same node or leaf ({a.leaf})")
            if b.appliance and not a.appliance:
                a, b = b, a  # an appliance has no address on the rails: it is the client
            by_colour[colour].append((a, b))
    rounds: list[list[Test]] = []
    n = 0
    for colour in sorted(by_colour):
        tests = []
        for a, b in by_colour[colour]:
            n += 1
            tests.append(Test(f"t{n:06d}", len(rounds) + 1, a, b))
        rounds.append(tests)
    return rounds


def spread(nics: list[Nic]) -> list[Nic]:
    """A ring order in which neighbours sit on different leaves (leaf pairs) wherever the counts allow: the
    leaves' NICs, largest leaf first, fill every other place, then the places between. When no leaf holds more
    than half the NICs no two neighbours share a leaf; otherwise the largest leaf's surplus sits side by side
    (those tests stay on that leaf)."""
    by_leaf: dict[str, list[Nic]] = defaultdict(list)
    for n in nics:
        by_leaf[n.leaf].append(n)
    flat = [n for _, group in sorted(by_leaf.items(), key=lambda kv: (-len(kv[1]), kv[0])) for n in group]
    places = list(range(0, len(flat), 2)) + list(range(1, len(flat), 2))
    out: list[Nic | None] = [None] * len(flat)
    for n, i in zip(flat, places, strict=True):
        out[i] = n
    return [n for n in out if n is not None]


def storage_bound(fabric: Fabric) -> int:
    """Rounds the storage ring needs: two tests per host, a third colour for an odd ring."""
    n = len(fabric.nics.get(0, []))
    return 0 if n < 2 else 1 if n == 2 else TESTS_PER_NIC + n % 2


def plan_storage_rounds(fabric: Fabric, first_round: int, first_test: int) -> list[list[Test]]:
    """The storage fabric's tests: every host's bond in two tests with two partners, on other leaf pairs where the
    counts allow (`spread`), numbered after the compute fabric's rounds and tests."""
    by_colour: dict[int, list[tuple[Nic, Nic]]] = defaultdict(list)
    for colour, a, b in ring_edges(spread(fabric.nics.get(0, []))):
        by_colour[colour].append((a, b))
    rounds: list[list[Test]] = []
    n = first_test
    for colour in sorted(by_colour):
        tests = []
        for a, b in by_colour[colour]:
            n += 1
            tests.append(Test(f"t{n:06d}", first_round + len(rounds), a, b))
        rounds.append(tests)
    return rounds
