"""The part of plan.json the Kubernetes stack reads: rails, pod networks, nodes and their topology, tenants and
the scheduling priority levels."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from pulumi.errors import RunError

SUPPORTED_SCHEMA_VERSIONS = (1, 2)  # 2 renamed fields of switches (platform, hwsku) this stack does not read


class PlanError(ValueError, RunError):
    """plan.json does not carry what the stack needs.
    A RunError: the Pulumi CLI reports its message as one error line, without a traceback."""


@dataclass(frozen=True, slots=True)
class Rail:
    index: int
    ifname: str
    hca: str

    @property
    def resource_name(self) -> str:
        return f"rail{self.index}"


@dataclass(frozen=True, slots=True)
class PodNetwork:
    rail: int
    ifname: str
    hca: str
    leaf: str | None
    subnet: str
    gateway: str | None
    range_start: str
    range_end: str
    scope: str


@dataclass(frozen=True, slots=True)
class NodeTopology:
    name: str
    su: int
    rack: str
    leaf_group: str
    spine_group: str
    rail_plane: str | None


@dataclass(frozen=True, slots=True)
class Pool:
    name: str
    prefix: str


@dataclass(frozen=True, slots=True)
class TenantInput:
    """A tenant of the plan and its GPU nodes (members that are not GPU nodes, e.g. storage hosts, dropped)."""

    name: str
    nodes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class QosLevel:
    """One priority level as the plan's Slurm QOS says it (highest first); `preempts` are the lower levels."""

    name: str
    preempts: tuple[str, ...]


# The plan's levels when it has no `slurm:` section: railforge.spec.slurm.DEFAULT_QOS, each preempting every level
# below it (railforge.planner.slurm.qos_levels); tests/pulumi compare the two.
DEFAULT_QOS_NAMES = ("p0", "p1", "p2", "p3", "p4", "p5")
DEFAULT_QOS = tuple(QosLevel(n, DEFAULT_QOS_NAMES[i + 1:]) for i, n in enumerate(DEFAULT_QOS_NAMES))


@dataclass(frozen=True, slots=True)
class PlanInput:
    cluster: str
    fabric: str
    host_mtu: int
    rails: tuple[Rail, ...]
    pod_networks: tuple[PodNetwork, ...]
    nodes: tuple[NodeTopology, ...]
    pools: tuple[Pool, ...]
    gpus_per_node: int = 0
    tenants: tuple[TenantInput, ...] = ()
    qos: tuple[QosLevel, ...] = DEFAULT_QOS

    def networks_of(self, rail: Rail) -> list[PodNetwork]:
        return [n for n in self.pod_networks if n.rail == rail.index]


def _rails(pod_networks: list[PodNetwork]) -> tuple[Rail, ...]:
    rails: dict[int, Rail] = {}
    for net in pod_networks:
        rail = Rail(index=net.rail, ifname=net.ifname, hca=net.hca)
        known = rails.setdefault(net.rail, rail)
        if known != rail:
            raise PlanError(f"pod_networks disagree on rail {net.rail}: {known} vs {rail}")
    return tuple(rails[i] for i in sorted(rails))


def _node(device: dict, rails: tuple[Rail, ...]) -> NodeTopology:
    name = device["name"]
    topo = device.get("topology")
    if not topo:
        raise PlanError(f"node {name} has no topology in plan.json")
    planned = {r.index: (r.ifname, r.hca) for r in rails}
    for rail in device.get("rails", []):
        if planned.get(rail["rail"]) != (rail["ifname"], rail["hca"]):
            raise PlanError(
                f"node {name} rail {rail['rail']} is {rail['ifname']}/{rail['hca']}, "
                f"pod_networks say {planned.get(rail['rail'])}: "
                "one RDMA resource per rail needs the same names on every node"
            )
    return NodeTopology(
        name=name,
        su=int(topo["su"]),
        rack=str(topo["rack"]),
        leaf_group=str(topo["leaf_group"]),
        spine_group=str(topo["spine_group"]),
        rail_plane=topo.get("rail_plane"),
    )


def _tenants(data: dict, nodes: tuple[NodeTopology, ...]) -> tuple[TenantInput, ...]:
    gpu_nodes = {n.name for n in nodes}
    return tuple(
        TenantInput(name=str(t["name"]), nodes=tuple(m for m in t.get("members", []) if m in gpu_nodes))
        for t in data.get("tenants", [])
    )


def _qos(data: dict) -> tuple[QosLevel, ...]:
    slurm = data.get("slurm")
    if not slurm:
        return DEFAULT_QOS
    levels = tuple(QosLevel(str(q["name"]), tuple(q["preempts"])) for q in slurm["qos"])
    if len(levels) != len(DEFAULT_QOS):
        raise PlanError(f"plan.json slurm.qos has {len(levels)} levels; this stack maps six (P0-P5)")
    return levels


def parse_plan(data: dict) -> PlanInput:
    version = data.get("schema_version")
    if version not in SUPPORTED_SCHEMA_VERSIONS:
        raise PlanError(f"plan.json schema_version {version!r}: this stack reads "
                        f"{' or '.join(map(str, SUPPORTED_SCHEMA_VERSIONS))}")
    pod_networks = [
        PodNetwork(
            rail=int(n["rail"]),
            ifname=n["ifname"],
            hca=n["hca"],
            leaf=n.get("leaf"),
            subnet=n["subnet"],
            gateway=n.get("gateway"),
            range_start=n["range_start"],
            range_end=n["range_end"],
            scope=n["scope"],
        )
        for n in data.get("pod_networks", [])
    ]
    if not pod_networks:
        raise PlanError("plan.json has no pod_networks: nothing to attach pods to")
    rails = _rails(pod_networks)
    nodes = tuple(_node(d, rails) for d in data["devices"] if d["role"] == "node")
    if not nodes:
        raise PlanError("plan.json has no devices with role 'node'")
    return PlanInput(
        cluster=data["cluster"]["name"],
        fabric=data["cluster"]["fabric"],
        host_mtu=int(data["qos"]["host_mtu"]),
        rails=rails,
        pod_networks=tuple(pod_networks),
        nodes=nodes,
        pools=tuple(Pool(name=p["name"], prefix=p["prefix"]) for p in data.get("pools", [])),
        gpus_per_node=int(data["cluster"]["gpus_per_node"]),
        tenants=_tenants(data, nodes),
        qos=_qos(data),
    )


def load_plan(path: str | Path) -> PlanInput:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise PlanError(f"cannot read plan {path}: {exc.strerror}") from exc
    return parse_plan(json.loads(text))
