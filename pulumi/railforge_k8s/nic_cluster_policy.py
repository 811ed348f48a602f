"""NicClusterPolicy: RDMA shared device plugin (one resource per rail), Multus + CNI plugins (+ IPoIB),
optional containerised DOCA driver."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi_kubernetes as k8s

import pulumi

from .options import child_options
from .plan_input import Rail
from .versions import Versions

MELLANOX_VENDOR = "15b3"
# The network-operator only reconciles the NicClusterPolicy with this name.
POLICY_NAME = "nic-cluster-policy"


@dataclass(frozen=True, slots=True)
class NicClusterPolicyArgs:
    rails: tuple[Rail, ...]
    mode: str
    rdma_hca_max: int
    install_doca_driver: bool
    versions: Versions
    image_pull_secrets: tuple[str, ...] = ()


def rdma_device_plugin_config(rails: tuple[Rail, ...], rdma_hca_max: int) -> dict:
    return {
        "periodicUpdateInterval": 300,
        "configList": [
            {
                "resourceName": rail.resource_name,
                "resourcePrefix": "rdma",
                "rdmaHcaMax": rdma_hca_max,
                "selectors": {"vendors": [MELLANOX_VENDOR], "ifNames": [rail.ifname]},
            }
            for rail in rails
        ],
    }


def _component(versions: Versions, key: str, pull_secrets: tuple[str, ...]) -> dict:
    img = versions.image(key)
    spec = {"image": img.image, "repository": img.repository, "version": img.version}
    if pull_secrets:
        spec["imagePullSecrets"] = list(pull_secrets)
    return spec


def nic_cluster_policy_spec(args: NicClusterPolicyArgs) -> dict:
    secrets = args.image_pull_secrets
    device_plugin = _component(args.versions, "rdmaSharedDevicePlugin", secrets)
    device_plugin["config"] = json.dumps(
        rdma_device_plugin_config(args.rails, args.rdma_hca_max), sort_keys=True, indent=2
    )
    spec: dict = {"rdmaSharedDevicePlugin": device_plugin}
    if args.mode != "host":
        secondary = {
            "multus": _component(args.versions, "multus", secrets),
            "cniPlugins": _component(args.versions, "cniPlugins", secrets),
        }
        if args.mode == "ipoib":
            secondary["ipoib"] = _component(args.versions, "ipoib", secrets)
        spec["secondaryNetwork"] = secondary
    if args.install_doca_driver:
        spec["ofedDriver"] = _component(args.versions, "docaDriver", secrets)
    return spec


class NicClusterPolicy(pulumi.ComponentResource):
    def __init__(self, name: str, args: NicClusterPolicyArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("railforge:k8s:NicClusterPolicy", name, None, opts)
        self.policy = k8s.apiextensions.CustomResource(
            f"{name}-policy",
            api_version="mellanox.com/v1alpha1",
            kind="NicClusterPolicy",
            metadata={"name": POLICY_NAME},
            spec=nic_cluster_policy_spec(args),
            opts=child_options(self, opts),
        )
        self.resource_names = [f"rdma/{rail.resource_name}" for rail in args.rails]
        self.register_outputs({"rdmaResources": self.resource_names})
