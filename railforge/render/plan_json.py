from __future__ import annotations

from railforge.formats.output import Output
from railforge.plan import outdir
from railforge.plan.io import write_plan
from railforge.plan.model import Plan


def render(plan: Plan, out: Output) -> None:
    with out.open(outdir.PLAN, "wb") as fh:
        write_plan(plan, fh)
