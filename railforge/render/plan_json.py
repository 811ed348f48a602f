from __future__ import annotations

from railforge.output import Output
from railforge.plan import Plan
from railforge.planio import write_plan


def render(plan: Plan, out: Output) -> None:
    with out.open("plan.json", "wb") as fh:
        write_plan(plan, fh)
