"""What changed between two plans of one cluster, item by item.

Every item is one of: `added` (something new), `config` (an existing switch's configuration gains what follows
from additions), or a breaking action on something that exists: `removed`, `renumbered` (address, ASN, pool),
`re-labelled` (the same connection under another cable label, or a port's front-panel label), `re-cabled` (a
cable label or a port now connects something else, or its media/length/speed changed), `moved` (rack or U),
`changed` (any other field of an existing device).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

from railforge.change.sides import Side
from railforge.plan.model import Device, Link, Plan

ADDED, CONFIG = "added", "reload"
BREAKING = ("removed", "renumbered", "re-labelled", "re-cabled", "moved", "changed")
PLACE_FIELDS = ("rack", "u")
NUMBER_FIELDS = ("asn", "loopback", "mgmt_address")
OTHER_FIELDS = ("role", "fabric", "model", "nos", "su", "slot", "rail", "group", "plane", "mlag_peer")
CABLE_FIELDS = ("fabric", "tier", "speed_mbps", "media", "part", "length_m")


@dataclass(frozen=True, slots=True)
class Item:
    kind: str
    action: str
    subject: str
    old: str = ""
    new: str = ""

    @property
    def breaking(self) -> bool:
        return self.action in BREAKING


@dataclass
class ChangeSet:
    old: Plan
    new: Plan
    items: list[Item] = field(default_factory=list)

    def counts(self) -> Counter:
        return Counter((i.kind, i.action) for i in self.items)

    def breaking(self) -> list[Item]:
        return [i for i in self.items if i.breaking]

    def of(self, kind: str, action: str | None = None) -> list[Item]:
        return [i for i in self.items if i.kind == kind and (action is None or i.action == action)]


def _ends(link: Link) -> str:
    return f"{link.a.device}:{link.a.port} <-> {link.b.device}:{link.b.port}"


def _cable_spec(link: Link) -> str:
    return f"{link.speed_mbps // 1000}G {link.media} {link.length_m:g} m"


def addresses(dev: Device) -> Iterator[tuple[str, str]]:
    """(interface, address) of every address a device holds in the plan."""
    if dev.loopback:
        yield "loopback", dev.loopback
    if dev.mgmt_address:
        yield "mgmt", dev.mgmt_address
    for p in dev.ports:
        if p.address and p.address != dev.mgmt_address and not (dev.bmc and p.address == dev.bmc.address):
            yield p.name, p.address
    for h in dev.host_subnets:
        yield f"vlan{h.vlan}", f"{h.address or ''} gw {h.gateway} {h.prefix}"
    for r in dev.rails:
        yield r.ifname, r.address
    if dev.bond:
        yield dev.bond.name, dev.bond.address
        if dev.bond.storage_vlan:
            yield f"{dev.bond.name}.{dev.bond.storage_vlan.id}", dev.bond.storage_vlan.address
    if dev.bmc:
        yield "bmc", dev.bmc.address


def _compare_device(o: Device, n: Device, out: list[Item]) -> None:
    name = n.name
    for f in PLACE_FIELDS:
        if getattr(o, f) != getattr(n, f):
            out.append(Item("device", "moved", name, f"{o.rack} U{o.u}", f"{n.rack} U{n.u}"))
            break
    if o.asn != n.asn:
        out.append(Item("asn", "renumbered" if o.asn is not None else ADDED, name, str(o.asn or ""), str(n.asn or "")))
    for f in OTHER_FIELDS:
        if getattr(o, f) != getattr(n, f):
            out.append(Item("device", "changed", f"{name} {f}", str(getattr(o, f)), str(getattr(n, f))))
    old_addr, new_addr = dict(addresses(o)), dict(addresses(n))
    for ifname, a in old_addr.items():
        b = new_addr.get(ifname)
        if b is None:
            out.append(Item("address", "removed", f"{name} {ifname}", a, ""))
        elif a != b:
            out.append(Item("address", "renumbered", f"{name} {ifname}", a, b))
    for ifname, b in new_addr.items():
        if ifname not in old_addr:
            out.append(Item("address", ADDED, f"{name} {ifname}", "", b))
    if o.ports == n.ports:
        return
    old_ports = {p.name: p for p in o.ports}
    new_ports = {p.name: p for p in n.ports}
    for pname, p in old_ports.items():
        q = new_ports.get(pname)
        subject = f"{name}:{pname}"
        if q is None:
            out.append(Item("port", "removed", subject, p.label, ""))
            continue
        if p.label != q.label:
            out.append(Item("port", "re-labelled", subject, p.label, q.label))
        if p.link != q.link:
            action = ADDED if p.link is None else ("removed" if q.link is None else "re-cabled")
            out.append(Item("port", action, subject, p.link or "", q.link or ""))
        if (p.speed_mbps, p.breakout, p.lanes) != (q.speed_mbps, q.breakout, q.lanes):
            out.append(Item("port", "changed", subject, f"{p.speed_mbps} {p.breakout}", f"{q.speed_mbps} {q.breakout}"))
    for pname, q in new_ports.items():
        if pname not in old_ports:
            out.append(Item("port", ADDED, f"{name}:{pname}", "", q.link or q.label))


def _compare_links(old: Plan, new: Plan, out: list[Item]) -> None:
    old_links, new_links = old.link_index(), new.link_index()
    old_by_ends = {_ends(link): link.id for link in old.links}
    for lid, a in old_links.items():
        b = new_links.get(lid)
        if b is None:
            out.append(Item("cable", "removed", lid, _ends(a), ""))
        elif _ends(a) != _ends(b):
            out.append(Item("cable", "re-cabled", lid, _ends(a), _ends(b)))
        elif any(getattr(a, f) != getattr(b, f) for f in CABLE_FIELDS):
            out.append(Item("cable", "re-cabled", lid, _cable_spec(a), _cable_spec(b)))
    for lid, b in new_links.items():
        if lid in old_links:
            continue
        was = old_by_ends.get(_ends(b))
        if was is not None and was != lid:
            out.append(Item("cable", "re-labelled", _ends(b), was, lid))
        else:
            out.append(Item("cable", ADDED, lid, "", _ends(b)))


def _compare_pools(old: Plan, new: Plan, out: list[Item]) -> None:
    new_pools = {p.name: p for p in new.pools}
    for p in old.pools:
        q = new_pools.get(p.name)
        if q is None:
            out.append(Item("pool", "removed", p.name, p.prefix, ""))
        elif p.prefix != q.prefix:
            out.append(Item("pool", "renumbered", p.name, p.prefix, q.prefix))
    new_asn = {p.name: p for p in new.asn_pools}
    for p in old.asn_pools:
        q = new_asn.get(p.name)
        if q is None:
            out.append(Item("asn", "removed", f"pool {p.name}", f"{p.first}-{p.last}", ""))
        elif p.first != q.first:
            out.append(Item("asn", "renumbered", f"pool {p.name}", f"{p.first}-{p.last}", f"{q.first}-{q.last}"))


def _compare_racks(old: Plan, new: Plan, out: list[Item]) -> None:
    new_racks = {r.name: r for r in new.racks}
    for r in old.racks:
        q = new_racks.get(r.name)
        if q is None:
            out.append(Item("rack", "removed", r.name, r.kind, ""))
        elif (r.row, r.position, r.x_m, r.y_m, r.height_u) != (q.row, q.position, q.x_m, q.y_m, q.height_u):
            out.append(Item("rack", "moved", r.name, f"row {r.row} pos {r.position}", f"row {q.row} pos {q.position}"))
    old_names = {r.name for r in old.racks}
    out.extend(Item("rack", ADDED, r.name, "", r.kind) for r in new.racks if r.name not in old_names)


def compare(old: Plan, new: Plan) -> ChangeSet:
    """Every difference that matters on the floor; configs are compared by the caller (they live beside a plan)."""
    items: list[Item] = []
    _compare_racks(old, new, items)
    new_devs = new.device_index()
    old_names = set()
    for o in old.devices:
        old_names.add(o.name)
        n = new_devs.get(o.name)
        if n is None:
            items.append(Item("device", "removed", o.name, f"{o.role} {o.rack} U{o.u}", ""))
        elif o != n:
            _compare_device(o, n, items)
    for n in new.devices:
        if n.name not in old_names:
            items.append(Item("device", ADDED, n.name, "", f"{n.role} {n.model} {n.rack} U{n.u}"))
            if n.asn is not None:
                items.append(Item("asn", ADDED, n.name, "", str(n.asn)))
            items.extend(Item("address", ADDED, f"{n.name} {i}", "", a) for i, a in addresses(n))
    _compare_links(old, new, items)
    _compare_pools(old, new, items)
    return ChangeSet(old, new, items)


def compare_sides(old: Side, new: Side) -> ChangeSet:
    """`compare` plus the switch configurations: file by file where both sides are build folders, else every
    existing switch whose plan entry changed."""
    cs = compare(old.plan, new.plan)
    old_devs = old.plan.device_index()
    both = old.folder is not None and new.folder is not None
    for dev in new.plan.switches():
        if dev.name not in old_devs:
            files = sorted(new.config_files(dev.name)) or ["(no per-switch file)"]
            cs.items.append(Item("config", ADDED, dev.name, "", ", ".join(files)))
            continue
        if both:
            a, b = old.config_files(dev.name), new.config_files(dev.name)
            changed = sorted(f for f in set(a) | set(b) if a.get(f) != b.get(f))
            if changed:
                cs.items.append(Item("config", CONFIG, dev.name, "", ", ".join(changed)))
        elif old_devs[dev.name] != dev:
            cs.items.append(Item("config", CONFIG, dev.name, "", "plan entry changed"))
    return cs
