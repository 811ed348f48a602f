"""Per-tenant queues: a Volcano Queue and a Kueue ClusterQueue + LocalQueue for every tenant of the plan.

A tenant's share is its GPUs (its GPU nodes x GPUs per node): the Volcano Queue's capability and the ClusterQueue's
nominal quota. The Volcano weight (proportion plugin) is the GPU count divided by the greatest common divisor of
all tenants' counts, so the shares keep their ratio within Volcano's weight range (1..65535).

ClusterQueues have no cohort: on InfiniBand a tenant's nodes are its P_Key partition, so lending GPUs to another
tenant would place its pods on nodes its fabric partition cannot reach. Preemption is by WorkloadPriorityClass
inside each ClusterQueue. Each ClusterQueue's flavor is its tenant's own ResourceFlavor (kueue_objects.py), which
selects only the tenant's nodes, so Kueue pins the tenant's admitted pods there. The Volcano Queue pins the same way
with node groups (on unless `volcanoNodeGroups: false`): the Queue requires the node group named after its tenant
(`affinity.nodeGroupAffinity.requiredDuringSchedulingIgnoredDuringExecution`), the stack labels the tenant's nodes
`volcano.sh/nodegroup-name=<tenant>` (node_labels.py) and the scheduler runs the nodegroup plugin
(volcano_config.py), so a tenant's pods bind only to its nodes without a nodeSelector of their own. The plugin does
not touch taints: a tenant's pods still tolerate its `railforge.io/tenant` taint where its nodes carry one.

ClusterQueues queue `StrictFIFO`, so a large gang cannot starve behind a stream of small jobs. Under Kueue's
default BestEffortFIFO a Workload that does not fit is set aside and smaller ones behind it are admitted, each time
nodes free; a 32-node job then waits for as long as 8-node jobs keep coming. Slurm solves this with backfill: it
reserves the large job's start and lets small jobs in only if their time limit ends before it. Kueue has no such
reservation (it does not plan with run times), so the honest choice is strict order: within a priority level
nothing passes the head of the queue, and freed nodes stay free until the head fits. The price is the one
Slurm's backfill avoids: GPUs idle while the head waits. Priority still orders the queue (a P0 job goes first and
preempts lower levels), so urgent work is not held behind a large P3 job.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import reduce
from math import gcd

import pulumi_kubernetes as k8s

import pulumi

from . import names
from .options import child_options
from .plan_input import PlanError, TenantInput
from .versions import KUEUE_API, VOLCANO_QUEUE_API
from .volcano_config import GPU_RESOURCE

VOLCANO_MAX_WEIGHT = 65535
QUEUEING_STRATEGY = "StrictFIFO"  # no starvation of large gangs (module docstring)
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
# Queues the Volcano v1.14.1 scheduler creates itself (pkg/scheduler/cache/cache.go: "root", defaultQueue).
VOLCANO_OWN_QUEUES = frozenset({"root", "default"})
# Namespaces every cluster has; the stack creates each tenant's namespace, so it cannot be one of them.
SYSTEM_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})


@dataclass(frozen=True, slots=True)
class TenantQueue:
    tenant: str
    name: str
    namespace: str
    gpus: int
    weight: int


def tenant_queues(
    tenants: tuple[TenantInput, ...],
    gpus_per_node: int,
    namespaces: dict[str, str] | None = None,
    taken_namespaces: frozenset[str] = frozenset(),
) -> list[TenantQueue]:
    """`taken_namespaces`: namespaces the rest of the stack creates or uses, which a tenant's cannot be."""
    namespaces = dict(namespaces or {})
    unknown = sorted(set(namespaces) - {t.name for t in tenants})
    if unknown:
        raise PlanError(f"tenantNamespaces names tenants the plan does not have: {unknown} "
                        f"(tenants: {[t.name for t in tenants]})")
    if gpus_per_node < 1 and tenants:
        raise PlanError(f"plan.json cluster.gpus_per_node is {gpus_per_node}: tenants would get no GPU quota")
    empty = [t.name for t in tenants if not t.nodes]
    if empty:
        raise PlanError(f"tenants {empty} have no GPU nodes in plan.json, so their queues would have no quota; "
                        "give them GPU nodes or set tenantQueues: false")
    gpus = [len(t.nodes) * gpus_per_node for t in tenants]
    divisor = reduce(gcd, gpus, 0) or 1
    queues = []
    for tenant, count in zip(tenants, gpus, strict=True):
        weight = count // divisor
        if weight > VOLCANO_MAX_WEIGHT:
            raise PlanError(f"tenant {tenant.name!r}: Volcano queue weight {weight} (its {count} GPUs over the "
                            f"tenants' common divisor {divisor}) exceeds {VOLCANO_MAX_WEIGHT}")
        name = names.dns_name(tenant.name)
        namespace = namespaces.get(tenant.name, name)
        if not _is_dns_label(namespace):
            raise PlanError(f"tenantNamespaces.{tenant.name}: {namespace!r} is not a namespace name "
                            "(lower-case letters, digits and '-', at most 63)")
        if name in VOLCANO_OWN_QUEUES:
            raise PlanError(f"tenant {tenant.name!r}: Volcano creates a queue {name!r} itself; rename the tenant")
        if namespace in SYSTEM_NAMESPACES | taken_namespaces:
            raise PlanError(f"tenant {tenant.name!r}: namespace {namespace!r} already exists or belongs to the stack; "
                            f"set tenantNamespaces.{tenant.name} to a namespace of its own")
        queues.append(TenantQueue(tenant.name, name, namespace, count, weight))
    for what, key in (("queue", "name"), ("namespace", "namespace")):
        seen: dict[str, str] = {}
        for queue in queues:
            other = seen.setdefault(getattr(queue, key), queue.tenant)
            if other != queue.tenant:
                raise PlanError(f"tenants {other!r} and {queue.tenant!r} both get {what} {getattr(queue, key)!r}; "
                                "rename one" + (" or set tenantNamespaces" if key == "namespace" else ""))
    return queues


def _is_dns_label(value: str) -> bool:
    try:
        return names.dns_name(value) == value
    except ValueError:
        return False


def quantity(count: int) -> str:
    """A resource quantity as Kubernetes writes it back (a string): a scheduler's webhook decodes the number into a
    Quantity and stores its string, so an integer here would make every `pulumi up` an update (found on live Kueue)."""
    return str(count)


def volcano_queue_spec(queue: TenantQueue, node_group: bool = True) -> dict:
    spec: dict = {"weight": queue.weight, "capability": {GPU_RESOURCE: quantity(queue.gpus)}, "reclaimable": True}
    if node_group:
        spec["affinity"] = {"nodeGroupAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            names.label_value(queue.tenant, f"tenant {queue.tenant!r} as a Volcano node group")]}}
    return spec


def cluster_queue_spec(queue: TenantQueue, flavor: str) -> dict:
    return {
        "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: queue.namespace}},
        "queueingStrategy": QUEUEING_STRATEGY,
        "resourceGroups": [{
            "coveredResources": [GPU_RESOURCE],
            "flavors": [{"name": flavor, "resources": [{"name": GPU_RESOURCE, "nominalQuota": quantity(queue.gpus)}]}],
        }],
        "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Never"},
    }


@dataclass(frozen=True, slots=True)
class TenantQueuesArgs:
    queues: tuple[TenantQueue, ...]
    volcano: bool
    kueue: bool
    kueue_flavors: dict[str, str] = field(default_factory=dict)  # tenant -> its ResourceFlavor
    volcano_node_groups: bool = True
    depends_on: tuple[pulumi.Resource, ...] = field(default=())


class TenantQueues(pulumi.ComponentResource):
    def __init__(self, name: str, args: TenantQueuesArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("railforge:k8s:TenantQueues", name, None, opts)
        child = child_options(self, opts)
        self.volcano_queues = []
        self.cluster_queues = []
        self.local_queues = []
        self.namespaces = []
        for queue in args.queues:
            if args.volcano:
                self.volcano_queues.append(k8s.apiextensions.CustomResource(
                    f"{name}-volcano-{queue.name}",
                    api_version=VOLCANO_QUEUE_API,
                    kind="Queue",
                    metadata={"name": queue.name},
                    spec=volcano_queue_spec(queue, args.volcano_node_groups),
                    opts=child,
                ))
            if args.kueue:
                if queue.tenant not in args.kueue_flavors:
                    raise ValueError(f"kueue queue of tenant {queue.tenant!r} needs its ResourceFlavor's name")
                namespace = k8s.core.v1.Namespace(
                    f"{name}-namespace-{queue.name}", metadata={"name": queue.namespace}, opts=child
                )
                cluster_queue = k8s.apiextensions.CustomResource(
                    f"{name}-clusterqueue-{queue.name}",
                    api_version=KUEUE_API,
                    kind="ClusterQueue",
                    metadata={"name": queue.name},
                    spec=cluster_queue_spec(queue, args.kueue_flavors[queue.tenant]),
                    opts=child_options(self, opts, *args.depends_on),
                )
                self.local_queues.append(k8s.apiextensions.CustomResource(
                    f"{name}-localqueue-{queue.name}",
                    api_version=KUEUE_API,
                    kind="LocalQueue",
                    metadata={"name": queue.name, "namespace": queue.namespace},
                    spec={"clusterQueue": queue.name},
                    opts=child_options(self, opts, namespace, cluster_queue),
                ))
                self.namespaces.append(namespace)
                self.cluster_queues.append(cluster_queue)
        self.register_outputs({"tenants": [q.tenant for q in args.queues]})
