"""The cabling workbook, CSV and pull sheets read back and checked against the plan."""

from __future__ import annotations

import csv
import io
import re
import subprocess
from collections import Counter

import openpyxl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import plan_of, require_tool

FABRIC_SHEETS = ("compute", "storage", "oob")
HEADER = ["cable", "fabric", "tier", "su", "rail", "a_rack", "a_u", "a_device", "a_port", "a_port_label",
          "b_rack", "b_u", "b_device", "b_port", "b_port_label", "speed", "media", "part", "transceivers", "fibre",
          "length_m"]


def _csv(path):
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def dgx(built):
    out = built("dgx-h100-4su")
    return out, plan_of("dgx-h100-4su"), openpyxl.load_workbook(out / "cabling.xlsx")


def _sheet_rows(ws):
    rows = list(ws.iter_rows(values_only=True))
    return list(rows[0]), [dict(zip(rows[0], r, strict=True)) for r in rows[1:]]


def test_workbook_has_a_sheet_per_fabric_a_summary_and_the_ip_plan(dgx):
    _, _, wb = dgx
    assert wb.sheetnames == ["summary", "compute", "storage", "oob", "ip-plan", "pools"]


@pytest.mark.parametrize("name", ["dgx-h100-4su", "roce-a800-4nic"])
def test_every_cable_of_the_plan_is_in_the_workbook_exactly_once_with_its_plan_values(built, name):
    out, plan = built(name), plan_of(name)
    wb = openpyxl.load_workbook(out / "cabling.xlsx", read_only=True)
    devices = {d.name: d for d in plan.devices}
    ports = {(d.name, p.name): p for d in plan.devices for p in d.ports}
    links = {link.id: link for link in plan.links}
    seen = Counter()
    for fabric in FABRIC_SHEETS:
        header, rows = _sheet_rows(wb[fabric])
        assert header == HEADER
        for row in rows:
            seen[row["cable"]] += 1
            link = links[row["cable"]]
            assert row["fabric"] == fabric == link.fabric
            assert (row["tier"], row["su"], row["rail"]) == (link.tier, link.su, link.rail)
            for end, ep in (("a", link.a), ("b", link.b)):
                dev = devices[ep.device]
                assert row[f"{end}_device"] == ep.device and row[f"{end}_port"] == ep.port
                assert (row[f"{end}_rack"], row[f"{end}_u"]) == (dev.rack, dev.u)
                assert row[f"{end}_port_label"] == ports[(ep.device, ep.port)].label
            assert row["speed"] == f"{link.speed_mbps // 1000}G"
            assert (row["media"], row["length_m"]) == (link.media, link.length_m)
            assert (row["part"] or None) == link.part and (row["fibre"] or None) == link.fibre
            assert (row["transceivers"] or 0) == link.transceivers
    assert set(seen) == set(links)
    assert max(seen.values()) == 1


def test_sheets_have_a_frozen_header_a_filter_over_all_rows_and_fitted_widths(dgx):
    _, plan, wb = dgx
    for fabric in FABRIC_SHEETS:
        ws = wb[fabric]
        n = sum(1 for link in plan.links if link.fabric == fabric)
        assert ws.freeze_panes == "A2"
        assert ws.auto_filter.ref == f"A1:U{n + 1}"
        longest = max(len(link.a.device) for link in plan.links if link.fabric == fabric)
        assert ws.column_dimensions["H"].width >= longest
        assert ws.column_dimensions["A"].width >= len("CMP-000001")


def test_rows_run_rack_by_rack_top_down(dgx):
    _, plan, wb = dgx
    rack_rank = {r.name: i for i, r in enumerate(sorted(plan.racks, key=lambda r: (r.row, r.position)))}
    for fabric in FABRIC_SHEETS:
        _, rows = _sheet_rows(wb[fabric])
        keys = [(rack_rank[r["a_rack"]], -r["a_u"]) for r in rows]
        assert keys == sorted(keys)


def test_csv_has_the_same_rows_as_the_workbook(dgx):
    out, plan, wb = dgx
    rows = _csv(out / "cabling.csv")
    assert list(rows[0]) == HEADER
    xlsx = [r for f in FABRIC_SHEETS for r in _sheet_rows(wb[f])[1]]
    assert [r["cable"] for r in rows] == [r["cable"] for r in xlsx]
    assert [float(r["length_m"]) for r in rows] == [r["length_m"] for r in xlsx]
    assert len(rows) == len(plan.links) == 2681


def test_summary_counts_add_up_to_the_plan(dgx):
    _, plan, wb = dgx
    _, rows = _sheet_rows(wb["summary"])
    assert sum(r["cables"] for r in rows) == len(plan.links)
    node_leaf = sum(r["cables"] for r in rows if r["tier"] == "node-leaf")
    leaf_spine = sum(r["cables"] for r in rows if r["tier"] == "leaf-spine")
    assert (node_leaf, leaf_spine) == (1020, 1024)  # DGX H100 SuperPOD RA, 4 SUs


def test_pull_sheets_list_every_cable_touching_the_rack(built):
    out, plan = built("dgx-h100-4su"), plan_of("dgx-h100-4su")
    rack_of = {d.name: d.rack for d in plan.devices}
    expected: dict[str, set[str]] = {}
    for link in plan.links:
        for dev in (link.a.device, link.b.device):
            expected.setdefault(rack_of[dev], set()).add(link.id)
    files = sorted(p.stem for p in (out / "pull-sheets").glob("*.csv"))
    assert files == sorted(expected)
    for rack in ("R001-01", "R001-05", "R000-01"):
        rows = _csv(out / "pull-sheets" / f"{rack}.csv")
        assert {r["cable"] for r in rows} == expected[rack]
        for r in rows:
            assert r["local_device"] in {d.name for d in plan.devices if d.rack == rack}
            assert r["leaves_rack"] == ("yes" if r["remote_rack"] != rack else "no")
        us = [int(r["local_u"]) for r in rows]
        assert us == sorted(us, reverse=True)


def test_workbook_writer_escapes_text_and_continues_past_the_row_limit(tmp_path, monkeypatch):
    from railforge.formats import xlsx

    monkeypatch.setattr(xlsx, "MAX_ROWS", 4)
    wb = xlsx.Workbook(tmp_path / "t.xlsx")
    wb.table("t", ("n", "text", "plain", "empty"), [(i, f" <a&b> {i}", f"p{i}", None) for i in range(7)])
    wb.table("none", ("n",), [])
    wb.close()
    book = openpyxl.load_workbook(tmp_path / "t.xlsx")
    assert book.sheetnames == ["t", "t-2", "t-3", "none"]
    rows = [r for n in book.sheetnames[:3] for r in list(book[n].iter_rows(values_only=True))[1:]]
    assert rows == [(i, f" <a&b> {i}", f"p{i}", None) for i in range(7)]
    assert list(book["none"].iter_rows(values_only=True)) == [("n",)]
    # widths: the longest of header and values, plus 2 ("n" and digits: 3; " <a&b> 6": 10; "plain": 7; "empty": 7)
    for name in book.sheetnames[:3]:
        assert [book[name].column_dimensions[c].width for c in "ABCD"] == [3, 10, 7, 7]


_CELL_TEXT = st.text(st.sampled_from(["a", "Z", "0", " ", "\t", "\n", "&", "<", ">", "\x01", "\x7f", "\u241e",
                                      "\xa0", "é", "|", '"']), max_size=6)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_CELL_TEXT, st.one_of(_CELL_TEXT, st.none(), st.integers(-5, 5), st.floats(0, 9))),
                max_size=12))
def test_batched_cells_read_back_as_written(rows):
    """Cells made a column and a batch at a time read back (openpyxl) as the values written."""
    _assert_batched_match(rows)


_FEW = [" <a&b>", "plain", "", None, 3, 2.5, "x\ty", "\x01"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(_FEW), st.sampled_from(_FEW[:3]), st.one_of(_CELL_TEXT, st.none())),
                min_size=8, max_size=80))
def test_columns_of_few_values_read_back_as_written(rows):
    """Columns with few distinct values are shared strings mapped through the cache: read back as written."""
    _assert_batched_match(rows, ("a", "b", "c"))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_CELL_TEXT, st.none(), st.integers(-10**6, 10**6), st.floats(-1e9, 1e9), st.booleans(),
                          st.sampled_from([0, 0.0, 1, 1.0, True, False, "", -1, -1.0])), max_size=20),
       st.text(max_size=4))
def test_column_width_is_the_longest_shown_value(values, header):
    """Widths measured by type and distinct value equal the plain definition: the longest header or non-empty cell
    as the sheet shows it (an int as digits, a float as repr), plus 2."""
    from railforge.formats import xlsx

    shown = [len(v) if isinstance(v, str) else len(repr(v) if isinstance(v, float) else str(int(v)))
             for v in values if v is not None and v != ""]
    assert xlsx.column_width(header, values) == max([len(header), *shown]) + 2
    assert xlsx.column_width(header, tuple(values)) == max([len(header), *shown]) + 2


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 4), st.sampled_from(["sw-a", "sw-b"]), st.sampled_from(["C-1", "C-2", "C-10"]),
                          st.integers()), max_size=30))
def test_pull_rows_sort_top_u_first_then_device_and_cable(rows):
    from railforge.render.cabling import _sort_pull_rows

    got = list(rows)
    _sort_pull_rows(got)
    assert got == sorted(rows, key=lambda r: (-r[0], r[1], r[2]))


_RACK = st.sampled_from(["R1", "R2", "R3"])
_NAME = st.sampled_from(["sw-a", "sw-b", "gpu,1", 'q"x', "n"])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_RACK, st.integers(1, 42), _NAME, _NAME, _RACK, st.integers(1, 42), _NAME, _NAME,
                          st.sampled_from([1.0, 2.5, 0.0, -0.0]), st.sampled_from(["", None, "AOC"])),
                max_size=25))
def test_pull_sheets_are_csv_writer_rows_per_rack(ends):
    """Pull sheets, formatted column-wise and sorted into racks, against csv.writer on rows built and sorted per
    rack the plain way; names with a comma or a quote take csv's quoting."""
    from railforge.plan.tables import CABLE_COLUMNS
    from railforge.render.cabling import PULL_COLUMNS, pull_sheets

    rows = [(f"C-{n}", "compute", "leaf-spine", 1, None, ar, au, ad, ap, f"{ap}L", br, bu, bd, bp, f"{bp}L", "400G",
             media, "part", 2, "", length) for n, (ar, au, ad, ap, br, bu, bd, bp, length, media) in enumerate(ends)]
    expected: dict[str, list[tuple]] = {}
    for r in rows:
        leaves = "yes" if r[5] != r[10] else "no"
        tail = (r[15], r[16], r[20], leaves)
        expected.setdefault(r[5], []).append((r[0], *r[6:10], *r[10:15], *tail))
        if r[10] != r[5]:
            expected.setdefault(r[10], []).append((r[0], *r[11:15], *r[5:10], *tail))
    buf = {}
    for rack, prow in expected.items():
        text = io.StringIO()
        ordered = sorted(prow, key=lambda p: (-p[1], p[2], p[0]))
        csv.writer(text, lineterminator="\n").writerows([PULL_COLUMNS, *ordered])
        buf[rack] = text.getvalue()
    columns = list(zip(*rows, strict=True)) if rows else [()] * len(CABLE_COLUMNS)
    assert list(pull_sheets(columns)) == sorted(buf.items())


def _assert_batched_match(rows, columns=("a", "b")):
    """The workbook read back by openpyxl holds every value as written (text with control characters as '?',
    empty text as an empty cell), with the batch sizes of a large build and with tiny ones that split batches and
    joins; both workbooks number their shared strings alike, so they are the same bytes."""
    import tempfile
    from pathlib import Path

    from railforge.formats import xlsx

    def shown(v):
        if isinstance(v, str):
            return re.sub(r"[\x00-\x08\x0b\x0c\x0e-\x1f]", "?", v) or None
        return v

    expected = [tuple(shown(v) for v in row) for row in rows]
    saved = xlsx.BATCH_ROWS, xlsx.JOIN_ROWS
    written = []
    with tempfile.TemporaryDirectory() as tmp:
        for batch, join in (saved, (7, 3)):
            xlsx.BATCH_ROWS, xlsx.JOIN_ROWS = batch, join
            try:
                path = Path(tmp) / f"b{batch}.xlsx"
                wb = xlsx.Workbook(path)
                wb.table("t", columns, rows)
                wb.close()
            finally:
                xlsx.BATCH_ROWS, xlsx.JOIN_ROWS = saved
            sheet = openpyxl.load_workbook(path)["t"]
            got = [tuple(r) for r in list(sheet.iter_rows(values_only=True))[1:]]
            assert got == expected
            written.append(path.read_bytes())
    if len(rows) <= 7:
        assert written[0] == written[1]


def test_libreoffice_reads_the_workbook_like_the_csv(built, tmp_path):
    """A second, independent reader (LibreOffice's XLSX import) sees the same cells as cabling.csv."""
    require_tool("soffice")
    out = built("dgx-h100-4su")
    filt = "csv:Text - txt - csv (StarCalc):44,34,76,1,,0,false,true,false,false,false,-1"
    subprocess.run(["soffice", f"-env:UserInstallation=file://{tmp_path}/profile", "--headless", "--convert-to",
                    filt, "--outdir", str(tmp_path), str(out / "cabling.xlsx")],
                   check=True, capture_output=True, timeout=300)
    assert sorted(p.name for p in tmp_path.glob("cabling-*.csv")) == [
        f"cabling-{s}.csv" for s in sorted(("summary", "compute", "storage", "oob", "ip-plan", "pools"))]
    want = [list(r.values()) for r in _csv(out / "cabling.csv")]
    got = [list(r.values()) for f in FABRIC_SHEETS for r in _csv(tmp_path / f"cabling-{f}.csv")]
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g[:20] == w[:20] and float(g[20]) == float(w[20])
