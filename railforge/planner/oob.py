"""Out-of-band management: every BMC and every switch management port to an OOB leaf in its row."""

from __future__ import annotations

from dataclasses import dataclass

from railforge import nos
from railforge.plan.model import Bmc, Device, HostSubnet, Port, TierSummary
from railforge.planner import clos, names
from railforge.planner.context import BuildContext
from railforge.planner.ipam import block_len_for, int_to_ip
from railforge.planner.ports import capacity
from railforge.planner.sizing import ceil_div

CORE_ROLES = ("superspine", "spine", "storage-superspine", "storage-spine", "mgmt", "storage-leaf")


@dataclass(frozen=True)
class OobDesign:
    down_speed: int
    up_speed: int
    ports_per_leaf: int
    leaves_per_row: int
    core_leaves: int
    core_units: int
    su_endpoints: int
    core_offsets: dict[str, int]
    block_len: int
    clos: clos.UnitClos


def design(ctx: BuildContext, max_sus: int, slots: int, rails: int, storage_leaves_per_su: int,
           core_counts: dict[str, int]) -> OobDesign:
    spec = ctx.spec
    o = spec.oob
    sw = ctx.switch_model("oob.leaf.model", o.leaf.model, "ethernet")
    speeds = sorted({m.speed for g in sw.groups for m in g.modes})
    down_speed = 1000 if 1000 in speeds else speeds[0]
    up_speed = max(speeds)
    ports = capacity(sw, down_speed)
    if capacity(sw, up_speed) < o.uplinks_per_leaf or up_speed == down_speed and ports <= o.uplinks_per_leaf:
        raise ctx.fail("oob.uplinks_per_leaf", f"{o.leaf.model} cannot give {o.uplinks_per_leaf} uplinks")
    if up_speed == down_speed:
        ports -= o.uplinks_per_leaf
    su_endpoints = slots + rails + storage_leaves_per_su
    offsets: dict[str, int] = {}
    total = 0
    for role in CORE_ROLES:
        offsets[role] = total
        total += core_counts.get(role, 0)
    per_row = max(ceil_div(su_endpoints, ports), 1)
    core_leaves = max(ceil_div(total, ports), 1)
    core_units = ceil_div(core_leaves, per_row)
    c = clos.design(ctx, "oob", "oob", o.spine.model, o.nos, up_speed, per_row, core_units + max_sus,
                    o.uplinks_per_leaf)
    return OobDesign(down_speed, up_speed, ports, per_row, core_leaves, core_units, su_endpoints, offsets,
                     block_len_for(ports + 2), c)


def build(ctx: BuildContext, d: OobDesign, sus: int, slots: int, rails: int) -> clos.UpperTiers:
    spec = ctx.spec
    o = spec.oob
    pool = ctx.pools["oob"]
    pool.require(d.clos.leaves_max, d.block_len, f"{d.clos.leaves_max} OOB leaves (one management subnet each)")
    asns = ctx.claim_asns("oob", d.clos.asn_count, "OOB fabric")
    clos.layouts(ctx, d.clos)
    loop_base = ctx.claim("loopbacks", d.clos.loopback_count, 32, "compute, storage and OOB switch loopbacks")
    uppers = clos.UpperTiers(ctx, d.clos, "oob-", names.oob_spine, names.oob_superspine, "OOB",
                             d.clos.leaves_max * d.ports_per_leaf, asns, loop_base, None)
    layout = ctx.layout("oob.leaf.model", o.leaf.model, o.nos,
                        [("down", d.down_speed, d.ports_per_leaf), ("up", d.up_speed, o.uplinks_per_leaf)])
    endpoints: dict[int, list[tuple[int, Device]]] = {}
    core_seen: dict[str, int] = {}
    for dev in ctx.devices:
        if dev.role in ("node", "ufm"):
            endpoints.setdefault(dev.su, []).append((dev.slot - 1, dev))
        elif dev.role == "leaf":
            endpoints.setdefault(dev.su, []).append((slots + dev.rail, dev))
        elif dev.role == "storage-leaf" and dev.su:
            endpoints.setdefault(dev.su, []).append((slots + rails + dev.slot, dev))
        elif dev.role == "storage-leaf":
            endpoints.setdefault(0, []).append((d.core_offsets["storage-leaf"] + dev.slot, dev))
        elif dev.role in CORE_ROLES:
            i = core_seen.get(dev.role, 0)
            core_seen[dev.role] = i + 1
            endpoints.setdefault(0, []).append((d.core_offsets[dev.role] + i, dev))
    for row in range(0, sus + 1):
        leaves: list[tuple[Device, list[Port], int]] = []
        for k in range(d.leaves_per_row if row else d.core_leaves):
            idx = (d.core_units + row - 1) * d.leaves_per_row + k if row else k
            ports = layout.ports()
            dev = Device(names.oob_leaf(row, k + 1), "oob-leaf", "oob", o.leaf.model, o.nos, "", 0,
                         su=row or None, slot=k, ports=ports["down"] + ports["up"] + ports["unused"],
                         asn=uppers.leaf_asn(idx))
            uppers.leaf_loopback(dev, idx)
            start, _ = pool.block(idx, d.block_len)
            pool.take(1 << (32 - d.block_len))
            dev.host_subnets.append(HostSubnet(o.vlan, f"{int_to_ip(start)}/{d.block_len}", int_to_ip(start + 1),
                                               [p.name for p in ports["down"]]))
            ctx.add(dev)
            uppers.attach(dev, ports["up"], idx, row or None)
            leaves.append((dev, ports["down"], start))
        for position, dev in sorted(endpoints.get(row, []), key=lambda x: x[0]):
            k, port_i = divmod(position, d.ports_per_leaf)
            if k >= len(leaves):
                raise ctx.fail("oob", f"{dev.name} has no OOB port left in row {row}")
            leaf, leaf_ports, start = leaves[k]
            address = f"{int_to_ip(start + 2 + port_i)}/{d.block_len}"
            port = _mgmt_port(ctx, dev)
            port.address = address
            leaf_idx = (d.core_units + row - 1) * d.leaves_per_row + k if row else k
            label = names.cable("OOB", leaf_idx * d.ports_per_leaf + port_i + 1)
            ctx.connect(label, "oob", "oob-access", (dev, port), (leaf, leaf_ports[port_i]), row or None)
            if dev.role in ("node", "ufm", "mgmt"):
                dev.bmc = Bmc(address, leaf.name, leaf_ports[port_i].name, label)
            else:
                dev.mgmt_address = address
    return uppers


def _mgmt_port(ctx: BuildContext, dev: Device) -> Port:
    name = "bmc" if dev.role in ("node", "ufm", "mgmt") else nos.profile(dev.nos).mgmt_port
    for p in dev.ports:
        if p.name == name:
            return p
    port = Port(name, "MGMT" if name != "bmc" else "BMC", 999, 0, 1000, "", [])
    dev.ports.append(port)
    return port


def tier_summaries(d: OobDesign, leaves: int, spines: int, superspines: int) -> list[TierSummary]:
    return clos.summaries(d.clos, "oob-", leaves, spines, superspines, d.ports_per_leaf, d.down_speed)
