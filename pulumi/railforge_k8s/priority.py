"""Six priority levels, P0 (most important, preempts everything below) to P5 (best effort), as Kubernetes
PriorityClasses (read by the default scheduler and by Volcano) and Kueue WorkloadPriorityClasses.

The levels are the plan's Slurm QOS (`slurm.qos`, highest first; the default names p0..p5 when the plan has no
`slurm:`), so a job's level means the same under Slurm and Kubernetes: a level whose QOS preempts every lower
level is `PreemptLowerPriority`, a level that preempts nothing is `Never`. Kubernetes cannot say "preempts only
some lower levels", so a plan that does is refused rather than mistranslated.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib.metadata import version

import pulumi_kubernetes as k8s

import pulumi

from . import names
from .options import child_options
from .plan_input import PlanError, QosLevel
from .versions import KUEUE_API

TOP_VALUE = 1_000_000
VALUE_STEP = 100_000
DESCRIPTIONS = (
    "production-critical training; preempts every lower level",
    "high-priority training",
    "normal training",
    "experiments and evaluation",
    "development and debugging",
    "best effort and backfill; never preempts",
)


@dataclass(frozen=True, slots=True)
class PriorityLevel:
    name: str
    value: int
    preemption_policy: str
    description: str


def priority_levels(qos: tuple[QosLevel, ...]) -> tuple[PriorityLevel, ...]:
    levels = []
    for i, level in enumerate(qos):
        lower = tuple(q.name for q in qos[i + 1:])
        if level.preempts not in ((), lower):
            raise PlanError(
                f"plan.json slurm.qos {level.name!r} preempts {list(level.preempts)}: Kubernetes priority classes "
                f"preempt every lower level ({list(lower)}) or none"
            )
        policy = "PreemptLowerPriority" if level.preempts else "Never"
        levels.append(PriorityLevel(
            name=names.dns_name("railforge", level.name),
            value=TOP_VALUE - i * VALUE_STEP,
            preemption_policy=policy,
            description=f"P{i} (Slurm QOS {level.name}): {DESCRIPTIONS[i]}",
        ))
    return tuple(levels)


class PriorityClasses(pulumi.ComponentResource):
    def __init__(self, name: str, levels: tuple[PriorityLevel, ...], opts: pulumi.ResourceOptions | None = None):
        super().__init__("railforge:k8s:PriorityClasses", name, None, opts)
        self.classes = [
            k8s.scheduling.v1.PriorityClass(
                f"{name}-{level.name.removeprefix('railforge-')}",
                metadata={"name": level.name},
                value=level.value,
                global_default=False,
                preemption_policy=level.preemption_policy,
                description=level.description,
                opts=child_options(self, opts),
            )
            for level in levels
        ]
        self.register_outputs({"priorityClasses": [level.name for level in levels]})


PRERELEASE = {"a": "alpha", "b": "beta", "rc": "rc"}


def provider_version(installed: str | None = None) -> str:
    """The Kubernetes SDK's version as the engine wants it, semver: PEP 440's 4.25.0a1768448096 is
    4.25.0-alpha.1768448096 (the SDK's own resources convert it the same way; the engine refuses the PEP 440 form)."""
    text = installed or version("pulumi-kubernetes")
    m = re.fullmatch(r"(\d+\.\d+\.\d+)(?:(a|b|rc)(\d+))?", text)
    if m is None:
        raise PlanError(f"pulumi-kubernetes {text!r} is not a release version (X.Y.Z, or X.Y.Z a/b/rc N)")
    return f"{m[1]}-{PRERELEASE[m[2]]}.{m[3]}" if m[2] else m[1]


class FieldsCustomResource(pulumi.CustomResource):
    """A custom resource whose fields sit beside metadata, not under `spec` (WorkloadPriorityClass has `value`):
    apiextensions.CustomResource takes only spec and metadata in Python. Same type token and provider version."""

    def __init__(self, name: str, api_version: str, kind: str, fields: dict, opts: pulumi.ResourceOptions):
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(version=provider_version()))
        super().__init__(f"kubernetes:{api_version}:{kind}", name, {"apiVersion": api_version, "kind": kind, **fields},
                         opts)


class WorkloadPriorityClasses(pulumi.ComponentResource):
    """Kueue's priority for queueing and preemption inside a ClusterQueue; same names and values as above."""

    def __init__(self, name: str, levels: tuple[PriorityLevel, ...], opts: pulumi.ResourceOptions | None = None):
        super().__init__("railforge:k8s:WorkloadPriorityClasses", name, None, opts)
        self.classes = [
            FieldsCustomResource(
                f"{name}-{level.name.removeprefix('railforge-')}",
                KUEUE_API,
                "WorkloadPriorityClass",
                {"metadata": {"name": level.name}, "value": level.value, "description": level.description},
                child_options(self, opts),
            )
            for level in levels
        ]
        self.register_outputs({"workloadPriorityClasses": [level.name for level in levels]})
