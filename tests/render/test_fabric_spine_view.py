"""fabric.svg's spine-by-spine view of a 2-tier fabric, read as XML and rendered by librsvg: every spine of the
plan has its box, every spine–SU bundle is drawn once with the count the plan's links give (counted here from the
links, not from the SVG's own data), and no label runs into another, out of its box or off the picture. Texts are
rendered a column or a line at a time and their ink read from the image, so the check uses librsvg's real glyph
extents."""

from __future__ import annotations

import io
import re
import subprocess
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict

import pytest
from PIL import Image, ImageOps

from tests.conftest import plan_of, require_tool, tool_path

NS = "http://www.w3.org/2000/svg"
SVG = f"{{{NS}}}"
HIDE = "text{fill:none!important;stroke:none!important}rect,line{display:none}"
TIERS = {"compute": ("spine", "leaf"), "storage": ("storage-spine", "storage-leaf")}


def _expected(plan, fabric: str) -> Counter:
    """(spine, SU block) -> cables, from the plan's links: a leaf of SU n is 'SU 00n', one outside any SU 'core'."""
    spine_role, leaf_role = TIERS[fabric]
    devices = {d.name: d for d in plan.devices}
    out: Counter = Counter()
    for link in plan.links:
        ends = sorted((devices[link.a.device], devices[link.b.device]), key=lambda d: d.role != spine_role)
        if link.fabric == fabric and [d.role for d in ends] == [spine_role, leaf_role]:
            leaf = ends[1]
            out[(ends[0].name, "core" if leaf.su is None else f"SU {leaf.su:03d}", link.speed_mbps)] += 1
    return out


def _view(root: ET.Element, fabric: str) -> ET.Element:
    views = [g for g in root.iter(f"{SVG}g") if g.get("id") == f"spines-{fabric}"]
    assert len(views) == 1
    return views[0]


def _render(svg: ET.Element, ids: list[str]) -> tuple[Image.Image, tuple[int, int, int, int] | None]:
    """The picture with every text hidden but `ids`, in black on white: (image, ink bounding box)."""
    ET.register_namespace("", NS)
    style = "<style>" + HIDE + "".join(f"#{i}{{fill:#000!important}}" for i in ids) + "</style>"
    text = ET.tostring(svg, encoding="unicode").replace("<style>", style + "<style>", 1)
    png = subprocess.run([tool_path("rsvg-convert"), "-f", "png", "-b", "white"], input=text.encode(),
                         capture_output=True, check=True, timeout=60).stdout
    image = Image.open(io.BytesIO(png)).convert("L")
    return image, ImageOps.invert(image).getbbox()


@pytest.fixture(scope="module")
def pictures(built):
    return {name: ET.parse(built(name) / "fabric.svg").getroot() for name in ("dgx-h100-4su", "roce-a800-4nic")}


@pytest.mark.parametrize(("example", "fabric", "spines"), [("dgx-h100-4su", "compute", 16),
                                                             ("dgx-h100-4su", "storage", 8),
                                                             ("roce-a800-4nic", "compute", 4)])
def test_every_spine_and_bundle_drawn_once_with_the_plan_count(pictures, example, fabric, spines):
    plan = plan_of(example)
    view = _view(pictures[example], fabric)
    names = {d.name for d in plan.devices if d.role == TIERS[fabric][0]}
    assert len(names) == spines
    boxes = [g for g in view.iter(f"{SVG}g") if g.find(f"{SVG}rect") is not None]
    drawn = [g.findall(f"{SVG}text")[0].text for g in boxes]
    assert set(drawn) >= names and len([n for n in drawn if n in names]) == spines
    expected = _expected(plan, fabric)
    assert sum(expected.values()) > 0
    lines = Counter()
    for line in view.iter(f"{SVG}line"):
        spine, leaf, n, speed = re.fullmatch(r"(\S+) – (.+): (\d+) × (\d+)G", line.find(f"{SVG}title").text).groups()
        lines[(spine, leaf, int(speed) * 1000)] += int(n)
    assert lines == expected
    assert len(list(view.iter(f"{SVG}line"))) == len(expected)  # each bundle one line
    legs = Counter(t.text for t in view.iter(f"{SVG}text") if t.get("class") == "leg")
    assert legs == Counter(f"{leaf}: {n} × {mbps // 1000}G" for (_, leaf, mbps), n in expected.items())


@pytest.mark.parametrize(("example", "fabric"), [("dgx-h100-4su", "compute"), ("roce-a800-4nic", "compute")])
def test_labels_stay_in_their_column_and_line_and_on_the_picture(pictures, example, fabric):
    """Each spine's column (its list and its box names) is rendered alone: its ink lies within the column's
    rectangle, so columns cannot meet. Each line of the lists is rendered alone across all columns: its ink lies
    in its own band of the line pitch, so lines cannot meet. Nothing touches the picture's edge."""
    require_tool("rsvg-convert")
    root = pictures[example]
    view = _view(root, fabric)
    width, height = int(root.get("width")), int(root.get("height"))
    columns: dict[int, list[str]] = defaultdict(list)
    rows: dict[int, list[str]] = defaultdict(list)
    rects = {}
    for k, g in enumerate(g for g in view.iter(f"{SVG}g") if g.find(f"{SVG}rect") is not None):
        rect = g.find(f"{SVG}rect")
        x, y, w = int(rect.get("x")), int(rect.get("y")), int(rect.get("width"))
        for n, t in enumerate(g.findall(f"{SVG}text")):
            t.set("id", f"b{k}-{n}")
        rects[k] = (x, y, x + w, y + int(rect.get("height")), [t.get("id") for t in g.findall(f"{SVG}text")])
    legs = [t for t in view.iter(f"{SVG}text") if t.get("class") == "leg"]
    for k, t in enumerate(legs):
        t.set("id", f"l{k}")
        rows[int(t.get("y"))].append(f"l{k}")
        top = min(r[1] for r in rects.values())  # the spine boxes' row; the leaf boxes sit below it
        box = next(i for i, r in rects.items() if r[1] == top and r[0] <= int(t.get("x")) < r[2])
        columns[box].append(f"l{k}")
    assert columns and rows
    for k, (x0, y0, x1, y1, ids) in rects.items():
        image, ink = _render(root, ids)
        assert image.size == (width, height)
        assert ink is not None and x0 < ink[0] and ink[2] < x1 and y0 < ink[1] and ink[3] < y1, (k, ink)
        if columns.get(k):
            _, ink = _render(root, columns[k])
            assert x0 <= ink[0] and ink[2] <= x1 and ink[1] > 0, (k, ink)
    pitch = sorted(rows)[1] - sorted(rows)[0] if len(rows) > 1 else 14
    for y, ids in sorted(rows.items()):
        _, ink = _render(root, ids)
        assert y - pitch < ink[1] and ink[3] <= y + 4 and ink[2] < width - 1, (y, ink)
