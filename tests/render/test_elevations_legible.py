"""Rack elevations read as a person reads them: every text's contrast against what it is drawn on, by the WCAG 2.x
relative-luminance formula, is at least 4.5:1 (white on the management servers' light green was 1.4:1); and where
one switch model shows different port totals in a row (the 16K example's SN5600: 129, 130 and 98), the row's legend
says why, with numbers that a count of the plan's ports (cages by breakout mode, cabled or not) gives again."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import defaultdict

import pytest

from railforge.plan.io import read_plan
from tests.helpers.contrast import WHITE, contrast, low_contrast

NS = "{http://www.w3.org/2000/svg}"


def test_contrast_formula_matches_known_ratios():
    assert contrast("#000", "#fff") == pytest.approx(21)
    assert contrast("#777777", WHITE) == pytest.approx(4.48, abs=0.01)  # WebAIM's classic just-failing grey
    assert contrast("#C5E0B4", WHITE) == pytest.approx(1.43, abs=0.01)  # the mgmt label as the issue found it


@pytest.mark.parametrize("example", ["roce-16k-railplane", "dgx-h100-4su"])
def test_every_elevation_text_has_contrast_4_5(built, example):
    files = sorted((built(example) / "elevations").glob("row-*.svg"))
    roles = set()
    for f in files:
        root = ET.parse(f).getroot()
        roles |= {g.get("data-role") for g in root.iter(f"{NS}g") if g.get("data-role")}
        assert low_contrast(f) == [], f.name
    assert {"mgmt", "node", "leaf", "oob-leaf"} <= roles


def _plan_mix(dev) -> dict[tuple[str, bool], tuple[int, int]]:
    """(breakout mode, cabled) -> (cages, ports), counted from the plan's ports; plus ("", True) for the ports
    outside any cage."""
    cages = defaultdict(list)
    other = 0
    for p in dev.ports:
        if p.breakout:
            cages[p.index].append(p)
        else:
            other += 1
    mix = defaultdict(lambda: [0, 0])
    for ports in cages.values():
        key = (ports[0].breakout, any(p.link for p in ports))
        mix[key][0] += 1
        mix[key][1] += len(ports)
    if other:
        mix[("", True)] = [0, other]
    return {k: tuple(v) for k, v in mix.items()}


NOTE = re.compile(r"(\S+): (\d+) ports on ([^=]+) = (.+)")
PART = re.compile(r"(\d+) (unused )?cages? × (\S+) \((\d+)\)|(\S+) \((\d+)\)")


def test_port_totals_that_differ_within_a_model_are_explained(built):
    out = built("roce-16k-railplane")
    plan = read_plan(out / "plan.json")
    by_rack = defaultdict(list)
    for d in plan.devices:
        by_rack[d.rack].append(d)
    explained = 0
    for f in sorted((out / "elevations").glob("row-*.svg")):
        root = ET.parse(f).getroot()
        devs = [d for g in root.iter(f"{NS}g") if g.get("class") == "rack" for d in by_rack[g.get("data-rack")]]
        totals = defaultdict(set)
        for d in devs:
            totals[d.model].add(len(d.ports))
        notes = [t.text for t in root.iter(f"{NS}text") if t.get("class") == "note"]
        said = defaultdict(dict)
        for note in notes[1:]:
            model, total, roles, parts = NOTE.fullmatch(note).groups()
            mix = {}
            for n, unused, mode, ports, _name, one in PART.findall(parts):
                key = (mode, not unused) if mode else ("", True)
                have = mix.get(key, (0, 0))
                mix[key] = (have[0] + (int(n) if mode else 0), have[1] + int(ports or one))
            assert sum(p for _, p in mix.values()) == int(total), note
            for role in roles.split(", "):
                said[model][(role, int(total))] = mix
        for model, seen in totals.items():
            if len(seen) < 2:
                assert model not in said, (f.name, model)
                continue
            for d in (d for d in devs if d.model == model):
                assert said[model][(d.role, len(d.ports))] == _plan_mix(d), (f.name, d.name)
                explained += 1
    assert explained >= 256 + 32 + 66  # the SN5600s of the core row: spines, storage spines, storage leaves
