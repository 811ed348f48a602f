"""What each test's traffic crosses: the cables it is certain to use, and the ECMP bundles it spreads over.

A pair's two node cables are certain. Above the leaves the plan knows the candidate cables, not the one a flow
takes: in an Ethernet fabric the switches hash each flow onto one of their equal-cost uplinks; in InfiniBand
OpenSM's forwarding tables pick one (not read here: see docs/acceptance.md). A bundle with a single cable is
certain too (a lab with one spine and one cable per leaf-spine pair).

How many flows per pair: with `flows` flows per pair, each flow in each direction picks uniformly one of the W
cables of every bundle it crosses; a bundle crossed by m tests (both directions) misses a given cable in one
direction with probability (1 - 1/W)^(m * flows). The union bound over every cable and direction,
    P(some upper cable unexercised) <= sum over bundles of 2 * W * (1 - 1/W)^(m * flows),
is a coupon-collector tail; `flows_for` returns the fewest flows that bring it under 1 - confidence.
Assumes independent, uniform hashing at each hop (no polarization: switches seed their hash differently).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

from railforge.acceptance.fabric import Fabric
from railforge.acceptance.rounds import Test
from railforge.plan.model import Link

MAX_FLOWS = 1024


@dataclass(frozen=True, slots=True)
class Bundle:
    """Equal-cost cables one hop may take: `tier` cables above `switch` (a leaf, or a pod's spines)."""

    key: str
    tier: str
    cables: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Path:
    certain: tuple[str, ...]
    bundles: tuple[Bundle, ...]


class Paths:
    """Paths of tests, with bundles shared (a 131K plan has ~10^5 tests but a few thousand bundles)."""

    def __init__(self, fabric: Fabric):
        self.f = fabric
        self._bundles: dict[str, Bundle] = {}

    def _bundle(self, key: str, tier: str, links: list[Link]) -> Bundle:
        b = self._bundles.get(key)
        if b is None:
            b = self._bundles[key] = Bundle(key, tier, tuple(sorted(lk.id for lk in links)))
        return b

    def _leaf_up(self, leaf: str, spines: set[str], everyone: bool) -> Bundle:
        key = f"{leaf} up" if everyone else f"{leaf} up to {','.join(sorted(spines))}"
        if key in self._bundles:
            return self._bundles[key]
        return self._bundle(key, "leaf-spine", [lk for lk in self.f.up.get(leaf, []) if lk.b.device in spines])

    def _pod_up(self, leaf: str) -> Bundle:
        group = self.f.group.get(leaf, "")
        key = f"{group} spines up"
        if key in self._bundles:
            return self._bundles[key]
        spines = self.f.spine_of_leaf.get(leaf, set())
        return self._bundle(key, "spine-superspine", [lk for s in sorted(spines) for lk in self.f.up.get(s, [])])

    def path(self, test: Test) -> Path:
        a, b = test.a, test.b
        certain = [a.cable, b.cable]
        bundles: list[Bundle] = []
        if a.leaf != b.leaf:
            sa, sb = self.f.spine_of_leaf.get(a.leaf, set()), self.f.spine_of_leaf.get(b.leaf, set())
            common = sa & sb
            if common:
                bundles = [self._leaf_up(a.leaf, common, common == sa), self._leaf_up(b.leaf, common, common == sb)]
            else:
                bundles = [self._leaf_up(a.leaf, sa, True), self._pod_up(a.leaf), self._pod_up(b.leaf),
                           self._leaf_up(b.leaf, sb, True)]
        out = []
        for bd in bundles:
            if len(bd.cables) == 1:
                certain.append(bd.cables[0])
            elif bd.cables:
                out.append(bd)
        return Path(tuple(certain), tuple(out))

    def bundles(self) -> dict[str, Bundle]:
        return self._bundles


def miss_probability(uses: Counter, bundles: dict[str, Bundle], flows: int) -> float:
    total = 0.0
    for key, m in uses.items():
        w = len(bundles[key].cables)
        if w > 1:
            total += 2 * w * math.exp(m * flows * math.log1p(-1 / w))
    return total


def flows_for(uses: Counter, bundles: dict[str, Bundle], confidence: float) -> tuple[int, float]:
    """The fewest flows per pair (and the miss bound they reach) for `confidence` that every upper cable is
    crossed in both directions; (1, 0.0) when every path is certain."""
    delta = 1 - confidence
    if miss_probability(uses, bundles, 1) <= delta:
        return 1, miss_probability(uses, bundles, 1)
    lo, hi = 1, 2
    while miss_probability(uses, bundles, hi) > delta:
        lo, hi = hi, hi * 2
        if hi > MAX_FLOWS:
            return MAX_FLOWS, miss_probability(uses, bundles, MAX_FLOWS)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if miss_probability(uses, bundles, mid) <= delta:
            hi = mid
        else:
            lo = mid
    return hi, miss_probability(uses, bundles, hi)


def unreachable(fabric: Fabric, bundles: dict[str, Bundle]) -> list[str]:
    """Upper cables no planned test can cross (a 3-tier fabric of one pod: nothing between two NICs goes up to
    the super-spines)."""
    reached = {c for b in bundles.values() for c in b.cables}
    return sorted(lk.id for lk in fabric.upper_links() if lk.id not in reached)
