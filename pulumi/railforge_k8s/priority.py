"""Six PriorityClasses, P0 (most important, preempts everything below) to P5 (best effort)."""

from __future__ import annotations

import pulumi_kubernetes as k8s

import pulumi

from .options import child_options

PRIORITY_LEVELS = (
    ("p0", 1_000_000, "P0: production-critical training; preempts every lower level"),
    ("p1", 900_000, "P1: high-priority training"),
    ("p2", 800_000, "P2: normal training"),
    ("p3", 700_000, "P3: experiments and evaluation"),
    ("p4", 600_000, "P4: development and debugging"),
    ("p5", 500_000, "P5: best effort and backfill; never preempts"),
)


class PriorityClasses(pulumi.ComponentResource):
    def __init__(self, name: str, opts: pulumi.ResourceOptions | None = None):
        super().__init__("railforge:k8s:PriorityClasses", name, None, opts)
        self.classes = [
            k8s.scheduling.v1.PriorityClass(
                f"{name}-{level}",
                metadata={"name": f"railforge-{level}"},
                value=value,
                global_default=False,
                preemption_policy="Never" if level == "p5" else "PreemptLowerPriority",
                description=description,
                opts=child_options(self, opts),
            )
            for level, value, description in PRIORITY_LEVELS
        ]
        self.register_outputs({"priorityClasses": [f"railforge-{level}" for level, _, _ in PRIORITY_LEVELS]})
