"""Checks on the finished plan, from its links alone: radix, oversubscription per tier, uniform wiring.

The builder sizes fabrics so these hold; checking the result independently catches a sizing bug
before any artifact is written."""

from __future__ import annotations

from collections import Counter, defaultdict
from fractions import Fraction
from operator import attrgetter

from railforge.plan.model import Plan

UPLINK_TIERS = {"leaf": "leaf-spine", "spine": "spine-superspine"}


def check_plan(plan: Plan, ratios: dict[str, Fraction], capacity: dict[str, int]) -> list[str]:
    """Problems found, as sentences; `ratios` is the declared down:up per compute role, `capacity` the
    ports each switch model offers at the compute speed."""
    problems: list[str] = []
    devices = plan.device_index()
    ends_a = [link.a.device for link in plan.links]
    ends_b = [link.b.device for link in plan.links]
    used: Counter[str] = Counter(ends_a)
    used.update(ends_b)
    compute = [k for k, link in enumerate(plan.links) if link.fabric == "compute"]
    compute_used: Counter[str] = Counter(ends_a[k] for k in compute)
    compute_used.update(ends_b[k] for k in compute)
    down_bw: Counter[str] = Counter()
    up_bw: Counter[str] = Counter()
    pairs: dict[str, Counter[str]] = defaultdict(Counter)
    for k in compute:
        link = plan.links[k]
        up_bw[ends_a[k]] += link.speed_mbps
        down_bw[ends_b[k]] += link.speed_mbps
        if link.tier in ("leaf-spine", "spine-superspine"):
            pairs[ends_a[k]][ends_b[k]] += 1
    for dev in plan.devices:
        if dev.role not in ("node", "ufm", "mgmt"):
            linked = sum(map(bool, map(attrgetter("link"), dev.ports)))
            if linked != used[dev.name] or linked > len(dev.ports):
                problems.append(f"{dev.name}: {used[dev.name]} cables on {linked} linked ports")
        if dev.fabric != "compute" or dev.role not in ("leaf", "spine", "superspine"):
            continue
        if dev.role in capacity and compute_used[dev.name] > capacity[dev.role]:
            problems.append(f"{dev.name}: radix exceeded, {compute_used[dev.name]} ports used of {capacity[dev.role]}")
        top = dev.role == "superspine" or (dev.role == "spine" and plan.cluster.tiers == 2)
        if top:
            continue
        if up_bw[dev.name] == 0:
            problems.append(f"{dev.name}: no uplinks")
            continue
        ratio = ratios.get(dev.role, Fraction(1))
        design_down = _design_down(plan, dev)
        actual = Fraction(design_down, up_bw[dev.name])
        if actual != ratio:
            problems.append(f"{dev.name}: down:up bandwidth is {actual}, declared {ratio}")
        counts = set(pairs[dev.name].values())
        if len(counts) > 1:
            problems.append(f"{dev.name}: uneven wiring to the tier above ({sorted(counts)} links per switch)")
    groups: dict[tuple[str, str | None], set[str]] = defaultdict(set)
    for leaf, uppers in pairs.items():
        if devices[leaf].role == "leaf":
            groups[("leaf", devices[leaf].group)].add(frozenset(uppers))
    for (_, group), sets in groups.items():
        if len(sets) > 1:
            problems.append(f"spine group {group}: its leaves do not all meet the same spines")
    return problems


def _design_down(plan: Plan, dev) -> int:
    """Downlink bandwidth the switch is designed for: every down port, used now or kept for growth."""
    if dev.role == "leaf":
        return plan.cluster.nodes_per_su * next(p.speed_mbps for p in dev.ports)
    summary = next(s for s in plan.cluster.tier_summaries if s.fabric == "compute" and s.role == dev.role)
    return summary.downlink_gbps * 1000
