"""A streaming SpreadsheetML (.xlsx) writer for large, plain tables.

Column widths are measured over a table's rows first (they lead the sheet XML); then its rows are serialised a
batch at a time straight into the zip member, under a frozen header row and with an autofilter over all rows.
Cells are numbers, shared strings or inline strings; the header row is bold on a tinted fill. Written by hand
because xlsxwriter's per-cell API costs 6 µs a cell (measured), and a 131K-GPU cabling workbook has about 10 M cells.
Batches are serialised column by column: a column of few distinct values is serialised once per value, its text as
an index into the workbook's shared strings (numbered in order of appearance, so the same table gives the same
bytes), and mapped through a per-column cache; a column whose values are all plain text (nothing to escape, mostly
unique: cable IDs, addresses) is formatted inline in one comprehension, and others go through the cache value by
value. Shared strings cut the 131K-GPU workbook's XML from 734 to 452 MB, which is what deflate and the row joins
pay for.
"""

from __future__ import annotations

import contextlib
import re
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path

MAIN = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
REL = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
PKG_REL = "http://schemas.openxmlformats.org/package/2006/relationships"
SHEET_CT = "application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"
MAX_WIDTH = 48
CACHE_CELLS = 50_000
MAX_ROWS = 1_048_576
EPOCH = (1980, 1, 1, 0, 0, 0)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")
_SPECIAL = re.compile(r"[&<>\x00-\x1f]|^\s|\s$")
_SEPARATOR = "\u241e"
BATCH_ROWS = 20_000
JOIN_ROWS = 2_000  # rows joined at a time: their cells stay in the CPU caches
NONE = type(None)

STYLES = (
    f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<styleSheet xmlns="{MAIN}">'
    '<fonts count="2"><font><sz val="11"/><name val="Calibri"/></font>'
    '<font><b/><sz val="11"/><name val="Calibri"/></font></fonts>'
    '<fills count="3"><fill><patternFill patternType="none"/></fill><fill><patternFill patternType="gray125"/></fill>'
    '<fill><patternFill patternType="solid"><fgColor rgb="FFD9E1F2"/><bgColor indexed="64"/></patternFill></fill>'
    '</fills><borders count="1"><border><left/><right/><top/><bottom/><diagonal/></border></borders>'
    '<cellStyleXfs count="1"><xf numFmtId="0" fontId="0" fillId="0" borderId="0"/></cellStyleXfs>'
    '<cellXfs count="2"><xf numFmtId="0" fontId="0" fillId="0" borderId="0" xfId="0"/>'
    '<xf numFmtId="0" fontId="1" fillId="2" borderId="0" xfId="0" applyFont="1" applyFill="1"/></cellXfs>'
    '<cellStyles count="1"><cellStyle name="Normal" xfId="0" builtinId="0"/></cellStyles></styleSheet>'
)


def _entry(name: str) -> zipfile.ZipInfo:
    """A zip member with a fixed timestamp, so the same plan gives a byte-identical workbook."""
    info = zipfile.ZipInfo(name, EPOCH)
    info.compress_type = zipfile.ZIP_DEFLATED
    info._compresslevel = 1
    return info


def column_letter(i: int) -> str:
    s = ""
    i += 1
    while i:
        i, r = divmod(i - 1, 26)
        s = chr(65 + r) + s
    return s


def _text(v: str) -> str:
    """`v` as a <t> element: XML's special characters escaped, control characters as '?'."""
    if _SPECIAL.search(v) is None:
        return f"<t>{v}</t>"
    if "&" in v or "<" in v or ">" in v:
        v = v.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    if _CONTROL.search(v):
        v = _CONTROL.sub("?", v)
    space = ' xml:space="preserve"' if v[:1].isspace() or v[-1:].isspace() else ""
    return f"<t{space}>{v}</t>"


def _cell_xml(v) -> str:
    """One cell: text inline, a number as its value (a float as repr writes it, anything else as an int)."""
    if isinstance(v, str):
        return f'<c t="inlineStr"><is>{_text(v)}</is></c>'
    return f"<c><v>{repr(v) if isinstance(v, float) else str(int(v))}</v></c>"


def _plain(joined: str) -> bool:
    """True when no value joined by _SEPARATOR needs escaping or xml:space (what _SPECIAL finds in one value).
    A printable string holds no control character and no whitespace but the space; str methods scan it at C
    speed, where the regex costs more than formatting the cells. A separator inside a value only errs safe."""
    return (joined.isprintable() and "&" not in joined and "<" not in joined and ">" not in joined
            and not joined.startswith(" ") and not joined.endswith(" ")
            and f"{_SEPARATOR} " not in joined and f" {_SEPARATOR}" not in joined)


def _display_len(v) -> int:
    """The length of a value as its cell shows it (what a column's width is sized for)."""
    if isinstance(v, str):
        return len(v)
    return len(repr(v) if isinstance(v, float) else str(int(v)))


def column_width(header: str, values: Sequence) -> int:
    """Characters for a column: its longest header or value (empty ones aside) plus 2. A column of text is
    measured in one C-level pass (len of a number or None raises); other columns over the distinct values of each
    type (1 and 1.0 show differently)."""
    try:
        longest = max(map(len, values), default=0)
    except TypeError:
        found = set(map(type, values))
        kinds = found - {NONE}
        if kinds == {str}:
            longest = max(map(len, filter(None, values)), default=0)
        else:
            longest = 0
            for kind in kinds:
                same = values if len(found) == 1 else [v for v in values if type(v) is kind]
                longest = max(longest, max(map(_display_len, set(same) - {""}), default=0))
    return max(len(header), longest) + 2


class Sheet:
    """Rows of one worksheet, streamed into the workbook's zip as they are serialised. Cells carry no `r`
    reference (optional in SpreadsheetML: they are sequential, empty ones written as <c/>), so each distinct
    value of a column is serialised once and reused. Column widths come first in the XML, so `widths` is
    measured over all rows before the first is written."""

    def __init__(self, name: str, columns: tuple[str, ...], widths: list[int], strings: dict[str, int] | None = None):
        self.name, self.columns, self.widths = name, columns, widths
        self.caches: list[dict] = [{None: "<c/>", "": "<c/>"} for _ in columns]
        self.strings = {} if strings is None else strings

    def _shared(self, v) -> str:
        """A cell of a column of few distinct values: text as an index into the workbook's shared strings (a
        short cell, its text written once), anything else as `_cell_xml` writes it."""
        if not isinstance(v, str):
            return _cell_xml(v)
        index = self.strings.get(v)
        if index is None:
            index = self.strings[v] = len(self.strings)
        return f'<c t="s"><v>{index}</v></c>'

    def _cell(self, c: int, v) -> str:
        xml = _cell_xml(v)
        cache = self.caches[c]
        if len(cache) < CACHE_CELLS:
            cache[v] = xml
        return xml

    def _column(self, c: int, values: list) -> list[str]:
        """The cells of column `c` for `values`. A column of few distinct values (most of a cable sheet's) has
        each one serialised once (`_shared`: text as a shared string) and is then mapped through the cache at C
        speed; other values are written inline (`_cell`), or taken from the cache if the column met them before."""
        distinct = dict.fromkeys(values)  # in order of appearance: shared strings are numbered in that order
        cache = self.caches[c]
        if len(distinct) * 4 <= len(values):
            missing = [v for v in distinct if v not in cache]
            if len(cache) + len(missing) <= CACHE_CELLS:
                for v in missing:
                    cache[v] = self._shared(v)
                return list(map(cache.__getitem__, values))
        if set(map(type, distinct)) == {str} and _plain(_SEPARATOR.join(values)):
            return [f'<c t="inlineStr"><is><t>{v}</t></is></c>' if v else "<c/>" for v in values]
        get, cell = cache.get, self._cell
        return [get(v) or cell(c, v) for v in values]

    def header(self) -> str:
        return "<row>" + "".join(f'<c t="inlineStr" s="1"><is>{_text(c)}</is></c>' for c in self.columns) + "</row>"

    def column_batches(self, columns: Sequence[Sequence]) -> Iterator[str]:
        """`<row>` elements for a table given as its columns (equally long): cells are made BATCH_ROWS rows at a
        time from each column's slice (enough rows to find the columns of few values), and joined into rows
        JOIN_ROWS at a time."""
        for start in range(0, len(columns[0]) if columns else 0, BATCH_ROWS):
            cells = [self._column(c, values[start:start + BATCH_ROWS]) for c, values in enumerate(columns)]
            for at in range(0, len(cells[0]), JOIN_ROWS):
                part = [column[at:at + JOIN_ROWS] for column in cells]
                yield "<row>" + "</row><row>".join(map("".join, zip(*part, strict=True))) + "</row>"

    def head_tail(self, rows: int) -> tuple[str, str, str]:
        """The worksheet XML before and after `rows` data rows, and its table's cell range."""
        last = f"{column_letter(len(self.columns) - 1)}{max(rows + 1, 2)}"
        cols = "".join(f'<col min="{i + 1}" max="{i + 1}" width="{min(w, MAX_WIDTH)}" customWidth="1"/>'
                       for i, w in enumerate(self.widths))
        head = (f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<worksheet xmlns="{MAIN}" '
                f'xmlns:r="{REL}"><dimension ref="A1:{last}"/><sheetViews><sheetView workbookViewId="0">'
                '<pane ySplit="1" topLeftCell="A2" activePane="bottomLeft" state="frozen"/>'
                '<selection pane="bottomLeft" activeCell="A2" sqref="A2"/></sheetView></sheetViews>'
                f'<sheetFormatPr defaultRowHeight="15"/><cols>{cols}</cols><sheetData>')
        return head, f'</sheetData><autoFilter ref="A1:{last}"/></worksheet>', f"A1:{last}"


class Workbook:
    """`table(name, columns, rows)` writes a table (one or more sheets), then `close()`."""

    def __init__(self, path: Path):
        self.zip = zipfile.ZipFile(path, "w")
        self.sheets: list[tuple[str, str]] = []
        self.strings: dict[str, int] = {}

    def table(self, name: str, columns: tuple[str, ...], rows: Sequence[tuple]) -> None:
        """`rows` in sheet `name`, continued in `name-2`, `name-3`... past MAX_ROWS; one sheet when empty. Every
        sheet of a table has the same column widths."""
        self.columns_table(name, columns, list(zip(*rows, strict=True)) if rows else [()] * len(columns))

    def columns_table(self, name: str, columns: tuple[str, ...], values: Sequence[Sequence]) -> None:
        """`table` for a table given as its columns (one sequence of values per column, equally long)."""
        count = len(values[0]) if values else 0
        widths = [column_width(h, v) for h, v in zip(columns, values, strict=True)]
        per_sheet = MAX_ROWS - 1
        for n, start in enumerate(range(0, max(count, 1), per_sheet), 1):
            part = values if count <= per_sheet else [v[start:start + per_sheet] for v in values]
            self._sheet(Sheet(name if n == 1 else f"{name}-{n}", columns, widths, self.strings), part)

    def _sheet(self, sheet: Sheet, columns: Sequence[Sequence]) -> None:
        head, tail, ref = sheet.head_tail(len(columns[0]) if columns else 0)
        n = len(self.sheets) + 1
        with self.zip.open(_entry(f"xl/worksheets/sheet{n}.xml"), "w", force_zip64=True) as fh:
            fh.write((head + sheet.header()).encode())
            for xml in sheet.column_batches(columns):
                fh.write(xml.encode())
            fh.write(tail.encode())
        self.sheets.append((sheet.name, ref))

    def abort(self) -> None:
        """Drop a half-written workbook: close its file without writing the zip directory, which on a full disk
        would fail again (and again from ZipFile.__del__)."""
        fp, self.zip.fp = self.zip.fp, None
        if fp is not None:
            with contextlib.suppress(OSError):
                fp.close()

    def close(self) -> None:
        n = len(self.sheets)
        z = self.zip
        z.writestr(_entry("[Content_Types].xml"), (
            '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
            '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
            '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
            '<Default Extension="xml" ContentType="application/xml"/>'
            '<Override PartName="/xl/workbook.xml" '
            'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/>'
            '<Override PartName="/xl/styles.xml" '
            'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.styles+xml"/>'
            '<Override PartName="/xl/sharedStrings.xml" '
            'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sharedStrings+xml"/>'
            + "".join(f'<Override PartName="/xl/worksheets/sheet{i}.xml" ContentType="{SHEET_CT}"/>'
                      for i in range(1, n + 1)) + "</Types>"))
        z.writestr(_entry("_rels/.rels"), (
            f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<Relationships xmlns="{PKG_REL}">'
            f'<Relationship Id="rId1" Type="{REL}/officeDocument" Target="xl/workbook.xml"/></Relationships>'))
        sheets = "".join(f'<sheet name="{name}" sheetId="{i}" r:id="rId{i}"/>'
                         for i, (name, _) in enumerate(self.sheets, 1))
        names = "".join(f'<definedName name="_xlnm._FilterDatabase" localSheetId="{i}" hidden="1">'
                        f"'{name}'!{_absolute(ref)}</definedName>" for i, (name, ref) in enumerate(self.sheets))
        z.writestr(_entry("xl/workbook.xml"), (
            f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<workbook xmlns="{MAIN}" xmlns:r="{REL}">'
            f'<bookViews><workbookView/></bookViews><sheets>{sheets}</sheets>'
            f"<definedNames>{names}</definedNames></workbook>"))
        rels = "".join(f'<Relationship Id="rId{i}" Type="{REL}/worksheet" Target="worksheets/sheet{i}.xml"/>'
                       for i in range(1, n + 1))
        z.writestr(_entry("xl/_rels/workbook.xml.rels"), (
            f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<Relationships xmlns="{PKG_REL}">{rels}'
            f'<Relationship Id="rId{n + 1}" Type="{REL}/styles" Target="styles.xml"/>'
            f'<Relationship Id="rId{n + 2}" Type="{REL}/sharedStrings" Target="sharedStrings.xml"/></Relationships>'))
        z.writestr(_entry("xl/styles.xml"), STYLES)
        z.writestr(_entry("xl/sharedStrings.xml"), (
            f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<sst xmlns="{MAIN}" '
            f'uniqueCount="{len(self.strings)}">' + "".join(f"<si>{_text(v)}</si>" for v in self.strings) + "</sst>"))
        z.close()


def _absolute(ref: str) -> str:
    a, b = ref.split(":")
    split = lambda c: (c.rstrip("0123456789"), c[len(c.rstrip("0123456789")):])  # noqa: E731
    (ca, ra), (cb, rb) = split(a), split(b)
    return f"${ca}${ra}:${cb}${rb}"
