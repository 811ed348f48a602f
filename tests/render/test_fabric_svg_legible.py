"""fabric.svg read as a person reads it (the 16K example's picture was found wanting): every bundle between two
tiers shows its cable count — on its line, where no other line crosses the label (librsvg's ink box), or in a
bundle table — and the count equals one made from the plan's links; every block's name is a block of the plan or
an unambiguous range `first … last` of them, and the blocks of a tier partition the plan's; no tier caption
repeats a word (`spine (spine)`); every text reads at 4.5:1 or more on what it is drawn on (WCAG 2.x)."""

from __future__ import annotations

import io
import re
import subprocess
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict

import pytest
from PIL import Image, ImageOps

from railforge.plan.io import read_plan
from tests.conftest import require_tool, tool_path
from tests.helpers.contrast import low_contrast

SVG_NS = "http://www.w3.org/2000/svg"
NS = f"{{{SVG_NS}}}"
TIERS = {"compute": ("superspine", "spine", "leaf"), "storage": ("storage-superspine", "storage-spine", "storage-leaf"),
         "oob": ("oob-superspine", "oob-spine", "oob-leaf")}
EXAMPLES = ["roce-16k-railplane", "dgx-h100-4su"]
COUNT = re.compile(r"(\d+) × (\d+)G")


def natural(text: str) -> list:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", text)]


def _row_and_block(dev, fabric: str) -> tuple[int, str]:
    """The tier a device is drawn in and the block it belongs to: its plane, group or role above the leaves, its SU
    (or `core`) from the leaves down."""
    row = TIERS[fabric].index(dev.role) if dev.role in TIERS[fabric] else 3
    if row >= 2:
        return row, "core" if dev.su is None else f"SU {dev.su:03d}"
    return row, dev.plane or dev.group or dev.role


def _panels(root: ET.Element) -> dict[str, tuple[float, float]]:
    """fabric -> (top, bottom) of its tier panel, from the panel titles `<fabric> fabric` and the next title."""
    titles = [(float(t.get("y")), t.text.split()[0]) for t in root.iter(f"{NS}text") if t.get("class") == "title"]
    views = [float(g.find(f"{NS}text").get("y")) for g in root.iter(f"{NS}g") if g.get("class") == "spine-view"]
    edges = sorted([y for y, _ in titles] + views) + [float(root.get("height"))]
    return {name: (y, min(e for e in edges if e > y)) for y, name in titles}


def _boxes(root: ET.Element, top: float, bottom: float) -> list[tuple[float, float, float, float, str]]:
    out = []
    for g in root.iter(f"{NS}g"):
        rect = g.find(f"{NS}rect")
        if rect is not None and top <= float(rect.get("y")) < bottom:
            x, y = float(rect.get("x")), float(rect.get("y"))
            out.append((x, y, x + float(rect.get("width")), y + float(rect.get("height")), g.find(f"{NS}text").text))
    return out


def _drawn_blocks(plan, fabric: str, boxes) -> tuple[dict[tuple[int, str], str], dict[float, int]]:
    """(row, plan block) -> the box drawn for it, checking each box's name is a block or a `first … last` range of
    blocks of its row and that every block is in exactly one box."""
    devices = {d.name: d for d in plan.devices}
    rows: dict[int, set[str]] = defaultdict(set)
    for link in plan.links:
        if link.fabric == fabric:
            for end in (link.a.device, link.b.device):
                row, block = _row_and_block(devices[end], fabric)
                rows[row].add(block)
    tops = sorted({b[1] for b in boxes})
    assert len(tops) == len(rows), (fabric, tops, sorted(rows))
    row_at = dict(zip(tops, sorted(rows), strict=True))
    owner: dict[tuple[int, str], str] = {}
    for _, y, _, _, name in boxes:
        row = row_at[y]
        ordered = sorted(rows[row], key=natural)
        first, _, last = name.partition(" … ")
        last = last or first
        assert first in rows[row] and last in rows[row], (fabric, row, name)
        for block in ordered[ordered.index(first):ordered.index(last) + 1]:
            assert (row, block) not in owner, (fabric, block, name, owner.get((row, block)))
            owner[(row, block)] = name
    assert set(owner) == {(r, b) for r, bs in rows.items() for b in bs}
    return owner, row_at


def _expected(plan, fabric: str, owner) -> Counter:
    devices = {d.name: d for d in plan.devices}
    out: Counter = Counter()
    for link in plan.links:
        if link.fabric != fabric:
            continue
        a, b = sorted((_row_and_block(devices[link.a.device], fabric), _row_and_block(devices[link.b.device], fabric)))
        if a[0] != b[0]:
            out[(a[0], owner[a], b[0], owner[b], link.speed_mbps)] += 1
    return out


def _box_at(boxes, row_at, x: float, y: float) -> tuple[int, str]:
    hit = [(row_at[b[1]], b[4]) for b in boxes if b[0] <= x <= b[2] and y in (b[1], b[3])]
    assert len(hit) == 1, (x, y, hit)
    return hit[0]


def _shown(root: ET.Element, fabric: str, top: float, bottom: float, boxes, row_at) -> tuple[Counter, Counter]:
    """Counts shown in the panel: (on lines, in tables), each keyed like _expected."""
    lines = {ln.get("id"): ln for ln in root.iter(f"{NS}line") if ln.get("id", "").startswith(f"{fabric}-")}
    on_lines: Counter = Counter()
    for t in root.iter(f"{NS}text"):
        if t.get("class") == "bundle" and t.get("data-line") in lines:
            ln = lines[t.get("data-line")]
            a = _box_at(boxes, row_at, float(ln.get("x1")), float(ln.get("y1")))
            b = _box_at(boxes, row_at, float(ln.get("x2")), float(ln.get("y2")))
            (a, b) = sorted((a, b))
            for n, g in COUNT.findall(t.text):
                on_lines[(a[0], a[1], b[0], b[1], int(g) * 1000)] += int(n)
    in_tables: Counter = Counter()
    captions = {t.text.split(":")[0]: row_at[min(y for y in row_at if y > float(t.get("y")))]
                for t in root.iter(f"{NS}text") if t.get("class") == "tier" and top < float(t.get("y")) < bottom
                and ":" in t.text and min((y for y in row_at if y > float(t.get("y"))), default=None) is not None}
    for g in root.iter(f"{NS}g"):
        if g.get("class") != "bundle-table" or not top < float(g.find(f"{NS}text").get("y")) < bottom:
            continue
        texts = g.findall(f"{NS}text")
        upper, lower = re.match(r"(.+?) – (.+?) bundles", texts[0].text).groups()
        ra, rb = captions[upper], captions[lower]
        heads = [t for t in texts if t.get("class") == "head"]
        cols = {t.get("x"): t.text for t in heads if t.get("y") == heads[0].get("y")}
        rows = {t.get("y"): t.text for t in heads if t.get("y") != heads[0].get("y")}
        for cell in (t for t in texts if t.get("class") == "cell"):
            for n, gbit in COUNT.findall(cell.text):
                in_tables[(ra, rows[cell.get("y")], rb, cols[cell.get("x")], int(gbit) * 1000)] += int(n)
    return on_lines, in_tables


@pytest.fixture(scope="module")
def pictures(built):
    return {name: (ET.parse(built(name) / "fabric.svg").getroot(), read_plan(built(name) / "plan.json"))
            for name in EXAMPLES}


@pytest.mark.parametrize("example", EXAMPLES)
def test_every_bundle_shows_the_plans_count_once_under_unambiguous_block_names(pictures, example):
    root, plan = pictures[example]
    panels = _panels(root)
    for fabric, (top, bottom) in panels.items():
        boxes = _boxes(root, top, bottom)
        owner, row_at = _drawn_blocks(plan, fabric, boxes)
        expected = _expected(plan, fabric, owner)
        on_lines, in_tables = _shown(root, fabric, top, bottom, boxes, row_at)
        assert not set(on_lines) & set(in_tables), fabric
        assert on_lines + in_tables == expected, fabric
    if example == "roce-16k-railplane":
        assert set(panels) == {"compute", "storage", "oob"}
        assert plan.cluster.tiers == 3


def _label_ink(root: ET.Element, label: ET.Element) -> tuple[int, int, int, int]:
    """The label's ink box in the picture's coordinates: only a window around it rendered (W × H px, the label
    alone in black), which keeps librsvg quick on a 3,000-pixel picture."""
    ET.register_namespace("", SVG_NS)
    x0, y0 = int(label.get("x")) - WINDOW[0] // 2, int(label.get("y")) - WINDOW[1] // 2
    saved = {k: root.get(k) for k in ("width", "height", "viewBox")}
    root.set("width", str(WINDOW[0]))
    root.set("height", str(WINDOW[1]))
    root.set("viewBox", f"{x0} {y0} {WINDOW[0]} {WINDOW[1]}")
    text = ET.tostring(root, encoding="unicode").replace(
        "<style>", "<style>text{fill:none!important;stroke:none!important}rect,line{display:none}"
        f"#{label.get('id')}{{fill:#000!important}}", 1)
    for k, v in saved.items():
        root.set(k, v)
    png = subprocess.run([tool_path("rsvg-convert"), "-f", "png", "-b", "white"], input=text.encode(),
                         capture_output=True, check=True, timeout=60).stdout
    box = ImageOps.invert(Image.open(io.BytesIO(png)).convert("L")).getbbox()
    assert box and box[0] > 0 and box[1] > 0 and box[2] < WINDOW[0] and box[3] < WINDOW[1], box  # all of it seen
    return box[0] + x0, box[1] + y0, box[2] + x0, box[3] + y0


WINDOW = (400, 80)


def _crosses(box, seg) -> bool:
    """Whether the segment passes through the box's inside: clip its parameter range against each edge."""
    x1, y1, x2, y2 = seg
    lo, hi = 0.0, 1.0
    for start, delta, low, high in ((x1, x2 - x1, box[0], box[2]), (y1, y2 - y1, box[1], box[3])):
        if delta == 0:
            if not low < start < high:
                return False
            continue
        t1, t2 = sorted(((low - start) / delta, (high - start) / delta))
        lo, hi = max(lo, t1), min(hi, t2)
    return lo < hi


@pytest.mark.parametrize("example", EXAMPLES)
def test_no_bundle_label_sits_on_another_bundles_line(pictures, example):
    require_tool("rsvg-convert")
    root, _ = pictures[example]
    segs = {ln.get("id"): tuple(float(ln.get(k)) for k in ("x1", "y1", "x2", "y2")) for ln in root.iter(f"{NS}line")
            if ln.get("id")}
    labels = [t for t in root.iter(f"{NS}text") if t.get("class") == "bundle"]
    assert len(labels) >= 10
    bad = []
    for k, t in enumerate(labels):
        t.set("id", f"label{k}")
        ink = _label_ink(root, t)
        assert _crosses(ink, segs[t.get("data-line")]) or _crosses((ink[0], ink[1] - 8, ink[2], ink[3] + 8),
                                                                   segs[t.get("data-line")]), t.text
        bad += [(t.text, other) for other, seg in segs.items() if other != t.get("data-line") and _crosses(ink, seg)]
    assert bad == []


@pytest.mark.parametrize("example", EXAMPLES)
def test_no_tier_caption_repeats_a_word(pictures, example):
    root, _ = pictures[example]
    skip = {id(t) for g in root.iter(f"{NS}g") if g.get("class") in ("bundle-table", "spine-view")
            for t in g.iter(f"{NS}text")}
    captions = [t.text for t in root.iter(f"{NS}text") if t.get("class") == "tier" and id(t) not in skip]
    assert len(captions) >= 6
    repeats = [c for c in captions if max(Counter(re.findall(r"[a-z]+", c.lower())).values()) > 1]
    assert repeats == []


@pytest.mark.parametrize("example", EXAMPLES)
def test_every_text_has_contrast_4_5(built, example):
    assert low_contrast(built(example) / "fabric.svg") == []
