"""NetworkAttachmentDefinitions, one per rail, from the routability-checked attachment specs."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi_kubernetes as k8s

import pulumi

from .options import child_options
from .routing import AttachmentSpec

RESOURCE_ANNOTATION = "k8s.v1.cni.cncf.io/resourceName"


@dataclass(frozen=True, slots=True)
class RailAttachmentsArgs:
    namespace: str
    specs: tuple[AttachmentSpec, ...]


class RailAttachments(pulumi.ComponentResource):
    def __init__(self, name: str, args: RailAttachmentsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("railforge:k8s:RailAttachments", name, None, opts)
        self.attachments = [
            k8s.apiextensions.CustomResource(
                f"{name}-{spec.name}",
                api_version="k8s.cni.cncf.io/v1",
                kind="NetworkAttachmentDefinition",
                metadata={
                    "name": spec.name,
                    "namespace": args.namespace,
                    "annotations": {RESOURCE_ANNOTATION: f"rdma/{spec.rail.resource_name}"},
                },
                spec={} if spec.config_json is None else {"config": spec.config_json},
                opts=child_options(self, opts),
            )
            for spec in args.specs
        ]
        self.register_outputs({"attachments": [spec.name for spec in args.specs]})
