"""Namespace and NVIDIA network-operator Helm release (NFD on, chart pinned, or a local chart path); without a
release, the chart's NicClusterPolicy and NetworkAttachmentDefinition CRDs from pulumi/crds."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pulumi_kubernetes as k8s

import pulumi

from .crds import NETWORK_OPERATOR, crd_resources
from .options import child_options
from .versions import Chart, Versions


@dataclass(frozen=True, slots=True)
class NetworkOperatorArgs:
    namespace: str
    versions: Versions
    image_pull_secrets: tuple[str, ...] = ()
    helm_release: bool = True  # false: no chart reachable; install the chart's CRDs the stack's objects need


def network_operator_values(args: NetworkOperatorArgs) -> dict:
    operator = args.versions.image("networkOperator")
    init = args.versions.image("networkOperatorInitContainer")
    nfd = args.versions.image("nodeFeatureDiscovery")
    return {
        "nfd": {"enabled": True, "deployNodeFeatureRules": True},
        "sriovNetworkOperator": {"enabled": False},
        "operator": {
            "repository": operator.repository,
            "image": operator.image,
            "tag": operator.version,
            "ofedDriver": {
                "initContainer": {"repository": init.repository, "image": init.image, "version": init.version}
            },
        },
        "node-feature-discovery": {
            "image": {"repository": f"{nfd.repository}/{nfd.image}", "tag": nfd.version},
        },
        "imagePullSecrets": list(args.image_pull_secrets),
    }


def helm_release(name: str, chart: Chart, namespace, values: dict, opts: pulumi.ResourceOptions):
    source = (
        {"chart": str(Path(chart.path).expanduser())}
        if chart.path
        else {"chart": chart.chart, "repository_opts": k8s.helm.v3.RepositoryOptsArgs(repo=chart.repo)}
    )
    return k8s.helm.v3.Release(
        name,
        name=name,
        version=chart.version,
        **source,
        namespace=namespace,
        values=values,
        create_namespace=False,
        opts=opts,
    )


class NetworkOperator(pulumi.ComponentResource):
    def __init__(self, name: str, args: NetworkOperatorArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("railforge:k8s:NetworkOperator", name, None, opts)
        child = child_options(self, opts)
        self.namespace = k8s.core.v1.Namespace(
            f"{name}-namespace",
            metadata={"name": args.namespace, "labels": {"pod-security.kubernetes.io/enforce": "privileged"}},
            opts=child,
        )
        self.release = None
        self.crds = []
        if args.helm_release:
            self.release = helm_release(
                "network-operator",
                args.versions.chart("networkOperator"),
                self.namespace.metadata.name,
                network_operator_values(args),
                child_options(self, opts, self.namespace),
            )
        else:
            self.crds = crd_resources(f"{name}-crd", NETWORK_OPERATOR, child)
        self.register_outputs({"namespace": self.namespace.metadata.name})

    @property
    def ready(self) -> list[pulumi.Resource]:
        """What the NicClusterPolicy and the attachments wait for: the release, or the CRDs installed in its place."""
        return [self.release] if self.release is not None else list(self.crds)
