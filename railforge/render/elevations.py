"""elevations/row-<NNN>.svg: every rack of a row drawn front-on, each device at its U and height with its name,
model and cabled/total ports, coloured by role; row 0 is the core row. Only reads the plan."""

from __future__ import annotations

from collections import defaultdict
from xml.sax.saxutils import escape, quoteattr

from railforge.formats.output import Output
from railforge.plan.model import Device, Plan, Rack

U_PX, RACK_W, RACK_GAP, MARGIN, TOP, LEGEND_H = 14, 190, 30, 40, 60, 40
ROLE_COLOURS = {
    "node": "#70AD47", "ufm": "#A9D18E", "mgmt": "#C5E0B4",
    "leaf": "#4472C4", "spine": "#2F5597", "superspine": "#1F3864",
    "storage-leaf": "#ED7D31", "storage-spine": "#C55A11", "storage-superspine": "#843C0C",
    "oob-leaf": "#7F7F7F", "oob-spine": "#595959", "oob-superspine": "#3A3A3A",
}


def elevation_file(row: int) -> str:
    return f"elevations/row-{row:03d}.svg"


def _device(dev: Device, x: int, top: int, rack_h: int) -> str:
    y = top + (rack_h - (dev.u + dev.height_u - 1)) * U_PX
    h = dev.height_u * U_PX
    cabled = sum(1 for p in dev.ports if p.link)
    label = f"{dev.name}  {cabled}/{len(dev.ports)} ports"
    title = (f"{dev.name}: {dev.role} {dev.model}, U{dev.u}-U{dev.u + dev.height_u - 1}, "
             f"{cabled} of {len(dev.ports)} ports cabled")
    text_y = y + h / 2 + 4
    return (f'<g class="device" data-device={quoteattr(dev.name)} data-role={quoteattr(dev.role)}>'
            f"<title>{escape(title)}</title>"
            f'<rect x="{x + 22}" y="{y}" width="{RACK_W - 26}" height="{h}" '
            f'fill="{ROLE_COLOURS.get(dev.role, "#BFBFBF")}" stroke="#fff" stroke-width="1"/>'
            f'<text x="{x + 26}" y="{text_y:g}" class="dev">{escape(label)}</text></g>')


def _rack(rack: Rack, devs: list[Device], x: int) -> list[str]:
    out = [f'<g class="rack" data-rack={quoteattr(rack.name)} data-height-u="{rack.height_u}">',
           f'<text x="{x + RACK_W / 2:g}" y="{TOP - 10}" class="rack">{escape(rack.name)} ({escape(rack.kind)})</text>',
           f'<rect class="frame" x="{x + 20}" y="{TOP}" width="{RACK_W - 22}" height="{rack.height_u * U_PX}" '
           'fill="#F2F2F2" stroke="#404040"/>']
    for u in range(1, rack.height_u + 1, 4):
        out.append(f'<text x="{x + 16}" y="{TOP + (rack.height_u - u + 1) * U_PX - 3}" class="u">{u}</text>')
    out += [_device(d, x, TOP, rack.height_u) for d in sorted(devs, key=lambda d: (-d.u, d.name))]
    out.append("</g>")
    return out


def row_svg(plan: Plan, row: int, racks: list[Rack], devices: dict[str, list[Device]]) -> str:
    width = 2 * MARGIN + len(racks) * (RACK_W + RACK_GAP)
    tallest = max(r.height_u for r in racks)
    height = TOP + tallest * U_PX + LEGEND_H + 20
    body: list[str] = []
    for i, rack in enumerate(racks):
        body += _rack(rack, devices.get(rack.name, []), MARGIN + i * (RACK_W + RACK_GAP))
    roles = sorted({d.role for r in racks for d in devices.get(r.name, [])}, key=list(ROLE_COLOURS).index)
    ly = TOP + tallest * U_PX + 30
    for i, role in enumerate(roles):
        lx = MARGIN + i * 130
        body.append(f'<rect x="{lx}" y="{ly - 11}" width="12" height="12" fill="{ROLE_COLOURS[role]}"/>'
                    f'<text x="{lx + 16}" y="{ly}" class="legend">{escape(role)}</text>')
    title = f"{plan.cluster.name}: row {row}{' (core)' if row == 0 else ''}, {len(racks)} racks"
    head = ['<?xml version="1.0" encoding="UTF-8"?>',
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" font-family="sans-serif" data-row="{row}" data-u-px="{U_PX}">',
            f"<title>{escape(title)}</title>",
            "<style>.h{font-size:16px;font-weight:bold}text.rack{font-size:12px;text-anchor:middle}"
            ".u{font-size:8px;text-anchor:end;fill:#666}.dev{font-size:9px;fill:#fff;text-anchor:start}.legend{font-size:11px}</style>",
            f'<text x="{MARGIN}" y="22" class="h">{escape(title)}</text>']
    return "\n".join(head + body + ["</svg>"]) + "\n"


def render(plan: Plan, out: Output) -> None:
    by_row: dict[int, list[Rack]] = defaultdict(list)
    for r in plan.racks:
        by_row[r.row].append(r)
    devices: dict[str, list[Device]] = defaultdict(list)
    for d in plan.devices:
        devices[d.rack].append(d)
    for row, racks in sorted(by_row.items()):
        racks.sort(key=lambda r: (r.position, r.name))
        out.write_text(elevation_file(row), row_svg(plan, row, racks, devices))
