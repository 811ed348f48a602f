"""The compute fabric as the burn-in sees it: every GPU node's NICs (rail, leaf, cable) and every switch's
uplinks, read from the plan only.

Why not the lab's scope or the verify views: the burn-in needs, per NIC, its cable and leaf, and per switch, the
cables towards the next tier and the group (pod or rail plane) it serves, for clusters of 131K GPUs; a few dicts
built in one pass over devices and links are all it takes.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from railforge.plan.model import Device, Link, Plan

UPPER_TIERS = ("leaf-spine", "spine-superspine")


@dataclass(frozen=True, slots=True)
class Nic:
    node: str
    rail: int
    hca: str
    ifname: str
    address: str
    leaf: str
    cable: str
    su: int
    speed_mbps: int

    @property
    def key(self) -> str:
        return f"{self.node}:{self.hca}"


@dataclass(slots=True)
class Fabric:
    """NICs per rail (ordered by SU, then node), uplinks per switch, and which group each switch serves."""

    cluster: str
    fabric: str
    mode: str
    tiers: int
    nics: dict[int, list[Nic]]
    up: dict[str, list[Link]]
    down_count: dict[str, int]
    group: dict[str, str]
    spine_of_leaf: dict[str, set[str]]
    uncovered: dict[str, str] = field(default_factory=dict)
    links: dict[str, Link] = field(default_factory=dict)

    def all_nics(self) -> list[Nic]:
        return [n for rail in sorted(self.nics) for n in self.nics[rail]]

    def upper_links(self) -> list[Link]:
        return [lk for lk in self.links.values() if lk.tier in UPPER_TIERS]


def _node_nics(dev: Device, link_of: dict[str, Link]) -> list[Nic]:
    out = []
    for r in dev.rails:
        lk = link_of.get(r.cable)
        out.append(Nic(dev.name, r.rail, r.hca, r.ifname, r.address.split("/")[0], r.leaf, r.cable,
                       dev.su or 0, lk.speed_mbps if lk else r.speed_mbps))
    return out


def read_fabric(plan: Plan) -> Fabric:
    """The compute fabric of `plan`. Hosts that are not GPU nodes (a UFM appliance) carry no rail interfaces:
    their cables are listed in `uncovered` with the reason, never silently dropped."""
    compute = [lk for lk in plan.links if lk.fabric == "compute"]
    link_of = {lk.id: lk for lk in compute}
    devices = {d.name: d for d in plan.devices if d.fabric == "compute"}
    nics: dict[int, list[Nic]] = defaultdict(list)
    nodes = sorted((d for d in devices.values() if d.role == "node"), key=lambda d: (d.su or 0, d.slot or 0, d.name))
    for dev in nodes:
        for nic in _node_nics(dev, link_of):
            nics[nic.rail].append(nic)
    up: dict[str, list[Link]] = defaultdict(list)
    down_count: dict[str, int] = defaultdict(int)
    spine_of_leaf: dict[str, set[str]] = defaultdict(set)
    for lk in compute:
        if lk.tier in UPPER_TIERS:
            up[lk.a.device].append(lk)
            down_count[lk.b.device] += 1
            if lk.tier == "leaf-spine":
                spine_of_leaf[lk.a.device].add(lk.b.device)
        elif lk.tier == "node-leaf":
            down_count[lk.b.device] += 1
    covered_cables = {n.cable for rail in nics.values() for n in rail}
    uncovered = {}
    for lk in compute:
        if lk.tier == "node-leaf" and lk.id not in covered_cables:
            dev = devices.get(lk.a.device)
            role = dev.role if dev else "unknown"
            uncovered[lk.id] = f"{lk.a.device} ({role}) has no rail interface in the plan: not a GPU node"
    group = {d.name: d.group or "" for d in devices.values() if d.role in ("leaf", "spine", "superspine")}
    c = plan.cluster
    return Fabric(cluster=c.name, fabric=c.fabric, mode=c.mode, tiers=c.tiers, nics=dict(nics), up=dict(up),
                  down_count=dict(down_count), group=group, spine_of_leaf=dict(spine_of_leaf), uncovered=uncovered,
                  links=link_of)
