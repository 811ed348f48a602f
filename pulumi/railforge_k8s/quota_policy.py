"""Refuse, at submission, a Job its tenant's queue can never admit: a ValidatingAdmissionPolicy + Binding per tenant.

The tenant ClusterQueues queue StrictFIFO (queues.py), so a Workload at the head of a priority level holds every
later one of that level. A Job asking for more GPUs than the tenant's nominal quota never fits (Kueue keeps it
`QuotaReserved=False` and requeues it at the head at once), and so would block the tenant's level for good. The
API server refuses such a Job instead, with a message naming the Job, the GPUs asked, the quota and the queue.

What is counted, as Kueue counts a batch/v1 Job's pod set (pkg/controller/jobs/job, v0.19.2): pods =
`parallelism`, capped by `completions`, and by the `kueue.x-k8s.io/job-min-parallelism` annotation when set
(partial admission may then admit fewer pods, so only the minimum must fit). GPUs per pod = the greater of the
pod's containers (plus restartable init containers, i.e. sidecars) and its largest other init container; per
container the greater of `requests` and `limits` of `nvidia.com/gpu` (the API server defaults an extended
resource's request to its limit). Sidecars are all counted against every init container: an upper bound.

Matched: batch/v1 Jobs created (or updated) in the tenant's namespace with the label
`kueue.x-k8s.io/queue-name: <the tenant's LocalQueue>`, the only way Kueue v0.19.2 reads a Job's queue. An update
that does not grow the Job's GPUs and keeps its queue is never refused, so Kueue's own updates of a Job
(suspend, node selectors) that predates the policy keep working. Not matched: Jobs without the queue label (Kueue
does not manage them; they bypass the tenant's quota altogether) and other workload kinds (JobSet, PyTorchJob,
RayJob, plain Pods): the program's Kueue runs the batch/job integration only.

Plain dicts, as kueue_objects.py: the Pulumi component (queues.py) and the live tests apply the same objects.
Hand-written CEL: no library builds admission policies.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi_kubernetes as k8s

import pulumi

from . import names
from .options import child_options
from .queues import TenantQueue
from .volcano_config import GPU_RESOURCE

ADMISSION_API = "admissionregistration.k8s.io/v1"  # GA since Kubernetes 1.30
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
MIN_PARALLELISM = "kueue.x-k8s.io/job-min-parallelism"


def policy_name(queue: TenantQueue) -> str:
    return names.dns_name("railforge", "gpu-quota", queue.name)


def _gpus(container: str) -> str:
    """CEL: the container's GPUs, the greater of its request and its limit."""
    def one(field: str) -> str:
        return (f"(has({container}.resources) && has({container}.resources.{field}) && "
                f"'{GPU_RESOURCE}' in {container}.resources.{field} ? "
                f"quantity({container}.resources.{field}['{GPU_RESOURCE}']).asInteger() : 0)")
    return f"({one('requests')} > {one('limits')} ? {one('requests')} : {one('limits')})"


def _job_variables(prefix: str, job: str) -> list[dict]:
    """CEL variables of the Job `job` (`object`, or `oldObject` with prefix `old`: `oldPods`, `oldGpus` ...)."""
    def name(short: str) -> str:
        return prefix + short[0].upper() + short[1:] if prefix else short

    def var(short: str) -> str:
        return f"variables.{name(short)}"

    pod = f"{job}.spec.template.spec"
    sidecar = "has(c.restartPolicy) && c.restartPolicy == 'Always'"
    inits = f"(has({pod}.initContainers) ? {pod}.initContainers : [])"
    annotations = f"(has({job}.metadata.annotations) ? {job}.metadata.annotations : {{}})"
    minimum = f"{annotations}['{MIN_PARALLELISM}']"
    return [
        {"name": name("parallel"), "expression": f"has({job}.spec.parallelism) ? {job}.spec.parallelism : 1"},
        {"name": name("completed"), "expression":
            f"has({job}.spec.completions) && {job}.spec.completions < {var('parallel')} ? "
            f"{job}.spec.completions : {var('parallel')}"},
        {"name": name("pods"), "expression":
            f"'{MIN_PARALLELISM}' in {annotations} && {minimum}.matches('^[0-9]+$') && "
            f"int({minimum}) < {var('completed')} ? int({minimum}) : {var('completed')}"},
        {"name": name("mainGpus"), "expression":
            f"([0] + {pod}.containers.map(c, {_gpus('c')})).sum() + "
            f"([0] + {inits}.filter(c, {sidecar}).map(c, {_gpus('c')})).sum()"},
        {"name": name("initGpus"), "expression":
            f"([0] + {inits}.filter(c, !({sidecar})).map(c, {_gpus('c')})).max()"},
        {"name": name("podGpus"), "expression":
            f"{var('mainGpus')} > {var('initGpus')} ? {var('mainGpus')} : {var('initGpus')}"},
        {"name": name("gpus"), "expression": f"{var('pods')} * {var('podGpus')}"},
    ]


def _in_queue(job: str, queue: TenantQueue) -> str:
    return (f"has({job}.metadata.labels) && '{QUEUE_LABEL}' in {job}.metadata.labels && "
            f"{job}.metadata.labels['{QUEUE_LABEL}'] == '{queue.name}'")


def validating_policy(queue: TenantQueue) -> dict:
    quota = queue.gpus
    kept = (f"(request.operation == 'UPDATE' && {_in_queue('oldObject', queue)} && "
            "variables.oldGpus >= variables.gpus)")
    message = (
        f"'Job ' + object.metadata.name + ' asks for ' + string(variables.gpus) + ' {GPU_RESOURCE} (' + "
        f"string(variables.pods) + ' pods x ' + string(variables.podGpus) + '), more than the {quota} GPUs "
        f"of the quota of tenant {queue.tenant}: LocalQueue {queue.namespace}/{queue.name} (ClusterQueue {queue.name}) "
        f"would never admit it, and under StrictFIFO it would hold every later Job of its priority level. Ask for "
        f"at most {quota} GPUs.'"
    )
    return {
        "apiVersion": ADMISSION_API, "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": policy_name(queue)},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": queue.namespace}},
                "resourceRules": [{"apiGroups": ["batch"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                                   "resources": ["jobs"]}],
            },
            "matchConditions": [{"name": "bound-for-the-tenant-queue", "expression": _in_queue("object", queue)}],
            "variables": _job_variables("", "object") + _job_variables("old", "oldObject"),
            "validations": [{
                "expression": f"variables.gpus <= {quota} || {kept}",
                "messageExpression": message,
                "message": f"the Job asks for more {GPU_RESOURCE} than the {quota} GPUs of the quota of tenant "
                           f"{queue.tenant} (LocalQueue {queue.namespace}/{queue.name})",
                "reason": "Forbidden",
            }],
        },
    }


def policy_binding(queue: TenantQueue) -> dict:
    return {
        "apiVersion": ADMISSION_API, "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": policy_name(queue)},
        "spec": {"policyName": policy_name(queue), "validationActions": ["Deny"]},
    }


@dataclass(frozen=True, slots=True)
class QuotaPoliciesArgs:
    queues: tuple[TenantQueue, ...]
    depends_on: tuple[pulumi.Resource, ...] = field(default=())


class QuotaPolicies(pulumi.ComponentResource):
    """Per tenant: the ValidatingAdmissionPolicy and its Binding (Deny)."""

    def __init__(self, name: str, args: QuotaPoliciesArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("railforge:k8s:QuotaPolicies", name, None, opts)
        self.policies = []
        self.bindings = []
        for queue in args.queues:
            obj = validating_policy(queue)
            policy = k8s.admissionregistration.v1.ValidatingAdmissionPolicy(
                f"{name}-{queue.name}", metadata=obj["metadata"], spec=obj["spec"],
                opts=child_options(self, opts, *args.depends_on),
            )
            bound = policy_binding(queue)
            self.bindings.append(k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding(
                f"{name}-{queue.name}-binding", metadata=bound["metadata"], spec=bound["spec"],
                opts=child_options(self, opts, policy),
            ))
            self.policies.append(policy)
        self.register_outputs({"tenants": [q.tenant for q in args.queues]})
