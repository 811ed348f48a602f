"""The Volcano scheduler's configuration (`volcano-scheduler.conf`), for training jobs on a rail-optimized cluster.

Actions run in order each cycle: enqueue (admit a job only when its whole gang can fit), allocate, preempt (a
higher PriorityClass evicts lower ones; P5 never preempts), backfill (small jobs into gaps that no waiting job can
use). Plugins, tier 1 decides first: priority (job order by PriorityClass), gang (all-or-nothing placement),
conformance (never evict critical system pods); tier 2: drf and proportion (tenant Queues share GPUs by weight,
capped by capability), predicates, nodeorder, binpack (fill nodes' GPUs before opening new nodes) and
network-topology-aware (place a job inside as few HyperNodes as possible: one SU first), and with node groups on,
nodegroup (a tenant Queue's pods only on nodes of the group its Queue requires: the tenant's own, queues.py).

nodegroup runs with `strict: false`: a node without a `volcano.sh/nodegroup-name` label (a GPU node of no tenant)
stays open to Queues that require no group (Volcano's `default` queue), while a labelled node takes only pods of a
Queue that requires its group. Strict (the plugin's default) would close every unlabelled node to every Volcano Job.

proportion does not vote at enqueue (`enableJobEnqueued: false`): with its vote a Job enters the queue only while
the tenant's capability has room, so in a tenant full of P5 work a P0 Job stays Pending, and Volcano preempts
only for Jobs already in the queue: P0 would wait for P5 to end (found on the live v1.14.1 scheduler,
tests/k8s/test_volcano.py). Without it every Job is enqueued and the capability still caps what is allocated
(proportion's allocatable check) and what a preemptor may take; gang keeps each placement whole.

Plugin and action names are the ones Volcano v1.14.1 registers (tests/pulumi/volcano_v1.14.1_scheduler.yaml).
Written as data and dumped with PyYAML: the scheduler parses it with a YAML library into Go structs.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi_kubernetes as k8s
import yaml

import pulumi

from .options import child_options

GPU_RESOURCE = "nvidia.com/gpu"
CONFIGMAP_NAME = "volcano-scheduler-configmap"
CONFIGMAP_KEY = "volcano-scheduler.conf"
ACTIONS = ("enqueue", "allocate", "preempt", "backfill")


def scheduler_configuration(node_groups: bool = True) -> dict:
    conf = {
        "actions": ", ".join(ACTIONS),
        "tiers": [
            {"plugins": [
                {"name": "priority"},
                {"name": "gang", "enablePreemptable": False},
                {"name": "conformance"},
            ]},
            {"plugins": [
                {"name": "drf", "enablePreemptable": False},
                {"name": "predicates"},
                {"name": "proportion", "enableJobEnqueued": False},
                {"name": "nodeorder"},
                {"name": "binpack", "arguments": {
                    "binpack.weight": 10,
                    "binpack.resources": GPU_RESOURCE,
                    f"binpack.resources.{GPU_RESOURCE}": 10,
                }},
                {"name": "network-topology-aware", "arguments": {
                    "weight": 10,
                    "hypernode.binpack.resources": GPU_RESOURCE,
                    f"hypernode.binpack.resources.{GPU_RESOURCE}": 10,
                }},
            ]},
        ],
    }
    if node_groups:
        conf["tiers"][1]["plugins"].append({"name": "nodegroup", "arguments": {"strict": False}})
    return conf


def scheduler_conf_text(node_groups: bool = True) -> str:
    return yaml.safe_dump(scheduler_configuration(node_groups), sort_keys=False, default_flow_style=False)


@dataclass(frozen=True, slots=True)
class VolcanoSchedulerConfigArgs:
    namespace: str
    node_groups: bool = True


class VolcanoSchedulerConfig(pulumi.ComponentResource):
    """The ConfigMap the Volcano scheduler reads, in its namespace (created here: the stack installs no Volcano, and
    a chart installed later into an existing namespace keeps it). A Volcano installed by its Helm chart owns a
    ConfigMap of this name: switch this part off there (`volcanoSchedulerConfig: false`) and pass the stack output
    `volcanoSchedulerConf` as the chart's `custom.scheduler_config_override`."""

    def __init__(self, name: str, args: VolcanoSchedulerConfigArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("railforge:k8s:VolcanoSchedulerConfig", name, None, opts)
        self.text = scheduler_conf_text(args.node_groups)
        child = child_options(self, opts)
        self.namespace = k8s.core.v1.Namespace(f"{name}-namespace", metadata={"name": args.namespace}, opts=child)
        self.configmap = k8s.core.v1.ConfigMap(
            f"{name}-configmap",
            metadata={"name": CONFIGMAP_NAME, "namespace": self.namespace.metadata.name},
            data={CONFIGMAP_KEY: self.text},
            opts=child,
        )
        self.register_outputs({"conf": self.text})
