"""fabric.svg: each fabric drawn by tier (super-spine / spine / leaf / SU), devices summarised into blocks
(an SU's leaves, a spine group or plane) and links into bundles ("32 × 400G"), so that a 100K-GPU fabric
stays a few hundred shapes."""

from __future__ import annotations

import re
from collections import defaultdict
from xml.sax.saxutils import escape

from railforge.output import Output
from railforge.plan import Device, Plan
from railforge.render.tables import speed_label

TIERS = {
    "compute": (("superspine",), ("spine",), ("leaf",)),
    "storage": (("storage-superspine",), ("storage-spine",), ("storage-leaf",)),
    "oob": (("oob-superspine",), ("oob-spine",), ("oob-leaf",)),
}
TIER_TITLES = {"superspine": "super-spine", "spine": "spine", "leaf": "leaf"}
MAX_BLOCKS = 16
MAX_LABELLED_BUNDLES = 40
BOX_W, BOX_H, GAP, ROW_H, MARGIN = 120, 44, 14, 150, 20
COLOURS = ("#4472C4", "#70AD47", "#ED7D31", "#7F7F7F")


def _block(dev: Device, row: int) -> str:
    if dev.su is not None and row >= 2:
        return f"SU {dev.su:03d}"
    if row >= 2:
        return "core"
    return dev.plane or dev.group or dev.role


def natural(text: str) -> list:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", text)]


def _bucket(keys: list[str]) -> dict[str, str]:
    """Merge consecutive blocks when a tier has more than MAX_BLOCKS of them."""
    if len(keys) <= MAX_BLOCKS:
        return {k: k for k in keys}
    per = -(-len(keys) // MAX_BLOCKS)
    out = {}
    for i in range(0, len(keys), per):
        chunk = keys[i:i + per]
        name = chunk[0] if len(chunk) == 1 else f"{chunk[0]} … {chunk[-1].split()[-1]}"
        for k in chunk:
            out[k] = name
    return out


def _panel(plan: Plan, fabric: str, devices: dict[str, Device], y0: int) -> tuple[list[str], int, int]:
    tiers = TIERS[fabric]
    row_of_role = {r: i for i, roles in enumerate(tiers) for r in roles}
    host_row = len(tiers)
    links = [link for link in plan.links if link.fabric == fabric]
    if not links:
        return [], y0, 0
    blocks: list[dict[str, list[Device]]] = [defaultdict(list) for _ in range(host_row + 1)]
    seen: set[str] = set()
    bundle: dict[tuple, list[int]] = defaultdict(lambda: [0, 0])
    placed: dict[str, tuple[int, str]] = {}
    taken: list[tuple[float, float, float, float]] = []  # boxes of the tier titles and bundle labels drawn so far

    def place(name: str) -> tuple[int, str]:
        hit = placed.get(name)
        if hit is None:
            dev = devices[name]
            row = row_of_role.get(dev.role, host_row)
            hit = placed[name] = (row, _block(dev, row))
            if name not in seen:
                seen.add(name)
                blocks[row][hit[1]].append(dev)
        return hit

    for link in links:
        a, b = place(link.a.device), place(link.b.device)
        if a > b:
            a, b = b, a
        bundle[(a, b, link.speed_mbps)][0] += 1

    merged = [_bucket(sorted(rb, key=natural)) for rb in blocks]
    rows_used = [i for i in range(host_row + 1) if blocks[i]]
    shapes: list[str] = []
    width = 0
    pos: dict[tuple[int, str], tuple[int, int]] = {}
    title_y = y0 + 24
    shapes.append(f'<text x="{MARGIN}" y="{title_y}" class="title">{escape(fabric)} fabric</text>')
    y0 += 20
    for n, row in enumerate(rows_used):
        y = y0 + 50 + n * ROW_H
        names = list(dict.fromkeys(merged[row][k] for k in sorted(blocks[row], key=natural)))
        counts: dict[str, list[Device]] = defaultdict(list)
        for k, devs in blocks[row].items():
            counts[merged[row][k]].extend(devs)
        if row < host_row:
            role = tiers[row][0]
            title = TIER_TITLES.get(role.split("-")[-1], role)
            models = sorted({d.model for d in counts[names[0]]} | {d.model for v in counts.values() for d in v})
            label = f"{title} ({role}): {sum(len(v) for v in counts.values())} × {'/'.join(models)}"
        else:
            hosts = [d for v in counts.values() for d in v]
            label = f"SU / endpoints: {len(hosts)}"
        shapes.append(f'<text x="{MARGIN}" y="{y - 8}" class="tier">{escape(label)}</text>')
        taken.append((MARGIN - LABEL_PAD, y - 8 - 13, MARGIN + 7.5 * len(label), y - 8 + LABEL_PAD))
        for i, name in enumerate(names):
            x = MARGIN + i * (BOX_W + GAP)
            pos[(row, name)] = (x + BOX_W // 2, y)
            devs = counts[name]
            roles = defaultdict(int)
            for d in devs:
                roles[d.role] += 1
            detail = ", ".join(f"{n} {r}" for r, n in sorted(roles.items()))
            shapes.append(f'<g><title>{escape(name)}: {escape(detail)}</title>'
                          f'<rect x="{x}" y="{y}" width="{BOX_W}" height="{BOX_H}" rx="6" '
                          f'fill="{COLOURS[min(row, 3)]}"/>'
                          f'<text x="{x + BOX_W // 2}" y="{y + 18}" class="box">{escape(name)}</text>'
                          f'<text x="{x + BOX_W // 2}" y="{y + 35}" class="box small">{len(devs)} '
                          f'{"device" if len(devs) == 1 else "devices"}</text></g>')
            width = max(width, x + BOX_W + MARGIN)
    drawn: dict[tuple, list[int]] = defaultdict(lambda: [0, 0])
    for ((ra, ka), (rb, kb), mbps), (count, _) in bundle.items():
        drawn[((ra, merged[ra][ka]), (rb, merged[rb][kb]), mbps)][0] += count
    lines, labels = [], []
    label_all = len(drawn) <= MAX_LABELLED_BUNDLES
    totals: dict[tuple[int, int, int], int] = defaultdict(int)
    for (a, b, mbps), (count, _) in sorted(drawn.items()):
        (xa, ya), (xb, yb) = pos[a], pos[b]
        ya += BOX_H if ya < yb else 0
        yb += BOX_H if yb < ya else 0
        text = f"{count} × {speed_label(mbps)}"
        totals[(a[0], b[0], mbps)] += count
        lines.append(f'<line x1="{xa}" y1="{ya}" x2="{xb}" y2="{yb}"><title>{escape(a[1])} – {escape(b[1])}: '
                     f'{text}</title></line>')
        if label_all and a[0] != b[0]:
            spot = _free_spot(taken, text, xa, ya, xb, yb)
            if spot is not None:
                labels.append(f'<text x="{spot[0]}" y="{spot[1]}" class="bundle">{text}</text>')
    bottom = y0 + 50 + (len(rows_used) - 1) * ROW_H + BOX_H + 20
    for i, ((ra, rb, mbps), count) in enumerate(sorted(totals.items())):
        name_a = "SU / endpoints" if ra == host_row else tiers[ra][0]
        name_b = "SU / endpoints" if rb == host_row else tiers[rb][0]
        shapes.append(f'<text x="{MARGIN}" y="{bottom + 16 * (i + 1)}" class="sum">'
                      f'{escape(name_a)} – {escape(name_b)}: {count} × {speed_label(mbps)}</text>')
    bottom += 16 * (len(totals) + 1)
    return ['<g class="links">', *lines, "</g>", *labels, *shapes], bottom, width


LABEL_SPOTS = (0.6, 0.4, 0.75, 0.25, 0.5, 0.85, 0.15)  # where along its line a bundle label may sit, in order
CHAR_W, LABEL_H, LABEL_PAD = 6.2, 11, 3  # 10 px sans-serif: an upper bound of a character's advance


def _free_spot(taken: list[tuple[float, float, float, float]], text: str, xa: int, ya: int, xb: int,
               yb: int) -> tuple[int, int] | None:
    """The first spot along the line (LABEL_SPOTS) where the label's box overlaps no label placed before, which
    it then joins; None when every spot is taken: the line's tooltip and the panel's totals still give the
    count. Labels once sat at one fixed spot and overran each other where bundles fan out of one block."""
    half = CHAR_W * len(text) / 2 + LABEL_PAD
    for f in LABEL_SPOTS:
        x, y = round(xa + (xb - xa) * f), round(ya + (yb - ya) * f)
        box = (x - half, y - LABEL_H - LABEL_PAD, x + half, y + LABEL_PAD)
        if all(box[2] <= o[0] or o[2] <= box[0] or box[3] <= o[1] or o[3] <= box[1] for o in taken):
            taken.append(box)
            return x, y
    return None


def fabric_svg(plan: Plan) -> str:
    devices = {d.name: d for d in plan.devices}
    body: list[str] = []
    y, width = 10, 600
    for fabric in ("compute", "storage", "oob"):
        parts, y, w = _panel(plan, fabric, devices, y)
        body += parts
        width = max(width, w)
    c = plan.cluster
    head = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{y + 20}" '
        f'viewBox="0 0 {width} {y + 20}" font-family="sans-serif">',
        f"<title>{escape(c.name)}: {c.gpus} GPUs, {c.fabric} {c.tiers}-tier {c.mode}</title>",
        "<style>.title{font-size:18px;font-weight:bold}.tier{font-size:12px}.box{font-size:11px;fill:#fff;"
        "text-anchor:middle}.small{font-size:10px}.bundle{font-size:10px;fill:#333;text-anchor:middle;paint-order:stroke;stroke:#fff;stroke-width:3px}"
        ".sum{font-size:12px;fill:#333}.links line{stroke:#999;stroke-width:1}</style>",
    ]
    return "\n".join(head + body + ["</svg>"]) + "\n"


def render(plan: Plan, out: Output) -> None:
    out.write_text("fabric.svg", fabric_svg(plan))
