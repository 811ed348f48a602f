"""Rack and row power from the catalog's figures: worked by hand for tests/specs/tiny-roce.yaml, then read back
from the report, the rack elevations, the BOM and the build's warning, which must all show the same numbers."""

from __future__ import annotations

import csv
import re
import xml.etree.ElementTree as ET

import pytest
import yaml

from railforge.hardware.catalog import builtin_catalog
from railforge.plan.power import power
from railforge.planner import build_plan
from railforge.render.report import report_markdown
from railforge.spec import load_spec
from railforge.spec.loader import validate
from tests.conftest import ROOT, run_cli

TINY = ROOT / "tests" / "specs" / "tiny-roce.yaml"
NS = {"s": "http://www.w3.org/2000/svg"}


def _w(name: str) -> tuple[float, float]:
    fact = builtin_catalog().power[name]
    return fact.typical_w, fact.max_w


def _node() -> tuple[float, float]:
    """One tiny-roce node with what is plugged into it: an HGX-H100, its 2 rails on legs of an ACC splitter
    (MCA7J60-N005, one plug each) and its 2 storage ports on 5 m 100G AOCs (MFA1A00-C005, one end each)."""
    server, leg, aoc = _w("HGX-H100"), _w("MCA7J60-N005"), _w("MFA1A00-C005")
    return tuple(server[i] + 2 * leg[i] + 2 * aoc[i] for i in (0, 1))


def _leaf() -> tuple[float, float]:
    """One tiny-roce leaf (SN5600): 4 node links on 2 cages, each the head of one ACC splitter, and 4 uplinks on 2
    cages split 2 x 400G, each holding one twin-port SR4 module (MMA4Z00-NS)."""
    switch, head, twin = _w("SN5600"), _w("MCA7J60-N005"), _w("MMA4Z00-NS")
    return tuple(switch[i] + 2 * head[i] + 2 * twin[i] for i in (0, 1))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    out = tmp_path_factory.mktemp("tiny") / "out"
    proc = run_cli("build", str(TINY), "--out", str(out), "--only", "plan,report,elevations,bom")
    spec, lines = load_spec(TINY)
    return out, build_plan(spec, lines, str(TINY)), proc.stderr


def test_a_compute_rack_is_its_four_nodes_and_what_is_plugged_into_them(tiny):
    out, plan, _ = tiny
    view = power(plan)
    racks = {r.rack: r for r in view.racks}
    typical, maximum = _node()
    compute = [r for r in view.racks if r.kind == "compute"]
    assert [r.devices for r in compute] == [4, 4]
    for r in compute:
        assert (r.draw.typical_w, r.draw.max_w) == pytest.approx((4 * typical, 4 * maximum))
    assert 4 * maximum == pytest.approx(40852)  # 4 x (10,200 + 2 x 3 + 2 x 3.5) W: over the 40 kW default
    assert view.devices["su001-leaf-r0"].max_w == pytest.approx(_leaf()[1])
    assert {r.rack for r in view.over_budget()} == {r.rack for r in compute} == {"R001-02", "R002-02"}
    assert racks["R001-01"].draw.max_w < 40_000
    total = sum(r.draw.max_w for r in view.racks)
    assert total == pytest.approx(sum(d.max_w for d in view.devices.values()))


def test_the_report_elevations_bom_and_warning_show_the_same_figures(tiny):
    out, plan, stderr = tiny
    typical, maximum = _node()
    report = (out / "report.md").read_text()
    section = report.split("## Power and cooling", 1)[1].split("\n## ", 1)[0]
    assert f"| R001-02 | 1 | compute | 4 | {4 * typical / 1000:,.1f} | {4 * maximum / 1000:,.1f} | yes |" in section
    assert "Estimates, not a vendor's published figure" in section and "HGX-H100" in section
    root = ET.parse(out / "elevations" / "row-001.svg").getroot()
    racks = {g.get("data-rack"): g for g in root.iterfind("s:g[@class='rack']", NS)}
    assert float(racks["R001-02"].get("data-max-w")) == pytest.approx(4 * maximum, abs=0.5)
    assert racks["R001-02"].get("data-over-budget") == "true" and racks["R001-01"].get("data-over-budget") is None
    assert "OVER BUDGET" in ET.tostring(racks["R001-02"], encoding="unicode")
    rows = list(csv.DictReader((out / "bom.csv").open()))
    power_rows = {r["item"]: r for r in rows if r["category"] == "power"}
    row1 = sum(r.draw.max_w for r in power(plan).racks if r.row == 1)
    assert float(power_rows["row 1"]["quantity"]) == pytest.approx(row1 / 1000, abs=0.05)
    assert "1 over the 40.0 kW rack budget" in power_rows["row 1"]["note"]
    node = next(r for r in rows if r["category"] == "host" and r["item"] == "node")
    assert "8,160 W typical / 10,200 W max each (estimate)" in node["note"]
    text = " ".join(stderr.split())
    assert "2 of 10 racks draw more than the 40.0 kW rack power budget (layout.rack_power_kw)" in text
    assert f"R001-02 {4 * maximum / 1000:,.1f} kW" in text and "layout.nodes_per_rack" in text


def test_a_budget_above_the_heaviest_rack_warns_about_nothing_and_a_figure_of_the_spec_wins(tmp_path):
    data = yaml.safe_load(TINY.read_text())
    data.setdefault("layout", {})["rack_power_kw"] = 41
    spec = tmp_path / "tiny.yaml"
    spec.write_text(yaml.safe_dump(data))
    proc = run_cli("validate", str(spec))
    assert "rack power budget" not in proc.stderr
    data["catalog"] = {"power": {"HGX-H100": {"typical_w": 11000, "max_w": 12000, "source": "our PDU readings"}}}
    view = power(build_plan(validate(data, {}, "tiny")))
    assert {r.rack for r in view.over_budget()} == {"R001-02", "R002-02"}
    assert "HGX-H100" not in view.estimates
    assert view.devices["su001-gpu01"].max_w == pytest.approx(12000 + 2 * 3 + 2 * 3.5)


def test_a_model_without_figures_counts_zero_and_is_named(tmp_path):
    data = yaml.safe_load(TINY.read_text())
    data["node"]["model"] = "OUR-SERVER"

    plan = build_plan(validate(data, {}, "tiny"))
    assert power(plan).unknown == ["OUR-SERVER"]
    assert re.search(r"No power figures, counted as 0 W .*: OUR-SERVER\.", report_markdown(plan))


def test_the_budget_and_figures_are_checked_at_the_door(tmp_path):
    data = yaml.safe_load(TINY.read_text())
    data["catalog"] = {"power": {"X": {"typical_w": 20, "max_w": 10, "source": "s"}}}
    spec = tmp_path / "bad.yaml"
    spec.write_text(yaml.safe_dump(data))
    proc = run_cli("validate", str(spec), check=False)
    assert proc.returncode == 2 and "catalog.power.X" in proc.stderr and "typical_w 20 exceeds max_w 10" in proc.stderr
    data.pop("catalog")
    data.setdefault("layout", {})["rack_power_kw"] = 0
    spec.write_text(yaml.safe_dump(data))
    proc = run_cli("validate", str(spec), check=False)
    assert proc.returncode == 2 and "layout.rack_power_kw" in proc.stderr
