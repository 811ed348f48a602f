"""Kueue's view of the fabric, as plain objects: a `Topology` whose levels are the plan's tiers (rail plane when
the plan has rail planes, spine group, scalable unit (leaf group), node) and the `ResourceFlavor`s that use it:
one for the whole cluster and one per tenant, which selects only the tenant's nodes (`railforge.io/tenant`) and
tolerates the tenant's taint, so Kueue pins an admitted tenant workload's pods to its own nodes.

Plain dicts, so the Pulumi components (scheduling.py) and the live tests against a running Kueue (tests/k8s)
apply the very same objects.
"""

from __future__ import annotations

from . import names
from .plan_input import NodeTopology, TenantInput
from .versions import KUEUE_API


def topology_name(cluster: str) -> str:
    return names.dns_name(cluster, "topology")


def flavor_name(cluster: str) -> str:
    return names.dns_name(cluster, "gpu")


def tenant_flavor_name(cluster: str, tenant: str) -> str:
    return names.dns_name(cluster, "gpu", tenant)


def topology_levels(nodes: tuple[NodeTopology, ...]) -> tuple[str, ...]:
    """Outermost first. The rail plane leads when every node has one (a rail-plane fabric: each plane is its own
    network above the SUs); a fabric with some nodes in a plane and some not cannot be one tree, and is refused."""
    planes = {node.rail_plane is not None for node in nodes}
    if len(planes) > 1:
        missing = sorted(n.name for n in nodes if n.rail_plane is None)[:5]
        raise ValueError(f"nodes {missing} have no rail plane while others do: the Kueue Topology needs one tree")
    top = (names.RAIL_PLANE_LABEL,) if planes == {True} else ()
    return (*top, names.SPINE_GROUP_LABEL, names.LEAF_GROUP_LABEL, names.HOSTNAME_LABEL)


def topology(cluster: str, nodes: tuple[NodeTopology, ...]) -> dict:
    return {
        "apiVersion": KUEUE_API, "kind": "Topology",
        "metadata": {"name": topology_name(cluster)},
        "spec": {"levels": [{"nodeLabel": label} for label in topology_levels(nodes)]},
    }


def tenant_toleration(tenant: str) -> dict:
    return {"key": names.TENANT_LABEL, "operator": "Equal", "value": tenant, "effect": "NoSchedule"}


def resource_flavor(cluster: str, tenant: str | None = None) -> dict:
    labels = {names.CLUSTER_LABEL: cluster}
    spec: dict = {"nodeLabels": labels, "topologyName": topology_name(cluster)}
    name = flavor_name(cluster)
    if tenant is not None:
        labels[names.TENANT_LABEL] = names.label_value(tenant, "tenant name")
        spec["tolerations"] = [tenant_toleration(tenant)]
        name = tenant_flavor_name(cluster, tenant)
    return {"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec}


def tenant_of(tenants: tuple[TenantInput, ...]) -> dict[str, str]:
    """node name -> its tenant; a node in two tenants cannot carry one label value, and is refused."""
    of: dict[str, str] = {}
    for tenant in tenants:
        for node in tenant.nodes:
            other = of.setdefault(node, tenant.name)
            if other != tenant.name:
                raise ValueError(f"node {node} is in tenants {other!r} and {tenant.name!r}: "
                                 f"{names.TENANT_LABEL} holds one")
    return of
