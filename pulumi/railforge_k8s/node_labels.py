"""Topology labels on every planned node, and `railforge.io/tenant` on a tenant's nodes (the label its Kueue
ResourceFlavor selects) plus, with Volcano node groups on, `volcano.sh/nodegroup-name` = the tenant (the group its
Volcano Queue requires); server-side apply patches, the nodes must already exist."""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi_kubernetes as k8s

import pulumi

from . import names
from .options import child_options
from .plan_input import NodeTopology


@dataclass(frozen=True, slots=True)
class NodeLabelsArgs:
    cluster: str
    nodes: tuple[NodeTopology, ...]
    tenant_of: dict[str, str] = field(default_factory=dict)  # node name -> tenant (kueue_objects.tenant_of)
    volcano_node_groups: bool = False


def topology_labels(cluster: str, node: NodeTopology, tenant: str | None = None,
                    volcano_node_group: bool = False) -> dict[str, str]:
    labels = {
        names.CLUSTER_LABEL: cluster,
        names.SU_LABEL: str(node.su),
        names.LEAF_GROUP_LABEL: node.leaf_group,
        names.SPINE_GROUP_LABEL: node.spine_group,
        names.RACK_LABEL: node.rack,
    }
    if node.rail_plane is not None:
        labels[names.RAIL_PLANE_LABEL] = node.rail_plane
    if tenant is not None:
        labels[names.TENANT_LABEL] = tenant
        if volcano_node_group:
            labels[names.VOLCANO_NODE_GROUP_LABEL] = tenant
    return {key: names.label_value(value, f"node {node.name} label {key}") for key, value in labels.items()}


class NodeLabels(pulumi.ComponentResource):
    def __init__(self, name: str, args: NodeLabelsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("railforge:k8s:NodeLabels", name, None, opts)
        self.patches = [
            k8s.core.v1.NodePatch(
                f"{name}-{node.name}",
                metadata={"name": node.name, "labels": topology_labels(
                    args.cluster, node, args.tenant_of.get(node.name), args.volcano_node_groups)},
                opts=child_options(self, opts),
            )
            for node in args.nodes
        ]
        self.register_outputs({"nodes": len(self.patches)})
