"""The storage / in-band fabric: each node's bonded pair to a leaf pair (MLAG or EVPN-MH) or one leaf."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from railforge import nos
from railforge.nos.profile import PlatformError
from railforge.plan.model import Bond, BondMember, Device, HostSubnet, Port, TierSummary, VlanInterface
from railforge.planner import clos, names
from railforge.planner.context import BuildContext
from railforge.planner.ipam import block_len_for, int_to_ip
from railforge.planner.ports import PortLayout, RadixError, capacity
from railforge.planner.sizing import ceil_div

INBAND_VLAN = 10


@dataclass(frozen=True)
class StorageDesign:
    node_speed: int
    up_speed: int
    ports_per_node: int
    per_pair: int
    pairs_per_unit: int
    nodes_per_pair: int
    leaf_down: int
    uplinks: int
    peer_links: int
    block_len: int
    clos: clos.UnitClos


def design(ctx: BuildContext, slots: int, max_sus: int) -> StorageDesign:
    spec = ctx.spec
    st = spec.storage
    node_speed = spec.node.storage.speed
    up_speed = st.uplink_speed or node_speed
    ports_per_node = spec.node.storage.ports
    if ports_per_node == 1 and st.attach != "single":
        raise ctx.fail("storage.attach", f"{st.attach!r} needs two storage ports per node; node.storage.ports is 1, "
                                         "so use attach: single")
    per_pair = 1 if st.attach == "single" else 2
    peer = 2 if st.attach == "mlag" else 0
    leaf = ctx.switch_model("storage.leaf.model", st.leaf.model, "ethernet")
    if capacity(leaf, node_speed) == 0:
        raise ctx.fail("storage.leaf.model", f"{st.leaf.model} has no ports at {node_speed // 1000}G "
                                             "(node.storage.speed)")
    ports_each = ports_per_node if per_pair == 1 else 1

    def needs(n: int) -> list[tuple[str, int, int]]:
        up = ceil_div(n * ports_each * node_speed, int(st.oversubscription * up_speed))
        out = [("down", node_speed, n * ports_each), ("up", up_speed, up)]
        return out + ([("peer", up_speed, peer)] if peer else [])

    def fits(n: int) -> bool:
        try:
            PortLayout(st.leaf.model, leaf, st.nos, needs(n))
        except RadixError:
            return False
        except PlatformError as exc:
            raise ctx.fail("storage.leaf.model", f"{st.leaf.model} with {nos.profile(st.nos).title}: {exc}") from None
        return True

    if st.nodes_per_leaf:
        n_max = st.nodes_per_leaf
        if not fits(n_max):
            raise ctx.fail("storage.nodes_per_leaf", f"radix exceeded: {n_max} nodes per leaf need "
                                                     f"{' + '.join(f'{c} {p}' for p, _, c in needs(n_max))} ports "
                                                     f"on {st.leaf.model}")
    else:
        n_max = next((n for n in range(slots, 0, -1) if fits(n)), 0)
        if n_max == 0:
            raise ctx.fail("storage.leaf.model", f"{st.leaf.model} cannot take even one node at this "
                                                 "oversubscription")
    pairs = ceil_div(slots, n_max)
    per = ceil_div(slots, pairs)
    _, _, up = needs(per)[1]
    down_ports = per * ports_each
    ratio = Fraction(down_ports * node_speed, up * up_speed)
    if ratio > st.oversubscription:
        raise ctx.fail("storage.oversubscription", f"storage leaves would run {ratio}:1, above the declared "
                                                   f"{st.oversubscription}")
    if spec.management.servers > per:
        raise ctx.fail("management.servers", f"{spec.management.servers} management servers do not fit the "
                                             f"{per} host ports of the service leaf pair; use at most {per}")
    units_max = max_sus + 1
    c = clos.design(ctx, "storage", "storage", st.spine.model, st.nos, up_speed, pairs * per_pair, units_max, up)
    block_len = block_len_for(max(per, spec.management.servers) + 5)
    return StorageDesign(node_speed, up_speed, ports_per_node, per_pair, pairs, per, down_ports, up, peer,
                         block_len, c)


def _leaf_index(d: StorageDesign, unit: int, pair: int, side: int) -> int:
    return (unit * d.pairs_per_unit + pair) * d.per_pair + side


def build(ctx: BuildContext, d: StorageDesign, sus: int, slots: int) -> clos.UpperTiers:
    spec = ctx.spec
    st = spec.storage
    inband = ctx.pools["inband"]
    storage_pool = ctx.pools["storage"]
    pairs_max = d.clos.units_max * d.pairs_per_unit
    inband.require(pairs_max, d.block_len, f"{pairs_max} storage leaf pairs (one in-band subnet each)")
    if st.storage_vlan:
        storage_pool.require(pairs_max, d.block_len, f"{pairs_max} storage leaf pairs (one storage subnet each)")
    loop_base = ctx.claim("loopbacks", d.clos.loopback_count, 32, "compute and storage switch loopbacks")
    asns = ctx.claim_asns("storage", d.clos.asn_count, "storage / in-band fabric")
    clos.layouts(ctx, d.clos)
    p2p_base = (ctx.claim("p2p", d.clos.links_max, 31, "compute and storage uplinks")
                if st.uplinks == "numbered" else None)
    uppers = clos.UpperTiers(ctx, d.clos, "storage-", names.storage_spine, names.storage_superspine, "STO",
                             _peer_base(d), asns, loop_base, p2p_base)
    layout = ctx.layout("storage.leaf.model", st.leaf.model, st.nos,
                        [("down", d.node_speed, d.leaf_down), ("up", d.up_speed, d.uplinks)]
                        + ([("peer", d.up_speed, d.peer_links)] if d.peer_links else []))
    nic = spec.node.storage
    ifnames = nic.ifnames or [f"stor{k}" for k in range(nic.ports)]
    hosts_by_unit: dict[int, list[Device]] = {0: []}
    for i in range(spec.management.servers):
        server = Device(names.mgmt(i + 1), "mgmt", "storage", spec.management.model, None, "", 0, slot=i)
        ctx.add(server)
        hosts_by_unit[0].append(server)
    for dev in ctx.devices:
        if dev.role == "node":
            hosts_by_unit.setdefault(dev.su, []).append(dev)
    for unit in range(0, sus + 1):
        hosts = hosts_by_unit.get(unit, [])
        slot_of = {h.name: (i if unit == 0 else h.slot - 1) for i, h in enumerate(hosts)}
        for pair in range(d.pairs_per_unit if unit else 1):
            pair_index = unit * d.pairs_per_unit + pair
            start, _ = inband.block(pair_index, d.block_len)
            inband.take(1 << (32 - d.block_len))
            vlan_start = None
            if st.storage_vlan:
                vlan_start, _ = storage_pool.block(pair_index, d.block_len)
                storage_pool.take(1 << (32 - d.block_len))
            leaves = []
            for side in range(d.per_pair):
                idx = _leaf_index(d, unit, pair, side)
                ports = layout.ports()
                sfx = "ab"[side] if d.per_pair == 2 else ""
                dev = Device(names.storage_leaf(unit or None, pair + 1, sfx), "storage-leaf", "storage",
                             st.leaf.model, st.nos, "", 0, su=unit or None, slot=pair * d.per_pair + side,
                             ports=ports["down"] + ports["up"] + ports.get("peer", []) + ports["unused"])
                dev.asn = uppers.leaf_asn(pair_index if st.attach == "mlag" else idx)
                uppers.leaf_loopback(dev, idx)
                members = [p.name for p in ports["down"]]
                dev.host_subnets.append(HostSubnet(INBAND_VLAN, f"{int_to_ip(start)}/{d.block_len}",
                                                   int_to_ip(start + 1), members,
                                                   f"{int_to_ip(start + 2 + side)}/{d.block_len}"))
                if vlan_start is not None:
                    dev.host_subnets.append(HostSubnet(st.storage_vlan, f"{int_to_ip(vlan_start)}/{d.block_len}",
                                                       int_to_ip(vlan_start + 1), members,
                                                       f"{int_to_ip(vlan_start + 2 + side)}/{d.block_len}"))
                ctx.add(dev)
                leaves.append((dev, ports))
                uppers.attach(dev, ports["up"], idx, unit or None)
            if d.per_pair == 2:
                a, b = leaves
                a[0].mlag_peer, b[0].mlag_peer = b[0].name, a[0].name
                for k in range(d.peer_links):
                    n = _peer_base(d) + uppers.links_max + pair_index * d.peer_links + k + 1
                    ctx.connect(names.cable("STO", n), "storage", "storage-peer", (a[0], a[1]["peer"][k]),
                                (b[0], b[1]["peer"][k]), unit or None)
            in_pair = [h for h in hosts if slot_of[h.name] // d.nodes_per_pair == pair] if unit else hosts
            for host in in_pair:
                i = slot_of[host.name] % d.nodes_per_pair if unit else slot_of[host.name]
                members = []
                for k in range(d.ports_per_node):
                    side = 0 if d.per_pair == 1 else k
                    leaf_dev, leaf_ports = leaves[side]
                    port_i = i * (d.ports_per_node if d.per_pair == 1 else 1) + (k if d.per_pair == 1 else 0)
                    leaf_port = leaf_ports["down"][port_i]
                    hp = Port(ifnames[k], f"STOR{k}", 100 + k, 0, d.node_speed, "", [])
                    host.ports.append(hp)
                    leaf_idx = _leaf_index(d, unit, pair, side)
                    n = leaf_idx * d.leaf_down + port_i + 1
                    label = names.cable("STO", n)
                    ctx.connect(label, "storage", "node-storage-leaf", (host, hp), (leaf_dev, leaf_port),
                                unit or None)
                    members.append(BondMember(ifnames[k], nic.pci[k] if nic.pci else None,
                                              nic.macs[k] if nic.macs else None, d.node_speed, leaf_dev.name,
                                              leaf_port.name, label))
                address = f"{int_to_ip(start + 4 + i)}/{d.block_len}"
                vlan = (VlanInterface(st.storage_vlan, f"{int_to_ip(vlan_start + 4 + i)}/{d.block_len}")
                        if vlan_start is not None else None)
                host.bond = Bond("bond0" if d.ports_per_node == 2 else ifnames[0], "802.3ad", "fast", "layer3+4",
                                 spec.qos.host_mtu, address, int_to_ip(start + 1), vlan, members)
    return uppers


def _peer_base(d: StorageDesign) -> int:
    return d.clos.leaves_max * d.leaf_down


def tier_summaries(d: StorageDesign, leaves: int, spines: int, superspines: int) -> list[TierSummary]:
    return clos.summaries(d.clos, "storage-", leaves, spines, superspines, d.leaf_down, d.node_speed)
