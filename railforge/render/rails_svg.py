"""rails/su-<NNN>.svg: which NIC of which node goes to which leaf port, one drawing per SU — the picture a
technician cables a rail-optimized SU from. Rows are the SU's nodes (and appliances such as UFM) in slot order,
columns the rails; each cell names the node's interface, the leaf and its port, and carries the cable label as
its tooltip. Hand-written SVG like the other drawings (no plotting library draws a labelled grid more simply).
Only reads the plan."""

from __future__ import annotations

from collections import defaultdict
from xml.sax.saxutils import escape, quoteattr

from railforge.output import Output
from railforge.plan import Device, Plan

NAME_W, CELL_W, CELL_H, HEAD_H, MARGIN, TITLE_H = 120, 150, 30, 24, 20, 36
RAIL_COLOURS = ("#4472C4", "#ED7D31", "#70AD47", "#7030A0", "#C00000", "#00B0F0", "#BF8F00", "#2F5597")


def rails_file(su: int) -> str:
    return f"rails/su-{su:03d}.svg"


def _cell(dev: Device, rail, x: int, y: int) -> str:
    colour = RAIL_COLOURS[rail.rail % len(RAIL_COLOURS)]
    title = f"{dev.name} {rail.ifname} ({rail.hca}) -> {rail.leaf} {rail.leaf_port}, cable {rail.cable}"
    return (f'<g class="nic" data-node={quoteattr(dev.name)} data-rail="{rail.rail}" data-leaf={quoteattr(rail.leaf)} '
            f'data-port={quoteattr(rail.leaf_port)}><title>{escape(title)}</title>'
            f'<rect x="{x}" y="{y}" width="{CELL_W - 4}" height="{CELL_H - 4}" rx="3" fill="{colour}"/>'
            f'<text x="{x + 5}" y="{y + 11}" class="c">{escape(rail.ifname)} → {escape(rail.leaf)}</text>'
            f'<text x="{x + 5}" y="{y + 22}" class="c">port {escape(rail.leaf_port)}</text></g>')


def su_svg(plan: Plan, su: int, devices: list[Device]) -> str:
    rails = sorted({r.rail for d in devices for r in d.rails})
    col = {k: MARGIN + NAME_W + i * CELL_W for i, k in enumerate(rails)}
    width = MARGIN * 2 + NAME_W + len(rails) * CELL_W
    top = TITLE_H + HEAD_H
    height = top + len(devices) * CELL_H + MARGIN
    title = f"{plan.cluster.name}: SU {su:03d}, {len(devices)} endpoints on {len(rails)} rails"
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
           f'font-family="sans-serif" data-su="{su}">',
           f"<title>{escape(title)}</title>",
           "<style>.h{font-size:16px;font-weight:bold}.r{font-size:11px;font-weight:bold;text-anchor:start}"
           ".n{font-size:11px;text-anchor:start}.c{font-size:9px;fill:#fff;text-anchor:start}</style>",
           f'<text x="{MARGIN}" y="22" class="h">{escape(title)}</text>']
    for k in rails:
        out.append(f'<text x="{col[k] + 5}" y="{TITLE_H + 14}" class="r">rail {k}</text>')
    for i, dev in enumerate(devices):
        y = top + i * CELL_H
        out.append(f'<text x="{MARGIN}" y="{y + 17}" class="n">{escape(dev.name)}</text>')
        out += [_cell(dev, r, col[r.rail], y) for r in sorted(dev.rails, key=lambda r: r.rail)]
    return "\n".join([*out, "</svg>"]) + "\n"


def render(plan: Plan, out: Output) -> None:
    by_su: dict[int, list[Device]] = defaultdict(list)
    for d in plan.devices:
        if d.rails and d.su is not None:
            by_su[d.su].append(d)
    for su, devices in sorted(by_su.items()):
        devices.sort(key=lambda d: (d.slot or 0, d.name))
        out.write_text(rails_file(su), su_svg(plan, su, devices))
