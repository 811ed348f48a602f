"""elevations/row-<NNN>.svg: every rack of a row drawn front-on, each device at its U and height with its name,
model and cabled/total ports, coloured by role (each label in black or white, whichever reads at >= 4.5:1 on its
role's colour, WCAG 2.x); each rack's typical and maximum power (pluggables included; a rack over the budget framed
in red and marked), the row's in the title; row 0 is the core row. Where one model shows different port totals in
the row, the legend says why: each total split into its cages' breakout modes (a cage split 2x400G is two ports),
unused cages and the management port, counted from the plan's ports. Only reads the plan."""

from __future__ import annotations

from collections import defaultdict
from xml.sax.saxutils import escape, quoteattr

from railforge.formats.output import Output
from railforge.plan.model import Device, Plan, Rack
from railforge.plan.power import Draw, PowerView, RackPower, kw, power

U_PX, RACK_W, RACK_GAP, MARGIN, TOP, LEGEND_H = 14, 190, 30, 40, 74, 40
ROLE_COLOURS = {
    "node": "#70AD47", "ufm": "#A9D18E", "mgmt": "#C5E0B4",
    "leaf": "#4472C4", "spine": "#2F5597", "superspine": "#1F3864",
    "storage-leaf": "#ED7D31", "storage-spine": "#C55A11", "storage-superspine": "#843C0C",
    "oob-leaf": "#7F7F7F", "oob-spine": "#595959", "oob-superspine": "#3A3A3A",
}
OTHER_COLOUR = "#BFBFBF"
DARK_TEXT = {"node", "ufm", "mgmt", "storage-leaf", "storage-spine", "oob-leaf", None}
"""Roles whose colour is too light for white text (white on the mgmt green was 1.4:1); None: OTHER_COLOUR."""
NOTE_LINE = 14


def elevation_file(row: int) -> str:
    return f"elevations/row-{row:03d}.svg"


def _device(dev: Device, x: int, top: int, rack_h: int, draw: Draw) -> str:
    y = top + (rack_h - (dev.u + dev.height_u - 1)) * U_PX
    h = dev.height_u * U_PX
    cabled = sum(1 for p in dev.ports if p.link)
    label = f"{dev.name}  {cabled}/{len(dev.ports)} ports"
    title = (f"{dev.name}: {dev.role} {dev.model}, U{dev.u}-U{dev.u + dev.height_u - 1}, "
             f"{cabled} of {len(dev.ports)} ports cabled, {draw.typical_w:,.0f} W typical / {draw.max_w:,.0f} W max "
             "with its pluggables")
    text_y = y + h / 2 + 4
    role = dev.role if dev.role in ROLE_COLOURS else None
    ink = " dark" if role in DARK_TEXT else ""
    return (f'<g class="device" data-device={quoteattr(dev.name)} data-role={quoteattr(dev.role)}>'
            f"<title>{escape(title)}</title>"
            f'<rect x="{x + 22}" y="{y}" width="{RACK_W - 26}" height="{h}" '
            f'fill="{ROLE_COLOURS.get(dev.role, OTHER_COLOUR)}" stroke="#fff" stroke-width="1"/>'
            f'<text x="{x + 26}" y="{text_y:g}" class="dev{ink}">{escape(label)}</text></g>')


def port_mix(dev: Device) -> tuple[tuple[str, str, int, int], ...]:
    """What a device's port total is made of: (cage mode, "" or "unused", cages, ports) per breakout mode and use,
    then ("", port name, 0, 1) per port outside a cage (the management port)."""
    cages: dict[int, list] = defaultdict(list)
    for p in dev.ports:
        if p.breakout:
            cages[p.index].append(p)
    mix: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for ports in cages.values():
        key = (ports[0].breakout, "" if any(p.link for p in ports) else "unused")
        mix[key][0] += 1
        mix[key][1] += len(ports)
    ordered = sorted(mix.items(), key=lambda kv: (kv[0][1], kv[0][0]))
    return (tuple((mode, use, n, ports) for (mode, use), (n, ports) in ordered)
            + tuple(("", p.name, 0, 1) for p in dev.ports if not p.breakout))


def port_notes(devs: list[Device]) -> list[str]:
    """One line per port total of each model that shows more than one total among `devs`, saying what it is made
    of and on which roles."""
    totals: dict[str, dict[tuple, set[str]]] = defaultdict(lambda: defaultdict(set))
    for d in devs:
        totals[d.model][port_mix(d)].add(d.role)
    lines = []
    for model, mixes in sorted(totals.items()):
        if len({sum(part[3] for part in mix) for mix in mixes}) < 2:
            continue
        for mix, roles in sorted(mixes.items(), key=lambda kv: (sum(p[3] for p in kv[0]), kv[0])):
            parts = [f"{n} {use + ' ' if use else ''}{'cage' if n == 1 else 'cages'} × {mode} ({ports})"
                     if mode else f"{use} ({ports})" for mode, use, n, ports in mix]
            lines.append(f"{model}: {sum(p[3] for p in mix)} ports on {', '.join(sorted(roles))} = "
                         + " + ".join(parts))
    return lines


def _rack(rack: Rack, devs: list[Device], x: int, view: PowerView, rp: RackPower) -> list[str]:
    over = ' data-over-budget="true"' if rp.over else ""
    mark = " OVER BUDGET" if rp.over else ""
    stroke = 'stroke="#C00000" stroke-width="3"' if rp.over else 'stroke="#404040"'
    power_class = "power over" if rp.over else "power"
    out = [f'<g class="rack" data-rack={quoteattr(rack.name)} data-height-u="{rack.height_u}" '
           f'data-typical-w="{rp.draw.typical_w:.0f}" data-max-w="{rp.draw.max_w:.0f}"{over}>',
           f'<text x="{x + RACK_W / 2:g}" y="{TOP - 24}" class="rack">{escape(rack.name)} ({escape(rack.kind)})</text>',
           f'<text x="{x + RACK_W / 2:g}" y="{TOP - 10}" class="{power_class}">'
           f'{rp.draw.typical_w / 1000:,.1f} / {rp.draw.max_w / 1000:,.1f} kW{mark}</text>',
           f'<rect class="frame" x="{x + 20}" y="{TOP}" width="{RACK_W - 22}" height="{rack.height_u * U_PX}" '
           f'fill="#F2F2F2" {stroke}/>']
    for u in range(1, rack.height_u + 1, 4):
        out.append(f'<text x="{x + 16}" y="{TOP + (rack.height_u - u + 1) * U_PX - 3}" class="u">{u}</text>')
    out += [_device(d, x, TOP, rack.height_u, view.devices[d.name]) for d in sorted(devs, key=lambda d: (-d.u, d.name))]
    out.append("</g>")
    return out


def row_svg(plan: Plan, row: int, racks: list[Rack], devices: dict[str, list[Device]]) -> str:
    tallest = max(r.height_u for r in racks)
    notes = port_notes([d for r in racks for d in devices.get(r.name, [])])
    if notes:
        notes.insert(0, "Port totals differ for one model: a cage split NxS is N ports, an unused cage keeps its "
                        "default mode")
    width = max(2 * MARGIN + len(racks) * (RACK_W + RACK_GAP), 2 * MARGIN + 7 * max(map(len, notes), default=0))
    height = TOP + tallest * U_PX + LEGEND_H + 20 + NOTE_LINE * len(notes)
    view = power(plan)
    by_rack = {r.rack: r for r in view.racks}
    body: list[str] = []
    for i, rack in enumerate(racks):
        body += _rack(rack, devices.get(rack.name, []), MARGIN + i * (RACK_W + RACK_GAP), view, by_rack[rack.name])
    roles = sorted({d.role for r in racks for d in devices.get(r.name, [])}, key=list(ROLE_COLOURS).index)
    ly = TOP + tallest * U_PX + 30
    for i, role in enumerate(roles):
        lx = MARGIN + i * 130
        body.append(f'<rect x="{lx}" y="{ly - 11}" width="12" height="12" fill="{ROLE_COLOURS[role]}"/>'
                    f'<text x="{lx + 16}" y="{ly}" class="legend">{escape(role)}</text>')
    for i, note in enumerate(notes):
        body.append(f'<text x="{MARGIN}" y="{ly + 24 + i * NOTE_LINE}" class="note">{escape(note)}</text>')
    draw = view.rows.get(row)
    over = sum(by_rack[r.name].over for r in racks)
    budget = f", {over} over the {kw(view.budget_w)} budget" if over and view.budget_w else ""
    title = (f"{plan.cluster.name}: row {row}{' (core)' if row == 0 else ''}, {len(racks)} racks, "
             f"{draw.typical_w / 1000:,.1f} kW typical / {draw.max_w / 1000:,.1f} kW max{budget}")
    head = ['<?xml version="1.0" encoding="UTF-8"?>',
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" font-family="sans-serif" data-row="{row}" data-u-px="{U_PX}">',
            f"<title>{escape(title)}</title>",
            "<style>.h{font-size:16px;font-weight:bold}text.rack{font-size:12px;text-anchor:middle}"
            "text.power{font-size:11px;text-anchor:middle;fill:#404040}text.over{fill:#C00000;font-weight:bold}"
            ".u{font-size:8px;text-anchor:end;fill:#666}.dev{font-size:9px;fill:#fff;text-anchor:start}.dark{fill:#000}"
            ".legend{font-size:11px}.note{font-size:11px;fill:#333}</style>",
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
