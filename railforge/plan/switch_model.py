"""The vendor-neutral per-switch model every switch renderer reads.

`build_models(plan)` turns the plan into one `SwitchConfig` per switch: interfaces with their
peers and cables, BGP neighbours (numbered or unnumbered, by tier), host-facing VLANs, MLAG or
EVPN multihoming pairs, the QoS profile and the prefixes the switch announces. Indices over the
plan are built once (`PlanIndex`), so building one switch costs time in its own ports only.
Adding a NOS means writing a renderer over this model, not touching the planner.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from railforge.plan.model import HOST_ROLES, SWITCH_ROLES, Device, Link, Plan, Port, Qos
from railforge.plan.tables import PlanIndex as TableIndex

TIER_RANK = {"leaf": 1, "spine": 2, "superspine": 3}
PEER_GROUPS = {1: "LEAF", 2: "SPINE", 3: "SUPERSPINE"}
HOST_POOLS = {"compute": ("compute_hosts",), "storage": ("inband", "storage"), "oob": ("oob",)}
MGMT_MTU = 1500
VNI_BASE = 10000
PEERLINK_VLAN = 4094


@dataclass(slots=True)
class Interface:
    name: str
    label: str
    role: str  # uplink | downlink | host | peerlink | mgmt | unused
    speed_mbps: int
    mtu: int
    lanes: list[int]
    breakout: str
    index: int
    sub: int
    address: str | None
    peer_device: str | None = None
    peer_port: str | None = None
    peer_role: str | None = None
    cable: str | None = None
    length_m: float | None = None
    peer_hca: str | None = None  # RDMA device behind a host port (InfiniBand node descriptions name it)

    @property
    def description(self) -> str:
        if self.peer_device is None:
            return ""
        return f"{self.peer_device}:{self.peer_port} {self.cable}"

    @property
    def enabled(self) -> bool:
        return self.role != "unused"


@dataclass(slots=True)
class BgpNeighbor:
    interface: str
    address: str | None  # peer address on numbered links; None: unnumbered (IPv6 link-local)
    local_address: str | None
    remote_asn: int
    peer_name: str
    peer_port: str
    peer_group: str
    bfd: bool = True

    @property
    def key(self) -> str:
        """How FRR names the neighbour: its address, or the local interface when unnumbered."""
        return self.address or self.interface


@dataclass(slots=True)
class HostVlan:
    vlan: int
    vni: int
    prefix: str
    gateway: str
    address: str | None  # own address when a pair shares `gateway` (anycast / VRR); None: the switch holds gateway
    members: list[str]


@dataclass(slots=True)
class HostBond:
    """One host-facing port of a leaf pair, bonded with the same host's port on the peer."""

    id: int
    member: str
    host: str
    host_port: str


@dataclass(slots=True)
class Pair:
    mode: str  # mlag | evpn-mh
    peer: str
    primary: bool
    sys_mac: str
    peer_loopback: str | None
    peer_mgmt: str | None
    peerlinks: list[str]
    bonds: list[HostBond]


@dataclass(slots=True)
class PeerDevice:
    name: str
    role: str
    model: str
    loopback: str | None
    mgmt_address: str | None
    hwsku: str | None = None


@dataclass(slots=True)
class SwitchConfig:
    hostname: str
    role: str
    tier: int
    fabric: str
    nos: str | None
    model: str
    asn: int | None
    router_id: str | None
    loopback: str | None
    mgmt_address: str | None
    mgmt_gateway: str | None
    mtu: int
    interfaces: list[Interface]
    neighbors: list[BgpNeighbor]
    host_vlans: list[HostVlan]
    pair: Pair | None
    qos: Qos | None
    announce: list[str]
    fabric_prefixes: list[str]
    evpn: bool = False
    peers: list[PeerDevice] = field(default_factory=list)
    platform: str | None = None
    hwsku: str | None = None

    def peer_groups(self) -> list[str]:
        return sorted({n.peer_group for n in self.neighbors})

    def interface(self, name: str) -> Interface:
        for i in self.interfaces:
            if i.name == name:
                return i
        raise KeyError(name)


class IncompletePlan(ValueError):
    pass


class PlanIndex:
    """Look-ups over the whole plan, built once and shared by every switch: each device's cabled ports and their
    far ends, and (through the tables' index) devices by name and a device's ports by name, indexed on first use:
    a shard of switches needs only its peers'."""

    def __init__(self, plan: Plan):
        self.plan = plan
        self.lookup = TableIndex(plan)
        self.devices: dict[str, Device] = self.lookup.devices
        self.far_end: dict[str, dict[str, tuple[Link, str, str]]] = {}
        far = self.far_end
        for link in plan.links:
            a, b = link.a, link.b
            ends = far.get(a.device)
            if ends is None:
                ends = far[a.device] = {}
            ends[a.port] = (link, b.device, b.port)
            ends = far.get(b.device)
            if ends is None:
                ends = far[b.device] = {}
            ends[b.port] = (link, a.device, a.port)
        self.pools = {p.name: p.prefix for p in plan.pools}
        peerlinked = {link.fabric for link in plan.links if link.tier.endswith("peer")}
        self.evpn_fabrics = {d.fabric for d in plan.devices if d.mlag_peer} - peerlinked

    def peer_hca(self, link: Link, peer_name: str, peer_port: str) -> str | None:
        """The RDMA device behind a host's compute rail port at the far end of `link` (hosts are link A ends)."""
        if link.tier != "node-leaf" or link.fabric != "compute" or link.a.device != peer_name:
            return None
        host, port = self.devices.get(peer_name), self.lookup.port(peer_name, peer_port)
        return None if host is None or port is None else host.hca(port)


_RANKS = {r: TIER_RANK[r.rsplit("-", 1)[-1]] for r in SWITCH_ROLES}


def rank(role: str) -> int:
    return _RANKS.get(role, 0)


def _ip(cidr: str | None) -> str | None:
    return cidr.split("/")[0] if cidr else None


def _sys_mac(dev: Device) -> str:
    """Shared MLAG / ES system MAC of a pair, from the host subnet both leaves serve (locally administered)."""
    octets = [int(x) for x in dev.host_subnets[0].prefix.split("/")[0].split(".")]
    return f"44:38:39:ff:{octets[2]:02x}:{octets[3]:02x}"


def _router_id(dev: Device) -> str | None:
    """The loopback; switches without one (OOB) use an address they own, else tier and slot as a 32-bit id
    (RFC 6286: the BGP identifier need not be an address)."""
    if dev.loopback:
        return _ip(dev.loopback)
    for s in dev.host_subnets:
        return _ip(s.address) or s.gateway
    if dev.asn is None:
        return None
    n = (dev.slot or 0) + 1
    return f"0.{rank(dev.role)}.{n >> 8}.{n & 255}"


def _classify(dev_role: str, port: Port, link: Link, peer: Device | None, host_ports: set[str]) -> str:
    if port.name in host_ports or (peer is not None and peer.role in HOST_ROLES):
        return "host"
    if link.tier.endswith("peer"):
        return "peerlink"
    if link.tier == "oob-access":
        return "host" if dev_role == "oob-leaf" else "mgmt"
    if peer is None or peer.role not in SWITCH_ROLES:
        return "host"
    return "uplink" if rank(peer.role) > rank(dev_role) else "downlink"


def build_switch(dev: Device, idx: PlanIndex) -> SwitchConfig:
    plan = idx.plan
    mtu = plan.qos.switch_mtu
    host_ports = {p for s in dev.host_subnets for p in s.ports}
    interfaces: list[Interface] = []
    neighbors: list[BgpNeighbor] = []
    peers: dict[str, PeerDevice] = {}
    mgmt_gateway = None
    name, devices = dev.name, idx.devices
    far_end = idx.far_end.get(name, {})
    for port in dev.ports:
        far = far_end.get(port.name)
        if far is None:
            interfaces.append(Interface(port.name, port.label, "unused", port.speed_mbps, mtu, port.lanes,
                                        port.breakout, port.index, port.sub, port.address))
            continue
        link, peer_name, peer_port = far
        peer = devices.get(peer_name)
        role = _classify(dev.role, port, link, peer, host_ports)
        iface = Interface(port.name, port.label, role, port.speed_mbps, MGMT_MTU if role == "mgmt" else mtu,
                          port.lanes, port.breakout, port.index, port.sub, port.address, peer_name, peer_port,
                          peer.role if peer is not None else None, link.id, link.length_m,
                          idx.peer_hca(link, peer_name, peer_port) if link.tier == "node-leaf" else None)
        interfaces.append(iface)
        if peer is None:
            if link.tier.endswith(("spine", "superspine")):
                raise IncompletePlan(f"{name}:{port.name} is cabled to {peer_name}, which is not in the plan: a "
                                     "switch configuration needs the switches at the far end of its fabric links "
                                     "(keep them when filtering devices)")
            continue
        if role == "mgmt" and peer.host_subnets:
            mgmt_gateway = peer.host_subnets[0].gateway
        if role in ("uplink", "downlink"):
            if peer_name not in peers:
                peers[peer_name] = PeerDevice(peer_name, peer.role, peer.model, peer.loopback, peer.mgmt_address,
                                              peer.hwsku)
            if dev.asn is not None and peer.asn is not None:
                far_port = idx.lookup.port(peer_name, peer_port)
                neighbors.append(BgpNeighbor(port.name, _ip(far_port.address) if far_port else None,
                                             _ip(port.address), peer.asn, peer_name, peer_port,
                                             PEER_GROUPS[rank(peer.role)]))
    pair = _pair(dev, interfaces, idx)
    if pair is not None and pair.mode == "mlag" and dev.asn is not None:
        neighbors.append(BgpNeighbor(f"peerlink.{PEERLINK_VLAN}", None, None, dev.asn, pair.peer, "peerlink",
                                     "PEER", bfd=False))
    host_vlans = [HostVlan(s.vlan, VNI_BASE + s.vlan, s.prefix, s.gateway, s.address, list(s.ports))
                  for s in dev.host_subnets]
    announce = ([dev.loopback] if dev.loopback else []) + [s.prefix for s in dev.host_subnets]
    fabric_prefixes = ([idx.pools["loopbacks"]] if dev.loopback and "loopbacks" in idx.pools else [])
    fabric_prefixes += [idx.pools[p] for p in HOST_POOLS.get(dev.fabric, ()) if p in idx.pools]
    lossless = dev.fabric == "compute" and plan.cluster.fabric == "roce"
    return SwitchConfig(dev.name, dev.role, rank(dev.role), dev.fabric, dev.nos, dev.model, dev.asn,
                        _router_id(dev), dev.loopback, dev.mgmt_address, mgmt_gateway, mtu, interfaces, neighbors,
                        host_vlans, pair, plan.qos if lossless else None, announce, fabric_prefixes,
                        dev.fabric in idx.evpn_fabrics and dev.asn is not None,
                        sorted(peers.values(), key=lambda p: p.name), dev.platform, dev.hwsku)


def _pair(dev: Device, interfaces: list[Interface], idx: PlanIndex) -> Pair | None:
    if not dev.mlag_peer:
        return None
    peer = idx.devices.get(dev.mlag_peer)
    peerlinks = [i.name for i in interfaces if i.role == "peerlink"]
    mode = "mlag" if peerlinks else "evpn-mh"
    members = dev.host_subnets[0].ports if dev.host_subnets else []
    by_name = {i.name: i for i in interfaces}
    bonds = [HostBond(n + 1, m, by_name[m].peer_device, by_name[m].peer_port)
             for n, m in enumerate(members) if by_name[m].peer_device is not None]
    return Pair(mode, dev.mlag_peer, dev.name < dev.mlag_peer, _sys_mac(dev), peer.loopback if peer else None,
                peer.mgmt_address if peer else None, peerlinks, bonds)


def build_models(plan: Plan, nos: str | None = None,
                 select: Callable[[str], bool] | None = None) -> Iterator[SwitchConfig]:
    """One model per Ethernet/IB switch of the plan (optionally only those running `nos`, or selected); the
    plan-wide index is built only when some switch is wanted."""
    chosen = [dev for dev in plan.devices
              if dev.role in SWITCH_ROLES and (nos is None or dev.nos == nos) and (select is None or select(dev.name))]
    if not chosen:
        return
    idx = PlanIndex(plan)
    for dev in chosen:
        yield build_switch(dev, idx)
