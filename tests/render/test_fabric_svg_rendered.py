"""fabric.svg as librsvg renders it: no bundle label overlaps another or a tier title (they once overran each
other where bundles fan out of one block: `32 × 100G32 × 100G`). Each text is rendered alone and its ink's
bounding box read from the image, so the check uses the renderer's real glyph extents, not an estimate."""

from __future__ import annotations

import io
import re
import subprocess

import pytest
from PIL import Image, ImageOps

from tests.conftest import require_tool, tool_path

HIDE = "<style>text{fill:none!important;stroke:none!important}rect,line{display:none}"


def _ink_box(svg: str, ident: str) -> tuple[int, int, int, int] | None:
    shown = svg.replace("<style>", HIDE + f"#{ident}{{fill:#000!important}}", 1)
    png = subprocess.run([tool_path("rsvg-convert"), "-f", "png", "-b", "white", "-z", "0.5"], input=shown.encode(),
                         capture_output=True, check=True, timeout=60).stdout
    return ImageOps.invert(Image.open(io.BytesIO(png)).convert("L")).getbbox()


@pytest.mark.parametrize("example", ["roce-16k-railplane", "dgx-h100-4su"])
def test_bundle_labels_overlap_nothing(built, example):
    require_tool("rsvg-convert")
    svg = (built(example) / "fabric.svg").read_text()
    count = 0

    def tag(m: re.Match) -> str:
        nonlocal count
        count += 1
        return f'<text id="t{count}" {m.group(1)}'

    svg = re.sub(r'<text ((?:x="\d+" y="\d+" )class="(?:bundle|tier)")', tag, svg)
    labels = len(re.findall(r'class="bundle"', svg))
    assert labels >= 10 and count > labels
    boxes = {i: _ink_box(svg, f"t{i}") for i in range(1, count + 1)}
    assert all(boxes.values())
    clashes = [(i, j) for i in boxes for j in boxes if i < j
               and not (boxes[i][2] <= boxes[j][0] or boxes[j][2] <= boxes[i][0]
                        or boxes[i][3] <= boxes[j][1] or boxes[j][3] <= boxes[i][1])]
    assert clashes == []
