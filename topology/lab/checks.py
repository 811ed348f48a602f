"""What `railforge lab check` asserts, read from the kernel and the daemons of a running lab."""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass
from ipaddress import ip_interface
from pathlib import Path

from topology.lab import daemons
from topology.lab.fib import NetnsFib
from topology.lab.scope import LabTopology
from topology.lab.shell import in_ns
from topology.lab.state import LabState
from topology.plan import Link, Plan
from topology.verify.cabling import CablingReport, compare
from topology.verify.lldp import parse_lldpcli_json
from topology.verify.names import PlanNames
from topology.verify.observed import Observation

RTPROT_BGP = 186
PING_PARALLEL = 64
Fib = dict[str, dict[str, set[str]]]  # device -> prefix -> local ports of the next hops


@dataclass(slots=True)
class Row:
    check: str
    subject: str
    expected: str
    observed: str
    ok: bool


def config_rows(state: LabState, topo: LabTopology) -> list[Row]:
    """Every line of every generated frr.conf was accepted by some daemon when `vtysh -b` booted it."""
    rows = []
    for sw in topo.switches:
        boot = daemons.device_dir(state, sw.name) / "boot.log"
        bad = daemons.rejected_lines(boot.read_text()) if boot.exists() else ["not booted"]
        rows.append(Row("frr.conf", sw.name, "every line accepted", "; ".join(bad[:4]) or "accepted", not bad))
    return rows


def peer_key(plan_ports: dict[tuple[str, str], str | None], link: Link, me: str) -> str:
    """How FRR names the BGP neighbour on this cable: the far end's address, or our interface if unnumbered."""
    mine, far = (link.a, link.b) if link.a.device == me else (link.b, link.a)
    addr = plan_ports.get((far.device, far.port))
    return addr.split("/")[0] if addr else mine.port


def bgp_sessions(state: LabState, topo: LabTopology, device: str) -> dict[str, str]:
    raw = daemons.vtysh_json(state, device, "show bgp summary json")
    out: dict[str, str] = {}
    for af in raw.values():
        if isinstance(af, dict):
            for peer, info in af.get("peers", {}).items():
                out[peer] = info.get("state", "?")
    return out


def bgp_rows(state: LabState, topo: LabTopology, plan_ports: dict[tuple[str, str], str | None]) -> list[Row]:
    rows = []
    for sw in topo.switches:
        want = {peer_key(plan_ports, link, sw.name) for link in topo.links
                if link.tier == "leaf-spine" and sw.name in (link.a.device, link.b.device)}
        have = bgp_sessions(state, topo, sw.name)
        up = {p for p in want if have.get(p) == "Established"}
        down = sorted(want - up)
        missing = ", ".join(f"{p}={have.get(p, 'absent')}" for p in down[:4])
        rows.append(Row("bgp", sw.name, f"{len(want)} Established",
                        f"{len(up)} Established" + (f"; not: {missing}" if down else ""), not down))
    return rows


def port_addresses(plan: Plan) -> dict[tuple[str, str], str | None]:
    return {(d.name, p.name): p.address for d in plan.devices for p in d.ports}


def expected_fib(topo: LabTopology, dead: set[str]) -> Fib:
    """Per switch, per other leaf's host subnet: the local ports whose path still reaches that leaf.
    `dead` holds failed cable ids."""
    alive = [link for link in topo.links if link.tier == "leaf-spine" and link.id not in dead]
    ends = [(link.a.device, link.a.port, link.b.device) for link in alive]
    ends += [(link.b.device, link.b.port, link.a.device) for link in alive]
    out: Fib = {}
    leaves = topo.leaves()
    spines = {s.name for s in topo.spines()}
    for sw in topo.switches:
        table: dict[str, set[str]] = {}
        for leaf in leaves:
            if leaf.name == sw.name:
                continue
            if sw.name in spines:
                ports = {p for d, p, far in ends if d == sw.name and far == leaf.name}
            else:
                reach = {d for d, _, far in ends if d in spines and far == leaf.name}
                ports = {p for d, p, far in ends if d == sw.name and far in reach}
            for hs in leaf.host_subnets:
                table[str(ip_interface(hs.prefix).network)] = ports
        out[sw.name] = table
    return out


class FabricFib:
    """The kernel FIBs of every switch of a lab, read over one netlink socket per namespace."""

    def __init__(self, topo: LabTopology):
        self.readers = {sw.name: NetnsFib(topo.ns(sw.name)) for sw in topo.switches}

    def bgp_routes(self, device: str) -> dict[str, set[str]]:
        return self.readers[device].routes(RTPROT_BGP)

    def close(self) -> None:
        for r in self.readers.values():
            r.close()

    def __enter__(self) -> FabricFib:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def fib_misses(fibs: FabricFib, want: Fib) -> list[tuple[str, str, set[str], set[str]]]:
    misses = []
    for device, table in want.items():
        have = fibs.bgp_routes(device)
        for prefix, ports in table.items():
            if have.get(prefix, set()) != ports:
                misses.append((device, prefix, ports, have.get(prefix, set())))
    return misses


def wait_fib(fibs: FabricFib, want: Fib, timeout: float, interval: float = 0.02) -> float | None:
    """Seconds until every switch's kernel FIB equals `want`, or None if it did not within `timeout`.
    A switch that got there is not read again until all have (polling must not starve the daemons)."""
    t0 = time.monotonic()
    pending = dict(want)
    while True:
        pending = {d: t for d, t in pending.items() if fib_misses(fibs, {d: t})}
        if not pending:
            if not fib_misses(fibs, want):
                return time.monotonic() - t0
            pending = dict(want)
        if time.monotonic() - t0 > timeout:
            return None
        time.sleep(interval)


def fib_rows(fibs: FabricFib, want: Fib) -> list[Row]:
    misses = fib_misses(fibs, want)
    rows = []
    for device, table in want.items():
        mine = [m for m in misses if m[0] == device]
        width = {len(v) for v in table.values()}
        detail = "; ".join(f"{p}: {len(h)} via {','.join(sorted(h)) or '-'}" for _, p, _, h in mine[:3])
        rows.append(Row("ecmp", device, f"{len(table)} subnets x {'/'.join(map(str, sorted(width)))} next-hops",
                        f"{len(table) - len(mine)} complete" + (f"; {detail}" if detail else ""), not mine))
    return rows


def ping_pairs(topo: LabTopology) -> list[tuple[str, str, str, str, int]]:
    """(host a, source address, host b, target address, rail) for every rail, hosts in different SUs."""
    pairs = []
    for i, a in enumerate(topo.hosts):
        for b in topo.hosts[i + 1:]:
            if a.su == b.su:
                continue
            rails_b = {r.rail: r for r in b.rails}
            for ra in a.rails:
                rb = rails_b.get(ra.rail)
                if rb and ra.ifname in topo.ports_of(a.name) and rb.ifname in topo.ports_of(b.name):
                    pairs.append((a.name, ra.address.split("/")[0], b.name, rb.address.split("/")[0], ra.rail))
    return pairs


def ping_rows(topo: LabTopology, parallel: int = PING_PARALLEL) -> list[Row]:
    rows = []
    pairs = ping_pairs(topo)
    for start in range(0, len(pairs), parallel):
        chunk = pairs[start:start + parallel]
        procs = [subprocess.Popen(in_ns(topo.ns(a), "ping", "-n", "-q", "-c", "3", "-i", "0.2", "-W", "1", "-I", src,
                                        dst), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                 for a, src, _, dst, _ in chunk]
        for (a, src, b, dst, rail), proc in zip(chunk, procs, strict=True):
            ok = proc.wait(timeout=30) == 0
            rows.append(Row("ping", f"{a} -> {b} rail{rail}", f"{src} -> {dst}", "reply" if ok else "no reply", ok))
    return rows


def lldp_observation(state: LabState, topo: LabTopology, names: PlanNames, save: Path | None = None) -> Observation:
    obs = Observation()
    for dev in topo.devices():
        text = daemons.lldp_neighbors(state, dev.name)
        if save is not None:
            (save / f"{dev.name}.json").write_text(text)
        obs.merge(parse_lldpcli_json(text, dev.name, names, dev.name))
    return obs


def lldp_report(state: LabState, topo: LabTopology, names: PlanNames, timeout: float = 15) -> CablingReport:
    """Compare LLDP with the lab's cables (veths report 10G: speeds are not compared); retries while
    lldpd is still learning its neighbours."""
    end = time.monotonic() + timeout
    while True:
        report = compare(topo.links, lldp_observation(state, topo, names), check_speed=False)
        if report.ok or time.monotonic() > end:
            return report
        time.sleep(0.5)


def lldp_rows(report: CablingReport, topo: LabTopology) -> list[Row]:
    rows = [Row("lldp", "all cables", f"{len(topo.links)} neighbours as planned", f"{report.matched} match",
                report.matched == len(topo.links))]
    rows += [Row("lldp", ", ".join(f.cables) or "-", f.kind, f.message, False) for f in report.findings]
    return rows
