"""Change a running lab without disturbing it: grow by an SU (new frr.conf applied with FRR's own frr-reload.py,
no daemon restart, then the new SU's switches and nodes brought up), or replace one switch (RMA).

Evidence is read from the daemons and the kernel, never assumed: every BGP session's
connectionsEstablished/connectionsDropped counters and up-time before and after, and continuous pings between
existing nodes whose transmitted/received counts come from ping itself.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from railforge.lab import daemons, fabric
from railforge.lab.checks import ping_pairs
from railforge.lab.runner import frr_text
from railforge.lab.scope import LabTopology
from railforge.lab.shell import CommandError, in_ns, ip, ip_batch, run
from railforge.lab.state import LabState
from railforge.plan.model import Device

FRR_RELOAD = Path("/usr/lib/frr/frr-reload.py")
PING_INTERVAL_S = 0.05
_PING_SUMMARY = re.compile(r"(\d+) packets transmitted, (\d+) received")


@dataclass(frozen=True, slots=True)
class Session:
    established: int
    dropped: int
    up_ms: int


def sessions(state: LabState, device: str) -> dict[str, Session]:
    """Every BGP neighbour of a switch with its connection counters (FRR `show bgp neighbors json`)."""
    raw = daemons.vtysh_json(state, device, "show bgp neighbors json")
    return {peer: Session(int(n.get("connectionsEstablished", 0)), int(n.get("connectionsDropped", 0)),
                          int(n.get("bgpTimerUpMsec", 0)) if n.get("bgpState") == "Established" else 0)
            for peer, n in raw.items() if isinstance(n, dict)}


@dataclass
class Snapshot:
    sessions: dict[tuple[str, str], Session]
    read_at: dict[str, float]


def snapshot(state: LabState, switches: list[str]) -> Snapshot:
    """Every session of these switches, with the monotonic time each switch was read."""
    out, at = {}, {}
    for sw in switches:
        at[sw] = time.monotonic()
        out.update({(sw, peer): s for peer, s in sessions(state, sw).items()})
    return Snapshot(out, at)


@dataclass
class SessionReport:
    kept: int = 0
    reset: list[str] = field(default_factory=list)
    new: int = 0
    min_uptime_gain_s: float | None = None


def compare_sessions(before: Snapshot, after: Snapshot, skip: set[tuple[str, str]] = frozenset()) -> SessionReport:
    """A session survived when it is still Established, FRR counted no new connection and no drop, and its
    up-time grew by the time between the two reads of its switch (less FRR's one-second resolution and the read
    itself)."""
    rep = SessionReport()
    gains = []
    for key, a in before.sessions.items():
        if key in skip or a.up_ms == 0:
            continue
        b = after.sessions.get(key)
        between = after.read_at[key[0]] - before.read_at[key[0]]
        gain = (b.up_ms - a.up_ms) / 1000 if b else -1.0
        if b is None or b.up_ms == 0 or (b.established, b.dropped) != (a.established, a.dropped) \
                or gain < between - 2:
            rep.reset.append(f"{key[0]} {key[1]}: {a} -> {b}")
        else:
            rep.kept += 1
            gains.append(gain)
    rep.new = sum(1 for k, s in after.sessions.items() if k not in before.sessions and s.up_ms > 0)
    rep.min_uptime_gain_s = round(min(gains), 2) if gains else None
    return rep


class Pings:
    """One `ping` per (host pair, rail), every PING_INTERVAL_S, until stopped; ping itself counts the losses."""

    def __init__(self, topo: LabTopology, interval: float = PING_INTERVAL_S):
        self.pairs = ping_pairs(topo)
        self.procs = [subprocess.Popen(in_ns(topo.ns(a), "ping", "-n", "-q", "-i", str(interval), "-I", src, dst),
                                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                      for a, src, _, dst, _ in self.pairs]

    def stop(self) -> tuple[int, int, list[str]]:
        """(transmitted, received, pairs that lost packets)."""
        tx = rx = 0
        lossy = []
        for p in self.procs:
            p.send_signal(signal.SIGINT)
        for (a, _, b, _, rail), p in zip(self.pairs, self.procs, strict=True):
            out, _ = p.communicate(timeout=10)
            m = _PING_SUMMARY.search(out or "")
            t, r = (int(m.group(1)), int(m.group(2))) if m else (0, 0)
            tx, rx = tx + t, rx + r
            if r < t or t == 0:
                lossy.append(f"{a} -> {b} rail{rail}: {t - r} of {t} lost")
        return tx, rx, lossy

    def kill(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def frr_reload(state: LabState, device: str, new_conf: Path) -> str:
    """Apply a new frr.conf to a running switch with FRR's frr-reload.py: it diffs the running configuration
    (read over this switch's private vty sockets) against the file and sends only the differences."""
    d = daemons.device_dir(state, device)
    staged = d / "frr.conf.new"
    shutil.copyfile(new_conf, staged)
    shutil.chown(staged, "frr", "frr")
    args = ["python3", str(FRR_RELOAD), "--reload", "--stdout", "--bindir", "/usr/bin", "--confdir", str(d),
            "--rundir", str(d), "--vty_socket", str(d), str(staged)]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=120)
    (d / "frr-reload.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        raise CommandError(f"frr-reload.py on {device} failed ({proc.returncode}): see {d / 'frr-reload.log'}")
    staged.replace(d / "frr.conf")
    return proc.stdout + proc.stderr


def add_devices(state: LabState, old: LabTopology, new: LabTopology, configs: Path) -> tuple[list[Device], int]:
    """Namespaces, cables, addresses and daemons for what `new` has and `old` lacks; existing devices only get
    their new ports cabled and raised. Returns the new devices and the number of new cables."""
    have = {d.name for d in old.devices()}
    old_links = {link.id for link in old.links}
    added = [d for d in new.devices() if d.name not in have]
    links = [link for link in new.links if link.id not in old_links]
    for dev in added:
        ns = new.ns(dev.name)
        ip(None, "netns", "add", ns)
        state.add_namespace(ns)
        ip(ns, "link", "set", "lo", "up")
        run(in_ns(ns, "sysctl", "-q", "-w", *[f"{k}={v}" for k, v in (
            fabric.SWITCH_SYSCTL if dev in new.switches else fabric.HOST_SYSCTL).items()]))
    fabric.cable(new, links)
    sub = LabTopology(new.cluster, new.prefix, [d for d in new.switches if d.name not in have],
                      [d for d in new.hosts if d.name not in have], new.links, new.mtu_switch, new.mtu_host)
    fabric.configure(sub)
    for dev in new.devices():
        if dev.name in have:
            ports = {e.port for link in links for e in (link.a, link.b) if e.device == dev.name}
            if ports:
                fabric.configure_ports(new, dev, ports)
                announce(state, dev.name, new.ports_of(dev.name))
    new_switches = [d.name for d in sub.switches]
    for sw in sub.switches:
        daemons.start_frr(state, new.ns(sw.name), sw.name, frr_text(configs, sw))
    daemons.boot_frr(state, new_switches)
    for dev in added:
        daemons.start_lldpd(state, new.ns(dev.name), dev.name, new.ports_of(dev.name))
    return added, len(links)


def announce(state: LabState, device: str, ports: list[str]) -> None:
    """Widen a running lldpd's interface pattern to the device's new ports (lldpd keeps running)."""
    sock = daemons.device_dir(state, device) / "lldpd.socket"
    run(["lldpcli", "-u", str(sock), "configure", "system", "interface", "pattern", ",".join(sorted(ports))])


def drain(state: LabState, device: str, asn: int) -> None:
    """RFC 8326 graceful shutdown, as an operator does before pulling a box: the switch re-advertises every
    route with the GRACEFUL_SHUTDOWN community, its peers (FRR honours it on receipt) drop it to local-pref 0
    and take it out of their ECMP sets, while it keeps forwarding what is still in flight."""
    daemons.vtysh(state, device, "configure terminal", f"router bgp {asn}", "bgp graceful-shutdown")


def replace_switch(state: LabState, topo: LabTopology, name: str, configs: Path) -> None:
    """An RMA: the switch's daemons stop and its namespace goes (every cable to it drops, as when a box is
    pulled); a fresh namespace is cabled as planned, addressed, and boots the same generated frr.conf."""
    dev = next(d for d in topo.switches if d.name == name)
    ns = topo.ns(name)
    mine = [p.pid for p in state.processes if p.ns == ns]
    daemons.stop_pids(mine)
    state.processes = [p for p in state.processes if p.ns != ns]
    links = [link for link in topo.links if name in (link.a.device, link.b.device)]
    # The kernel frees a deleted namespace's devices later, in a work queue: the far ends of its veths could
    # still exist when the new cables are made ("File exists"). Deleting each veth first is synchronous.
    ip_batch(ns, [f"link del {e.port}" for link in links for e in (link.a, link.b) if e.device == name])
    ip(None, "netns", "delete", ns)
    d = daemons.device_dir(state, name)
    shutil.rmtree(d, ignore_errors=True)
    ip(None, "netns", "add", ns)
    ip(ns, "link", "set", "lo", "up")
    run(in_ns(ns, "sysctl", "-q", "-w", *[f"{k}={v}" for k, v in fabric.SWITCH_SYSCTL.items()]))
    fabric.cable(topo, links)
    one = LabTopology(topo.cluster, topo.prefix, [dev], [], topo.links, topo.mtu_switch, topo.mtu_host)
    fabric.configure(one)
    for link in links:
        far = link.b if link.a.device == name else link.a
        far_dev = next(x for x in topo.devices() if x.name == far.device)
        fabric.configure_ports(topo, far_dev, {far.port})
    daemons.start_frr(state, ns, name, frr_text(configs, dev))
    daemons.boot_frr(state, [name])
    daemons.start_lldpd(state, ns, name, topo.ports_of(name))
    state.save()


def wait_established(state: LabState, switches: list[str], want: dict[str, int], timeout: float) -> float | None:
    """Seconds until every switch has at least `want[switch]` Established sessions, or None."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if all(sum(1 for s in sessions(state, sw).values() if s.up_ms > 0) >= want[sw] for sw in switches):
            return time.monotonic() - t0
        time.sleep(0.2)
    return None
