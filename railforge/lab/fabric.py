"""Namespaces, veth cables, addresses, host-subnet bridges and host policy routing for a lab topology."""

from __future__ import annotations

from ipaddress import ip_interface

from railforge.lab.scope import LabTopology
from railforge.lab.shell import ip, ip_batch, run, sysctl
from railforge.lab.state import LabState
from railforge.plan.model import Device, Link

LOOPBACK = "Loopback0"
RULE_PRIORITY_BASE = 1000  # as the rails role: priority = base + rail
ROOT_NEIGH = {f"net.{af}.neigh.default.gc_thresh{i}": v for af in ("ipv4", "ipv6")
              for i, v in ((1, 8192), (2, 32768), (3, 65536))}
SWITCH_SYSCTL = {
    "net.ipv4.ip_forward": 1,
    "net.ipv6.conf.all.forwarding": 1,
    "net.ipv4.fib_multipath_hash_policy": 1,
    "net.ipv6.fib_multipath_hash_policy": 1,
    "net.ipv4.conf.all.rp_filter": 0,
    "net.ipv4.conf.default.rp_filter": 0,
    "net.ipv4.conf.all.ignore_routes_with_linkdown": 1,
    "net.ipv6.conf.all.ignore_routes_with_linkdown": 1,
}
HOST_SYSCTL = {"net.ipv4.conf.all.arp_ignore": 1, "net.ipv4.conf.all.arp_announce": 2,
               "net.ipv4.conf.all.rp_filter": 2, "net.ipv4.conf.default.rp_filter": 2}


def raise_neigh_limits() -> None:
    """Big labs hold many neighbours per namespace; the root namespace's gc thresholds apply to all of them."""
    run(["sysctl", "-q", "-w", *[f"{k}={v}" for k, v in ROOT_NEIGH.items()]])


def create_namespaces(topo: LabTopology, state: LabState) -> None:
    for dev in topo.devices():
        ns = topo.ns(dev.name)
        ip(None, "netns", "add", ns)
        state.add_namespace(ns)
        ip(ns, "link", "set", "lo", "up")
        sysctl(ns, SWITCH_SYSCTL if dev in topo.switches else HOST_SYSCTL)


def _veth(topo: LabTopology, link: Link) -> str:
    return (f"link add name {link.a.port} netns {topo.ns(link.a.device)} type veth "
            f"peer name {link.b.port} netns {topo.ns(link.b.device)}")


def cable(topo: LabTopology, links: list[Link]) -> None:
    """One veth pair per planned cable, each end named as the plan's port, in its device's namespace."""
    ip_batch(None, [_veth(topo, link) for link in links])


def _bridges(dev: Device) -> dict[str, str]:
    """Host-facing port -> the bridge that stands in for its SONiC VLAN interface (`Vlan1000`)."""
    return {p: f"Vlan{hs.vlan}" for hs in dev.host_subnets for p in hs.ports}


def _switch_port_lines(topo: LabTopology, dev: Device, names: set[str]) -> list[str]:
    by_name = {p.name: p for p in dev.ports}
    bridges = _bridges(dev)
    lines: list[str] = []
    for name in sorted(names):
        port = by_name[name]
        lines.append(f"link set {name} mtu {topo.mtu_switch} alias {port.label}")
        if name in bridges:
            lines.append(f"link set {name} master {bridges[name]}")
        elif port.address:
            lines.append(f"addr add {port.address} dev {name}")
        lines.append(f"link set {name} up")
    return lines


def _switch_lines(topo: LabTopology, dev: Device, ports: set[str]) -> list[str]:
    lines: list[str] = []
    if dev.loopback:
        lines += [f"link add {LOOPBACK} type bridge", f"link set {LOOPBACK} up",
                  f"addr add {dev.loopback} dev {LOOPBACK}"]
    for hs in dev.host_subnets:
        bridge = f"Vlan{hs.vlan}"
        plen = ip_interface(hs.prefix).network.prefixlen
        lines += [f"link add {bridge} type bridge", f"link set {bridge} mtu {topo.mtu_switch}",
                  f"addr add {hs.address or f'{hs.gateway}/{plen}'} dev {bridge}", f"link set {bridge} up"]
    return lines + _switch_port_lines(topo, dev, ports)


def _host_lines(topo: LabTopology, dev: Device, ports: set[str]) -> list[str]:
    lines: list[str] = []
    by_name = {p.name: p for p in dev.ports}
    for rail in dev.rails:
        if rail.ifname not in ports:
            continue
        net = ip_interface(rail.address).network
        addr = ip_interface(rail.address).ip
        lines += [f"link set {rail.ifname} mtu {topo.mtu_host} alias {by_name[rail.ifname].label}",
                  f"addr add {rail.address} dev {rail.ifname}", f"link set {rail.ifname} up",
                  f"route add {net} dev {rail.ifname} scope link src {addr} table {rail.table}",
                  f"rule add from {addr} table {rail.table} priority {RULE_PRIORITY_BASE + rail.rail}"]
        if rail.gateway:
            lines.append(f"route add default via {rail.gateway} dev {rail.ifname} table {rail.table}")
    return lines


def host_rail_sysctl(dev: Device, ports: set[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for rail in dev.rails:
        if rail.ifname in ports:
            out |= {f"net.ipv4.conf.{rail.ifname}.{k}": v
                    for k, v in (("arp_ignore", 1), ("arp_announce", 2), ("rp_filter", 2))}
    return out


def configure(topo: LabTopology) -> None:
    for dev in topo.switches:
        ip_batch(topo.ns(dev.name), _switch_lines(topo, dev, set(topo.ports_of(dev.name))))
    for dev in topo.hosts:
        ports = set(topo.ports_of(dev.name))
        sysctl(topo.ns(dev.name), host_rail_sysctl(dev, ports))
        ip_batch(topo.ns(dev.name), _host_lines(topo, dev, ports))


def configure_ports(topo: LabTopology, device: Device, ports: set[str]) -> None:
    """Address and raise some ports of one device again (after re-cabling them)."""
    if device in topo.switches:
        ip_batch(topo.ns(device.name), _switch_port_lines(topo, device, ports))
    else:
        ip_batch(topo.ns(device.name), _host_lines(topo, device, ports))


def swap_far_ends(topo: LabTopology, first: Link, second: Link) -> None:
    """Re-cable: first.a now meets second.b and second.a meets first.b (a classic swapped pair)."""
    ip(topo.ns(first.a.device), "link", "delete", first.a.port)
    ip(topo.ns(second.a.device), "link", "delete", second.a.port)
    crossed = [Link(first.id, first.fabric, first.tier, first.speed_mbps, first.a, second.b, 0, ""),
               Link(second.id, second.fabric, second.tier, second.speed_mbps, second.a, first.b, 0, "")]
    cable(topo, crossed)
    devices = topo.devices()
    for end in (first.a, first.b, second.a, second.b):
        dev = next(d for d in devices if d.name == end.device)
        configure_ports(topo, dev, {end.port})
