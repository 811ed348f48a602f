"""The suspects' work order, through the change work-order writer's rows and workbook: one row per suspect
cable with both ends (rack, U, device, port, front-panel label) and the rack elevation to look at, in floor
order, then the re-test step."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from railforge.acceptance.analysis import Analysis
from railforge.change.workorder import ORDER_COLUMNS, PHASES, Steps
from railforge.formats.xlsx import Workbook
from railforge.plan.model import Plan

SUSPECT_COLUMNS = ("rank", "cable", "slow_paths", "lowest_gbps", "tests")


def write_suspect_work_order(plan: Plan, analysis: Analysis, path: Path) -> int:
    """Write the workbook atomically; return the number of steps."""
    links = plan.link_index()
    steps = Steps(plan)
    for rank, s in enumerate(analysis.suspects, 1):
        low = "failed" if s.lowest_gbps is None else f"{s.lowest_gbps:g} Gb/s"
        steps.cable("verify", "inspect", links[s.cable],
                    f"suspect #{rank}: on {s.slow_paths} slow paths ({low}), on no healthy one. Clean both ends "
                    f"and reseat; replace the cable or optic if it stays slow")
    retest = sorted({t for s in analysis.suspects for t in s.tests})
    steps.rows.append((PHASES.index("verify"), (1 << 30, 0, ""),
                       ("verify", "re-test", "", "", "", "", "", "", "", "", "", "", "", "", "", "",
                        f"re-run the pair tests {', '.join(retest[:20])}{' ...' if len(retest) > 20 else ''} "
                        "and `railforge acceptance analyze`", "")))
    rows = list(steps.sorted())
    path = path.absolute()
    tmp = path.parent / f".{path.name}.tmp-{os.getpid()}"
    try:
        wb = Workbook(tmp)
        wb.table("work-order", ORDER_COLUMNS, rows)
        wb.table("suspects", SUSPECT_COLUMNS,
                 [(i, s.cable, s.slow_paths, s.lowest_gbps if s.lowest_gbps is not None else "failed",
                   " ".join(s.tests)) for i, s in enumerate(analysis.suspects, 1)])
        wb.close()
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    return len(rows)
