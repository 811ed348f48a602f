"""whereabouts IPAM (the pinned CRDs from pulumi/crds + node daemonset), on its own: the NicClusterPolicy no longer
deploys it."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi_kubernetes as k8s

import pulumi

from .crds import WHEREABOUTS, crd_resources
from .options import child_options
from .versions import Versions

NAME = "whereabouts"
CLUSTER_ROLE = "whereabouts-cni"


@dataclass(frozen=True, slots=True)
class WhereaboutsArgs:
    versions: Versions
    namespace: str = "kube-system"
    image_pull_secrets: tuple[str, ...] = ()


def cluster_role_rules() -> list[dict]:
    return [
        {
            "apiGroups": ["whereabouts.cni.cncf.io"],
            "resources": ["ippools", "overlappingrangeipreservations", "nodeslicepools"],
            "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
        },
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["*"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]},
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]},
        {
            "apiGroups": ["k8s.cni.cncf.io"],
            "resources": ["network-attachment-definitions"],
            "verbs": ["get", "list", "watch"],
        },
        {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch", "update"]},
    ]


def daemonset_spec(args: WhereaboutsArgs) -> dict:
    image = args.versions.image("whereabouts")
    labels = {"app": NAME, "name": NAME, "tier": "node"}
    pod_spec = {
        "hostNetwork": True,
        "serviceAccountName": NAME,
        "priorityClassName": "system-node-critical",
        "tolerations": [{"operator": "Exists", "effect": "NoSchedule"}],
        "containers": [
            {
                "name": NAME,
                "image": image.reference,
                "command": ["/bin/sh"],
                "args": ["-c", "SLEEP=false /install-cni.sh && /ip-control-loop -log-level info"],
                "env": [
                    {
                        "name": "NODENAME",
                        "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "spec.nodeName"}},
                    },
                    {
                        "name": "WHEREABOUTS_NAMESPACE",
                        "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
                    },
                ],
                "resources": {
                    "requests": {"cpu": "100m", "memory": "100Mi"},
                    "limits": {"cpu": "100m", "memory": "200Mi"},
                },
                "securityContext": {"privileged": True},
                "volumeMounts": [
                    {"name": "cnibin", "mountPath": "/host/opt/cni/bin"},
                    {"name": "cni-net-dir", "mountPath": "/host/etc/cni/net.d"},
                ],
            }
        ],
        "volumes": [
            {"name": "cnibin", "hostPath": {"path": "/opt/cni/bin"}},
            {"name": "cni-net-dir", "hostPath": {"path": "/etc/cni/net.d"}},
        ],
    }
    if args.image_pull_secrets:
        pod_spec["imagePullSecrets"] = [{"name": s} for s in args.image_pull_secrets]
    return {
        "selector": {"matchLabels": {"name": NAME}},
        "updateStrategy": {"type": "RollingUpdate"},
        "template": {"metadata": {"labels": labels}, "spec": pod_spec},
    }


class Whereabouts(pulumi.ComponentResource):
    def __init__(self, name: str, args: WhereaboutsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("railforge:k8s:Whereabouts", name, None, opts)
        child = child_options(self, opts)
        self.crds = crd_resources(f"{name}-crd", WHEREABOUTS, child)
        account = k8s.core.v1.ServiceAccount(
            f"{name}-serviceaccount", metadata={"name": NAME, "namespace": args.namespace}, opts=child
        )
        role = k8s.rbac.v1.ClusterRole(
            f"{name}-clusterrole", metadata={"name": CLUSTER_ROLE}, rules=cluster_role_rules(), opts=child
        )
        binding = k8s.rbac.v1.ClusterRoleBinding(
            f"{name}-clusterrolebinding",
            metadata={"name": NAME},
            role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": CLUSTER_ROLE},
            subjects=[{"kind": "ServiceAccount", "name": NAME, "namespace": args.namespace}],
            opts=child_options(self, opts, role, account),
        )
        self.daemonset = k8s.apps.v1.DaemonSet(
            f"{name}-daemonset",
            metadata={"name": NAME, "namespace": args.namespace, "labels": {"app": NAME, "tier": "node"}},
            spec=daemonset_spec(args),
            opts=child_options(self, opts, *self.crds, binding),
        )
        self.register_outputs({"daemonset": self.daemonset.metadata.name})
