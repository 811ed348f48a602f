"""Namespace and NVIDIA network-operator Helm release (NFD on, chart pinned)."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi_kubernetes as k8s

import pulumi

from .options import child_options
from .versions import Chart, Versions


@dataclass(frozen=True, slots=True)
class NetworkOperatorArgs:
    namespace: str
    versions: Versions
    image_pull_secrets: tuple[str, ...] = ()


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
    return k8s.helm.v3.Release(
        name,
        name=name,
        chart=chart.chart,
        version=chart.version,
        repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=chart.repo),
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
        self.release = helm_release(
            "network-operator",
            args.versions.chart("networkOperator"),
            self.namespace.metadata.name,
            network_operator_values(args),
            child_options(self, opts, self.namespace),
        )
        self.register_outputs({"namespace": self.namespace.metadata.name, "release": self.release.status})
