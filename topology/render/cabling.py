"""The cabling plan: cabling.xlsx (one sheet per fabric, a summary, the IP plan and pool headroom),
cabling.csv with the same cable rows, and one pull sheet per rack (what leaves this rack, to where)."""

from __future__ import annotations

import csv
from collections import defaultdict

import xlsxwriter

from topology.output import Output
from topology.plan import Link, Plan
from topology.render.tables import (
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
MAX_WIDTH = 48
WORKBOOK_OPTIONS = {"constant_memory": True, "strings_to_numbers": False, "strings_to_formulas": False,
                    "strings_to_urls": False}


class _Sheet:
    """A worksheet written row by row (constant memory), with header, frozen pane, filter and fitted widths."""

    def __init__(self, wb: xlsxwriter.Workbook, name: str, columns: tuple[str, ...], header_fmt):
        self.ws = wb.add_worksheet(name)
        self.columns = columns
        self.widths = [len(c) + 2 for c in columns]
        self.row = 1
        self.closed = False
        self.ws.write_row(0, 0, columns, header_fmt)
        self.ws.freeze_panes(1, 0)

    def add(self, values: tuple) -> None:
        ws, r, widths = self.ws, self.row, self.widths
        for c, v in enumerate(values):
            if v is None or v == "":
                continue
            if isinstance(v, str):
                ws.write_string(r, c, v)
                n = len(v)
            else:
                ws.write_number(r, c, v)
                n = len(str(v))
            if n + 2 > widths[c]:
                widths[c] = n + 2
        self.row = r + 1

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.ws.autofilter(0, 0, max(self.row - 1, 1), len(self.columns) - 1)
        for c, w in enumerate(self.widths):
            self.ws.set_column(c, c, min(w, MAX_WIDTH))


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


def _pull_rows(idx: PlanIndex, links: list[Link]) -> dict[str, list[tuple]]:
    per_rack: dict[str, list[tuple]] = defaultdict(list)
    for link in links:
        row = idx.cable_row(link)
        a_rack, b_rack = row[5], row[10]
        a = row[5:10]
        b = row[10:15]
        tail = (row[15], row[16], row[20])
        leaves = "yes" if a_rack != b_rack else "no"
        per_rack[a_rack].append((link.id, *a[1:], *b, *tail, leaves))
        if b_rack != a_rack:
            per_rack[b_rack].append((link.id, *b[1:], *a, *tail, leaves))
    return per_rack


def render(plan: Plan, out: Output) -> None:
    idx = PlanIndex(plan)
    links = idx.sorted_links()
    wb = xlsxwriter.Workbook(str(out.path("cabling.xlsx")), WORKBOOK_OPTIONS)
    bold = wb.add_format({"bold": True, "bg_color": "#D9E1F2", "border": 1})
    summary = _Sheet(wb, "summary", SUMMARY_COLUMNS, bold)
    for r in summary_rows(links):
        summary.add(r)
    summary.close()
    sheets: dict[str, _Sheet] = {}
    with out.open("cabling.csv") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(CABLE_COLUMNS)
        for link in links:
            sheet = sheets.get(link.fabric)
            if sheet is None:
                for s in sheets.values():
                    s.close()
                sheet = sheets[link.fabric] = _Sheet(wb, link.fabric, CABLE_COLUMNS, bold)
            row = idx.cable_row(link)
            w.writerow(row)
            sheet.add(row)
    for s in sheets.values():
        s.close()
    rows, usage = address_table(plan)
    ip = _Sheet(wb, "ip-plan", ADDRESS_COLUMNS, bold)
    for r in rows:
        ip.add(r)
    ip.close()
    pools = _Sheet(wb, "pools", POOL_COLUMNS, bold)
    for u in usage:
        pools.add(pool_row(u))
    pools.close()
    wb.close()
    for rack, prow in sorted(_pull_rows(idx, links).items()):
        prow.sort(key=lambda r: (-r[1], r[2], r[0]))
        with out.open(f"pull-sheets/{rack}.csv") as fh:
            w = csv.writer(fh, lineterminator="\n")
            w.writerow(PULL_COLUMNS)
            w.writerows(prow)
