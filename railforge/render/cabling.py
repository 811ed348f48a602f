"""The cabling plan: cabling.xlsx (one sheet per fabric, a summary, the IP plan and pool headroom),
cabling.csv with the same cable rows, and one pull sheet per rack (what leaves this rack, to where)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence
from itertools import groupby
from operator import itemgetter

from railforge.formats.csvrows import column_lines, format_rows, write_rows
from railforge.formats.output import Output
from railforge.formats.xlsx import Workbook
from railforge.plan.model import Link, Plan
from railforge.plan.tables import (
    ADDRESS_COLUMNS,
    CABLE_COLUMNS,
    POOL_COLUMNS,
    PlanIndex,
    address_table,
    pool_row,
    speed_label,
)

SUMMARY_COLUMNS = ("fabric", "tier", "speed", "media", "part", "length_m", "cables", "transceivers",
                   "total_length_m")
PULL_COLUMNS = ("cable", "local_u", "local_device", "local_port", "local_port_label", "remote_rack", "remote_u",
                "remote_device", "remote_port", "remote_port_label", "speed", "media", "length_m", "leaves_rack")


def summary_rows(links: list[Link]) -> list[tuple]:
    agg: dict[tuple, list[float]] = defaultdict(lambda: [0, 0, 0.0])
    for link in links:
        a = agg[(link.fabric, link.tier, link.speed_mbps, link.media, link.part or "", link.length_m)]
        a[0] += 1
        a[1] += link.transceivers
        a[2] += link.length_m
    order = {f: i for i, f in enumerate(("compute", "storage", "oob"))}
    out = []
    for k in sorted(agg, key=lambda k: (order.get(k[0], 9), k[1], -k[2], k[3], k[5])):
        n, t, total = agg[k]
        out.append((k[0], k[1], speed_label(k[2]), k[3], k[4], k[5], n, t, round(total, 1)))
    return out


# the cable table's columns (CABLE_COLUMNS) behind each pull sheet column, seen from the A end and from the B end
_FROM_A = (0, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 20)
_FROM_B = (0, 11, 12, 13, 14, 5, 6, 7, 8, 9, 15, 16, 20)


def pull_sheets(columns: Sequence[Sequence]) -> Iterator[tuple[str, str]]:
    """(rack, CSV text) per rack, racks in order: every cable is a row in its A end's rack and, when it leaves
    that rack, in its B end's, seen from there; top U first, then device and cable. Each cable's two lines are
    formatted once, for all cables a column at a time, and only sorted into racks."""
    cable, a_rack, a_u, a_device, b_rack, b_u, b_device = (columns[i] for i in (0, 5, 6, 7, 10, 11, 12))
    leaves = ["no" if a == b else "yes" for a, b in zip(a_rack, b_rack, strict=True)]
    with_leaves = [*columns, leaves]
    from_a, from_b = column_lines(with_leaves, (*_FROM_A, len(columns)), (*_FROM_B, len(columns)))
    per_rack: dict[str, list[tuple]] = defaultdict(list)
    for c, ar, au, ad, al, br, bu, bd, bl in zip(cable, a_rack, a_u, a_device, from_a, b_rack, b_u, b_device, from_b,
                                                 strict=True):
        per_rack[ar].append((au, ad, c, al))
        if br != ar:
            per_rack[br].append((bu, bd, c, bl))
    header = format_rows([PULL_COLUMNS])
    for rack, rows in sorted(per_rack.items()):
        _sort_pull_rows(rows)
        yield rack, header + "\n".join(map(itemgetter(3), rows)) + "\n"


def _sort_pull_rows(rows: list[tuple]) -> None:
    """(local U, local device, cable, ...) rows top U first, then device and cable: two stable sorts on C-level
    keys (a reverse sort keeps ties in order)."""
    rows.sort(key=itemgetter(1, 2))
    rows.sort(key=itemgetter(0), reverse=True)


def render(plan: Plan, out: Output) -> None:
    idx = PlanIndex(plan)
    links = idx.sorted_links()
    cable_rows = [idx.cable_row(link) for link in links]
    with out.open("cabling.csv") as fh:
        write_rows(fh, [CABLE_COLUMNS])
        write_rows(fh, cable_rows)
    columns = list(zip(*cable_rows, strict=True)) if cable_rows else [()] * len(CABLE_COLUMNS)
    del cable_rows
    wb = Workbook(out.path("cabling.xlsx"))
    wb.table("summary", SUMMARY_COLUMNS, summary_rows(links))
    start = 0
    for fabric, group in groupby(columns[1]):  # links come sorted by fabric first
        end = start + sum(1 for _ in group)
        wb.columns_table(fabric, CABLE_COLUMNS, [values[start:end] for values in columns])
        start = end
    rows, usage = address_table(plan)
    wb.table("ip-plan", ADDRESS_COLUMNS, rows)
    wb.table("pools", POOL_COLUMNS, [pool_row(u) for u in usage])
    wb.close()
    for rack, text in pull_sheets(columns):
        with out.open(f"pull-sheets/{rack}.csv") as fh:
            fh.write(text)
