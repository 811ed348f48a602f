"""NVIDIA GPU operator for hosts that already run the NVIDIA driver and DOCA-OFED (GPUDirect RDMA on).

The chart cannot be downloaded here, so its values stay minimal: every key set below exists in the
gpu-operator chart values.yaml at the pinned tag (v26.3.3).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi_kubernetes as k8s

import pulumi

from .network_operator import helm_release
from .options import child_options
from .versions import Versions

# Upstream image repositories in the pinned chart; set explicitly so registryMirrors can rewrite them.
GPU_OPERATOR_REPOSITORIES = {
    "operator": "nvcr.io/nvidia",
    "validator": "nvcr.io/nvidia",
    "toolkit": "nvcr.io/nvidia/k8s",
    "devicePlugin": "nvcr.io/nvidia",
    "dcgmExporter": "nvcr.io/nvidia/k8s",
    "gfd": "nvcr.io/nvidia",
    "migManager": "nvcr.io/nvidia/cloud-native",
}
WITH_PULL_SECRETS = ("operator", "validator", "toolkit", "devicePlugin", "gfd", "migManager")


@dataclass(frozen=True, slots=True)
class GpuOperatorArgs:
    namespace: str
    versions: Versions
    image_pull_secrets: tuple[str, ...] = ()
    helm_release: bool = True


def gpu_operator_values(args: GpuOperatorArgs) -> dict:
    values: dict = {
        # NFD already runs from the network-operator release; a second instance would fight over labels.
        "nfd": {"enabled": False},
        "driver": {"enabled": False, "rdma": {"enabled": True, "useHostMofed": True}},
    }
    for component, repository in GPU_OPERATOR_REPOSITORIES.items():
        values[component] = {"repository": args.versions.mirrored(repository)}
        if args.image_pull_secrets and component in WITH_PULL_SECRETS:
            values[component]["imagePullSecrets"] = list(args.image_pull_secrets)
    return values


class GpuOperator(pulumi.ComponentResource):
    def __init__(self, name: str, args: GpuOperatorArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("railforge:k8s:GpuOperator", name, None, opts)
        self.namespace = k8s.core.v1.Namespace(
            f"{name}-namespace",
            metadata={"name": args.namespace, "labels": {"pod-security.kubernetes.io/enforce": "privileged"}},
            opts=child_options(self, opts),
        )
        self.release = None
        if args.helm_release:
            self.release = helm_release(
                "gpu-operator",
                args.versions.chart("gpuOperator"),
                self.namespace.metadata.name,
                gpu_operator_values(args),
                child_options(self, opts, self.namespace),
            )
        self.register_outputs({"namespace": self.namespace.metadata.name})
