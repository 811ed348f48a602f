"""The stack's program: read config and plan, deploy, export. `__main__.py` runs it for a project on disk; the
Automation API runs the same function as an inline program (`LocalWorkspace` with `program=main`), which is how the
tests drive the real Pulumi CLI where no Python language host is installed (docs/pulumi.md)."""

from __future__ import annotations

from pathlib import Path

import pulumi

from .plan_input import load_plan
from .pulumi_config import read_stack_config
from .stack import deploy
from .volcano_config import scheduler_conf_text

PROJECT = "railforge-k8s"


def main() -> None:
    config = read_stack_config(pulumi.Config(PROJECT))
    plan = load_plan(Path(config.plan).expanduser())
    deployment = deploy(config, plan)
    pulumi.export("cluster", plan.cluster)
    pulumi.export("rdmaMode", deployment.mode)
    pulumi.export("skippedReleases", deployment.skipped_releases)
    pulumi.export("rdmaResources", deployment.rdma_resources)
    pulumi.export("nodesLabelled", len(plan.nodes) if deployment.node_labels else 0)
    pulumi.export("tenants", [t.name for t in plan.tenants] if deployment.tenant_queues else [])
    if config.volcano:
        pulumi.export("volcanoSchedulerConf", scheduler_conf_text(config.volcano_node_groups))
