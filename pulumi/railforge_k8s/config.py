"""Stack configuration: typed, validated once, with the pinned defaults."""

from __future__ import annotations

from dataclasses import dataclass, field

from pulumi.errors import RunError

from .versions import Versions, versions_from_config

RDMA_MODES = ("macvlan", "ipoib", "host", "routed")
KNOWN_KEYS = (
    "plan",
    "rdmaMode",
    "rdmaHcaMax",
    "installDocaDriver",
    "networkOperatorNamespace",
    "gpuOperatorNamespace",
    "workloadNamespace",
    "gpuOperator",
    "nodeLabels",
    "volcano",
    "kueue",
    "priorityClasses",
    "images",
    "charts",
    "registryMirrors",
    "imagePullSecrets",
    "helmReleases",
    "volcanoSchedulerConfig",
    "volcanoNamespace",
    "tenantQueues",
    "tenantNamespaces",
    "kueueQuotaPolicy",
    "volcanoNodeGroups",
)


class ConfigError(ValueError, RunError):
    """The stack configuration is invalid.
    A RunError: the Pulumi CLI reports its message as one error line, without a traceback."""


@dataclass(frozen=True, slots=True)
class StackConfig:
    plan: str
    rdma_mode: str | None = None
    rdma_hca_max: int = 63
    install_doca_driver: bool = False
    helm_releases: bool = True  # false: no operator charts reachable; install their CRDs and the custom resources
    network_operator_namespace: str = "network-operator"
    gpu_operator_namespace: str = "gpu-operator"
    workload_namespace: str = "default"
    gpu_operator: bool = True
    node_labels: bool = True
    volcano: bool = True
    kueue: bool = True
    priority_classes: bool = True
    volcano_scheduler_config: bool = True
    volcano_namespace: str = "volcano-system"
    tenant_queues: bool = True
    tenant_namespaces: dict[str, str] = field(default_factory=dict)
    kueue_quota_policy: bool = True  # refuse Jobs larger than their tenant's quota at submission (quota_policy.py)
    volcano_node_groups: bool = True  # pin a tenant's Volcano pods to its nodes (queues.py)
    image_pull_secrets: tuple[str, ...] = ()
    versions: Versions = field(default_factory=Versions)

    def mode_for(self, fabric: str) -> str:
        """The configured RDMA mode, checked against the fabric (with none set, routing.default_mode picks)."""
        mode = self.rdma_mode or ("ipoib" if fabric == "infiniband" else "macvlan")
        if mode in ("macvlan", "routed") and fabric != "roce":
            raise ConfigError(f"rdmaMode {mode} needs a RoCE fabric; this plan's fabric is {fabric}")
        if mode == "ipoib" and fabric != "infiniband":
            raise ConfigError(f"rdmaMode ipoib needs an InfiniBand fabric; this plan's fabric is {fabric}")
        return mode


def _bool(value, key: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ConfigError(f"{key}: expected true or false, got {value!r}")


def config_from_mapping(values: dict) -> StackConfig:
    if "whereaboutsCrdBaseUrl" in values:
        raise ConfigError("whereaboutsCrdBaseUrl: no longer read; the whereabouts v0.9.4 CRDs are installed from "
                          "the repository (pulumi/crds/whereabouts-v0.9.4), nothing is fetched at deploy time")
    unknown = sorted(set(values) - set(KNOWN_KEYS))
    if unknown:
        raise ConfigError(f"unknown config keys {unknown}; known: {', '.join(KNOWN_KEYS)}")
    if not values.get("plan"):
        raise ConfigError("config 'plan' (path to generated/plan.json) is required")
    mode = values.get("rdmaMode")
    if mode is not None and mode not in RDMA_MODES:
        raise ConfigError(f"rdmaMode {mode!r}: choose one of {', '.join(RDMA_MODES)}")
    try:
        hca_max = int(values.get("rdmaHcaMax", 63))
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"rdmaHcaMax must be an integer, got {values.get('rdmaHcaMax')!r}") from exc
    if hca_max < 1:
        raise ConfigError(f"rdmaHcaMax must be at least 1, got {hca_max}")
    try:
        versions = versions_from_config(
            values.get("images"),
            values.get("charts"),
            values.get("registryMirrors"),
        )
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    flags = {
        "install_doca_driver": ("installDocaDriver", False),
        "helm_releases": ("helmReleases", True),
        "gpu_operator": ("gpuOperator", True),
        "node_labels": ("nodeLabels", True),
        "volcano": ("volcano", True),
        "kueue": ("kueue", True),
        "priority_classes": ("priorityClasses", True),
        "volcano_scheduler_config": ("volcanoSchedulerConfig", True),
        "tenant_queues": ("tenantQueues", True),
        "kueue_quota_policy": ("kueueQuotaPolicy", True),
        "volcano_node_groups": ("volcanoNodeGroups", True),
    }
    tenant_namespaces = values.get("tenantNamespaces", {})
    if not isinstance(tenant_namespaces, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in tenant_namespaces.items()
    ):
        raise ConfigError(f"tenantNamespaces: expected a map of tenant name to namespace, got {tenant_namespaces!r}")
    return StackConfig(
        plan=str(values["plan"]),
        rdma_mode=mode,
        rdma_hca_max=hca_max,
        network_operator_namespace=values.get("networkOperatorNamespace", "network-operator"),
        gpu_operator_namespace=values.get("gpuOperatorNamespace", "gpu-operator"),
        workload_namespace=values.get("workloadNamespace", "default"),
        volcano_namespace=values.get("volcanoNamespace", "volcano-system"),
        tenant_namespaces=dict(tenant_namespaces),
        image_pull_secrets=tuple(values.get("imagePullSecrets", ())),
        versions=versions,
        **{attr: _bool(values.get(key, default), key) for attr, (key, default) in flags.items()},
    )
