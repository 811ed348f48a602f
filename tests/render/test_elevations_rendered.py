"""Rack elevations as a browser shows them: rendered by librsvg (`rsvg-convert`), every device label's ink must
fall inside its own device box. Reading the SVG's attributes cannot catch an inherited `text-anchor` (the
rack group's `middle` once centred each label on its left edge and cut it in half); only a renderer can."""

from __future__ import annotations

import io
import re
import subprocess
import xml.etree.ElementTree as ET

import pytest
from PIL import Image

from tests.conftest import require_tool, tool_path

NS = {"s": "http://www.w3.org/2000/svg"}


def _labels_only(svg: str) -> str:
    """The same SVG with everything but the device labels made invisible (layout and styles untouched)."""
    svg = svg.replace("<style>", "<style>rect{fill:none!important;stroke:none!important}"
                      "text{fill:none!important}text.dev{fill:#000!important}", 1)
    return re.sub(r'(<rect[^>]*?) fill="[^"]*"', r"\1", svg).replace('stroke="#404040"', "")


def _ink_columns_outside_boxes(svg_path) -> list[tuple[str, int, int]]:
    svg = svg_path.read_text()
    root = ET.fromstring(svg)
    png = subprocess.run([tool_path("rsvg-convert"), "-f", "png", "-b", "white"], input=_labels_only(svg).encode(),
                         capture_output=True, check=True, timeout=60).stdout
    img = Image.open(io.BytesIO(png)).convert("L")
    assert img.size == (int(root.get("width")), int(root.get("height")))
    px = img.load()
    bad = []
    for g in root.iterfind(".//s:g[@class='device']", NS):
        r = g.find("s:rect", NS)
        x0, y0 = float(r.get("x")), float(r.get("y"))
        x1, y1 = x0 + float(r.get("width")), y0 + float(r.get("height"))
        text = g.find("s:text", NS)
        ty = float(text.get("y"))
        band = range(max(0, int(ty) - 8), min(img.size[1], int(ty) + 3))  # the label's line of text
        inked = [x for x in range(img.size[0]) if any(px[x, y] < 128 for y in band)]
        inside = [x for x in inked if x0 <= x < x1]
        outside = [x for x in inked if x0 - 30 <= x < x0 or x1 <= x < x1 + 30]  # this rack's neighbourhood
        if not inside or outside:
            bad.append((g.get("data-device"), len(inside), len(outside)))
        assert y0 <= ty <= y1
    return bad


@pytest.mark.parametrize("example", ["dgx-h100-4su"])
def test_device_labels_render_inside_their_boxes(built, example):
    require_tool("rsvg-convert")
    files = sorted((built(example) / "elevations").glob("row-*.svg"))
    assert files
    for f in files:
        assert _ink_columns_outside_boxes(f) == [], f.name
