"""rails/su-<NNN>.svg: which NIC of which node goes to which leaf port, one drawing per SU — the picture a
technician cables a rail-optimized SU from. Rows are the SU's nodes (and appliances such as UFM) in slot order,
columns the rails; each cell names the node's interface, the leaf and its port, and carries the cable label as
its tooltip. Hand-written SVG like the other drawings (no plotting library draws a labelled grid more simply).
Only reads the plan."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from xml.sax.saxutils import escape, quoteattr

from railforge.formats.output import Output
from railforge.plan.model import SWITCH_ROLES, Device, Link, Plan

NAME_W, CELL_W, CELL_H, HEAD_H, MARGIN, TITLE_H = 120, 150, 30, 24, 20, 36
RAIL_COLOURS = ("#4472C4", "#ED7D31", "#70AD47", "#7030A0", "#C00000", "#00B0F0", "#BF8F00", "#2F5597")


def rails_file(su: int) -> str:
    return f"rails/su-{su:03d}.svg"


@dataclass(frozen=True, slots=True)
class Nic:
    """One cell: a node's rail interface, or an appliance's compute port (UFM has no rail records, only cables)."""

    rail: int
    ifname: str
    hca: str
    leaf: str
    leaf_port: str
    cable: str


def nics(dev: Device, links: dict[str, Link]) -> list[Nic]:
    if dev.rails:
        return [Nic(r.rail, r.ifname, r.hca, r.leaf, r.leaf_port, r.cable) for r in dev.rails]
    out = []
    for p in dev.ports:
        link = links.get(p.link) if p.link else None
        if link is not None and link.fabric == "compute" and link.rail is not None:
            far = link.b if link.a.device == dev.name else link.a
            out.append(Nic(link.rail, p.name, "", far.device, far.port, link.id))
    return out


def _cell(dev: Device, rail: Nic, x: int, y: int) -> str:
    colour = RAIL_COLOURS[rail.rail % len(RAIL_COLOURS)]
    hca = f" ({rail.hca})" if rail.hca else ""
    title = f"{dev.name} {rail.ifname}{hca} -> {rail.leaf} {rail.leaf_port}, cable {rail.cable}"
    return (f'<g class="nic" data-node={quoteattr(dev.name)} data-rail="{rail.rail}" data-leaf={quoteattr(rail.leaf)} '
            f'data-port={quoteattr(rail.leaf_port)} data-if={quoteattr(rail.ifname)}><title>{escape(title)}</title>'
            f'<rect x="{x}" y="{y}" width="{CELL_W - 4}" height="{CELL_H - 4}" rx="3" fill="{colour}"/>'
            f'<text x="{x + 5}" y="{y + 11}" class="c">{escape(rail.ifname)} → {escape(rail.leaf)}</text>'
            f'<text x="{x + 5}" y="{y + 22}" class="c">port {escape(rail.leaf_port)}</text></g>')


def su_svg(plan: Plan, su: int, devices: list[tuple[Device, list[Nic]]]) -> str:
    rails = sorted({r.rail for _, cells in devices for r in cells})
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
    for i, (dev, cells) in enumerate(devices):
        y = top + i * CELL_H
        out.append(f'<text x="{MARGIN}" y="{y + 17}" class="n">{escape(dev.name)}</text>')
        out += [_cell(dev, r, col[r.rail], y) for r in sorted(cells, key=lambda r: (r.rail, r.ifname))]
    return "\n".join([*out, "</svg>"]) + "\n"


def render(plan: Plan, out: Output) -> None:
    links = {link.id: link for link in plan.links if link.fabric == "compute"}
    by_su: dict[int, list[tuple[Device, list[Nic]]]] = defaultdict(list)
    for d in plan.devices:
        if d.su is not None and d.role not in SWITCH_ROLES and (cells := nics(d, links)):
            by_su[d.su].append((d, cells))
    for su, devices in sorted(by_su.items()):
        devices.sort(key=lambda dc: (dc[0].slot or 0, dc[0].name))
        out.write_text(rails_file(su), su_svg(plan, su, devices))
