"""Will the lab fit in memory? Measured cost per switch and per host namespace against MemAvailable."""

from __future__ import annotations

from pathlib import Path

from railforge.lab.scope import LabTopology

MIB_PER_SWITCH = 90  # zebra, bgpd, bfdd, lldpd: 41 MiB measured in 2 tiers, 89 MiB in the 3-tier rail-plane lab
MIB_PER_SESSION = 0.1  # bgpd and bfdd per planned session on a kept cable
MIB_PER_HOST = 3  # lldpd and the namespace
RESERVE_MIB = 1024  # left to everything else on the machine


def available_mib(meminfo: Path = Path("/proc/meminfo")) -> float:
    for line in meminfo.read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 1024
    return 0.0


def needed_mib(topo: LabTopology) -> float:
    return (len(topo.switches) * MIB_PER_SWITCH + 2 * len(topo.fabric_links()) * MIB_PER_SESSION
            + len(topo.hosts) * MIB_PER_HOST)


def memory_problems(topo: LabTopology, available: float | None = None) -> list[str]:
    """One line naming what the lab needs, what is free and which options shrink it, or nothing."""
    have = (available_mib() if available is None else available) - RESERVE_MIB
    need = needed_mib(topo)
    if need <= have:
        return []
    knobs = "--sus, --hosts-per-su, --spines" + (", --superspines, --parallel" if topo.superspines() else "")
    return [f"this lab needs about {need:.0f} MiB ({len(topo.switches)} switches x {MIB_PER_SWITCH} MiB, "
            f"{2 * len(topo.fabric_links())} BGP sessions, {len(topo.hosts)} hosts) but {max(have, 0):.0f} MiB "
            f"is available (MemAvailable less {RESERVE_MIB} MiB kept free): shrink it with {knobs}"]
