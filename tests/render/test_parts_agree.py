"""For every bundled example: the report, the BOM, the cabling workbook (its summary and its cable sheets),
cabling.csv, the pull sheets and a work order name the same parts and count the same cables and transceiver
modules. Each artifact is read back as a user would read it (CSV, XLSX through openpyxl, report markdown) and
counted here with the one rule the BOM page states -- a twin-port module serves every port of its split switch
cage, every other transceiver one cable end; a cable shared by several links (`assembly`) is one cable -- so no
artifact's count is taken from another's code."""

from __future__ import annotations

import copy
import csv
import re
from collections import Counter
from pathlib import Path

import openpyxl
import pytest

from railforge.change.compare import compare
from railforge.change.workorder import write_work_order
from railforge.plan.io import read_plan
from tests.conftest import EXAMPLES, ROOT, run_cli

BUNDLED = sorted(p.parent.name for p in (ROOT / "inventory").glob("*/cluster.yaml"))


def _csv(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _sheet(book, name: str) -> list[dict]:
    rows = book[name].iter_rows(values_only=True)
    header = next(rows)
    return [dict(zip(header, r, strict=True)) for r in rows]


@pytest.fixture(scope="module")
def example(built, tmp_path_factory):
    """example(name) -> (output folder, plan) of a full build of that bundled example."""
    cache: dict[str, tuple[Path, object]] = {}

    def get(name: str):
        if name not in cache:
            if name in EXAMPLES:
                out = built(name)
            else:
                out = tmp_path_factory.mktemp(name) / "out"
                run_cli("build", str(ROOT / "inventory" / name / "cluster.yaml"), "--out", str(out))
            cache[name] = (out, read_plan(out / "plan.json"))
        return cache[name]

    return get


class Count:
    """Modules by part and cables by part, counted from rows that each describe one link's two ends."""

    def __init__(self, twins: set[str]):
        self.twins = twins
        self.modules: Counter = Counter()
        self.cables: Counter = Counter()
        self._cages: set[tuple[str, str]] = set()
        self._ends: set[tuple[str, str]] = set()
        self._assemblies: set[str] = set()

    def end(self, cable: str, device: str, port_label: str, module: str | None) -> None:
        if not module or (cable, device) in self._ends:
            return
        self._ends.add((cable, device))
        if module in self.twins and "/" in port_label:
            cage = (device, port_label.split("/")[0])
            if cage in self._cages:
                return
            self._cages.add(cage)
        self.modules[module] += 1

    def cable(self, cable: str, part: str | None, assembly: str | None) -> None:
        if not part:
            return
        key = assembly or cable
        if key not in self._assemblies:
            self._assemblies.add(key)
            self.cables[part] += 1


def _bom(out: Path) -> tuple[Counter, Counter, set[str], int]:
    rows = _csv(out / "bom.csv")
    modules = Counter()
    cables = Counter()
    twins = set()
    for r in rows:
        if r["category"] == "transceiver":
            modules[r["part"]] += int(r["quantity"])
            if "twin-port" in r["item"]:
                twins.add(r["part"])
                shown = re.fullmatch(r"(\d+)G \((\d+) x (\d+)G\)", r["speed"])  # 800G (2 x 400G)
                assert shown and int(shown[1]) == int(shown[2]) * int(shown[3]) > int(shown[3]), r
        elif r["category"] == "cable" and r["part"]:
            cables[r["part"]] += int(r["quantity"])
    cords = sum(int(r["quantity"]) for r in rows if r["category"] == "fibre patch cord")
    return modules, cables, twins, cords


@pytest.mark.parametrize("name", BUNDLED)
def test_every_artifact_names_and_counts_the_same_parts(example, name, tmp_path):
    out, plan = example(name)
    modules, cables, twins, cords = _bom(out)
    assert sum(modules.values()) > 0

    # cabling.csv: every link's parts, counted by the rule
    csv_rows = _csv(out / "cabling.csv")
    from_csv = Count(twins)
    for r in csv_rows:
        from_csv.end(r["cable"], r["a_device"], r["a_port_label"], r["a_module"])
        from_csv.end(r["cable"], r["b_device"], r["b_port_label"], r["b_module"])
        from_csv.cable(r["cable"], r["part"], r["assembly"])
    assert from_csv.modules == modules
    assert from_csv.cables == cables
    parts_of = {r["cable"]: (r["part"], r["a_module"], r["b_module"], r["assembly"]) for r in csv_rows}

    # the workbook: its cable sheets hold the same parts, its summary the same totals
    book = openpyxl.load_workbook(out / "cabling.xlsx", read_only=True)
    sheet_rows = [r for f in ("compute", "storage", "oob") if f in book.sheetnames for r in _sheet(book, f)]
    assert {r["cable"]: tuple(r[k] or "" for k in ("part", "a_module", "b_module", "assembly"))
            for r in sheet_rows} == parts_of
    summary = _sheet(book, "summary")
    assert sum(r["modules_to_order"] for r in summary) == sum(modules.values())
    assert sum(r["cables_to_order"] for r in summary) == sum(cables.values()) + sum(
        1 for r in csv_rows if not r["part"] and r["a_module"]) + sum(
        1 for r in csv_rows if not r["part"] and not r["a_module"])  # + fibre cords + cables with no part number
    assert sum(r["links"] for r in summary) == len(csv_rows) == len(plan.links)

    # the report: totals and the tier table
    report = (out / "report.md").read_text(encoding="utf-8")
    total = re.search(r"in ([\d,]+) cables to order .*?, ([\d,]+) transceiver modules to order", report)
    assert int(total.group(2).replace(",", "")) == sum(modules.values())
    assert int(total.group(1).replace(",", "")) == sum(r["cables_to_order"] for r in summary)
    table = report.split("## Cables per fabric and tier", 1)[1].split("\n\n")[1].splitlines()[2:]
    assert sum(int(line.split("|")[5]) for line in table) == sum(modules.values())
    assert sum(int(line.split("|")[4]) for line in table) == sum(r["cables_to_order"] for r in summary)
    optical = re.search(r"Optical modules: ([\d,]+) \(([\d,]+) transceiver modules \+ 2 ends of each of ([\d,]+) AOCs",
                        report)
    assert int(optical.group(2).replace(",", "")) == sum(modules.values())
    assert cords == sum(1 for r in csv_rows if r["a_module"])

    # the pull sheets: every end once, seen from its own rack (or from the A end's rack when both share one)
    from_pull = Count(twins)
    for sheet in sorted((out / "pull-sheets").glob("*.csv")):
        for r in _csv(sheet):
            assert (r["part"], r["assembly"]) == (parts_of[r["cable"]][0], parts_of[r["cable"]][3])
            from_pull.end(r["cable"], r["local_device"], r["local_port_label"], r["local_module"])
            if r["leaves_rack"] == "no":
                from_pull.end(r["cable"], r["remote_device"], r["remote_port_label"], r["remote_module"])
            from_pull.cable(r["cable"], r["part"], r["assembly"])
    assert from_pull.modules == modules
    assert from_pull.cables == cables

    # a work order laying the whole cluster (from an empty plan): every lay row carries the parts
    empty = copy.copy(plan)
    empty.devices, empty.links, empty.racks, empty.views = [], [], [], {}
    book_path = tmp_path / "work-order.xlsx"
    write_work_order(compare(empty, plan), book_path)
    lay = [r for r in _sheet(openpyxl.load_workbook(book_path, read_only=True), "work-order") if r["action"] == "lay"]
    assert len(lay) == len(plan.links)
    from_order = Count(twins)
    for r in lay:
        assert (r["part"] or "", r["module"] or "", r["to_module"] or "", r["assembly"] or "") == parts_of[r["cable"]]
        from_order.end(r["cable"], r["device"], r["port_label"], r["module"])
        from_order.end(r["cable"], r["to_device"], r["to_port_label"], r["to_module"])
        from_order.cable(r["cable"], r["part"], r["assembly"])
    assert from_order.modules == modules
    assert from_order.cables == cables


def test_the_issue_40_build_lays_and_orders_the_splitter_it_buys(tmp_path):
    """The 6-SU build of issue 40 (the starter spec grown to 6 of 8 SUs): its 720 node-leaf copper links were
    listed as straight 800G ACCs (MCA4J80-N005) in the workbook while the BOM ordered 360 MCA7J60-N005 splitters,
    and the pull sheets carried no part. Now every one of those links names the splitter, two per splitter."""
    spec = tmp_path / "six.yaml"
    text = (ROOT / "inventory" / "minimal" / "cluster.yaml").read_text()
    spec.write_text(text.replace("count: 1\n", "count: 6\n").replace("max: 4\n", "max: 8\n"))
    out = tmp_path / "out"
    run_cli("build", str(spec), "--out", str(out), "--only", "plan,cabling,bom,report")
    acc = [r for r in _csv(out / "cabling.csv") if r["media"] == "ACC"]
    assert len(acc) == 720 and {r["part"] for r in acc} == {"MCA7J60-N005"}
    assert Counter(Counter(r["assembly"] for r in acc).values()) == {2: 360}
    bom = {(r["item"], r["part"]): r for r in _csv(out / "bom.csv")}
    assert bom[("ACC splitter 1:2", "MCA7J60-N005")]["quantity"] == "360"
    assert bom[("ACC splitter 1:2", "MCA7J60-N005")]["speed"] == "800G (2 x 400G)"
    assert bom[("SR4 MMF twin-port", "MMA4Z00-NS")]["speed"] == "800G (2 x 400G)"
    pulled = [r for f in (out / "pull-sheets").glob("*.csv") for r in _csv(f) if r["media"] == "ACC"]
    assert pulled and {r["part"] for r in pulled} == {"MCA7J60-N005"}
    report = (out / "report.md").read_text()
    assert "2760 transceiver modules to order" in report  # 1944 twin-port + 816 single-port, as the BOM
    assert sum(int(bom[k]["quantity"]) for k in bom if k[0].startswith("SR4")) == 2760


def test_netbox_cables_are_described_with_the_parts_laid(tmp_path):
    """The NetBox import CSV and the SoT push describe each cable with the parts a technician lays: a fibre run
    with its modules (the twin-port module at a split cage, not nothing), a splitter leg with the splitter."""
    import csv as csv_module

    from railforge.formats.output import Output
    from railforge.planner import build_plan
    from railforge.render import netbox
    from railforge.sot.desired import desired
    from railforge.spec.loader import load_spec

    spec_path = ROOT / "tests" / "specs" / "tiny-clos.yaml"
    plan = build_plan(*load_spec(spec_path), str(spec_path))
    out = Output(tmp_path / "out")
    netbox.render(plan, out)
    out.commit()
    with open(tmp_path / "out" / "netbox" / netbox.FILES[7], newline="", encoding="utf-8") as fh:
        csv_rows = {r["label"]: r["description"] for r in csv_module.DictReader(fh)}
    pushed = {c.label: c.description for c in desired(plan).cables}
    fibre = next(link for link in plan.links if link.a_module and link.b_module == link.a_module)
    leg = next(link for link in plan.links if link.assembly and link.part in {
        s for by_ways in plan.splitter_parts.values() for s in by_ways.values()})
    for described in (csv_rows, pushed):
        assert described[fibre.id].endswith(f"{fibre.media} {fibre.a_module}"), described[fibre.id]
        assert described[leg.id].endswith(f"{leg.media} {leg.part}"), described[leg.id]
