"""What a routed fabric must show, from the plan, and how observed BGP and FIB state is judged against it.

Shared by `railforge lab check` (daemons in namespaces) and `railforge verify fabric` (what real
switches print). Sessions: one eBGP session per planned cable between two BGP switches, named as
FRR names the neighbour (the far end's address, or the local port when unnumbered). Routes: each
announced prefix is propagated from the switches that own it the way the generated frr.conf lets it
travel (leaves announce only their own prefixes, a switch drops a path carrying its own ASN, the
shortest AS path wins, equal ones are multipath), giving per switch and prefix the local ports a
complete fabric installs as next hops.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from ipaddress import ip_interface

from railforge.plan.model import Device, Link

Fib = dict[str, dict[str, set[str]]]  # device -> prefix -> local ports of the next hops
Adjacency = dict[str, list[tuple[str, str]]]  # device -> (far device, far device's port) per live cable
KINDS = ("unreadable", "unknown-switch", "wrong-asn", "session-missing", "session-down", "unexpected-peer",
         "prefix-missing", "ecmp-narrow", "prefix-unexpected")


def is_bgp_link(link: Link) -> bool:
    return link.tier != "oob-access" and not link.tier.endswith("peer")


def port_addresses(devices: Iterable[Device]) -> dict[tuple[str, str], str | None]:
    return {(d.name, p.name): p.address for d in devices for p in d.ports}


def peer_key(addresses: dict[tuple[str, str], str | None], link: Link, me: str) -> str:
    """How FRR names the BGP neighbour on this cable: the far end's address, or our interface if unnumbered."""
    mine, far = (link.a, link.b) if link.a.device == me else (link.b, link.a)
    addr = addresses.get((far.device, far.port))
    return addr.split("/")[0] if addr else mine.port


@dataclass(slots=True, frozen=True)
class Session:
    key: str
    port: str
    peer: str
    peer_port: str
    peer_asn: int | None
    cable: str


def planned_sessions(switches: list[Device], links: list[Link]) -> dict[str, dict[str, Session]]:
    """Per switch: neighbour key -> the planned session on one cable."""
    by_name = {d.name: d for d in switches}
    addresses = port_addresses(switches)
    out: dict[str, dict[str, Session]] = {d.name: {} for d in switches}
    for link in links:
        if not is_bgp_link(link) or link.a.device not in by_name or link.b.device not in by_name:
            continue
        for mine, far in ((link.a, link.b), (link.b, link.a)):
            key = peer_key(addresses, link, mine.device)
            out[mine.device][key] = Session(key, mine.port, far.device, far.port, by_name[far.device].asn, link.id)
    return out


def _owned(dev: Device, loopbacks: bool) -> list[str]:
    owned = [str(ip_interface(hs.prefix).network) for hs in dev.host_subnets]
    if loopbacks and dev.loopback:
        owned.insert(0, str(ip_interface(dev.loopback).network))
    return owned


def expected_routes(switches: list[Device], links: list[Link], dead: set[str] = frozenset(),
                    loopbacks: bool = False) -> Fib:
    """Per switch, per prefix another switch announces: the local ports a converged fabric uses to reach it.
    `dead` holds failed cable ids; `loopbacks` adds the switches' loopbacks to the host subnets."""
    by_name = {d.name: d for d in switches}
    adj: Adjacency = {d.name: [] for d in switches}
    for link in links:
        if link.id in dead or not is_bgp_link(link) or link.a.device not in by_name or link.b.device not in by_name:
            continue
        adj[link.a.device].append((link.b.device, link.b.port))
        adj[link.b.device].append((link.a.device, link.a.port))
    owners: dict[str, list[str]] = {}
    for d in switches:
        for prefix in _owned(d, loopbacks):
            owners.setdefault(prefix, []).append(d.name)
    out: Fib = {d.name: {} for d in switches}
    solved: dict[tuple[str, ...], dict[str, set[str]]] = {}
    for prefix, origin in owners.items():
        key = tuple(sorted(origin))
        if key not in solved:
            solved[key] = _propagate(by_name, adj, key)
        for device, ports in solved[key].items():
            out[device][prefix] = ports
    return out


def _transits(dev: Device) -> bool:
    return not dev.role.endswith("leaf")


def _propagate(by_name: dict[str, Device], adj: Adjacency,
               origin: tuple[str, ...]) -> dict[str, set[str]]:
    """Shortest loop-free AS paths from the origin switches, level by level; the ports offering one."""
    path: dict[str, tuple[int | None, ...]] = {o: () for o in origin}
    frontier = list(origin)
    hops: dict[str, set[str]] = {}
    while frontier:
        offers: dict[str, tuple[set[str], tuple[int | None, ...]]] = {}
        for sender in sorted(frontier):
            dev = by_name[sender]
            if sender not in origin and not _transits(dev):
                continue
            advertised = (dev.asn, *path[sender])
            for far, far_port in adj[sender]:
                receiver = by_name[far]
                if far in path or (receiver.asn is not None and receiver.asn in advertised):
                    continue
                offers.setdefault(far, (set(), advertised))[0].add(far_port)
        frontier = []
        for far, (ports, best) in sorted(offers.items()):
            path[far] = best
            hops[far] = ports
            frontier.append(far)
    return hops


@dataclass(slots=True)
class Finding:
    kind: str
    device: str
    cables: list[str]
    message: str


@dataclass(slots=True)
class PeerState:
    state: str
    remote_as: int | None


@dataclass(slots=True)
class FabricReport:
    findings: list[Finding] = field(default_factory=list)
    sessions_checked: int = 0
    sessions_up: int = 0
    prefixes_checked: int = 0
    prefixes_complete: int = 0

    @property
    def ok(self) -> bool:
        return not self.findings

    def of(self, kind: str) -> list[Finding]:
        return [f for f in self.findings if f.kind == kind]

    def sort(self) -> None:
        order = {k: i for i, k in enumerate(KINDS)}
        self.findings.sort(key=lambda f: (order[f.kind], f.device, f.cables, f.message))


def judge_sessions(report: FabricReport, device: str, planned: dict[str, Session], observed: dict[str, PeerState],
                   local_as: int | None, planned_as: int | None) -> None:
    if local_as is not None and planned_as is not None and local_as != planned_as:
        report.findings.append(Finding("wrong-asn", device, [], f"{device} runs BGP as AS {local_as}, planned "
                                                                f"AS {planned_as}"))
    for key, s in sorted(planned.items()):
        report.sessions_checked += 1
        where = f"{device}:{s.port} - {s.peer}:{s.peer_port} (cable {s.cable}, neighbour {key})"
        have = observed.get(key)
        if have is None:
            report.findings.append(Finding("session-missing", device, [s.cable], f"no BGP session {where}"))
            continue
        if have.remote_as is not None and s.peer_asn is not None and have.remote_as != s.peer_asn:
            report.findings.append(Finding("wrong-asn", device, [s.cable], (
                f"{where}: neighbour AS {have.remote_as}, planned AS {s.peer_asn} ({s.peer})")))
        if have.state == "Established":
            report.sessions_up += 1
        else:
            report.findings.append(Finding("session-down", device, [s.cable], f"{where} is {have.state}"))
    for key in sorted(set(observed) - set(planned)):
        report.findings.append(Finding("unexpected-peer", device, [], (
            f"{device} has a BGP neighbour {key} (AS {observed[key].remote_as}, {observed[key].state}) "
            "that the plan does not have")))


def judge_routes(report: FabricReport, device: str, want: dict[str, set[str]], have: dict[str, set[str]],
                 cable_of: dict[str, str], owner_of: dict[str, str]) -> None:
    """`have`: BGP prefix -> installed next-hop ports; `cable_of`: local port -> cable label."""
    for prefix in sorted(want):
        ports = want[prefix]
        report.prefixes_checked += 1
        got = have.get(prefix)
        owner = owner_of.get(prefix, "?")
        if not got:
            cables = sorted({cable_of[p] for p in ports if p in cable_of})
            report.findings.append(Finding("prefix-missing", device, cables, (
                f"{device} has no route to {prefix} ({owner}); planned via {len(ports)} next hops")))
        elif not ports <= got:
            lost = sorted(ports - got)
            report.findings.append(Finding("ecmp-narrow", device, sorted({cable_of[p] for p in lost if p in cable_of}),
                                           f"{device} reaches {prefix} ({owner}) over {len(got & ports)} of "
                                           f"{len(ports)} planned next hops; not via {', '.join(lost)}"))
        else:
            report.prefixes_complete += 1
    for prefix in sorted(set(have) - set(want)):
        report.findings.append(Finding("prefix-unexpected", device, [], (
            f"{device} has a BGP route to {prefix} via {', '.join(sorted(have[prefix])) or '-'} that the plan "
            "does not announce to it")))
