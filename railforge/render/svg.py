"""fabric.svg: each fabric drawn by tier (super-spine / spine / leaf / SU), devices summarised into blocks
(an SU's leaves, a spine group or plane) and links into bundles ("32 × 400G"), so that a 100K-GPU fabric
stays a few hundred shapes; a 2-tier fabric is drawn a second time spine by spine (which SU's leaves reach which
spine, over how many cables)."""

from __future__ import annotations

import re
from collections import defaultdict
from xml.sax.saxutils import escape

from railforge.formats.output import Output
from railforge.plan.model import Device, Plan
from railforge.plan.tables import speed_label

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
DARK_TEXT = {"#70AD47", "#ED7D31", "#7F7F7F"}
"""Fills on which white text reads under 4.5:1 (WCAG 2.x): their box names are drawn in black."""


def _block(dev: Device, row: int) -> str:
    if dev.su is not None and row >= 2:
        return f"SU {dev.su:03d}"
    if row >= 2:
        return "core"
    return dev.plane or dev.group or dev.role


def natural(text: str) -> list:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", text)]


def _bucket(keys: list[str]) -> dict[str, str]:
    """Merge consecutive blocks when a tier has more than MAX_BLOCKS of them; a merged block is named by its first
    and last member in full (`plane1 … plane2`: `plane1 … 2` read as one plane or a count)."""
    if len(keys) <= MAX_BLOCKS:
        return {k: k for k in keys}
    per = -(-len(keys) // MAX_BLOCKS)
    out = {}
    for i in range(0, len(keys), per):
        chunk = keys[i:i + per]
        name = chunk[0] if len(chunk) == 1 else f"{chunk[0]} … {chunk[-1]}"
        for k in chunk:
            out[k] = name
    return out


Box = tuple[float, float, float, float]
Segment = tuple[float, float, float, float]


def _overlaps(a: Box, b: Box) -> bool:
    return not (a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1])


def _crosses(box: Box, seg: Segment) -> bool:
    """Whether the segment passes through the box (Liang–Barsky clipping)."""
    x1, y1, x2, y2 = seg
    t0, t1 = 0.0, 1.0
    for p, q in ((x1 - x2, x1 - box[0]), (x2 - x1, box[2] - x1), (y1 - y2, y1 - box[1]), (y2 - y1, box[3] - y1)):
        if p == 0:
            if q < 0:
                return False
            continue
        t = q / p
        if p < 0:
            t0 = max(t0, t)
        else:
            t1 = min(t1, t)
        if t0 > t1:
            return False
    return True


def _label_box(x: float, y: float, text: str) -> Box:
    half = CHAR_W * len(text) / 2 + LABEL_PAD
    return x - half, y - LABEL_H - LABEL_PAD, x + half, y + LABEL_PAD


def _free_spot(taken: list[Box], lines: list[Segment], own: int, text: str, seg: Segment) -> tuple[int, int] | None:
    """The first spot along the line (LABEL_SPOTS) where the label's box overlaps no label, title or block placed
    before and no other line crosses it; None when there is none. Labels once sat at one fixed spot and overran
    each other where bundles fan out of one block, then sat on other bundles' lines where they cross."""
    xa, ya, xb, yb = seg
    for f in LABEL_SPOTS:
        x, y = round(xa + (xb - xa) * f), round(ya + (yb - ya) * f + LABEL_H / 2)
        box = _label_box(x, y, text)
        if (all(not _overlaps(box, o) for o in taken)
                and not any(i != own and _crosses(box, other) for i, other in enumerate(lines))):
            return x, y
    return None


def _table(caption: str, rows: list[str], cols: list[str], cells: dict[tuple[str, str], str], y0: int
           ) -> tuple[list[str], int, int]:
    """A bundle table: a line per upper block, a column per lower block, each cell its bundle's `count × speed`
    ('–' for none) — where the bundles are too many to label on their lines without crossing others."""
    first = round(CHAR_W * max(len(r) for r in rows)) + 2 * GAP
    widths = [round(CHAR_W * max(len(c), *(len(cells.get((r, c), "–")) for r in rows))) + GAP for c in cols]
    out = [f'<g class="bundle-table"><text x="{MARGIN}" y="{y0 + 14}" class="tier">{escape(caption)}</text>']
    x = MARGIN + first
    xs = []
    for w in widths:
        xs.append(x)
        x += w
    y = y0 + 14 + LIST_LINE + 4
    out += [f'<text x="{cx}" y="{y}" class="head">{escape(c)}</text>' for cx, c in zip(xs, cols, strict=True)]
    for r in rows:
        y += LIST_LINE
        out.append(f'<text x="{MARGIN}" y="{y}" class="head">{escape(r)}</text>')
        out += [f'<text x="{cx}" y="{y}" class="cell">{escape(cells.get((r, c), "–"))}</text>'
                for cx, c in zip(xs, cols, strict=True)]
    out.append("</g>")
    return out, y + 10, x + MARGIN


def _panel(plan: Plan, fabric: str, devices: dict[str, Device], y0: int) -> tuple[list[str], int, int]:
    tiers = TIERS[fabric]
    row_of_role = {r: i for i, roles in enumerate(tiers) for r in roles}
    host_row = len(tiers)
    links = [link for link in plan.links if link.fabric == fabric]
    if not links:
        return [], y0, 0
    blocks: list[dict[str, list[Device]]] = [defaultdict(list) for _ in range(host_row + 1)]
    seen: set[str] = set()
    bundle: dict[tuple, int] = defaultdict(int)
    placed: dict[str, tuple[int, str]] = {}
    taken: list[Box] = []  # boxes of the tier titles, blocks and bundle labels drawn so far

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
        bundle[(a, b, link.speed_mbps)] += 1

    merged = [_bucket(sorted(rb, key=natural)) for rb in blocks]
    rows_used = [i for i in range(host_row + 1) if blocks[i]]
    names_of = {row: list(dict.fromkeys(merged[row][k] for k in sorted(blocks[row], key=natural))) for row in rows_used}
    box_w = max(BOX_W, *(round(CHAR_W * 1.1 * len(n)) + 4 * LABEL_PAD for v in names_of.values() for n in v))
    title_of = {row: "SU / endpoints" if row == host_row else TIER_TITLES.get(tiers[row][0].split("-")[-1],
                                                                                tiers[row][0]) for row in rows_used}
    shapes: list[str] = []
    width = 0
    pos: dict[tuple[int, str], tuple[int, int]] = {}
    shapes.append(f'<text x="{MARGIN}" y="{y0 + 24}" class="title">{escape(fabric)} fabric</text>')
    y0 += 20
    for n, row in enumerate(rows_used):
        y = y0 + 50 + n * ROW_H
        names = names_of[row]
        counts: dict[str, list[Device]] = defaultdict(list)
        for k, devs in blocks[row].items():
            counts[merged[row][k]].extend(devs)
        if row < host_row:
            models = sorted({d.model for v in counts.values() for d in v})
            label = f"{title_of[row]}: {sum(len(v) for v in counts.values())} × {'/'.join(models)}"
        else:
            label = f"{title_of[row]}: {sum(len(v) for v in counts.values())}"
        shapes.append(f'<text x="{MARGIN}" y="{y - 8}" class="tier">{escape(label)}</text>')
        taken.append((MARGIN - LABEL_PAD, y - 8 - 13, MARGIN + 7.5 * len(label), y - 8 + LABEL_PAD))
        for i, name in enumerate(names):
            x = MARGIN + i * (box_w + GAP)
            pos[(row, name)] = (x + box_w // 2, y)
            taken.append((x, y, x + box_w, y + BOX_H))
            devs = counts[name]
            roles = defaultdict(int)
            for d in devs:
                roles[d.role] += 1
            detail = ", ".join(f"{n} {r}" for r, n in sorted(roles.items()))
            colour = COLOURS[min(row, 3)]
            ink = " dark" if colour in DARK_TEXT else ""
            shapes.append(f'<g><title>{escape(name)}: {escape(detail)}</title>'
                          f'<rect x="{x}" y="{y}" width="{box_w}" height="{BOX_H}" rx="6" fill="{colour}"/>'
                          f'<text x="{x + box_w // 2}" y="{y + 18}" class="box{ink}">{escape(name)}</text>'
                          f'<text x="{x + box_w // 2}" y="{y + 35}" class="box small{ink}">{len(devs)} '
                          f'{"device" if len(devs) == 1 else "devices"}</text></g>')
            width = max(width, x + box_w + MARGIN)
    drawn: dict[tuple, int] = defaultdict(int)
    for ((ra, ka), (rb, kb), mbps), count in bundle.items():
        drawn[((ra, merged[ra][ka]), (rb, merged[rb][kb]), mbps)] += count
    order = sorted(drawn.items())
    segs: list[Segment] = []
    lines = []
    totals: dict[tuple[int, int, int], int] = defaultdict(int)
    pairs: dict[tuple[int, int], list[int]] = defaultdict(list)
    for i, ((a, b, mbps), count) in enumerate(order):
        (xa, ya), (xb, yb) = pos[a], pos[b]
        ya += BOX_H if ya < yb else 0
        yb += BOX_H if yb < ya else 0
        segs.append((xa, ya, xb, yb))
        text = f"{count} × {speed_label(mbps)}"
        totals[(a[0], b[0], mbps)] += count
        lines.append(f'<line id="{fabric}-{i}" x1="{xa}" y1="{ya}" x2="{xb}" y2="{yb}"><title>{escape(a[1])} – '
                     f'{escape(b[1])}: {text}</title></line>')
        if a[0] != b[0]:
            pairs[(a[0], b[0])].append(i)
    labels: list[str] = []
    tables: list[tuple[int, int]] = []
    for pair, members in sorted(pairs.items()):
        spots = []
        if len(members) <= MAX_LABELLED_BUNDLES:
            for i in members:
                text = f"{order[i][1]} × {speed_label(order[i][0][2])}"
                spot = _free_spot(taken + [_label_box(*s, t) for s, t in spots], segs, i, text, segs[i])
                if spot is None:
                    break
                spots.append((spot, text))
        if len(spots) < len(members):
            tables.append(pair)
            continue
        for i, (spot, text) in zip(members, spots, strict=True):
            taken.append(_label_box(*spot, text))
            labels.append(f'<text x="{spot[0]}" y="{spot[1]}" class="bundle" data-line="{fabric}-{i}">{text}</text>')
    bottom = y0 + 50 + (len(rows_used) - 1) * ROW_H + BOX_H + 10
    for ra, rb in tables:
        cells: dict[tuple[str, str], list[str]] = defaultdict(list)
        for (a, b, mbps), count in order:
            if (a[0], b[0]) == (ra, rb):
                cells[(a[1], b[1])].append(f"{count} × {speed_label(mbps)}")
        caption = (f"{title_of[ra]} – {title_of[rb]} bundles, too many to label on their lines: a line per "
                   f"{title_of[ra]} block, a column per {title_of[rb]} block")
        parts, bottom, w = _table(caption, names_of[ra], names_of[rb], {k: " + ".join(v) for k, v in cells.items()},
                                  bottom)
        shapes += parts
        width = max(width, w)
    bottom += 10
    for i, ((ra, rb, mbps), count) in enumerate(sorted(totals.items())):
        between = f"within {title_of[ra]}" if ra == rb else f"{title_of[ra]} – {title_of[rb]}"
        shapes.append(f'<text x="{MARGIN}" y="{bottom + 16 * (i + 1)}" class="sum">'
                      f'{escape(between)}: {count} × {speed_label(mbps)}</text>')
    bottom += 16 * (len(totals) + 1)
    return ['<g class="links">', *lines, "</g>", *labels, *shapes], bottom, width


LABEL_SPOTS = (0.6, 0.4, 0.75, 0.25, 0.5, 0.85, 0.15, 0.7, 0.3, 0.8, 0.2, 0.9, 0.1, 0.65, 0.35, 0.55, 0.45)
"""Where along its line a bundle label may sit, in order of preference."""
CHAR_W, LABEL_H, LABEL_PAD = 6.2, 11, 3  # 10 px sans-serif: an upper bound of a character's advance


LIST_LINE, LIST_FONT = 14, 10  # the per-spine lists: line pitch and font size, px


def _spine_view(plan: Plan, fabric: str, devices: dict[str, Device], y0: int) -> tuple[list[str], int, int]:
    """A 2-tier fabric spine by spine: one box per spine (consecutive spines merged past MAX_BLOCKS), its leaf
    bundles listed above it, one per SU ("SU 001: 16 × 400G"), and a line from the spine to each SU's leaves.
    The tier panel shows the spines as one block, which hides how the leaves spread over them. The lists sit in
    columns as wide as their longest line, so no label can run into another."""
    spine_role, leaf_role = TIERS[fabric][1][0], TIERS[fabric][2][0]
    roles = {d.role for link in plan.links if link.fabric == fabric for d in (devices[link.a.device],
                                                                             devices[link.b.device])}
    if spine_role not in roles or TIERS[fabric][0][0] in roles:
        return [], y0, 0
    bundle: dict[tuple[str, str, int], int] = defaultdict(int)
    for link in plan.links:
        if link.fabric != fabric:
            continue
        a, b = devices[link.a.device], devices[link.b.device]
        if a.role == leaf_role and b.role == spine_role:
            a, b = b, a
        if a.role == spine_role and b.role == leaf_role:
            bundle[(a.name, _block(b, 2), link.speed_mbps)] += 1
    spines = _bucket(sorted({k[0] for k in bundle}, key=natural))
    leaves = _bucket(sorted({k[1] for k in bundle}, key=natural))
    merged: dict[tuple[str, str, int], int] = defaultdict(int)
    members: dict[str, list[str]] = defaultdict(list)
    for (spine, leaf, mbps), n in bundle.items():
        merged[(spines[spine], leaves[leaf], mbps)] += n
    for spine, block in spines.items():
        members[block].append(spine)
    cols = list(dict.fromkeys(spines[k] for k in sorted(spines, key=natural)))
    rows = list(dict.fromkeys(leaves[k] for k in sorted(leaves, key=natural)))
    lists = {c: [(leaf, f"{leaf}: {n} × {speed_label(mbps)}") for (s, leaf, mbps), n in
                 sorted(merged.items(), key=lambda kv: (natural(kv[0][1]), kv[0][2])) if s == c] for c in cols}
    longest = max(len(text) for col in lists.values() for _, text in col)
    col_w = max(BOX_W, round(CHAR_W * longest) + 2 * LABEL_PAD,
                round(CHAR_W * 1.1 * max(len(c) for c in cols)) + 2 * LABEL_PAD)  # box names are 11 px
    depth = max(len(col) for col in lists.values())
    title = f"{fabric} fabric, spine by spine: {sum(merged.values())} leaf–spine cables over {len(spines)} spines"
    shapes = [f'<text x="{MARGIN}" y="{y0 + 24}" class="tier">{escape(title)}</text>']
    top = y0 + 24 + 10 + LIST_LINE
    box_y = top + depth * LIST_LINE
    leaf_y = box_y + BOX_H + ROW_H - BOX_H
    model = {d.name: d.model for d in devices.values() if d.role == spine_role}
    width = 0
    xs: dict[str, int] = {}
    for i, col in enumerate(cols):
        x = MARGIN + i * (col_w + GAP)
        xs[col] = x + col_w // 2
        names = members[col]
        sub = model[names[0]] if len(names) == 1 else f"{len(names)} devices"
        shapes.append(f'<g><title>{escape(col)}: {escape(", ".join(sorted(names, key=natural)))}</title>'
                      f'<rect x="{x}" y="{box_y}" width="{col_w}" height="{BOX_H}" rx="6" fill="{COLOURS[1]}"/>'
                      f'<text x="{x + col_w // 2}" y="{box_y + 18}" class="box dark">{escape(col)}</text>'
                      f'<text x="{x + col_w // 2}" y="{box_y + 35}" class="box small dark">{escape(sub)}</text></g>')
        for j, (_, text) in enumerate(lists[col]):
            shapes.append(f'<text x="{x + LABEL_PAD}" y="{top + j * LIST_LINE}" class="leg">{escape(text)}</text>')
        width = max(width, x + col_w + MARGIN)
    leaf_x: dict[str, int] = {}
    shift = max(0, (len(cols) * (col_w + GAP) - len(rows) * (BOX_W + GAP)) // 2)  # leaves centred under spines
    for i, row in enumerate(rows):
        x = MARGIN + shift + i * (BOX_W + GAP)
        leaf_x[row] = x + BOX_W // 2
        n = sum(1 for d in devices.values() if d.role == leaf_role and leaves.get(_block(d, 2)) == row)
        shapes.append(f'<g><title>{escape(row)}: {n} {escape(leaf_role)}</title>'
                      f'<rect x="{x}" y="{leaf_y}" width="{BOX_W}" height="{BOX_H}" rx="6" fill="{COLOURS[2]}"/>'
                      f'<text x="{x + BOX_W // 2}" y="{leaf_y + 18}" class="box dark">{escape(row)}</text>'
                      f'<text x="{x + BOX_W // 2}" y="{leaf_y + 35}" class="box small dark">{n} '
                      f'{"device" if n == 1 else "devices"}</text></g>')
        width = max(width, x + BOX_W + MARGIN)
    lines = [f'<line x1="{xs[s]}" y1="{box_y + BOX_H}" x2="{leaf_x[leaf]}" y2="{leaf_y}"><title>{escape(s)} – '
             f'{escape(leaf)}: {n} × {speed_label(mbps)}</title></line>'
             for (s, leaf, mbps), n in sorted(merged.items(), key=lambda kv: (natural(kv[0][0]), natural(kv[0][1]),
                                                                             kv[0][2]))]
    return ([f'<g class="spine-view" id="spines-{fabric}">', '<g class="links">', *lines, "</g>", *shapes, "</g>"],
            leaf_y + BOX_H + 20, width)


def fabric_svg(plan: Plan) -> str:
    devices = {d.name: d for d in plan.devices}
    body: list[str] = []
    y, width = 10, 600
    for fabric in ("compute", "storage", "oob"):
        parts, y, w = _panel(plan, fabric, devices, y)
        body += parts
        width = max(width, w)
        parts, y, w = _spine_view(plan, fabric, devices, y)
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
        ".sum{font-size:12px;fill:#333}.leg{font-size:10px;fill:#333}.dark{fill:#000}.head{font-size:10px;font-weight:bold}"
        ".cell{font-size:10px;fill:#333}.links line{stroke:#999;stroke-width:1}</style>",
    ]
    return "\n".join(head + body + ["</svg>"]) + "\n"


def render(plan: Plan, out: Output) -> None:
    out.write_text("fabric.svg", fabric_svg(plan))
