"""A repair work order for what the receiver found broken, written with the change work-order machinery.

One workbook per subject (a cable, a device or an SU), in the same columns a technician already follows
for `railforge diff`: rack, U, device, port, port label, cable, far end, media, length and the rack
elevation to look at. Written atomically; an existing order for the same subject is left as it is, so
repeated alerts do not multiply paperwork.
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

from railforge.change.workorder import ORDER_COLUMNS, Steps
from railforge.formats.xlsx import Workbook
from railforge.health.decide import WorkItem
from railforge.health.topology import HealthIndex

SAFE = re.compile(r"[^A-Za-z0-9._-]")


def order_path(folder: Path, item: WorkItem) -> Path:
    return folder / f"repair-{item.kind}-{SAFE.sub('_', item.subject)}.xlsx"


def _rows(idx: HealthIndex, item: WorkItem) -> list[tuple]:
    steps = Steps(idx.plan)
    if item.kind == "cable":
        link = idx.links[item.subject]
        steps.cable("pull", "inspect", link, f"{item.why}: reseat both ends, clean or swap the optics")
        steps.cable("lay", "replace", link, "if still down: replace the cable (same label, same ports)")
    elif item.kind == "device":
        dev = idx.devices[item.subject]
        steps.device("remove-device", "inspect", dev, f"{item.why}: check power, console and logs")
        for link in idx.plan.links:
            if dev.name in (link.a.device, link.b.device) and link.fabric == "compute":
                steps.cable("verify", "check", link, f"cabled to {dev.name}")
    else:
        su = int(item.subject.removeprefix("su"))
        for leaf in idx.leaves_of_su.get(su, []):
            steps.device("remove-device", "inspect", idx.devices[leaf], f"{item.why}: SU {su} off the fabric")
    return list(steps.sorted())


def write_repair_order(folder: Path, idx: HealthIndex, item: WorkItem) -> Path | None:
    """The order's path, or None when one for this subject already exists."""
    path = order_path(folder, item)
    if path.exists():
        return None
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{path.name}.tmp-{os.getpid()}"
    try:
        wb = Workbook(tmp)
        wb.table("work-order", ORDER_COLUMNS, _rows(idx, item))
        wb.close()
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    return path
