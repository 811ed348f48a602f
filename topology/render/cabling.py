"""The cabling plan: cabling.xlsx (one sheet per fabric, a summary, the IP plan and pool headroom),
cabling.csv with the same cable rows, and one pull sheet per rack (what leaves this rack, to where)."""

from __future__ import annotations

from collections import defaultdict
from operator import itemgetter

from topology.output import Output
from topology.plan import Link, Plan
from topology.render.csvrows import write_rows
from topology.render.tables import (
    ADDRESS_COLUMNS,
    CABLE_COLUMNS,
    POOL_COLUMNS,
    PlanIndex,
    address_table,
    pool_row,
    speed_label,
)
from topology.render.xlsx import Workbook

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


def _pull_rows(cable_rows: list[tuple]) -> dict[str, list[tuple]]:
    per_rack: dict[str, list[tuple]] = defaultdict(list)
    for row in cable_rows:
        cable, a_rack, b_rack = row[0], row[5], row[10]
        a = row[5:10]
        b = row[10:15]
        tail = (row[15], row[16], row[20])
        leaves = "yes" if a_rack != b_rack else "no"
        per_rack[a_rack].append((cable, *a[1:], *b, *tail, leaves))
        if b_rack != a_rack:
            per_rack[b_rack].append((cable, *b[1:], *a, *tail, leaves))
    return per_rack


def _sort_pull_rows(rows: list[tuple]) -> None:
    """Top U first, then device and cable: two stable sorts on C-level keys (a reverse sort keeps ties in order)."""
    rows.sort(key=itemgetter(2, 0))
    rows.sort(key=itemgetter(1), reverse=True)


def render(plan: Plan, out: Output) -> None:
    idx = PlanIndex(plan)
    links = idx.sorted_links()
    cable_rows = [idx.cable_row(link) for link in links]
    with out.open("cabling.csv") as fh:
        write_rows(fh, [CABLE_COLUMNS])
        write_rows(fh, cable_rows)
    by_fabric: dict[str, list[tuple]] = {}
    for link, row in zip(links, cable_rows, strict=True):
        by_fabric.setdefault(link.fabric, []).append(row)
    wb = Workbook(out.path("cabling.xlsx"))
    wb.table("summary", SUMMARY_COLUMNS, summary_rows(links))
    for fabric, rows in by_fabric.items():
        wb.table(fabric, CABLE_COLUMNS, rows)
    rows, usage = address_table(plan)
    wb.table("ip-plan", ADDRESS_COLUMNS, rows)
    wb.table("pools", POOL_COLUMNS, [pool_row(u) for u in usage])
    wb.close()
    for rack, prow in sorted(_pull_rows(cable_rows).items()):
        _sort_pull_rows(prow)
        with out.open(f"pull-sheets/{rack}.csv") as fh:
            write_rows(fh, [PULL_COLUMNS, *prow])
