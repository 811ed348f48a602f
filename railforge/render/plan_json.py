from __future__ import annotations

from railforge import outdir
from railforge.output import Output
from railforge.plan import Plan
from railforge.planio import write_plan


def render(plan: Plan, out: Output) -> None:
    with out.open(outdir.PLAN, "wb") as fh:
        write_plan(plan, fh)
