"""Clos sizing: how many spines and super-spines, with how many parallel links, for a design maximum.

Uniform wiring is built in: a leaf meets every spine of its group with the same number of links
(the spine count divides the leaf's uplinks), and likewise spine to super-spine plane.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction


@dataclass(frozen=True, slots=True)
class TwoTier:
    spines: int
    links_per_spine: int


@dataclass(frozen=True, slots=True)
class ThreeTier:
    leaves_per_group: int
    groups: int
    spines_per_group: int
    links_leaf_spine: int
    spine_down: int
    spine_up: int
    superspines_per_plane: int
    links_spine_superspine: int

    @property
    def planes(self) -> int:
        return self.spines_per_group

    @property
    def superspines(self) -> int:
        return self.planes * self.superspines_per_plane


class SpineTiers:
    """Spine and super-spine counts of a design that has either `two` (2 tiers) or `three` (3 tiers) set."""

    two: TwoTier | None
    three: ThreeTier | None

    @property
    def groups(self) -> int:
        return self.three.groups if self.three else 1

    @property
    def spines_per_group(self) -> int:
        return self.three.spines_per_group if self.three else self.two.spines

    @property
    def spines_max(self) -> int:
        return self.groups * self.spines_per_group

    @property
    def superspines_max(self) -> int:
        return self.three.superspines if self.three else 0


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def smallest_divisor_at_least(n: int, minimum: int) -> int | None:
    return next((d for d in divisors(n) if d >= minimum), None)


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def uplinks_for(down_ports: int, down_mbps: int, up_mbps: int, ratio: Fraction) -> Fraction:
    """Uplink ports that give down:up bandwidth = ratio."""
    return Fraction(down_ports * down_mbps) / (ratio * up_mbps)


def two_tier(leaves_max: int, uplinks: int, spine_ports: int, min_spines: int = 1) -> TwoTier | None:
    need = ceil_div(leaves_max * uplinks, spine_ports)
    spines = smallest_divisor_at_least(uplinks, max(min_spines, need))
    if spines is None:
        return None
    return TwoTier(spines, uplinks // spines)


def spine_split(spine_ports: int, ratio: Fraction) -> int:
    """Most downlinks a spine can take while keeping down:up = ratio."""
    return int(Fraction(spine_ports) * ratio / (1 + ratio))


def three_tier(leaves_per_group: int, groups: int, uplinks: int, spine_ports: int, ratio: Fraction,
               superspine_ports: int) -> ThreeTier | str:
    """Size a 3-tier Clos; returns the reason as a string when it cannot be built."""
    down_max = spine_split(spine_ports, ratio)
    if leaves_per_group > down_max:
        return (f"a spine group of {leaves_per_group} leaves needs {leaves_per_group} spine downlinks but a spine "
                f"offers {down_max} at this oversubscription")
    spines = smallest_divisor_at_least(uplinks, max(min(2, uplinks), ceil_div(leaves_per_group * uplinks, down_max)))
    if spines is None:
        return f"no spine count divides the {uplinks} leaf uplinks evenly"
    links = uplinks // spines
    down = leaves_per_group * links
    up_exact = Fraction(down) / ratio
    if up_exact.denominator != 1:
        return f"spine downlinks {down} are not divisible by the spine oversubscription {ratio}"
    up = int(up_exact)
    if down + up > spine_ports:
        return f"spines need {down} down + {up} up ports but have {spine_ports}"
    per_plane = smallest_divisor_at_least(up, ceil_div(groups * up, superspine_ports))
    if per_plane is None:
        return (f"{groups} spine groups x {up} spine uplinks exceed what one super-spine plane of "
                f"{superspine_ports}-port switches can take; the fabric is too large for 3 tiers of this radix")
    return ThreeTier(leaves_per_group, groups, spines, links, down, up, per_plane, up // per_plane)
