"""What a source of truth (NetBox, Nautobot) should hold for a plan: one typed record per object, keyed by the
natural key both products use, computed from the plan only.

The same records drive `sot push` (create what is missing, refuse to change what exists unless asked) and
`sot diff` (read back and compare), so the two can never disagree about what "matches the plan" means. Every field
a push sets is a field of a record here (statuses and faces included), so `diff` can compare every one of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from railforge.plan.model import HOST_ROLES, SWITCH_ROLES, Plan
from railforge.plan.parts import laid
from railforge.plan.switch_model import MGMT_MTU
from railforge.plan.tables import device_addresses
from railforge.render.netbox import (
    ADDRESS_ROLES,
    ETHERNET_TYPES,
    INFINIBAND_TYPES,
    ROLE_COLOURS,
    cable_type,
    device_types,
)

OWNER_TAG = "railforge"
CABLE_COLOURS = {"compute": "2196f3", "storage": "ff9800", "oob": "9e9e9e"}
"""Cable colour by fabric (NetBox/Nautobot store RGB hex): the colours railforge's cabling workbook uses."""


@dataclass(frozen=True, slots=True)
class DeviceType:
    manufacturer: str
    model: str
    u_height: int


PLANNED, ACTIVE, RESERVED = "planned", "active", "reserved"
"""Statuses railforge gives what it creates: what the plan builds is planned; addresses, VLANs and pools are in use
(active, reserved) from the day the plan hands them out."""


@dataclass(frozen=True, slots=True)
class Rack:
    name: str
    u_height: int
    description: str
    status: str = PLANNED
    width: int = 19


@dataclass(frozen=True, slots=True)
class Device:
    name: str
    role: str
    model: str
    rack: str
    position: int
    description: str
    face: str = "front"
    status: str = PLANNED


@dataclass(frozen=True, slots=True)
class Interface:
    device: str
    name: str
    type: str
    speed_kbps: int | None
    mgmt_only: bool
    lag: str | None
    parent: str | None
    label: str
    description: str
    status: str = PLANNED
    mtu: int | None = None
    """The MTU the plan configures on the port (the switch configs', the hosts' rails and bonds); None where the
    plan configures none (InfiniBand ports, host management ports, virtual interfaces)."""


@dataclass(frozen=True, slots=True)
class Cable:
    label: str
    a_device: str
    a_port: str
    b_device: str
    b_port: str
    type: str
    colour: str
    length_m: float
    description: str
    status: str = PLANNED

    @property
    def ends(self) -> tuple[tuple[str, str], tuple[str, str]]:
        return (self.a_device, self.a_port), (self.b_device, self.b_port)


@dataclass(frozen=True, slots=True)
class Address:
    address: str
    device: str
    interface: str
    role: str
    description: str
    status: str = ACTIVE


@dataclass(frozen=True, slots=True)
class Prefix:
    prefix: str
    description: str
    status: str = RESERVED


@dataclass(frozen=True, slots=True)
class Bgp:
    """A switch's BGP identity: its ASN and its loopback as router ID (where a product ties a device to an ASN:
    Nautobot's BGP app does, through one routing instance per device)."""

    device: str
    asn: int
    router_id: str | None


@dataclass(frozen=True, slots=True)
class Vlan:
    vid: int
    name: str
    status: str = ACTIVE


@dataclass(slots=True)
class Desired:
    """Everything railforge owns in the source of truth for one plan, in creation order."""

    site: str
    site_description: str
    manufacturers: list[str] = field(default_factory=list)
    roles: dict[str, str] = field(default_factory=dict)
    device_types: list[DeviceType] = field(default_factory=list)
    racks: list[Rack] = field(default_factory=list)
    devices: list[Device] = field(default_factory=list)
    interfaces: list[Interface] = field(default_factory=list)
    cables: list[Cable] = field(default_factory=list)
    prefixes: list[Prefix] = field(default_factory=list)
    addresses: list[Address] = field(default_factory=list)
    asns: list[int] = field(default_factory=list)
    bgp: list[Bgp] = field(default_factory=list)
    vlans: list[Vlan] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return {"sites": 1, "manufacturers": len(self.manufacturers), "device roles": len(self.roles),
                "device types": len(self.device_types), "racks": len(self.racks), "devices": len(self.devices),
                "interfaces": len(self.interfaces), "cables": len(self.cables), "prefixes": len(self.prefixes),
                "IP addresses": len(self.addresses), "ASNs": len(self.asns), "BGP instances": len(self.bgp),
                "VLANs": len(self.vlans)}


def desired(plan: Plan) -> Desired:
    """The source-of-truth objects of `plan`: no lookups outside it."""
    c = plan.cluster
    want = Desired(plan.cluster.name, f"{c.gpus} GPUs, {c.fabric} {c.tiers}-tier {c.mode}")
    types = device_types(plan)
    want.manufacturers = sorted({vendor for vendor, _ in types.values()})
    want.roles = {role: ROLE_COLOURS.get(role, "9e9e9e") for role in sorted({d.role for d in plan.devices})}
    want.device_types = [DeviceType(vendor, model, height) for model, (vendor, height) in sorted(types.items())]
    want.racks = [Rack(r.name, r.height_u, f"{r.kind} rack, row {r.row} position {r.position}") for r in plan.racks]
    ib = c.fabric == "infiniband"
    fabric_of = {link.id: link.fabric for link in plan.links}
    mtu = _Mtu(plan)
    for d in plan.devices:
        want.devices.append(Device(d.name, d.role, d.model, d.rack, d.u, _describe(d)))
        lag_of = {m.ifname: d.bond.name for m in d.bond.members} if d.bond else {}
        own = device_addresses(d)
        mgmt_ifs = {i for _, _, i, k in own if k in ("mgmt", "bmc")}
        names: set[str] = set()
        if d.bond:
            names.add(d.bond.name)
            want.interfaces.append(Interface(d.name, d.bond.name, "lag", None, False, None, None, "",
                                             f"{d.bond.mode} {d.bond.hash_policy}", mtu=d.bond.mtu))
        for p in d.ports:
            names.add(p.name)
            kind = fabric_of.get(p.link or "", "")
            table = INFINIBAND_TYPES if ib and kind == "compute" else ETHERNET_TYPES
            mgmt = p.name in mgmt_ifs or (kind == "oob" and d.role not in SWITCH_ROLES)
            want.interfaces.append(Interface(d.name, p.name, table.get(p.speed_mbps, "other"), p.speed_mbps * 1000,
                                             mgmt, lag_of.get(p.name), None, p.label, _breakout(p),
                                             mtu=mtu.of(d, p, lag_of)))
        for _, _, ifname, kind in own:
            if ifname in names:
                continue
            names.add(ifname)
            parent = d.bond.name if d.bond and ifname.startswith(d.bond.name + ".") else None
            want.interfaces.append(Interface(d.name, ifname, "virtual", None, kind in ("mgmt", "bmc"), None, parent,
                                             "", kind))
        want.addresses.extend(Address(cidr, d.name, ifname, ADDRESS_ROLES.get(kind, ""), kind)
                              for cidr, _, ifname, kind in own)
    for link in plan.links:
        want.cables.append(Cable(link.id, link.a.device, link.a.port, link.b.device, link.b.port,
                                 cable_type(link.media, link.fibre), CABLE_COLOURS.get(link.fabric, "9e9e9e"),
                                 link.length_m,
                                 " ".join(x for x in (link.fabric, link.tier, link.media, laid(link)) if x)))
    want.prefixes = [Prefix(p.prefix, f"{p.name}: {p.purpose}") for p in plan.pools]
    want.asns = sorted({d.asn for d in plan.devices if d.asn is not None})
    want.bgp = [Bgp(d.name, d.asn, d.loopback) for d in plan.devices if d.asn is not None]
    vlans = {hs.vlan for d in plan.devices for hs in d.host_subnets}
    vlans |= {d.bond.storage_vlan.id for d in plan.devices if d.bond and d.bond.storage_vlan}
    want.vlans = [Vlan(v, f"vlan{v}") for v in sorted(vlans)]
    return want


class _Mtu:
    """A port's MTU as the plan configures it: a switch's ports carry the switch MTU (its own management port
    1500), as the switch configs write them (`railforge.plan.switch_model`); a host's rail ports the host MTU, its
    bond members the bond's. InfiniBand ports and a host's management and BMC ports: none (the plan sets none)."""

    def __init__(self, plan: Plan):
        self.plan = plan
        self.ib = plan.cluster.fabric == "infiniband"
        self.links = {link.id: link for link in plan.links}
        self.roles = {d.name: d.role for d in plan.devices}

    def of(self, d, p, lag_of: dict[str, str]) -> int | None:
        link = self.links.get(p.link or "")
        if self.ib and link is not None and link.fabric == "compute":
            return None
        if d.role in SWITCH_ROLES:
            if link is None:
                return self.plan.qos.switch_mtu
            peer = link.b.device if link.a.device == d.name else link.a.device
            host_ports = {x for s in d.host_subnets for x in s.ports}
            mgmt = link.tier == "oob-access" and d.role != "oob-leaf" and p.name not in host_ports and \
                self.roles.get(peer) not in HOST_ROLES
            return MGMT_MTU if mgmt else self.plan.qos.switch_mtu
        if p.name in lag_of:
            return d.bond.mtu
        if link is not None and link.fabric == "compute":
            return self.plan.qos.host_mtu
        return None


def _breakout(p) -> str:
    """A split cage's sub-ports are interfaces of their own; the description names the cage and the split."""
    return f"cage {p.index} split {p.breakout}" if p.breakout and not p.breakout.startswith("1x") else ""


def _describe(d) -> str:
    parts = [f"su {d.su}" if d.su is not None else "", f"rail {d.rail}" if d.rail is not None else "",
             f"group {d.group}" if d.group else "", f"plane {d.plane}" if d.plane else "",
             f"ASN {d.asn}" if d.asn is not None else ""]
    return ", ".join(p for p in parts if p)
