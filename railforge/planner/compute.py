"""The compute fabric: GPU nodes, rail-optimized leaves, spines and super-spines (RoCE or InfiniBand)."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property

from railforge import nos as nos_registry
from railforge.plan.model import Device, HostSubnet, Port, RailInterface, TierSummary
from railforge.planner import clos, names
from railforge.planner.context import BuildContext
from railforge.planner.ipam import block_len_for, int_to_ip
from railforge.planner.ports import capacity
from railforge.planner.sizing import (
    SpineTiers,
    ThreeTier,
    TwoTier,
    ceil_div,
    spine_split,
    three_tier,
    two_tier,
    uplinks_for,
)
from railforge.units import format_speed

HOST_VLAN = 1000


@dataclass(frozen=True)
class ComputeDesign(SpineTiers):
    fabric: str
    nos: str
    speed: int
    rails: int
    slots: int
    uplinks: int
    sus: int
    max_sus: int
    tiers: int
    mode: str
    two: TwoTier | None
    three: ThreeTier | None
    group_sus: int
    blocks: int
    host_block_len: int
    spine_model: str
    superspine_model: str | None

    @property
    def leaves_max(self) -> int:
        return self.max_sus * self.rails

    @property
    def ethernet(self) -> bool:
        return self.fabric == "roce"

    @cached_property
    def clos(self) -> clos.UnitClos:
        """The fabric above the rail leaves as the Clos builder takes it: units are SUs of one leaf per rail."""
        shape = clos.RailPlaneClos if self.mode == "rail-plane" else clos.UnitClos
        extra = {"blocks": self.blocks} if self.mode == "rail-plane" else {}
        return shape("compute", "compute", self.spine_model, self.nos, self.speed, self.rails, self.max_sus,
                     self.uplinks, self.two, self.three, self.group_sus, self.superspine_model,
                     "compute.superspine.model", **extra)

    def leaf_index(self, su: int, rail: int) -> int:
        return (su - 1) * self.rails + rail

    def group_of(self, su: int, rail: int) -> tuple[int, int]:
        """(group index, leaf position inside the group) of leaf (su, rail)."""
        return self.clos.group_of(self.leaf_index(su, rail))

    def group_name(self, g: int) -> str | None:
        return self.clos.group_name(g)


def design(ctx: BuildContext) -> ComputeDesign:
    spec = ctx.spec
    cf = spec.compute
    su = spec.scalable_units
    ib = cf.fabric == "infiniband"
    kind = "infiniband" if ib else "ethernet"
    nos = cf.nos or nos_registry.default("compute", kind).name
    if nos_registry.profile(nos).kind != kind:
        what = "an Ethernet NOS; an InfiniBand fabric uses" if ib else "for InfiniBand; a RoCE fabric uses"
        raise ctx.fail("compute.nos", f"{nos!r} is {what} {' or '.join(map(repr, nos_registry.names(kind=kind)))}")
    if su.max is not None and su.max < su.count:
        raise ctx.fail("scalable_units.max", f"max {su.max} is below count {su.count}; max is the design "
                                             "capacity the spines are sized for, so it must be >= count")
    speed = spec.node.compute.speed
    rails = spec.node.compute.ports
    slots = su.nodes_per_su
    leaf = ctx.switch_model("compute.leaf.model", cf.leaf.model, kind)
    spine = ctx.switch_model("compute.spine.model", cf.spine.model, kind)
    leaf_ports = capacity(leaf, speed)
    spine_ports = capacity(spine, speed)
    if leaf_ports == 0:
        raise ctx.fail("compute.leaf.model", f"{cf.leaf.model} has no ports at {format_speed(speed)} "
                                             f"(node.compute.speed)")
    if spine_ports == 0:
        raise ctx.fail("compute.spine.model", f"{cf.spine.model} has no ports at {format_speed(speed)}")
    leaf_ratio = cf.oversubscription.get("leaf", Fraction(1))
    up_exact = uplinks_for(slots, speed, speed, leaf_ratio)
    if up_exact.denominator != 1:
        raise ctx.fail("compute.oversubscription.leaf",
                       f"{_ratio(leaf_ratio)} with {slots} node ports per leaf gives {float(up_exact):.2f} "
                       f"uplinks; choose a ratio that divides scalable_units.nodes_per_su ({slots})")
    uplinks = int(up_exact)
    if slots + uplinks > leaf_ports:
        fit = int(Fraction(leaf_ports) * leaf_ratio / (1 + leaf_ratio))
        raise ctx.fail("scalable_units.nodes_per_su",
                       f"radix exceeded: a leaf needs {slots} node ports + {uplinks} uplinks = {slots + uplinks} "
                       f"ports at {format_speed(speed)} ({_ratio(leaf_ratio)}), but {cf.leaf.model} has "
                       f"{leaf_ports}; use at most {fit} nodes per SU at this ratio, a higher leaf "
                       "oversubscription, or a larger leaf switch")
    max_sus = su.design_max
    spine_ratio = cf.oversubscription.get("spine", Fraction(1))
    two = None
    three = None
    tiers = cf.tiers
    if cf.mode == "rail-plane" and tiers == 2:
        raise ctx.fail("compute.tiers", "rail-plane mode is a 3-tier design (rail spine planes joined by "
                                        "super-spines); use tiers: 3 or auto, or mode: clos for 2 tiers")
    if cf.mode == "clos" and tiers in ("auto", 2):
        two = two_tier(max_sus * rails, uplinks, spine_ports, min_spines=min(2, uplinks))
        if two is None and tiers == 2:
            most = spine_ports // rails
            raise ctx.fail("scalable_units.max" if su.max else "scalable_units.count",
                           f"{max_sus} SUs x {rails} rail leaves = {max_sus * rails} leaves do not fit a 2-tier "
                           f"fabric: a {cf.spine.model} spine has {spine_ports} ports at {format_speed(speed)}, "
                           f"so at most {most} SUs fit; use tiers: 3 (or auto) or fewer SUs")
    group_sus = 0
    blocks = 1
    if two is None:
        if cf.superspine is None:
            raise ctx.fail("compute.superspine", "a 3-tier fabric is needed for this size; name the "
                                                 "super-spine switch model (compute.superspine.model)")
        ss = ctx.switch_model("compute.superspine.model", cf.superspine.model, kind)
        ss_ports = capacity(ss, speed)
        down_max = spine_split(spine_ports, spine_ratio)
        if cf.mode == "rail-plane":
            group_sus = min(down_max, max_sus)
            blocks = ceil_div(max_sus, group_sus)
            leaves_per_group, groups = group_sus, rails * blocks
        else:
            group_sus = cf.sus_per_pod or max(1, down_max // rails)
            if group_sus * rails > down_max:
                raise ctx.fail("compute.sus_per_pod", f"{group_sus} SUs x {rails} leaves exceed the {down_max} "
                                                      f"downlinks of a {cf.spine.model} spine")
            group_sus = min(group_sus, max_sus)
            leaves_per_group, groups = group_sus * rails, ceil_div(max_sus, group_sus)
        result = three_tier(leaves_per_group, groups, uplinks, spine_ports, spine_ratio, ss_ports)
        if isinstance(result, str):
            raise ctx.fail("compute", f"cannot build a 3-tier fabric: {result}; use larger switches, fewer SUs "
                                      "or more oversubscription")
        three = result
        tiers = 3
    else:
        tiers = 2
    if ib:
        hosts = max_sus * slots
        pods = hosts * spec.addressing.pod_addresses_per_node
        host_block_len = block_len_for(hosts + pods + 2)
    else:
        host_block_len = block_len_for(slots + 3 + slots * spec.addressing.pod_addresses_per_node)
    return ComputeDesign(cf.fabric, nos, speed, rails, slots, uplinks, su.count, max_sus, tiers, cf.mode, two,
                         three, group_sus, blocks, host_block_len, cf.spine.model,
                         cf.superspine.model if cf.superspine else None)


def _ratio(r: Fraction) -> str:
    return f"{r.numerator}:{r.denominator}"


def tier_summaries(d: ComputeDesign, leaves: int, spines: int, superspines: int) -> list[TierSummary]:
    g = d.speed // 1000
    out = [TierSummary("compute", "leaf", leaves, d.slots, d.uplinks, d.slots * g, d.uplinks * g,
                       _ratio(Fraction(d.slots, d.uplinks)))]
    if d.three is None:
        down = d.leaves_max * d.two.links_per_spine
        out.append(TierSummary("compute", "spine", spines, down, 0, down * g, 0, "top"))
    else:
        t = d.three
        out.append(TierSummary("compute", "spine", spines, t.spine_down, t.spine_up, t.spine_down * g,
                               t.spine_up * g, _ratio(Fraction(t.spine_down, t.spine_up))))
        down = t.groups * t.links_spine_superspine
        out.append(TierSummary("compute", "superspine", superspines, down, 0, down * g, 0, "top"))
    return out


def build(ctx: BuildContext, d: ComputeDesign) -> None:
    spec = ctx.spec
    nic = spec.node.compute
    ifnames = nic.ifnames or [f"{'ib' if d.fabric == 'infiniband' else 'rail'}{k}" for k in range(d.rails)]
    hcas = nic.hcas or [f"mlx5_{k}" for k in range(d.rails)]
    per_node = spec.addressing.pod_addresses_per_node
    reserved = {(r.su, r.slot): r for r in spec.scalable_units.reserved_slots}
    for i, r in enumerate(spec.scalable_units.reserved_slots):
        if r.su > d.max_sus:
            raise ctx.fail(f"scalable_units.reserved_slots.{i}.su", f"SU {r.su} is beyond the design maximum "
                                                                    f"of {d.max_sus} SUs")
        if r.slot > d.slots:
            raise ctx.fail(f"scalable_units.reserved_slots.{i}.slot",
                           f"slot {r.slot} is beyond nodes_per_su ({d.slots})")
        if r.compute_ports > d.rails:
            raise ctx.fail(f"scalable_units.reserved_slots.{i}.compute_ports",
                           f"{r.compute_ports} ports but there are only {d.rails} rails")
    if len(reserved) != len(spec.scalable_units.reserved_slots):
        raise ctx.fail("scalable_units.reserved_slots", "two reserved slots name the same su and slot")

    leaf_needs = [("down", d.speed, d.slots), ("up", d.speed, d.uplinks)]
    leaf_layout = ctx.layout("compute.leaf.model", spec.compute.leaf.model, d.nos, leaf_needs)
    c = d.clos
    clos.layouts(ctx, c)
    hosts = ctx.pools["compute_hosts"]
    host_size = 1 << (32 - d.host_block_len)
    asns = loop_base = p2p_base = None
    if d.ethernet:
        hosts.require(d.leaves_max, d.host_block_len, f"{d.leaves_max} rail leaves (one host subnet each)")
        asns = ctx.claim_asns("compute", c.asn_count, "compute fabric")
        loop_base = ctx.claim("loopbacks", c.loopback_count, 32, "compute switch loopbacks")
        if spec.compute.uplinks == "numbered":
            p2p_base = ctx.claim("p2p", c.links_max, 31, "compute uplinks (one /31 each)")
    else:
        hosts.require(d.rails, d.host_block_len, f"{d.rails} rails (one IPoIB subnet each)")
        hosts.take(d.rails * host_size)
    node_link_base = 0
    uppers = clos.UpperTiers(ctx, c, "", names.spine, names.superspine, "CMP", d.leaves_max * d.slots, asns,
                             loop_base, p2p_base)

    for su in range(1, d.sus + 1):
        leaves: list[tuple[Device, dict[str, list[Port]]]] = []
        leaf_start: dict[int, int] = {}
        for rail in range(d.rails):
            leaf_idx = d.leaf_index(su, rail)
            g, _ = d.group_of(su, rail)
            ports = leaf_layout.ports()
            dev = Device(names.compute_leaf(su, rail), "leaf", "compute", spec.compute.leaf.model, d.nos, "", 0,
                         su=su, rail=rail, group=d.group_name(g) or "fabric",
                         ports=ports["down"] + ports["up"] + ports["unused"])
            if d.ethernet:
                dev.asn = uppers.leaf_asn(leaf_idx)
                uppers.leaf_loopback(dev, leaf_idx)
                start, _ = hosts.block(leaf_idx, d.host_block_len)
                leaf_start[rail] = start
                used_down = [p.name for s, p in enumerate(ports["down"])
                             if (su, s + 1) not in reserved or reserved[(su, s + 1)].compute_ports > rail]
                dev.host_subnets.append(HostSubnet(HOST_VLAN, f"{int_to_ip(start)}/{d.host_block_len}",
                                                   int_to_ip(start + 1), used_down))
                hosts.take(host_size)
            ctx.add(dev)
            leaves.append((dev, ports))
            uppers.attach(dev, ports["up"], leaf_idx, su, rail)

        for slot in range(1, d.slots + 1):
            r = reserved.get((su, slot))
            if r is not None:
                appliance = Device(r.name, r.role, "compute", r.model, None, "", 0, su=su, slot=slot)
                for k in range(r.compute_ports):
                    port = Port(f"ib{k}" if d.fabric == "infiniband" else f"rail{k}", f"port{k + 1}", k, 0,
                                d.speed, "", [])
                    appliance.ports.append(port)
                appliance.ports.append(Port("bmc", "BMC", r.compute_ports, 0, 1000, "", []))
                ctx.add(appliance)
                for k in range(r.compute_ports):
                    leaf_dev, leaf_ports = leaves[k]
                    n = node_link_base + ((su - 1) * d.rails + k) * d.slots + slot
                    ctx.connect(names.cable("CMP", n), "compute", "node-leaf", (appliance, appliance.ports[k]),
                                (leaf_dev, leaf_ports["down"][slot - 1]), su, k)
                continue
            node = Device(names.node(su, slot, d.slots), "node", "compute", spec.node.model, None, "", 0, su=su,
                          slot=slot)
            for k in range(d.rails):
                node.ports.append(Port(ifnames[k], f"NIC{k}", k, 0, d.speed, "", []))
            ctx.add(node)
            for k in range(d.rails):
                leaf_dev, leaf_ports = leaves[k]
                leaf_port = leaf_ports["down"][slot - 1]
                n = node_link_base + ((su - 1) * d.rails + k) * d.slots + slot
                label = names.cable("CMP", n)
                ctx.connect(label, "compute", "node-leaf", (node, node.ports[k]), (leaf_dev, leaf_port), su, k)
                if d.ethernet:
                    start = leaf_start[k]
                    address = f"{int_to_ip(start + 1 + slot)}/{d.host_block_len}"
                    gateway = int_to_ip(start + 1)
                    pod_base = start + 2 + d.slots + (slot - 1) * per_node
                else:
                    start, _ = hosts.block(k, d.host_block_len)
                    global_slot = (su - 1) * d.slots + slot
                    address = f"{int_to_ip(start + global_slot)}/{d.host_block_len}"
                    gateway = None
                    pod_base = start + 1 + d.max_sus * d.slots + (global_slot - 1) * per_node
                node.ports[k].address = address
                rail = RailInterface(k, ifnames[k], hcas[k], nic.pci[k] if nic.pci else None,
                                     nic.macs[k] if nic.macs else None, d.speed, address, gateway,
                                     100 + k, leaf_dev.name, leaf_port.name, label)
                if per_node:
                    rail.pod_first, rail.pod_last = int_to_ip(pod_base), int_to_ip(pod_base + per_node - 1)
                node.rails.append(rail)


def _ip_int(prefix: str) -> int:
    a, b, c, e = (int(x) for x in prefix.split("/")[0].split("."))
    return a << 24 | b << 16 | c << 8 | e


def pod_networks(ctx: BuildContext, d: ComputeDesign):
    """Per-rail pod ranges: inside each leaf's subnet (RoCE) or each rail's IPoIB subnet (InfiniBand)."""
    from railforge.plan.model import PodNetwork

    spec = ctx.spec
    per_node = spec.addressing.pod_addresses_per_node
    if per_node == 0:
        return []
    nic = spec.node.compute
    ifnames = nic.ifnames or [f"{'ib' if d.fabric == 'infiniband' else 'rail'}{k}" for k in range(d.rails)]
    hcas = nic.hcas or [f"mlx5_{k}" for k in range(d.rails)]
    out = []
    if d.ethernet:
        for leaf in (x for x in ctx.devices if x.role == "leaf"):
            net = leaf.host_subnets[0]
            base = _ip_int(net.prefix)
            first = base + 2 + d.slots
            last = first + d.slots * per_node - 1
            out.append(PodNetwork(leaf.rail, ifnames[leaf.rail], hcas[leaf.rail], leaf.name, net.prefix,
                                  net.gateway, int_to_ip(first), int_to_ip(last), "leaf"))
    else:
        hosts = ctx.pools["compute_hosts"]
        for k in range(d.rails):
            start, length = hosts.block(k, d.host_block_len)
            first = start + 1 + d.max_sus * d.slots
            last = first + d.max_sus * d.slots * per_node - 1
            out.append(PodNetwork(k, ifnames[k], hcas[k], None, f"{int_to_ip(start)}/{length}", None,
                                  int_to_ip(first), int_to_ip(last), "rail"))
    return out
