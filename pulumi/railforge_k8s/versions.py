"""One pinned, tested set of charts and images; every entry can be pointed at a private mirror.

Network-operator components: tests/reference/network-operator-v26.4.1/{release,Chart}.yaml.
whereabouts: v0.9.4. GPU operator: chart v26.3.3. Scheduling objects: the API versions Volcano v1.14.1 and
Kueue v0.19.2 serve (tests/reference/{volcano-v1.14.1,kueue-v0.19.2}); the stack installs neither scheduler, so
these objects carry no images to mirror.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Image:
    repository: str
    image: str
    version: str

    @property
    def reference(self) -> str:
        return f"{self.repository}/{self.image}:{self.version}"


@dataclass(frozen=True, slots=True)
class Chart:
    """A Helm chart: `chart` at `version` from the repository `repo` (or a mirror of it), or, when `path` is set, a
    chart folder or .tgz on the machine that runs `pulumi up` (air-gapped sites)."""

    repo: str
    chart: str
    version: str
    path: str | None = None


MELLANOX = "nvcr.io/nvidia/mellanox"
NETWORK_OPERATOR_TAG = "network-operator-v26.4.1"
NGC_HELM = "https://helm.ngc.nvidia.com/nvidia"
WHEREABOUTS_VERSION = "v0.9.4"
VOLCANO_VERSION = "v1.14.1"
KUEUE_VERSION = "v0.19.2"
VOLCANO_QUEUE_API = "scheduling.volcano.sh/v1beta1"
KUEUE_API = "kueue.x-k8s.io/v1beta2"


def _default_images() -> dict[str, Image]:
    return {
        "networkOperator": Image("nvcr.io/nvidia/cloud-native", "network-operator", "v26.4.1"),
        "networkOperatorInitContainer": Image(MELLANOX, "network-operator-init-container", NETWORK_OPERATOR_TAG),
        "nodeFeatureDiscovery": Image(MELLANOX, "node-feature-discovery", NETWORK_OPERATOR_TAG),
        "rdmaSharedDevicePlugin": Image(MELLANOX, "k8s-rdma-shared-dev-plugin", NETWORK_OPERATOR_TAG),
        "multus": Image(MELLANOX, "multus-cni", NETWORK_OPERATOR_TAG),
        "cniPlugins": Image(MELLANOX, "plugins", NETWORK_OPERATOR_TAG),
        "ipoib": Image(MELLANOX, "ipoib-cni", NETWORK_OPERATOR_TAG),
        "docaDriver": Image(MELLANOX, "doca-driver", "doca3.4.1-26.04-1.1.0.0-1"),
        "whereabouts": Image("ghcr.io/k8snetworkplumbingwg", "whereabouts", WHEREABOUTS_VERSION),
    }


def _default_charts() -> dict[str, Chart]:
    return {
        "networkOperator": Chart(NGC_HELM, "network-operator", "26.4.1"),
        "gpuOperator": Chart(NGC_HELM, "gpu-operator", "v26.3.3"),
    }


@dataclass(frozen=True, slots=True)
class Versions:
    images: dict[str, Image] = field(default_factory=_default_images)
    charts: dict[str, Chart] = field(default_factory=_default_charts)
    registry_mirrors: dict[str, str] = field(default_factory=dict)

    def image(self, key: str) -> Image:
        img = self.images[key]
        return replace(img, repository=self.mirrored(img.repository))

    def chart(self, key: str) -> Chart:
        return self.charts[key]

    def mirrored(self, repository: str) -> str:
        """Rewrite the registry prefix (nvcr.io -> registry.local/nvcr) when a mirror is configured."""
        for upstream, mirror in self.registry_mirrors.items():
            if repository == upstream or repository.startswith(upstream + "/"):
                return mirror.rstrip("/") + repository[len(upstream) :]
        return repository


def versions_from_config(
    images: dict | None,
    charts: dict | None,
    registry_mirrors: dict | None,
) -> Versions:
    """Overlay stack config on the pinned set; unknown component names are errors, not silently ignored."""
    base = Versions()
    merged_images = dict(base.images)
    for key, override in (images or {}).items():
        if key not in merged_images:
            raise ValueError(f"images.{key}: unknown component (known: {', '.join(sorted(merged_images))})")
        merged_images[key] = replace(merged_images[key], **_only(override, Image.__slots__, f"images.{key}"))
    merged_charts = dict(base.charts)
    for key, override in (charts or {}).items():
        if key not in merged_charts:
            raise ValueError(f"charts.{key}: unknown chart (known: {', '.join(sorted(merged_charts))})")
        merged_charts[key] = replace(merged_charts[key], **_only(override, Chart.__slots__, f"charts.{key}"))
        path = merged_charts[key].path
        if path is not None and not Path(path).expanduser().exists():
            raise ValueError(f"charts.{key}.path {path!r}: no such chart folder or .tgz on this machine")
    return Versions(
        images=merged_images,
        charts=merged_charts,
        registry_mirrors=dict(registry_mirrors or {}),
    )


def _only(override: dict, allowed: tuple[str, ...], where: str) -> dict:
    unknown = sorted(set(override) - set(allowed))
    if unknown:
        raise ValueError(f"{where}: unknown keys {unknown} (allowed: {list(allowed)})")
    return dict(override)
