from __future__ import annotations

from topology.output import Output
from topology.plan import Plan
from topology.planio import write_plan


def render(plan: Plan, out: Output) -> None:
    with out.open("plan.json", "wb") as fh:
        write_plan(plan, fh)
