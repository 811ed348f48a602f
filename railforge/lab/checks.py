"""What `railforge lab check` asserts, read from the kernel and the daemons of a running lab."""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass
from ipaddress import ip_interface
from pathlib import Path

from railforge.lab import daemons
from railforge.lab.fib import NetnsFib
from railforge.lab.scope import LabTopology
from railforge.lab.shell import in_ns
from railforge.lab.state import LabState
from railforge.verify.cabling import CablingReport, compare
from railforge.verify.fabric import Fib, expected_routes, peer_key
from railforge.verify.lldp import parse_lldpcli_json
from railforge.verify.names import PlanNames
from railforge.verify.observed import Observation

RTPROT_BGP = 186
PING_PARALLEL = 64


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


def bgp_sessions(state: LabState, topo: LabTopology, device: str) -> dict[str, str]:
    """Neighbour -> state, with the neighbour's AS when Established (`Established AS4200000001`)."""
    raw = daemons.vtysh_json(state, device, "show bgp summary json")
    out: dict[str, str] = {}
    for af in raw.values():
        if isinstance(af, dict):
            for peer, info in af.get("peers", {}).items():
                st = info.get("state", "?")
                out[peer] = f"{st} AS{info.get('remoteAs')}" if st == "Established" else st
    return out


def bgp_rows(state: LabState, topo: LabTopology, plan_ports: dict[tuple[str, str], str | None]) -> list[Row]:
    rows = []
    for sw in topo.switches:
        asn = {d.name: d.asn for d in topo.switches}
        want = {peer_key(plan_ports, link, sw.name): asn[link.b.device if link.a.device == sw.name else link.a.device]
                for link in topo.fabric_links() if sw.name in (link.a.device, link.b.device)}
        have = bgp_sessions(state, topo, sw.name)
        up = {p for p, remote in want.items() if have.get(p) == f"Established AS{remote}"}
        down = sorted(set(want) - up)
        missing = ", ".join(f"{p}={have.get(p, 'absent')}" for p in down[:4])
        rows.append(Row("bgp", sw.name, f"{len(want)} Established with the planned AS",
                        f"{len(up)} Established" + (f"; not: {missing}" if down else ""), not down))
    return rows


def expected_fib(topo: LabTopology, dead: set[str]) -> Fib:
    """Per switch, per other leaf's host subnet: the local ports whose path still reaches that leaf (none when
    no loop-free path is left, e.g. a super-spine whose only spine into a rail failed). `dead` holds failed
    cable ids."""
    reach = expected_routes(topo.switches, topo.fabric_links(), dead)
    out: Fib = {sw.name: {} for sw in topo.switches}
    for leaf in topo.leaves():
        for hs in leaf.host_subnets:
            prefix = str(ip_interface(hs.prefix).network)
            for sw in topo.switches:
                if sw.name != leaf.name:
                    out[sw.name][prefix] = reach[sw.name].get(prefix, set())
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


def ping_pairs(topo: LabTopology) -> list[tuple[str, str, str, str, str]]:
    """(host a, source address, host b, target address, rails) for every rail, hosts in different SUs;
    in 3 tiers also from each rail to the next one (across rail planes or pods)."""
    pairs = []
    for i, a in enumerate(topo.hosts):
        for b in topo.hosts[i + 1:]:
            if a.su == b.su:
                continue
            rails_b = {r.rail: r for r in b.rails if r.ifname in topo.ports_of(b.name)}
            for ra in a.rails:
                if ra.ifname not in topo.ports_of(a.name):
                    continue
                targets = [ra.rail] + ([(ra.rail + 1) % len(a.rails)] if topo.tiers == 3 else [])
                for k in dict.fromkeys(targets):
                    if k in rails_b:
                        label = f"rail{ra.rail}" if k == ra.rail else f"rail{ra.rail}->rail{k}"
                        pairs.append((a.name, ra.address.split("/")[0], b.name, rails_b[k].address.split("/")[0],
                                      label))
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
            rows.append(Row("ping", f"{a} -> {b} {rail}", f"{src} -> {dst}", "reply" if ok else "no reply", ok))
    return rows


def _far_ends(topo: LabTopology) -> dict[tuple[str, str], str]:
    out = {}
    for link in topo.fabric_links():
        out[(link.a.device, link.a.port)] = link.b.device
        out[(link.b.device, link.b.port)] = link.a.device
    return out


def fib_paths(fibs: FabricFib, topo: LabTopology, src: str, dst: str, prefix: str) -> list[tuple[str, ...]]:
    """Every switch path the kernel FIBs give from leaf `src` to leaf `dst`'s subnet, hop by hop over all ECMP
    members; a path that ends anywhere but `dst` (no route, a loop) is returned as it stands."""
    far = _far_ends(topo)
    tables = {sw.name: fibs.bgp_routes(sw.name) for sw in topo.switches}
    paths: list[tuple[str, ...]] = []

    def walk(path: tuple[str, ...]) -> None:
        here = path[-1]
        nexts = sorted({far[(here, port)] for port in tables[here].get(prefix, set()) if (here, port) in far})
        if here == dst or not nexts or len(path) > 8:
            paths.append(path)
            return
        for n in nexts:
            if n in path:
                paths.append((*path, n))
            else:
                walk((*path, n))
    walk((src,))
    return paths


def path_rows(fibs: FabricFib, topo: LabTopology) -> list[Row]:
    """3 tiers, from each leaf of the first SU to the same and the next rail's leaves of other SUs: a leaf of
    the same spine group (rail plane or clos pod) is reached inside the group; a leaf of another group only
    through a super-spine. Judged by walking the kernel FIBs hop by hop."""
    if topo.tiers != 3:
        return []
    role = {sw.name: sw for sw in topo.switches}
    leaves = topo.leaves()
    first_su = min(lf.su for lf in leaves)
    rows = []
    for a in (lf for lf in leaves if lf.su == first_su):
        for b in leaves:
            if b.su == a.su or b.rail not in (a.rail, (a.rail + 1) % len({x.rail for x in leaves})):
                continue
            prefix = str(ip_interface(b.host_subnets[0].prefix).network)
            paths = fib_paths(fibs, topo, a.name, b.name, prefix)
            complete = bool(paths) and all(p[-1] == b.name for p in paths)
            middle = sorted({d for p in paths for d in p[1:-1]})
            supers = [d for d in middle if role[d].role == "superspine"]
            if b.group == a.group:
                ok = complete and all(role[d].role == "spine" and role[d].group == a.group for d in middle)
                rows.append(Row("plane", f"{a.name} -> {b.name}", f"inside {a.group}: its spines, no super-spine",
                                f"{len(paths)} paths via {', '.join(middle) or '-'}" + ("" if complete else "; broken"),
                                ok))
            else:
                ok = complete and all(any(role[d].role == "superspine" for d in p) for p in paths)
                rows.append(Row("super-spine", f"{a.name} -> {b.name}", "every path up through a super-spine",
                                f"{len(paths)} paths via {len(supers)} super-spines ({', '.join(supers[:4])})"
                                + ("" if complete else "; broken"), ok))
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
