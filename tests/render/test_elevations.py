"""Rack elevations: parse every row's SVG and measure where each device is drawn against the plan."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import defaultdict

import pytest

from railforge.plan.io import read_plan

NS = {"s": "http://www.w3.org/2000/svg"}


@pytest.mark.parametrize("example", ["dgx-h100-4su", "roce-a800-4nic"])
def test_every_device_is_drawn_at_its_planned_u_without_overlap(built, example):
    out = built(example)
    plan = read_plan(out / "plan.json")
    files = sorted((out / "elevations").glob("row-*.svg"))
    assert [f.name for f in files] == [f"row-{r:03d}.svg" for r in sorted({r.row for r in plan.racks})]
    drawn: dict[str, tuple[str, int, int, str]] = {}
    racks_drawn = set()
    for f in files:
        root = ET.parse(f).getroot()
        u_px = float(root.get("data-u-px"))
        for rack in root.iterfind("s:g[@class='rack']", NS):
            name = rack.get("data-rack")
            racks_drawn.add(name)
            frame = rack.find("s:rect[@class='frame']", NS)
            top, height = float(frame.get("y")), float(frame.get("height"))
            bottom = top + height
            occupied: dict[int, str] = {}
            for g in rack.iterfind("s:g[@class='device']", NS):
                r = g.find("s:rect", NS)
                y, h = float(r.get("y")), float(r.get("height"))
                assert top <= y and y + h <= bottom
                u_low = round((bottom - (y + h)) / u_px) + 1
                units = round(h / u_px)
                dev = g.get("data-device")
                label = g.find("s:text", NS).text
                assert dev not in drawn
                drawn[dev] = (name, u_low, units, label)
                for u in range(u_low, u_low + units):
                    assert u not in occupied, f"{dev} overlaps {occupied[u]} at U{u} of {name}"
                    occupied[u] = dev
    assert racks_drawn == {r.name for r in plan.racks}
    assert set(drawn) == {d.name for d in plan.devices}
    per_rack = defaultdict(int)
    for d in plan.devices:
        rack, u, units, label = drawn[d.name]
        assert (rack, u, units) == (d.rack, d.u, d.height_u), d.name
        cabled = sum(1 for p in d.ports if p.link)
        assert label.startswith(d.name) and f"{cabled}/{len(d.ports)} ports" in label
        per_rack[rack] += 1
    assert max(per_rack.values()) > 1


def test_the_report_links_every_elevation(built):
    out = built("roce-a800-4nic")
    report = (out / "report.md").read_text()
    for f in (out / "elevations").glob("row-*.svg"):
        assert f"(elevations/{f.name})" in report
