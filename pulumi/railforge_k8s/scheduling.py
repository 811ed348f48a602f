"""Topology-aware scheduling objects: Volcano HyperNodes, and a Kueue Topology + ResourceFlavors (kueue_objects.py:
one for the cluster, one per tenant).

Volcano and Kueue themselves are not installed by the stack; these objects need their CRDs in the cluster.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi_kubernetes as k8s

import pulumi

from . import kueue_objects, names
from .kueue_objects import flavor_name
from .options import child_options
from .plan_input import NodeTopology, TenantInput

__all__ = ["HyperNodeSpec", "SchedulingArgs", "TopologyScheduling", "flavor_name", "hypernode_specs"]


@dataclass(frozen=True, slots=True)
class HyperNodeSpec:
    name: str
    tier: int
    tier_name: str
    members: tuple[dict, ...]


def hypernode_specs(cluster: str, nodes: tuple[NodeTopology, ...]) -> list[HyperNodeSpec]:
    """Tier 1 = leaf group (scalable unit), tier 2 = spine group, tier 3 = the cluster (>1 spine group)."""
    leaf_groups: dict[str, str] = {}
    for node in nodes:
        spine = leaf_groups.setdefault(node.leaf_group, node.spine_group)
        if spine != node.spine_group:
            raise ValueError(
                f"leaf group {node.leaf_group} spans spine groups {spine} and {node.spine_group}: "
                "HyperNode tiers must nest"
            )
    specs = [
        HyperNodeSpec(
            name=names.dns_name("leaf", leaf),
            tier=1,
            tier_name="leaf-group",
            members=({"type": "Node", "selector": {"labelMatch": {"matchLabels": {names.LEAF_GROUP_LABEL: leaf}}}},),
        )
        for leaf in sorted(leaf_groups)
    ]
    spine_groups = sorted(set(leaf_groups.values()))
    for spine in spine_groups:
        members = tuple(
            {"type": "HyperNode", "selector": {"exactMatch": {"name": names.dns_name("leaf", leaf)}}}
            for leaf in sorted(leaf_groups)
            if leaf_groups[leaf] == spine
        )
        specs.append(HyperNodeSpec(names.dns_name("spine", spine), 2, "spine-group", members))
    if len(spine_groups) > 1:
        members = tuple(
            {"type": "HyperNode", "selector": {"exactMatch": {"name": names.dns_name("spine", spine)}}}
            for spine in spine_groups
        )
        specs.append(HyperNodeSpec(names.dns_name("cluster", cluster), 3, "cluster", members))
    return specs


@dataclass(frozen=True, slots=True)
class SchedulingArgs:
    cluster: str
    nodes: tuple[NodeTopology, ...]
    volcano: bool
    kueue: bool
    tenants: tuple[TenantInput, ...] = ()


class TopologyScheduling(pulumi.ComponentResource):
    def __init__(self, name: str, args: SchedulingArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("railforge:k8s:TopologyScheduling", name, None, opts)
        child = child_options(self, opts)
        self.hypernodes = []
        if args.volcano:
            self.hypernodes = [
                k8s.apiextensions.CustomResource(
                    f"{name}-hypernode-{spec.name}",
                    api_version="topology.volcano.sh/v1alpha1",
                    kind="HyperNode",
                    metadata={"name": spec.name},
                    spec={"tier": spec.tier, "tierName": spec.tier_name, "members": list(spec.members)},
                    opts=child,
                )
                for spec in hypernode_specs(args.cluster, args.nodes)
            ]
        self.kueue = []
        self.tenant_flavors: dict[str, k8s.apiextensions.CustomResource] = {}
        if args.kueue:
            topo = kueue_objects.topology(args.cluster, args.nodes)
            topology = k8s.apiextensions.CustomResource(
                f"{name}-kueue-topology", api_version=topo["apiVersion"], kind=topo["kind"],
                metadata=topo["metadata"], spec=topo["spec"], opts=child,
            )
            flavors = [(None, kueue_objects.resource_flavor(args.cluster))]
            flavors += [(t.name, kueue_objects.resource_flavor(args.cluster, t.name)) for t in args.tenants]
            made = {
                tenant: k8s.apiextensions.CustomResource(
                    f"{name}-kueue-flavor" + (f"-{names.dns_name(tenant)}" if tenant else ""),
                    api_version=obj["apiVersion"], kind=obj["kind"], metadata=obj["metadata"], spec=obj["spec"],
                    opts=child_options(self, opts, topology),
                )
                for tenant, obj in flavors
            }
            self.tenant_flavors = {t: r for t, r in made.items() if t is not None}
            self.kueue = [topology, *made.values()]
        self.register_outputs({"hypernodes": len(self.hypernodes)})
