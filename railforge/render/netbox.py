"""NetBox bulk-import CSVs, one per object type, numbered in import order.

Columns follow the bulk-import forms of NetBox v4.4 (netbox/dcim/forms/bulk_import.py: SiteImportForm,
ManufacturerImportForm, DeviceRoleImportForm, DeviceTypeImportForm, RackImportForm, DeviceImportForm,
InterfaceImportForm, CableImportForm; netbox/ipam/forms/bulk_import.py: IPAddressImportForm). Choice values
(interface and cable types, statuses) are NetBox's slugs; interface speed is in kb/s as NetBox stores it.
Device types (manufacturer, U height) come from the plan's `device_types`, so a model from the spec's own
catalog or a server model gets its real height.
"""

from __future__ import annotations

import re

from railforge.formats.csvrows import RowWriter
from railforge.formats.output import Output
from railforge.plan.model import SWITCH_ROLES, Device, Plan
from railforge.plan.tables import device_addresses

NETBOX_VERSION = "4.4"
FILES = ("01-sites.csv", "02-manufacturers.csv", "03-device-roles.csv", "04-device-types.csv", "05-racks.csv",
         "06-devices.csv", "07-interfaces.csv", "08-cables.csv", "09-ip-addresses.csv")
ROLE_COLOURS = {"node": "76b900", "ufm": "76b900", "mgmt": "9e9e9e", "leaf": "2196f3", "spine": "3f51b5",
                "superspine": "673ab7", "storage-leaf": "ff9800", "storage-spine": "ff5722",
                "storage-superspine": "795548", "oob-leaf": "607d8b", "oob-spine": "455a64",
                "oob-superspine": "263238"}
ETHERNET_TYPES = {1000: "1000base-t", 10000: "10gbase-x-sfpp", 25000: "25gbase-x-sfp28", 50000: "50gbase-x-sfp56",
                  100000: "100gbase-x-qsfp28", 200000: "200gbase-x-qsfp56", 400000: "400gbase-x-osfp",
                  800000: "800gbase-x-osfp"}
INFINIBAND_TYPES = {100000: "infiniband-edr", 200000: "infiniband-hdr", 400000: "infiniband-ndr",
                    800000: "infiniband-xdr"}
GENERIC_VENDOR = "Generic"


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9_-]+", "-", text.lower()).strip("-")


def cable_type(media: str, fibre: str | None) -> str:
    m = media.upper()
    if "ACC" in m or "AEC" in m:
        return "dac-active"
    if "DAC" in m:
        return "dac-passive"
    if "AOC" in m:
        return "aoc"
    if "CAT6" in m or "RJ45" in m:
        return "cat6"
    f = (fibre or "").upper()
    if "SMF" in m or "OS2" in f:
        return "smf-os2"
    if "OM4" in f:
        return "mmf-om4"
    if "MMF" in m:
        return "mmf"
    return ""


ADDRESS_ROLES = {"anycast-gateway": "anycast", "loopback": "loopback"}


def _writer(out: Output, name: str, columns: tuple[str, ...]) -> RowWriter:
    fh = out.open(f"netbox/{name}")
    w = RowWriter(fh)
    w.writerow(columns)
    return w


def device_types(plan: Plan) -> dict[str, tuple[str, int]]:
    """(manufacturer, U height) of every model the plan racks, from the plan's `device_types`."""
    types = {t.model: (t.manufacturer or GENERIC_VENDOR, t.height_u) for t in plan.device_types}
    for d in plan.devices:
        types.setdefault(d.model, (GENERIC_VENDOR, d.height_u))
    return types


def render(plan: Plan, out: Output) -> None:
    site = plan.cluster.name
    ib = plan.cluster.fabric == "infiniband"
    fabric_of = {link.id: link.fabric for link in plan.links}

    w = _writer(out, FILES[0], ("name", "slug", "status", "description"))
    w.writerow((site, slug(site), "planned", f"{plan.cluster.gpus} GPUs, {plan.cluster.fabric} "
                                             f"{plan.cluster.tiers}-tier {plan.cluster.mode}"))
    w.close()

    types = device_types(plan)
    w = _writer(out, FILES[1], ("name", "slug"))
    for vendor in sorted({v for v, _ in types.values()}):
        w.writerow((vendor, slug(vendor)))
    w.close()

    w = _writer(out, FILES[2], ("name", "slug", "color", "description"))
    for role in sorted({d.role for d in plan.devices}):
        w.writerow((role, slug(role), ROLE_COLOURS.get(role, "9e9e9e"), f"railforge role {role}"))
    w.close()

    w = _writer(out, FILES[3], ("manufacturer", "model", "slug", "u_height", "is_full_depth"))
    for model, (vendor, height) in sorted(types.items()):
        w.writerow((vendor, model, slug(model), height, "true"))
    w.close()

    w = _writer(out, FILES[4], ("site", "name", "status", "width", "u_height", "description"))
    for r in plan.racks:
        w.writerow((site, r.name, "planned", 19, r.height_u, f"{r.kind} rack, row {r.row} position {r.position}"))
    w.close()

    w = _writer(out, FILES[5], ("name", "role", "manufacturer", "device_type", "status", "site", "rack",
                                    "position", "face", "description"))
    for d in plan.devices:
        w.writerow((d.name, d.role, types[d.model][0], d.model, "planned", site, d.rack, d.u, "front",
                    _describe(d)))
    w.close()

    w = _writer(out, FILES[6], ("device", "name", "label", "type", "speed", "mtu", "mgmt_only", "lag",
                                    "parent", "enabled", "description"))
    addrs: list[tuple[Device, list]] = []
    for d in plan.devices:
        lag_of = {m.ifname: d.bond.name for m in d.bond.members} if d.bond else {}
        own = device_addresses(d)
        addrs.append((d, own))
        mgmt_ifs = {i for _, _, i, k in own if k in ("mgmt", "bmc")}
        rows = []
        if d.bond:
            rows.append((d.name, d.bond.name, "", "lag", "", d.bond.mtu, "false", "", "", "true",
                         f"{d.bond.mode} {d.bond.hash_policy}"))
        names = set()
        for p in d.ports:
            names.add(p.name)
            kind = fabric_of.get(p.link or "", "")
            types_map = INFINIBAND_TYPES if ib and kind == "compute" else ETHERNET_TYPES
            rows.append((d.name, p.name, p.label, types_map.get(p.speed_mbps, "other"), p.speed_mbps * 1000, "",
                         "true" if p.name in mgmt_ifs or kind == "oob" and d.role not in SWITCH_ROLES else "false",
                         lag_of.get(p.name, ""), "", "true", p.link or ""))
        for _, _, ifname, kind in own:
            if ifname in names or (d.bond and ifname == d.bond.name):
                continue
            names.add(ifname)
            parent = d.bond.name if d.bond and ifname.startswith(d.bond.name + ".") else ""
            rows.append((d.name, ifname, "", "virtual", "", "", "true" if kind in ("mgmt", "bmc") else "false", "",
                         parent, "true", kind))
        w.writerows(rows)
    w.close()

    w = _writer(out, FILES[7], ("side_a_device", "side_a_type", "side_a_name", "side_b_device", "side_b_type",
                                    "side_b_name", "type", "status", "label", "length", "length_unit",
                                    "description"))
    kinds: dict[tuple, tuple[str, str]] = {}  # (type, description) per kind of cable: a few hundred
    rows = []
    for link in plan.links:
        key = (link.media, link.fibre, link.fabric, link.tier, link.part)
        known = kinds.get(key)
        if known is None:
            known = kinds[key] = (cable_type(link.media, link.fibre),
                                  " ".join(x for x in (link.fabric, link.tier, link.media, link.part or "") if x))
        rows.append((link.a.device, "dcim.interface", link.a.port, link.b.device, "dcim.interface", link.b.port,
                     known[0], "planned", link.id, link.length_m, "m", known[1]))
    w.writerows(rows)
    w.close()

    w = _writer(out, FILES[8], ("address", "status", "role", "device", "interface", "is_primary", "description"))
    for d, own in addrs:
        primary = _primary(d, own)
        w.writerows((cidr, "active", ADDRESS_ROLES.get(kind, ""), d.name, ifname,
                     "true" if cidr == primary else "false", kind) for cidr, _, ifname, kind in own)
    w.close()


def _primary(d: Device, own: list) -> str | None:
    """The address a device is reached at: the bond for hosts, the management address for switches."""
    if d.bond is not None:
        return d.bond.address
    if d.mgmt_address:
        return d.mgmt_address
    return next((cidr for cidr, _, _, kind in own if kind == "loopback"), None)


def _describe(d: Device) -> str:
    parts = [f"su {d.su}" if d.su is not None else "", f"rail {d.rail}" if d.rail is not None else "",
             f"group {d.group}" if d.group else "", f"plane {d.plane}" if d.plane else "",
             f"ASN {d.asn}" if d.asn is not None else ""]
    return ", ".join(p for p in parts if p)
