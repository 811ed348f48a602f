"""railforge Kubernetes stack: RDMA networking and topology-aware scheduling for the cluster in `plan`."""

from pathlib import Path

from railforge_k8s.plan_input import load_plan
from railforge_k8s.pulumi_config import read_stack_config
from railforge_k8s.stack import deploy
from railforge_k8s.volcano_config import scheduler_conf_text

import pulumi

config = read_stack_config(pulumi.Config())
plan = load_plan(Path(config.plan).expanduser())
deployment = deploy(config, plan)

pulumi.export("cluster", plan.cluster)
pulumi.export("rdmaMode", deployment.mode)
pulumi.export("rdmaResources", deployment.rdma_resources)
pulumi.export("nodesLabelled", len(plan.nodes) if deployment.node_labels else 0)
pulumi.export("tenants", [t.name for t in plan.tenants] if deployment.tenant_queues else [])
if config.volcano:
    pulumi.export("volcanoSchedulerConf", scheduler_conf_text())
