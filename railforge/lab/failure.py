"""Take a spine or a cable down and time how long every switch's kernel FIB needs to route around it.

`silent` failures keep carrier up and drop every packet (a hung switch, a bad optic): only BFD or the
BGP hold timer can notice. They put a blackhole qdisc on the ports (for a spine: all of its ports; for a
cable: both ends), so nothing the failed element sends arrives. `down` failures take the interfaces
down, so the far end loses carrier at once.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from railforge.lab import checks, daemons
from railforge.lab.scope import FABRIC_TIERS, LabTopology, ScopeError
from railforge.lab.shell import batch
from railforge.lab.state import LabState
from railforge.plan.model import Link

HOW = ("silent", "down")


@dataclass(slots=True)
class Target:
    kind: str  # spine (a spine or super-spine) | link
    name: str
    links: list[Link]

    @property
    def ids(self) -> set[str]:
        return {link.id for link in self.links}


@dataclass(slots=True)
class Measurement:
    target: str
    how: str
    bfd: bool
    converge_s: float | None
    restore_s: float | None


def parse_target(topo: LabTopology, spec: str) -> Target:
    kind, _, value = spec.partition("=")
    if kind in ("spine", "superspine"):
        upper = topo.spines() + topo.superspines()
        if value not in {s.name for s in upper}:
            names = ", ".join(s.name for s in upper)
            raise ScopeError(f"--fail {kind}={value}: not a spine or super-spine of this lab ({names})")
        return Target("spine", value, [lk for lk in topo.links if value in (lk.a.device, lk.b.device)])
    if kind == "link":
        device, _, port = value.partition(":")
        for link in topo.links:
            ends = ((link.a.device, link.a.port), (link.b.device, link.b.port))
            if link.tier in FABRIC_TIERS and (device, port) in ends:
                return Target("link", f"{link.id} {device}:{port}", [link])
        raise ScopeError(f"--fail link={value}: no fabric cable of this lab ends at {device}:{port}")
    raise ScopeError(f"--fail must be spine=NAME or link=DEVICE:PORT, not {spec!r}")


Step = tuple[str, str, list[str], list[str]]  # namespace, tool (ip|tc), fail lines, repair lines


def _silent(ns: str, ports: list[str]) -> Step:
    """A blackhole qdisc on each port: everything the device sends there is dropped, carrier stays up."""
    return (ns, "tc", [f"qdisc add dev {p} root blackhole" for p in ports], [f"qdisc del dev {p} root" for p in ports])


def _down(ns: str, ports: list[str]) -> Step:
    return (ns, "ip", [f"link set {p} down" for p in ports], [f"link set {p} up" for p in ports])


def inject(topo: LabTopology, target: Target, how: str) -> Callable[[], None]:
    """Fail the target now; returns the function that repairs it."""
    make = _silent if how == "silent" else _down
    if target.kind == "spine":
        ports = [e.port for lk in target.links for e in (lk.a, lk.b) if e.device == target.name]
        steps = [make(topo.ns(target.name), ports)]
    else:
        link = target.links[0]
        ends = (link.a, link.b) if how == "silent" else (link.a,)
        steps = [make(topo.ns(e.device), [e.port]) for e in ends]
    for ns, tool, on, _ in steps:
        batch(tool, ns, on)

    def repair() -> None:
        for ns, tool, _, off in steps:
            batch(tool, ns, off)
    return repair


BFD_LINE = re.compile(r"^ neighbor \S+ bfd( .*)?$")


def bfd_lines(state: LabState, device: str) -> tuple[str | None, list[str]]:
    """The `router bgp N` line and its `neighbor X bfd ...` lines, from bgpd's running configuration."""
    running = daemons.vtysh(state, device, "show running-config", daemon="bgpd").splitlines()
    router = next((x for x in running if x.startswith("router bgp ")), None)
    return router, [x.strip() for x in running if BFD_LINE.match(x)]


def set_bfd(state: LabState, topo: LabTopology, saved: dict[str, tuple[str | None, list[str]]], enabled: bool) -> None:
    for sw in topo.switches:
        router, lines = saved[sw.name]
        if router and lines:
            cmds = lines if enabled else [f"no {x}" for x in lines if " profile " not in x]
            daemons.vtysh(state, sw.name, "configure terminal", router, *cmds, daemon="bgpd")


def measure(state: LabState, topo: LabTopology, fibs: checks.FabricFib, target: Target, how: str, bfd: bool,
            timeout: float) -> Measurement:
    """Fail, time the kernel FIBs until they route around the failure, repair, time the return."""
    full = checks.expected_fib(topo, set())
    reduced = checks.expected_fib(topo, target.ids)
    if target.kind == "spine":
        del reduced[target.name]  # the failed spine itself is not judged
    saved = {sw.name: bfd_lines(state, sw.name) for sw in topo.switches}
    if not bfd:
        set_bfd(state, topo, saved, enabled=False)
    try:
        if checks.wait_fib(fibs, full, timeout=60) is None:
            raise RuntimeError("the fabric is not converged before the failure")
        repair = inject(topo, target, how)
        try:
            t0 = time.monotonic()
            converge = checks.wait_fib(fibs, reduced, timeout=timeout)
            if converge is not None:
                converge = time.monotonic() - t0
        finally:
            repair()
        restore = checks.wait_fib(fibs, full, timeout=max(timeout, 60))
    finally:
        if not bfd:
            set_bfd(state, topo, saved, enabled=True)
    return Measurement(target.name, how, bfd, converge, restore)
