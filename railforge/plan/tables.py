"""Row views of the plan shared by the cabling, IP, NetBox and report families.

Everything here is read from the plan in one pass with dict indices; nothing is re-derived.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from socket import inet_aton, inet_ntoa

from railforge.plan.model import FABRICS, Device, Link, Plan, Pool, Port

FABRIC_ORDER = {f: i for i, f in enumerate(FABRICS)}
ROLE_ORDER = {r: i for i, r in enumerate(
    ("superspine", "spine", "leaf", "node", "ufm", "mgmt", "storage-superspine", "storage-spine", "storage-leaf",
     "oob-superspine", "oob-spine", "oob-leaf"))}

CABLE_COLUMNS = (
    "cable", "fabric", "tier", "su", "rail",
    "a_rack", "a_u", "a_device", "a_port", "a_port_label",
    "b_rack", "b_u", "b_device", "b_port", "b_port_label",
    "speed", "media", "part", "transceivers", "fibre", "length_m",
)
ADDRESS_COLUMNS = ("address", "prefix", "device", "role", "interface", "kind", "pool", "purpose", "fabric", "su",
                   "rack")


def speed_label(mbps: int) -> str:
    return f"{mbps // 1000}G" if mbps % 1000 == 0 else f"{mbps}M"


class PlanIndex:
    """Name -> device, (device, port) -> port and rack -> order, built once per render."""

    def __init__(self, plan: Plan):
        self.plan = plan
        self.devices: dict[str, Device] = {d.name: d for d in plan.devices}
        self._ports: dict[str, dict[str, Port]] = {}
        self.rack_order: dict[str, int] = {
            r.name: i for i, r in enumerate(sorted(plan.racks, key=lambda r: (r.row, r.position, r.name)))}

    def port(self, device: str, port: str) -> Port | None:
        ports = self._ports.get(device)
        if ports is None:
            dev = self.devices.get(device)
            ports = {p.name: p for p in dev.ports} if dev else {}
            self._ports[device] = ports
        return ports.get(port)

    def sorted_links(self) -> list[Link]:
        """Fabric, then the A end's rack (row, position), top U first, device and port: the order a technician
        pulls cables. Sorted on one integer per cable: device and port ranks are computed once. Each fabric's
        cables are contiguous (a fabric the plan does not define sorts after those it does, by name)."""
        fabrics = sorted({link.fabric for link in self.plan.links}, key=lambda f: (FABRIC_ORDER.get(f, 9), f))
        fabric_rank = {f: i for i, f in enumerate(fabrics)}
        by_place = sorted(self.plan.devices, key=lambda d: (self.rack_order.get(d.rack, 1 << 30), -d.u, d.name))
        dev_rank = {d.name: i for i, d in enumerate(by_place)}
        port_rank: dict[str, dict[str, int]] = {}

        def key(link: Link) -> int:
            ranks = port_rank.get(link.a.device)
            if ranks is None:
                ports = sorted(self.devices[link.a.device].ports, key=lambda p: (p.index, p.sub, p.name))
                ranks = port_rank[link.a.device] = {p.name: i for i, p in enumerate(ports)}
            return ((fabric_rank[link.fabric] << 48) | (dev_rank[link.a.device] << 20)
                    | ranks.get(link.a.port, 0xFFFFF))

        return sorted(self.plan.links, key=key)

    def cable_row(self, link: Link) -> tuple:
        a, b = self.devices[link.a.device], self.devices[link.b.device]
        pa, pb = self.port(a.name, link.a.port), self.port(b.name, link.b.port)
        return (
            link.id, link.fabric, link.tier, link.su, link.rail,
            a.rack, a.u, a.name, link.a.port, pa.label if pa else "",
            b.rack, b.u, b.name, link.b.port, pb.label if pb else "",
            speed_label(link.speed_mbps), link.media, link.part or "", link.transceivers, link.fibre or "",
            link.length_m,
        )


def _with_len(address: str, prefix: str) -> str:
    return f"{address}/{prefix.rsplit('/', 1)[1]}"


def device_addresses(dev: Device) -> list[tuple[str, str | None, str, str]]:
    """(address/len, subnet if the plan names it, interface, kind) of one device, each address once."""
    out: list[tuple[str, str | None, str, str]] = []
    seen: set[str] = set()

    def emit(cidr: str | None, interface: str, kind: str, subnet: str | None = None) -> None:
        if cidr and cidr not in seen:
            seen.add(cidr)
            out.append((cidr, subnet, interface, kind))

    if dev.loopback:
        emit(dev.loopback, "lo", "loopback")
    bmc = dev.bmc.address if dev.bmc else None
    port_kind = "rail" if dev.role == "node" else "p2p" if dev.loopback else "interface"
    for p in dev.ports:
        if p.address:
            emit(p.address, p.name, "bmc" if p.address == bmc else "mgmt" if p.address == dev.mgmt_address
                 else port_kind)
    for hs in dev.host_subnets:
        vlan_if = f"vlan{hs.vlan}"
        if hs.address:
            emit(hs.address, vlan_if, "svi", hs.prefix)
            emit(_with_len(hs.gateway, hs.prefix), vlan_if, "anycast-gateway", hs.prefix)
        else:
            emit(_with_len(hs.gateway, hs.prefix), vlan_if, "gateway", hs.prefix)
    if dev.bond:
        emit(dev.bond.address, dev.bond.name, "bond")
        if dev.bond.storage_vlan:
            v = dev.bond.storage_vlan
            emit(v.address, f"{dev.bond.name}.{v.id}", "storage-vlan")
    if dev.mgmt_address:
        emit(dev.mgmt_address, "mgmt0", "mgmt")
    if bmc:
        emit(bmc, "bmc", "bmc")
    return out


def _v4(addr: str) -> int | None:
    if ":" in addr:
        return None
    return int.from_bytes(inet_aton(addr), "big")


class PoolMatcher:
    """Which plan pool an address falls in (IPv4 integer ranges; the pools are few)."""

    def __init__(self, pools: list[Pool]):
        self.ranges: list[tuple[int, int, Pool]] = []
        self.v6: list[tuple[ipaddress.IPv6Network, Pool]] = []
        for p in pools:
            net = ipaddress.ip_network(p.prefix)
            if net.version == 4:
                self.ranges.append((int(net.network_address), int(net.broadcast_address), p))
            else:
                self.v6.append((net, p))
        self.ranges.sort(key=lambda r: r[1] - r[0])

    def pool_of(self, address: str) -> Pool | None:
        n = _v4(address.split("/", 1)[0])
        if n is None:
            ip = ipaddress.ip_interface(address).ip
            return next((p for net, p in self.v6 if ip in net), None)
        return self.pool_of_int(n)

    def pool_of_int(self, n: int) -> Pool | None:
        for lo, hi, p in self.ranges:
            if lo <= n <= hi:
                return p
        return None


@dataclass(slots=True)
class PoolUse:
    name: str
    kind: str
    range: str
    fabric: str
    purpose: str
    size: int
    allocated: int
    assigned: int

    @property
    def free(self) -> int:
        return self.size - self.allocated

    @property
    def allocated_pct(self) -> float:
        return 100.0 * self.allocated / self.size if self.size else 0.0


POOL_COLUMNS = ("pool", "kind", "range", "fabric", "purpose", "size", "allocated", "assigned", "free", "allocated_pct")


def address_table(plan: Plan) -> tuple[list[tuple], list[PoolUse]]:
    """Every assigned address as an ADDRESS_COLUMNS row, and the pool utilisation. Computed once per plan (the
    cabling workbook, the IP plan and the report all read it; rendering in one process shares it)."""
    return plan.view("address_table", _address_table)


def _address_table(plan: Plan) -> tuple[list[tuple], list[PoolUse]]:
    matcher = PoolMatcher(plan.pools)
    assigned: dict[str, set] = {p.name: set() for p in plan.pools}
    nets: dict[tuple[int, str], tuple[str, str, str]] = {}
    rows = []
    masks = {str(bits): (0xFFFFFFFF << (32 - bits)) & 0xFFFFFFFF for bits in range(33)}
    masks[""] = masks["32"]
    from_bytes = int.from_bytes
    for dev in plan.devices:
        tail = (dev.fabric, dev.su, dev.rack)
        for cidr, subnet, interface, kind in device_addresses(dev):
            addr, _, plen = cidr.partition("/")
            if ":" in addr:
                iface = ipaddress.ip_interface(cidr)
                pool = matcher.pool_of(cidr)
                net_s, key = str(iface.network), iface.ip
                name, purpose = (pool.name, pool.purpose) if pool else ("", "")
            else:
                key = from_bytes(inet_aton(addr), "big")
                bits = plen if plen in masks else str(int(plen))
                net = key & masks[bits]
                hit = nets.get((net, bits))
                if hit is None:
                    pool = matcher.pool_of_int(net)
                    hit = nets[(net, bits)] = (f"{inet_ntoa(net.to_bytes(4, 'big'))}/{bits or 32}",
                                               *((pool.name, pool.purpose) if pool else ("", "")))
                net_s, name, purpose = hit
            if name:
                assigned[name].add(key)
            rows.append((cidr, subnet or net_s, dev.name, dev.role, interface, kind, name, purpose, *tail))
    return rows, pool_usage(plan, {k: len(v) for k, v in assigned.items()})


def pool_usage(plan: Plan, assigned: dict[str, int]) -> list[PoolUse]:
    """Address pools: size and allocated from the plan, assigned = distinct addresses counted on devices.
    ASN pools: size from the range, allocated from the plan, assigned = distinct ASNs on devices."""
    out = [PoolUse(p.name, "ipv4" if ":" not in p.prefix else "ipv6", p.prefix, p.fabric, p.purpose, p.size, p.used,
                   assigned.get(p.name, 0)) for p in plan.pools]
    asns: dict[str, set[int]] = {a.name: set() for a in plan.asn_pools}
    for d in plan.devices:
        if d.asn is not None:
            for a in plan.asn_pools:
                if a.first <= d.asn <= a.last:
                    asns[a.name].add(d.asn)
    for a in plan.asn_pools:
        out.append(PoolUse(f"asn-{a.name}", "asn", f"{a.first}-{a.last}", a.name, a.purpose, a.last - a.first + 1,
                           a.used, len(asns[a.name])))
    return out


def pool_row(u: PoolUse) -> tuple:
    return (u.name, u.kind, u.range, u.fabric, u.purpose, u.size, u.allocated, u.assigned, u.free,
            round(u.allocated_pct, 2))
