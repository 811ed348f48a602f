"""rails/su-<NNN>.svg, the per-SU rail view: every cell names the leaf and port the plan's cable reaches from
that node's NIC (checked against the links, not the node's rail records the drawing reads), and rendered by
librsvg no label runs out of its cell."""

from __future__ import annotations

import io
import subprocess
import xml.etree.ElementTree as ET

from PIL import Image

from railforge.plan.io import read_plan
from tests.conftest import require_tool, tool_path

NS = {"s": "http://www.w3.org/2000/svg"}


def test_every_nic_cell_is_the_planned_cable(built):
    out = built("dgx-h100-4su")
    plan = read_plan(out / "plan.json")
    ends = {}
    for link in plan.links:
        ends[(link.a.device, link.a.port)] = (link.b.device, link.b.port)
        ends[(link.b.device, link.b.port)] = (link.a.device, link.a.port)
    nodes = {d.name: d for d in plan.devices if d.role == "node"}
    role = {d.name: d.role for d in plan.devices}
    # every compute cable from a node or an appliance (the SuperPOD's UFM, which has no rail records) to a leaf
    expected = {(end.device, link.rail) for link in plan.links if link.fabric == "compute" and link.rail is not None
                for end in (link.a, link.b) if role[end.device] in ("node", "ufm")}
    assert ("ufm01", 3) in expected
    seen = set()
    files = sorted((out / "rails").glob("su-*.svg"))
    assert [f.name for f in files] == [f"su-{s:03d}.svg" for s in sorted({d.su for d in nodes.values()})]
    for f in files:
        for g in ET.parse(f).getroot().iterfind(".//s:g[@class='nic']", NS):
            node, rail, port = g.get("data-node"), int(g.get("data-rail")), g.get("data-if")
            if node in nodes:
                assert port == nodes[node].ports[rail].name  # the node's compute ports are in rail order
            assert ends[(node, port)] == (g.get("data-leaf"), g.get("data-port")), (node, rail)
            assert f"port {g.get('data-port')}" in "".join(t.text for t in g.iterfind("s:text", NS))
            assert (node, rail) not in seen
            seen.add((node, rail))
    assert seen == expected


def test_labels_stay_inside_their_cells(built):
    require_tool("rsvg-convert")
    f = sorted((built("dgx-h100-4su") / "rails").glob("su-*.svg"))[0]
    svg = f.read_text()
    root = ET.fromstring(svg)
    only_labels = svg.replace("<style>", "<style>rect{fill:none!important}text{fill:none!important}"
                              "text.c{fill:#000!important}", 1)
    only_labels = only_labels.replace(' fill="#', ' data-fill="#')
    png = subprocess.run([tool_path("rsvg-convert"), "-f", "png", "-b", "white"], input=only_labels.encode(),
                         capture_output=True, check=True, timeout=60).stdout
    img = Image.open(io.BytesIO(png)).convert("L")
    px = img.load()
    cells = [g.find("s:rect", NS) for g in root.iterfind(".//s:g[@class='nic']", NS)]
    assert cells
    for r in cells:
        x0, y0 = float(r.get("x")), float(r.get("y"))
        x1, y1 = x0 + float(r.get("width")), y0 + float(r.get("height"))
        inside = sum(px[x, y] < 128 for x in range(int(x0), int(x1)) for y in range(int(y0), int(y1)))
        gap = sum(px[x, y] < 128 for x in range(int(x1), int(x1) + 4) for y in range(int(y0), int(y1)))
        assert inside > 0 and gap == 0, (r.getparent() if hasattr(r, "getparent") else x0, y0)
