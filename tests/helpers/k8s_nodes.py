"""Kubernetes Node objects for a plan's GPU nodes, managed by KWOK (tests/helpers/k8s_cluster.py).

Read from plan.json through railforge's plan reader (`railforge.plan.io.read_plan`), never re-derived:
  - name: the plan's device name;
  - capacity = allocatable: `nvidia.com/gpu` = the plan's gpus_per_node, one `rdma/rail<N>` per rail of the node
    (count = the stack's default rdmaHcaMax, what rdma-shared-dev-plugin advertises per resource), `cpu` and
    `memory` from the plan's Slurm node hardware when the plan has one (the catalog merged with the spec, memory
    after the reservation: what jobs may use), else the built-in catalog entry of the plan's node model, and
    `pods` 110 (the kubelet's default);
  - labels: the keys the Pulumi program labels nodes with (pulumi/railforge_k8s/names.py: cluster, SU, leaf group,
    spine group, rack, rail plane when the plan has one), `railforge.io/tenant` for a tenant's member, the
    well-known `kubernetes.io/hostname`, `kubernetes.io/os`, `kubernetes.io/arch` and
    `node.kubernetes.io/instance-type` (the node model);
  - taints: a tenant's node carries `railforge.io/tenant=<tenant>:NoSchedule`, so only workloads that tolerate
    the tenant land there.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

from railforge.hardware.catalog import builtin_catalog
from railforge.plan.model import Device, Plan

from .k8s_cluster import KWOK_ANNOTATION, K8sHarnessError, KubeApi

PULUMI_PROJECT = Path(__file__).resolve().parents[2] / "pulumi"
if str(PULUMI_PROJECT) not in sys.path:
    sys.path.insert(0, str(PULUMI_PROJECT))

from railforge_k8s import names  # noqa: E402  (the Pulumi program's label keys)

GPU = "nvidia.com/gpu"
TENANT_LABEL = names.TENANT_LABEL  # the program labels a tenant's nodes with it (node_labels.py)
RDMA_HCA_MAX = 63  # StackConfig.rdma_hca_max's default (pulumi/railforge_k8s/config.py); a test compares them
MAX_PODS = 110


@dataclass(frozen=True)
class NodeSpec:
    name: str
    labels: dict[str, str]
    taints: tuple[dict[str, str], ...]
    capacity: dict[str, str]
    annotations: dict[str, str] = field(default_factory=lambda: {KWOK_ANNOTATION: "fake"})

    def to_object(self) -> dict:
        return {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": self.name, "labels": dict(self.labels), "annotations": dict(self.annotations)},
            "spec": {"taints": [dict(t) for t in self.taints]} if self.taints else {},
            "status": {"capacity": dict(self.capacity), "allocatable": dict(self.capacity)},
        }


def rdma_resource(rail: int) -> str:
    return f"rdma/rail{rail}"


def node_hardware(plan: Plan) -> tuple[int, int]:
    """(CPUs, memory MiB) of the plan's GPU server model."""
    if plan.slurm is not None:
        hw = plan.slurm.node
        return hw.sockets * hw.cores_per_socket * hw.threads_per_core, hw.real_memory_mib
    model = plan.cluster.node_model
    hw = builtin_catalog().nodes.get(model)
    if hw is None:
        raise K8sHarnessError(f"node model {model!r} has no catalog entry: its CPUs and memory are unknown")
    return hw.sockets * hw.cores_per_socket * hw.threads_per_core, hw.memory_mib


def _tenants(plan: Plan) -> dict[str, str]:
    of: dict[str, str] = {}
    for tenant in plan.tenants:
        for member in tenant.members:
            if of.setdefault(member, tenant.name) != tenant.name:
                raise K8sHarnessError(f"node {member} is in tenants {of[member]} and {tenant.name}: one label value")
    return of


def _labels(plan: Plan, node: Device, tenant: str | None) -> dict[str, str]:
    topo = node.topology
    if topo is None:
        raise K8sHarnessError(f"node {node.name} has no topology in plan.json")
    labels = {
        names.CLUSTER_LABEL: plan.cluster.name,
        names.SU_LABEL: str(topo.su),
        names.LEAF_GROUP_LABEL: topo.leaf_group,
        names.SPINE_GROUP_LABEL: topo.spine_group,
        names.RACK_LABEL: topo.rack,
    }
    if topo.rail_plane is not None:
        labels[names.RAIL_PLANE_LABEL] = topo.rail_plane
    if tenant is not None:
        labels[TENANT_LABEL] = tenant
    return labels


def plan_nodes(plan: Plan, only: Iterable[str] | None = None, topology_labels: bool = True,
               rdma_per_rail: int = RDMA_HCA_MAX) -> list[NodeSpec]:
    """One NodeSpec per GPU node of the plan (role `node`), in plan order; `only` keeps those names.
    `topology_labels=False` leaves the railforge.io labels off (for a test that has the Pulumi program add them)."""
    cpus, memory_mib = node_hardware(plan)
    tenants = _tenants(plan)
    keep = set(only) if only is not None else None
    specs = []
    for node in plan.devices:
        if node.role != "node" or (keep is not None and node.name not in keep):
            continue
        tenant = tenants.get(node.name)
        labels = {"kubernetes.io/hostname": node.name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                  "node.kubernetes.io/instance-type": node.model}
        if topology_labels:
            labels |= _labels(plan, node, tenant)
        capacity = {"cpu": str(cpus), "memory": f"{memory_mib}Mi", "pods": str(MAX_PODS),
                    GPU: str(plan.cluster.gpus_per_node)}
        capacity |= {rdma_resource(r.rail): str(rdma_per_rail) for r in node.rails}
        taints = ({"key": TENANT_LABEL, "value": tenant, "effect": "NoSchedule"},) if tenant else ()
        specs.append(NodeSpec(node.name, labels, taints, capacity))
    if keep is not None and len(specs) != len(keep):
        raise K8sHarnessError(f"not GPU nodes of the plan: {sorted(keep - {s.name for s in specs})}")
    return specs


def without_resource(specs: list[NodeSpec], resource: str) -> list[NodeSpec]:
    """The same nodes with `resource` removed from capacity (a mutation: the tests must then fail)."""
    return [replace(s, capacity={k: v for k, v in s.capacity.items() if k != resource}) for s in specs]


def register(api: KubeApi, specs: list[NodeSpec], workers: int = 8) -> None:
    """Create the Node objects (and set their status: capacity and allocatable); KWOK then makes them Ready."""
    def one(spec: NodeSpec) -> None:
        obj = spec.to_object()
        api.create(obj)
        api.patch("v1", "Node", spec.name, {"status": obj["status"]}, subresource="status")

    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(one, specs))


def unregister(api: KubeApi, specs: Iterable[NodeSpec]) -> None:
    for spec in specs:
        api.delete("v1", "Node", spec.name)


def node_labels(api: KubeApi) -> dict[str, dict[str, str]]:
    """Every node's labels, by node name."""
    return {n["metadata"]["name"]: n["metadata"].get("labels", {}) for n in api.list("v1", "Node")}


def is_ready(node: dict) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in node.get("status", {}).get("conditions", []))
