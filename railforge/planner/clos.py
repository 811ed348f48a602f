"""Spine and super-spine tiers above a set of leaves grouped in units (SUs or rows): used by the
storage/in-band and OOB fabrics. Indices come from the design maximum, so growth only appends."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction

from railforge.plan.model import Device, Port, TierSummary
from railforge.planner import names
from railforge.planner.context import BuildContext
from railforge.planner.ipam import int_to_ip
from railforge.planner.ports import capacity
from railforge.planner.sizing import SpineTiers, ThreeTier, TwoTier, ceil_div, spine_split, three_tier, two_tier


@dataclass(frozen=True)
class UnitClos(SpineTiers):
    """Leaves come in units of `unit_leaves`; `units_max` units at most."""

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

    @property
    def leaves_max(self) -> int:
        return self.unit_leaves * self.units_max

    def group_of(self, leaf_index: int) -> tuple[int, int]:
        if self.three is None:
            return 0, leaf_index
        unit, offset = divmod(leaf_index, self.unit_leaves)
        pod, unit_in_pod = divmod(unit, self.units_per_pod)
        return pod, unit_in_pod * self.unit_leaves + offset


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
                    per_pod)


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


@dataclass
class UpperTiers:
    """Builds spines and super-spines on demand and wires leaves to them."""

    ctx: BuildContext
    c: UnitClos
    role_prefix: str
    spine_name: Callable[[str | None, int, int], str]
    superspine_name: Callable[[int, int, int, int], str]
    label_prefix: str
    link_base: int
    asn_first: int
    loopback_base: int | None
    p2p_base: int | None
    spines: dict[int, tuple[Device, dict[str, list[Port]]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        c = self.c
        if c.three is None:
            needs = [("down", c.speed, c.leaves_max * c.two.links_per_spine)]
        else:
            needs = [("down", c.speed, c.three.spine_down), ("up", c.speed, c.three.spine_up)]
        self.spine_layout = self.ctx.layout(f"{c.field}.spine.model", c.spine_model, c.nos, needs)
        self.superspines: dict[int, tuple[Device, list[Port]]] = {}
        if c.three is not None:
            ss_layout = self.ctx.layout(f"{c.field}.spine.model", c.spine_model, c.nos,
                                        [("down", c.speed, c.three.groups * c.three.links_spine_superspine)])
            for plane in range(c.three.planes):
                for q in range(c.three.superspines_per_plane):
                    idx = plane * c.three.superspines_per_plane + q
                    ports = ss_layout.ports()
                    dev = Device(self.superspine_name(plane + 1, c.three.planes, q + 1,
                                                      c.three.superspines_per_plane),
                                 f"{self.role_prefix}superspine", c.fabric, c.spine_model, c.nos, "", 0, slot=idx,
                                 group="superspine", plane=f"plane{plane + 1}",
                                 ports=ports["down"] + ports["unused"], asn=self.asn_first)
                    self._loopback(dev, c.leaves_max + c.spines_max + idx)
                    self.ctx.add(dev)
                    self.superspines[idx] = (dev, ports["down"])

    def _loopback(self, dev: Device, index: int) -> None:
        if self.loopback_base is not None:
            dev.loopback = f"{int_to_ip(self.ctx.pools['loopbacks'].first + self.loopback_base + index)}/32"
            self.ctx.pools["loopbacks"].take(1)

    def leaf_loopback(self, dev: Device, leaf_index: int) -> None:
        self._loopback(dev, leaf_index)

    def leaf_asn(self, index: int) -> int:
        return self.asn_first + 1 + (self.c.groups if self.c.three else 0) + index

    def _connect(self, n: int, lower: tuple[Device, Port], upper: tuple[Device, Port], tier: str,
                 su: int | None) -> None:
        if self.p2p_base is not None:
            pool = self.ctx.pools["p2p"]
            base = pool.first + self.p2p_base + 2 * (n - self.link_base - 1)
            upper[1].address = f"{int_to_ip(base)}/31"
            lower[1].address = f"{int_to_ip(base + 1)}/31"
            pool.take(2)
        self.ctx.connect(names.cable(self.label_prefix, n), self.c.fabric, tier, lower, upper, su)

    def _spine(self, g: int, j: int) -> tuple[Device, dict[str, list[Port]]]:
        c = self.c
        idx = g * c.spines_per_group + j
        if idx not in self.spines:
            ports = self.spine_layout.ports()
            group = names.pod(g + 1, c.groups) if c.three else None
            dev = Device(self.spine_name(group, j + 1, c.spines_per_group), f"{self.role_prefix}spine", c.fabric,
                         c.spine_model, c.nos, "", 0, group=group or "fabric", slot=idx,
                         ports=ports["down"] + ports.get("up", []) + ports["unused"],
                         asn=self.asn_first + (1 + g if c.three else 0))
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
                                  f"{self.role_prefix}spine-superspine", None)
        return self.spines[idx]

    def attach(self, leaf: Device, up_ports: list[Port], leaf_index: int, su: int | None) -> None:
        c = self.c
        g, pos = c.group_of(leaf_index)
        leaf.group = names.pod(g + 1, c.groups) if c.three else "fabric"
        links = c.three.links_leaf_spine if c.three else c.two.links_per_spine
        for k in range(c.uplinks):
            j, lnk = k % c.spines_per_group, k // c.spines_per_group
            sp, sp_ports = self._spine(g, j)
            n = self.link_base + leaf_index * c.uplinks + k + 1
            self._connect(n, (leaf, up_ports[k]), (sp, sp_ports["down"][pos * links + lnk]),
                          f"{self.role_prefix}leaf-spine", su)

    @property
    def links_max(self) -> int:
        c = self.c
        return c.leaves_max * c.uplinks + c.spines_max * (c.three.spine_up if c.three else 0)
