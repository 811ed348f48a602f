"""Label keys and Kubernetes name rules shared by the components."""

from __future__ import annotations

import re

LABEL_PREFIX = "railforge.io"
CLUSTER_LABEL = f"{LABEL_PREFIX}/cluster"
SU_LABEL = f"{LABEL_PREFIX}/su"
LEAF_GROUP_LABEL = f"{LABEL_PREFIX}/leaf-group"
SPINE_GROUP_LABEL = f"{LABEL_PREFIX}/spine-group"
RACK_LABEL = f"{LABEL_PREFIX}/rack"
RAIL_PLANE_LABEL = f"{LABEL_PREFIX}/rail-plane"
HOSTNAME_LABEL = "kubernetes.io/hostname"
# a tenant's GPU nodes (plan.json tenants[].members): Kueue's per-tenant ResourceFlavor selects them by this label
TENANT_LABEL = f"{LABEL_PREFIX}/tenant"
# a tenant's GPU nodes again, under the key Volcano v1.14.1's nodegroup plugin reads (NodeGroupNameKey in
# pkg/scheduler/plugins/nodegroup/nodegroup.go); the tenant's Queue requires its group (queues.py)
VOLCANO_NODE_GROUP_LABEL = "volcano.sh/nodegroup-name"

_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_DNS_LABEL_CHARS = re.compile(r"[^a-z0-9-]+")


def label_value(value: str, what: str) -> str:
    if len(value) > 63 or not _LABEL_VALUE.match(value):
        raise ValueError(f"{what} {value!r} is not a valid Kubernetes label value")
    return value


def dns_name(*parts: str) -> str:
    """A DNS-1123 label built from plan names (lower case, '-' for anything else)."""
    name = _DNS_LABEL_CHARS.sub("-", "-".join(parts).lower()).strip("-")
    if not name or len(name) > 63:
        raise ValueError(f"cannot make a DNS label from {parts!r}")
    return name
