"""Wire the components in order: namespace -> operator release -> NicClusterPolicy -> attachments."""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi

from .attachments import RailAttachments, RailAttachmentsArgs
from .config import StackConfig
from .gpu_operator import GpuOperator, GpuOperatorArgs
from .kueue_objects import tenant_flavor_name, tenant_of
from .network_operator import NetworkOperator, NetworkOperatorArgs
from .nic_cluster_policy import NicClusterPolicy, NicClusterPolicyArgs
from .node_labels import NodeLabels, NodeLabelsArgs
from .plan_input import PlanInput
from .priority import PriorityClasses, WorkloadPriorityClasses, priority_levels
from .queues import TenantQueues, TenantQueuesArgs, tenant_queues
from .quota_policy import QuotaPolicies, QuotaPoliciesArgs
from .routing import default_mode, plan_attachments
from .scheduling import SchedulingArgs, TopologyScheduling
from .volcano_config import VolcanoSchedulerConfig, VolcanoSchedulerConfigArgs
from .whereabouts import Whereabouts, WhereaboutsArgs


@dataclass
class Deployment:
    mode: str
    network_operator: NetworkOperator
    nic_cluster_policy: NicClusterPolicy
    whereabouts: Whereabouts | None = None
    attachments: RailAttachments | None = None
    gpu_operator: GpuOperator | None = None
    node_labels: NodeLabels | None = None
    scheduling: TopologyScheduling | None = None
    priority_classes: PriorityClasses | None = None
    workload_priority_classes: WorkloadPriorityClasses | None = None
    volcano_scheduler_config: VolcanoSchedulerConfig | None = None
    tenant_queues: TenantQueues | None = None
    quota_policies: QuotaPolicies | None = None
    rdma_resources: list[str] = field(default_factory=list)
    skipped_releases: list[str] = field(default_factory=list)


def deploy(config: StackConfig, plan: PlanInput) -> Deployment:
    mode = config.mode_for(plan.fabric) if config.rdma_mode else default_mode(plan)
    specs = plan_attachments(plan, mode, plan.host_mtu)
    secrets = config.image_pull_secrets
    operator = NetworkOperator(
        "network-operator",
        NetworkOperatorArgs(config.network_operator_namespace, config.versions, secrets, config.helm_releases),
    )
    policy = NicClusterPolicy(
        "nic-cluster-policy",
        NicClusterPolicyArgs(
            rails=plan.rails,
            mode=mode,
            rdma_hca_max=config.rdma_hca_max,
            install_doca_driver=config.install_doca_driver,
            versions=config.versions,
            image_pull_secrets=secrets,
        ),
        pulumi.ResourceOptions(depends_on=operator.ready),
    )
    result = Deployment(mode=mode, network_operator=operator, nic_cluster_policy=policy)
    result.rdma_resources = policy.resource_names
    if specs:
        depends: list[pulumi.Resource] = [policy.policy]
        if mode != "routed":  # routed pods use host-local IPAM in each node's own range (the rails role)
            result.whereabouts = Whereabouts("whereabouts",
                                             WhereaboutsArgs(config.versions, image_pull_secrets=secrets))
            depends.append(result.whereabouts.daemonset)
        result.attachments = RailAttachments(
            "rail-attachments",
            RailAttachmentsArgs(config.workload_namespace, tuple(specs)),
            pulumi.ResourceOptions(depends_on=depends),
        )
    if config.gpu_operator:
        result.gpu_operator = GpuOperator(
            "gpu-operator",
            GpuOperatorArgs(config.gpu_operator_namespace, config.versions, secrets, config.helm_releases),
            pulumi.ResourceOptions(depends_on=[policy.policy]),
        )
    tenants = plan.tenants if config.tenant_queues else ()
    node_groups = config.volcano and config.volcano_node_groups
    if config.node_labels:
        result.node_labels = NodeLabels("node-labels", NodeLabelsArgs(plan.cluster, plan.nodes, tenant_of(tenants),
                                                                      volcano_node_groups=node_groups))
    if config.volcano or config.kueue:
        result.scheduling = TopologyScheduling(
            "topology",
            SchedulingArgs(plan.cluster, plan.nodes, volcano=config.volcano, kueue=config.kueue, tenants=tenants),
            pulumi.ResourceOptions(depends_on=[result.node_labels] if result.node_labels else None),
        )
    levels = priority_levels(plan.qos)
    if config.priority_classes:
        result.priority_classes = PriorityClasses("priority", levels)
    if config.kueue:
        result.workload_priority_classes = WorkloadPriorityClasses("workload-priority", levels)
    if config.volcano and config.volcano_scheduler_config:
        result.volcano_scheduler_config = VolcanoSchedulerConfig(
            "volcano-scheduler", VolcanoSchedulerConfigArgs(config.volcano_namespace, node_groups)
        )
    if config.tenant_queues and (config.volcano or config.kueue) and plan.tenants:
        taken = frozenset({config.network_operator_namespace, config.gpu_operator_namespace,
                           config.workload_namespace, config.volcano_namespace})
        queues = tenant_queues(plan.tenants, plan.gpus_per_node, config.tenant_namespaces, taken)
        flavors = result.scheduling.tenant_flavors if result.scheduling else {}
        result.tenant_queues = TenantQueues(
            "tenant-queues",
            TenantQueuesArgs(
                tuple(queues),
                volcano=config.volcano,
                kueue=config.kueue,
                kueue_flavors={q.tenant: tenant_flavor_name(plan.cluster, q.tenant) for q in queues}
                if config.kueue else {},
                depends_on=tuple(flavors.values()),
                volcano_node_groups=node_groups,
            ),
        )
        if config.kueue and config.kueue_quota_policy:
            result.quota_policies = QuotaPolicies(
                "kueue-quota-policy",
                QuotaPoliciesArgs(tuple(queues), depends_on=tuple(result.tenant_queues.namespaces)),
            )
    if not config.helm_releases:
        result.skipped_releases = ["network-operator"] + (["gpu-operator"] if config.gpu_operator else [])
        pulumi.log.warn(
            f"helmReleases is false: skipped the Helm releases {', '.join(result.skipped_releases)}; installed "
            "their CRDs the stack needs (pulumi/crds) and the custom resources only. Set charts.<name>.path or "
            "charts.<name>.repo (a mirror) and helmReleases: true to install the operators."
        )
    return result
