"""Spine and super-spine tiers above a set of leaves grouped in units (SUs or rows): the one Clos builder of the
compute, storage/in-band and OOB fabrics. Indices come from the design maximum, so growth only appends.

Numbering, in one place for every fabric: a fabric's ASN range holds the super-spines' ASN (its first), then one
per spine group (3 tiers; 2 tiers: the spines share the first), then one per leaf (`asn_count`); loopbacks are the
leaves', then the spines', then the super-spines', from the fabric's block of the loopback pool; uplink /31s are
the leaf uplinks', then the spine-to-super-spine links', from its block of the point-to-point pool. A fabric
claims its ASN range and blocks through the build context (`BuildContext.claim_asns`, `BuildContext.claim`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction

from railforge.plan.model import Device, Port, TierSummary
from railforge.planner import names
from railforge.planner.context import BuildContext
from railforge.planner.ipam import AsnRange, int_to_ip
from railforge.planner.ports import PortLayout, capacity
from railforge.planner.sizing import SpineTiers, ThreeTier, TwoTier, ceil_div, spine_split, three_tier, two_tier


@dataclass(frozen=True)
class UnitClos(SpineTiers):
    """Leaves come in units of `unit_leaves`; `units_max` units at most. A 3-tier fabric groups `units_per_pod`
    units under each spine group (a pod). Super-spines are of `superspine_model` (`superspine_field` in the spec),
    by default the spine model."""

    fabric: str
    field: str
    spine_model: str
    nos: str
    speed: int
    unit_leaves: int
    units_max: int
    uplinks: int
    two: TwoTier | None
    three: ThreeTier | None
    units_per_pod: int
    superspine_model: str | None = None
    superspine_field: str | None = None
    spare_asn: bool = False
    """Reserve one more ASN in 2 tiers, as a spine group of 3 tiers would take: the storage and OOB ranges always
    have (their `last` is in every plan), the compute range never has; kept so that no existing plan changes."""

    @property
    def leaves_max(self) -> int:
        return self.unit_leaves * self.units_max

    @property
    def asn_count(self) -> int:
        """The fabric's ASN range: the super-spines' ASN, one per spine group (3 tiers), one per leaf."""
        return 1 + (self.groups if self.three or self.spare_asn else 0) + self.leaves_max

    @property
    def loopback_count(self) -> int:
        return self.leaves_max + self.spines_max + self.superspines_max

    @property
    def links_max(self) -> int:
        """Uplinks of every leaf and spine at the design maximum (one /31 each when numbered)."""
        return self.leaves_max * self.uplinks + self.spines_max * (self.three.spine_up if self.three else 0)

    def group_of(self, leaf_index: int) -> tuple[int, int]:
        """(spine group, the leaf's position among the group's leaves) of leaf `leaf_index`."""
        if self.three is None:
            return 0, leaf_index
        unit, offset = divmod(leaf_index, self.unit_leaves)
        pod, unit_in_pod = divmod(unit, self.units_per_pod)
        return pod, unit_in_pod * self.unit_leaves + offset

    def group_name(self, g: int) -> str | None:
        return names.pod(g + 1, self.groups) if self.three else None

    def group_rail(self, g: int) -> int | None:
        """The rail every leaf of spine group `g` serves, where groups are per rail."""
        return None


@dataclass(frozen=True)
class RailPlaneClos(UnitClos):
    """The compute fabric's rail-plane shape: one spine plane per rail, in `blocks` blocks of `units_per_pod` SUs,
    each a spine group of one leaf per SU (a unit is an SU, its leaves one per rail)."""

    blocks: int = 1

    def group_of(self, leaf_index: int) -> tuple[int, int]:
        if self.three is None:
            return 0, leaf_index
        su, rail = divmod(leaf_index, self.unit_leaves)
        block, pos = divmod(su, self.units_per_pod)
        return rail * self.blocks + block, pos

    def group_name(self, g: int) -> str | None:
        if self.three is None:
            return None
        rail, block = divmod(g, self.blocks)
        return names.rail_group(rail, block + 1, self.blocks)

    def group_rail(self, g: int) -> int | None:
        return g // self.blocks if self.three else None


def design(ctx: BuildContext, fabric: str, field_path: str, spine_model: str, nos: str, speed: int,
           unit_leaves: int, units_max: int, uplinks: int) -> UnitClos:
    sw = ctx.switch_model(f"{field_path}.spine.model", spine_model, "ethernet")
    ports = capacity(sw, speed)
    if ports == 0:
        raise ctx.fail(f"{field_path}.spine.model", f"{spine_model} has no ports at {speed // 1000}G")
    two = two_tier(unit_leaves * units_max, uplinks, ports, min_spines=min(2, uplinks))
    three = None
    per_pod = 0
    if two is None:
        down_max = spine_split(ports, Fraction(1))
        per_pod = down_max // unit_leaves
        if per_pod == 0:
            raise ctx.fail(f"{field_path}.spine.model", f"a unit of {unit_leaves} leaves exceeds the {down_max} "
                                                        f"downlinks of a 3-tier {spine_model} spine")
        per_pod = min(per_pod, units_max)
        result = three_tier(per_pod * unit_leaves, ceil_div(units_max, per_pod), uplinks, ports, Fraction(1), ports)
        if isinstance(result, str):
            raise ctx.fail(f"{field_path}.spine.model", f"cannot build the {fabric} fabric: {result}")
        three = result
    return UnitClos(fabric, field_path, spine_model, nos, speed, unit_leaves, units_max, uplinks, two, three,
                    per_pod, spare_asn=True)


def summaries(c: UnitClos, role_prefix: str, leaves: int, spines: int, superspines: int,
              leaf_down: int, down_speed: int) -> list[TierSummary]:
    g = c.speed // 1000
    down_g = leaf_down * down_speed // 1000
    ratio = Fraction(down_g, c.uplinks * g)
    out = [TierSummary(c.fabric, f"{role_prefix}leaf", leaves, leaf_down, c.uplinks, down_g, c.uplinks * g,
                       f"{ratio.numerator}:{ratio.denominator}")]
    if c.three is None:
        down = c.leaves_max * c.two.links_per_spine
        out.append(TierSummary(c.fabric, f"{role_prefix}spine", spines, down, 0, down * g, 0, "top"))
    else:
        t = c.three
        out.append(TierSummary(c.fabric, f"{role_prefix}spine", spines, t.spine_down, t.spine_up,
                               t.spine_down * g, t.spine_up * g, "1:1"))
        down = t.groups * t.links_spine_superspine
        out.append(TierSummary(c.fabric, f"{role_prefix}superspine", superspines, down, 0, down * g, 0, "top"))
    return out


def layouts(ctx: BuildContext, c: UnitClos) -> tuple[PortLayout, PortLayout | None]:
    """The port layouts of a spine (down to the leaves, up to the super-spines in 3 tiers) and of a super-spine
    (None in 2 tiers); a fabric may ask for them early, so that their errors come before its pools'."""
    if c.three is None:
        needs = [("down", c.speed, c.leaves_max * c.two.links_per_spine)]
    else:
        needs = [("down", c.speed, c.three.spine_down), ("up", c.speed, c.three.spine_up)]
    spine = ctx.layout(f"{c.field}.spine.model", c.spine_model, c.nos, needs)
    if c.three is None:
        return spine, None
    return spine, ctx.layout(c.superspine_field or f"{c.field}.spine.model", c.superspine_model or c.spine_model,
                             c.nos, [("down", c.speed, c.three.groups * c.three.links_spine_superspine)])


@dataclass
class UpperTiers:
    """Builds spines and super-spines on demand and wires leaves to them. `asns` is the fabric's claimed range
    (None: no BGP, InfiniBand); `loopback_base` and `p2p_base` its address offsets in the loopback and point-to-point
    pools (None: no loopbacks, unnumbered uplinks)."""

    ctx: BuildContext
    c: UnitClos
    role_prefix: str
    spine_name: Callable[[str | None, int, int], str]
    superspine_name: Callable[[int, int, int, int], str]
    label_prefix: str
    link_base: int
    asns: AsnRange | None
    loopback_base: int | None
    p2p_base: int | None
    spines: dict[int, tuple[Device, dict[str, list[Port]]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        c = self.c
        self.spine_layout, ss_layout = layouts(self.ctx, c)
        self.superspines: dict[int, tuple[Device, list[Port]]] = {}
        if ss_layout is not None:
            for plane in range(c.three.planes):
                for q in range(c.three.superspines_per_plane):
                    idx = plane * c.three.superspines_per_plane + q
                    ports = ss_layout.ports()
                    dev = Device(self.superspine_name(plane + 1, c.three.planes, q + 1,
                                                      c.three.superspines_per_plane),
                                 f"{self.role_prefix}superspine", c.fabric, c.superspine_model or c.spine_model,
                                 c.nos, "", 0, slot=idx, group="superspine", plane=f"plane{plane + 1}",
                                 ports=ports["down"] + ports["unused"], asn=self._asn(0))
                    self._loopback(dev, c.leaves_max + c.spines_max + idx)
                    self.ctx.add(dev)
                    self.superspines[idx] = (dev, ports["down"])

    def _asn(self, offset: int) -> int | None:
        return None if self.asns is None else self.asns.first + offset

    def _loopback(self, dev: Device, index: int) -> None:
        if self.loopback_base is not None:
            dev.loopback = f"{int_to_ip(self.ctx.pools['loopbacks'].first + self.loopback_base + index)}/32"
            self.ctx.pools["loopbacks"].take(1)

    def leaf_loopback(self, dev: Device, leaf_index: int) -> None:
        self._loopback(dev, leaf_index)

    def leaf_asn(self, index: int) -> int | None:
        return self._asn(1 + (self.c.groups if self.c.three else 0) + index)

    def _connect(self, n: int, lower: tuple[Device, Port], upper: tuple[Device, Port], tier: str,
                 su: int | None, rail: int | None) -> None:
        if self.p2p_base is not None:
            pool = self.ctx.pools["p2p"]
            base = pool.first + self.p2p_base + 2 * (n - self.link_base - 1)
            upper[1].address = f"{int_to_ip(base)}/31"
            lower[1].address = f"{int_to_ip(base + 1)}/31"
            pool.take(2)
        self.ctx.connect(names.cable(self.label_prefix, n), self.c.fabric, tier, lower, upper, su, rail)

    def _spine(self, g: int, j: int) -> tuple[Device, dict[str, list[Port]]]:
        c = self.c
        idx = g * c.spines_per_group + j
        if idx not in self.spines:
            ports = self.spine_layout.ports()
            group = c.group_name(g)
            dev = Device(self.spine_name(group, j + 1, c.spines_per_group), f"{self.role_prefix}spine", c.fabric,
                         c.spine_model, c.nos, "", 0, group=group or "fabric", slot=idx,
                         ports=ports["down"] + ports.get("up", []) + ports["unused"],
                         asn=self._asn(1 + g if c.three else 0))
            dev.rail = c.group_rail(g)
            self._loopback(dev, c.leaves_max + idx)
            self.ctx.add(dev)
            self.spines[idx] = (dev, ports)
            if c.three is not None:
                t = c.three
                for k in range(t.spine_up):
                    q, lnk = k % t.superspines_per_plane, k // t.superspines_per_plane
                    ss, ss_ports = self.superspines[j * t.superspines_per_plane + q]
                    n = self.link_base + c.leaves_max * c.uplinks + idx * t.spine_up + k + 1
                    self._connect(n, (dev, ports["up"][k]), (ss, ss_ports[g * t.links_spine_superspine + lnk]),
                                  f"{self.role_prefix}spine-superspine", None, dev.rail)
        return self.spines[idx]

    def attach(self, leaf: Device, up_ports: list[Port], leaf_index: int, su: int | None,
               rail: int | None = None) -> None:
        c = self.c
        g, pos = c.group_of(leaf_index)
        leaf.group = c.group_name(g) or "fabric"
        links = c.three.links_leaf_spine if c.three else c.two.links_per_spine
        for k in range(c.uplinks):
            j, lnk = k % c.spines_per_group, k // c.spines_per_group
            sp, sp_ports = self._spine(g, j)
            n = self.link_base + leaf_index * c.uplinks + k + 1
            self._connect(n, (leaf, up_ports[k]), (sp, sp_ports["down"][pos * links + lnk]),
                          f"{self.role_prefix}leaf-spine", su, rail)

    @property
    def links_max(self) -> int:
        return self.c.links_max
