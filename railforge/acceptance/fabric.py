"""The fabrics as the burn-in sees them, read from the plan only: the compute fabric (every GPU node's NICs by
rail, leaf and cable; every appliance's compute ports, such as a UFM's HCAs on the rails' leaves) and the
storage fabric (every host's storage bond: its member cables and the leaf pair they land on), with every
switch's uplinks.

Why not the lab's scope or the verify views: the burn-in needs, per NIC, its cable and leaf, and per switch, the
cables towards the next tier and the group (pod or rail plane) it serves, for clusters of 131K GPUs; a few dicts
built in one pass over devices and links are all it takes.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from railforge.plan.model import Device, Link, Plan

UPPER_TIERS = ("leaf-spine", "spine-superspine")
STORAGE_UPPER_TIERS = ("storage-leaf-spine", "storage-spine-superspine")
STORAGE_HOST_TIER = "node-storage-leaf"


@dataclass(frozen=True, slots=True)
class Nic:
    """One end of a pair test: a compute NIC (one cable), or a host's storage bond (`members`: its cables, `leaf`:
    the leaves they land on joined by `+`, which the paths treat as one switch)."""

    node: str
    rail: int | None
    hca: str
    ifname: str
    address: str
    leaf: str
    cable: str | None
    su: int
    speed_mbps: int
    appliance: bool = False
    """Not a GPU node (a UFM, a management host): no Slurm, no NCCL; reached over ssh. A compute appliance is
    always the client side of its tests (the plan gives it no address on the rails)."""
    members: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.node}:{self.hca}"

    @property
    def bond(self) -> str:
        """The bundle key of a storage bond's member cables."""
        return f"{self.node} {self.ifname}"


@dataclass(slots=True)
class Fabric:
    """NICs per pairing key (a rail; 0 for the storage fabric), uplinks per switch, and which group each switch
    serves."""

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
    upper_tiers: tuple[str, ...] = UPPER_TIERS

    def all_nics(self) -> list[Nic]:
        return [n for rail in sorted(self.nics) for n in self.nics[rail]]

    def upper_links(self) -> list[Link]:
        return [lk for lk in self.links.values() if lk.tier in self.upper_tiers]


def _node_nics(dev: Device, link_of: dict[str, Link]) -> list[Nic]:
    out = []
    for r in dev.rails:
        lk = link_of.get(r.cable)
        out.append(Nic(dev.name, r.rail, r.hca, r.ifname, r.address.split("/")[0], r.leaf, r.cable,
                       dev.su or 0, lk.speed_mbps if lk else r.speed_mbps))
    return out


def _appliance_nics(dev: Device, link_of: dict[str, Link], leaves: set[str]) -> list[Nic]:
    """An appliance's compute ports cabled to a leaf of a rail; its RDMA device as the plan names it
    (`Device.hca`). No address: it is always the client of its tests."""
    out = []
    for p in dev.ports:
        lk = link_of.get(p.link or "")
        if lk is None or lk.tier != "node-leaf" or lk.rail is None or lk.b.device not in leaves:
            continue
        out.append(Nic(dev.name, lk.rail, dev.hca(p), p.name, "", lk.b.device, lk.id, dev.su or 0, lk.speed_mbps,
                       appliance=True))
    return out


def _uplinks(links: list[Link], upper: tuple[str, ...], host_tiers: tuple[str, ...]):
    up: dict[str, list[Link]] = defaultdict(list)
    down_count: dict[str, int] = defaultdict(int)
    spine_of_leaf: dict[str, set[str]] = defaultdict(set)
    for lk in links:
        if lk.tier in upper:
            up[lk.a.device].append(lk)
            down_count[lk.b.device] += 1
            if lk.tier == upper[0]:
                spine_of_leaf[lk.a.device].add(lk.b.device)
        elif lk.tier in host_tiers:
            down_count[lk.b.device] += 1
    return up, down_count, spine_of_leaf


def read_fabric(plan: Plan) -> Fabric:
    """The compute fabric of `plan`: GPU nodes' rails and appliances' compute ports (a UFM) as NICs. A host's
    compute cable that is neither is listed in `uncovered` with the reason, never silently dropped."""
    compute = [lk for lk in plan.links if lk.fabric == "compute"]
    link_of = {lk.id: lk for lk in compute}
    devices = {d.name: d for d in plan.devices if d.fabric == "compute"}
    leaves = {d.name for d in devices.values() if d.role == "leaf"}
    nics: dict[int, list[Nic]] = defaultdict(list)
    hosts = sorted((d for d in devices.values() if d.role in ("node", "ufm")),
                   key=lambda d: (d.su or 0, d.slot or 0, d.name))
    for dev in hosts:
        for nic in _node_nics(dev, link_of) if dev.role == "node" else _appliance_nics(dev, link_of, leaves):
            nics[nic.rail].append(nic)
    up, down_count, spine_of_leaf = _uplinks(compute, UPPER_TIERS, ("node-leaf",))
    covered_cables = {n.cable for rail in nics.values() for n in rail}
    uncovered = {}
    for lk in compute:
        if lk.tier == "node-leaf" and lk.id not in covered_cables:
            dev = devices.get(lk.a.device)
            role = dev.role if dev else "unknown"
            uncovered[lk.id] = (f"{lk.a.device} ({role}) port {lk.a.port}: neither a GPU node's rail nor an "
                                "appliance's port on a rail's leaf")
    group = {d.name: d.group or "" for d in devices.values() if d.role in ("leaf", "spine", "superspine")}
    c = plan.cluster
    return Fabric(cluster=c.name, fabric=c.fabric, mode=c.mode, tiers=c.tiers, nics=dict(nics), up=dict(up),
                  down_count=dict(down_count), group=group, spine_of_leaf=dict(spine_of_leaf), uncovered=uncovered,
                  links=link_of)


def read_storage(plan: Plan, hca: str) -> Fabric:
    """The storage fabric of `plan`: every host with a storage bond whose members are cabled in the plan, as one
    endpoint (`hca`: the bond's RDMA device) on the leaves its members land on. A leaf pair (MLAG, EVPN-MH) is
    one switch to the paths: its uplinks are the union of both leaves' (the bond's hash picks the leaf), its
    group the leaves' pod. Storage hosts are one pairing class, keyed 0."""
    storage = [lk for lk in plan.links if lk.fabric == "storage"]
    link_of = {lk.id: lk for lk in storage}
    up, down_count, spine_of_leaf = _uplinks(storage, STORAGE_UPPER_TIERS, (STORAGE_HOST_TIER,))
    switches = {d.name: d for d in plan.devices if d.fabric == "storage" and d.role.startswith("storage-")}
    group = {n: d.group or "" for n, d in switches.items()}
    hosts: list[Nic] = []
    uncovered: dict[str, str] = {}
    for d in sorted((d for d in plan.devices if d.bond is not None), key=lambda d: (d.su or 0, d.slot or 0, d.name)):
        members = [m for m in d.bond.members if m.cable in link_of]
        if not members:
            continue
        leaves = tuple(sorted({m.switch for m in members}))
        leaf = "+".join(leaves)
        if leaf not in up and len(leaves) > 1:
            up[leaf] = [lk for x in leaves for lk in up.get(x, [])]
            spine_of_leaf[leaf] = set().union(*(spine_of_leaf.get(x, set()) for x in leaves))
            down_count[leaf] = sum(down_count.get(x, 0) for x in leaves)
            group[leaf] = group.get(leaves[0], "")
        hosts.append(Nic(d.name, None, hca, d.bond.name, d.bond.address.split("/")[0], leaf,
                         members[0].cable if len(members) == 1 else None, d.su or 0,
                         min(m.speed_mbps for m in members), appliance=d.role != "node",
                         members=tuple(m.cable for m in members)))
    bonded = {c for h in hosts for c in h.members}
    for lk in storage:
        if lk.tier == STORAGE_HOST_TIER and lk.id not in bonded:
            uncovered[lk.id] = f"{lk.a.device} port {lk.a.port} is no member of a storage bond in the plan"
    c = plan.cluster
    return Fabric(cluster=c.name, fabric="storage", mode="clos", tiers=c.tiers, nics={0: hosts} if hosts else {},
                  up=dict(up), down_count=dict(down_count), group=group, spine_of_leaf=dict(spine_of_leaf),
                  uncovered=uncovered, links=link_of, upper_tiers=STORAGE_UPPER_TIERS)
