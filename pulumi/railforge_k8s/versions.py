"""One pinned, tested set of charts and images; every entry can be pointed at a private mirror.

Network-operator components: tests/reference/network-operator-v26.4.1/{release,Chart}.yaml.
whereabouts: v0.9.4. GPU operator: chart v26.3.3. Scheduling objects: the API versions Volcano v1.15.1 and
Kueue v0.19.2 serve (tests/reference/{volcano-v1.15.1,kueue-v0.19.2}); the stack installs neither scheduler, so
these objects carry no images to mirror.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace


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
    repo: str
    chart: str
    version: str


MELLANOX = "nvcr.io/nvidia/mellanox"
NETWORK_OPERATOR_TAG = "network-operator-v26.4.1"
NGC_HELM = "https://helm.ngc.nvidia.com/nvidia"
WHEREABOUTS_VERSION = "v0.9.4"
VOLCANO_VERSION = "v1.15.1"
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


WHEREABOUTS_CRD_BASE_URL = (
    f"https://raw.githubusercontent.com/k8snetworkplumbingwg/whereabouts/{WHEREABOUTS_VERSION}/doc/crds"
)
WHEREABOUTS_CRD_FILES = (
    "whereabouts.cni.cncf.io_ippools.yaml",
    "whereabouts.cni.cncf.io_overlappingrangeipreservations.yaml",
    "whereabouts.cni.cncf.io_nodeslicepools.yaml",
)


@dataclass(frozen=True, slots=True)
class Versions:
    images: dict[str, Image] = field(default_factory=_default_images)
    charts: dict[str, Chart] = field(default_factory=_default_charts)
    whereabouts_crd_base_url: str = WHEREABOUTS_CRD_BASE_URL
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

    def whereabouts_crd_sources(self) -> list[str]:
        return [f"{self.whereabouts_crd_base_url.rstrip('/')}/{name}" for name in WHEREABOUTS_CRD_FILES]


def versions_from_config(
    images: dict | None,
    charts: dict | None,
    registry_mirrors: dict | None,
    whereabouts_crd_base_url: str | None,
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
    return Versions(
        images=merged_images,
        charts=merged_charts,
        whereabouts_crd_base_url=whereabouts_crd_base_url or base.whereabouts_crd_base_url,
        registry_mirrors=dict(registry_mirrors or {}),
    )


def _only(override: dict, allowed: tuple[str, ...], where: str) -> dict:
    unknown = sorted(set(override) - set(allowed))
    if unknown:
        raise ValueError(f"{where}: unknown keys {unknown} (allowed: {list(allowed)})")
    return dict(override)
