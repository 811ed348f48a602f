"""Which part of the plan the lab emulates: a few SUs, some spines per group, some super-spines per
plane, a few hosts per SU; every tier and the wiring pattern of the kept devices stay as planned."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from railforge.plan.model import Device, Link, Plan

FABRIC_TIERS = ("leaf-spine", "spine-superspine")
LAB_TIERS = ("node-leaf", *FABRIC_TIERS)
SWITCH_ROLES = ("leaf", "spine", "superspine")


class ScopeError(ValueError):
    pass


@dataclass(slots=True)
class LabTopology:
    cluster: str
    prefix: str
    switches: list[Device]
    hosts: list[Device]
    links: list[Link]
    mtu_switch: int
    mtu_host: int
    tiers: int = 2

    def ns(self, device: str) -> str:
        return f"{self.prefix}{device}"

    def devices(self) -> list[Device]:
        return self.switches + self.hosts

    def namespaces(self) -> list[str]:
        return [self.ns(d.name) for d in self.devices()]

    def leaves(self) -> list[Device]:
        return [d for d in self.switches if d.role == "leaf"]

    def spines(self) -> list[Device]:
        return [d for d in self.switches if d.role == "spine"]

    def superspines(self) -> list[Device]:
        return [d for d in self.switches if d.role == "superspine"]

    def ports_of(self, device: str) -> list[str]:
        out = [link.a.port for link in self.links if link.a.device == device]
        out += [link.b.port for link in self.links if link.b.device == device]
        return out

    def fabric_links(self) -> list[Link]:
        return [link for link in self.links if link.tier in FABRIC_TIERS]

    def uplinks(self, leaf: str) -> list[Link]:
        return [link for link in self.links if link.tier == "leaf-spine" and leaf in (link.a.device, link.b.device)]

    def link(self, cable: str) -> Link:
        for link in self.links:
            if link.id == cable:
                return link
        raise ScopeError(f"cable {cable} is not part of the lab")


def _count(spec: str, option: str, most: int) -> int:
    if spec == "all":
        return most
    if not spec.isdigit() or not 1 <= int(spec) <= most:
        raise ScopeError(f"{option} must be 'all' or 1..{most}, not {spec!r}")
    return int(spec)


def parse_sus(spec: str | int, built: int) -> list[int]:
    """`N` (the first N SUs) or a comma list (`1,9`: SUs of two clos pods)."""
    text = str(spec)
    if text.isdigit():
        if not 1 <= int(text) <= built:
            raise ScopeError(f"--sus must be 1..{built} or a list of SUs, not {text}")
        return list(range(1, int(text) + 1))
    try:
        sus = sorted({int(x) for x in text.split(",")})
    except ValueError:
        raise ScopeError(f"--sus must be a count or a comma list of SUs (1,9), not {text!r}") from None
    bad = [s for s in sus if not 1 <= s <= built]
    if bad or not sus:
        raise ScopeError(f"--sus {text}: SUs are numbered 1..{built}")
    return sus


def _group_spines(spines: list[Device], spec: str) -> list[Device]:
    """The first N spines of every spine group (2-tier: of the one group)."""
    groups: dict[str, list[Device]] = defaultdict(list)
    for s in spines:
        groups[s.group or ""].append(s)
    n = _count(spec, "--spines", min(len(g) for g in groups.values()))
    return [s for g in groups.values() for s in g[:n]]


def _plane_superspines(superspines: list[Device], spines: set[str], links: list[Link], spec: str) -> list[Device]:
    """The first N super-spines of every plane that a kept spine joins."""
    joined = {lk.b.device for lk in links if lk.tier == "spine-superspine" and lk.a.device in spines}
    planes: dict[str, list[Device]] = defaultdict(list)
    for s in superspines:
        if s.name in joined:
            planes[s.plane or ""].append(s)
    if not planes:
        return []
    n = _count(spec, "--superspines", min(len(p) for p in planes.values()))
    return [s for p in planes.values() for s in p[:n]]


def _parallel(links: list[Link], spec: str) -> list[Link]:
    """At most N of the parallel cables between two switches (first by cable label)."""
    if spec == "all":
        return links
    bundles: dict[tuple[str, str], list[Link]] = defaultdict(list)
    for lk in links:
        bundles[(lk.a.device, lk.b.device)].append(lk)
    n = _count(spec, "--parallel", max((len(b) for b in bundles.values()), default=1))
    keep = {lk.id for b in bundles.values() for lk in b[:n]}
    return [lk for lk in links if lk.id in keep or lk.tier not in FABRIC_TIERS]


def lab_topology(plan: Plan, sus: str | int = 2, spines: str = "all", hosts_per_su: int = 2,
                 prefix: str = "rf-", superspines: str = "all", parallel: str = "all") -> LabTopology:
    """The compute fabric of the chosen SUs with `hosts_per_su` GPU nodes each, the first `spines` spines of
    every spine group, the first `superspines` super-spines of every plane those spines join, and at most
    `parallel` cables between two switches."""
    c = plan.cluster
    if c.fabric != "roce":
        raise ScopeError(f"the lab emulates Ethernet (RoCE) fabrics; {c.name} is {c.fabric}")
    if hosts_per_su < 1:
        raise ScopeError(f"--hosts-per-su must be at least 1, not {hosts_per_su}")
    chosen = set(parse_sus(sus, c.sus))
    compute = [d for d in plan.devices if d.fabric == "compute"]
    leaves = [d for d in compute if d.role == "leaf" and d.su in chosen]
    groups = {lf.group for lf in leaves} if c.tiers == 3 else None
    spine_pool = [d for d in compute if d.role == "spine" and (groups is None or d.group in groups)]
    kept_spines = _group_spines(spine_pool, spines) if spine_pool else []
    compute_links = [lk for lk in plan.links if lk.fabric == "compute" and lk.tier in LAB_TIERS]
    kept_super = _plane_superspines([d for d in compute if d.role == "superspine"], {s.name for s in kept_spines},
                                    compute_links, superspines)
    hosts: list[Device] = []
    for su in sorted(chosen):
        hosts += [d for d in compute if d.role == "node" and d.su == su][:hosts_per_su]
    keep = {d.name for d in leaves + kept_spines + kept_super + hosts}
    links = _parallel([lk for lk in compute_links if lk.a.device in keep and lk.b.device in keep], parallel)
    return LabTopology(cluster=c.name, prefix=prefix, switches=leaves + kept_spines + kept_super, hosts=hosts,
                       links=links, mtu_switch=plan.qos.switch_mtu, mtu_host=plan.qos.host_mtu, tiers=c.tiers)
