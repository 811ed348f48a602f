"""CSV text exactly as `csv.writer(fh, lineterminator="\\n")` writes it, a batch of rows at a time.

Why not the csv module alone: it costs ~4.5 µs per 21-field row (a Python-level call per row, a type
dispatch and a quoting scan per field), and at 131K GPUs the build writes ~1.9 M rows (cabling.csv, pull
sheets, NetBox, the IP plan). Here each column of a batch becomes text in one C-level pass (`map(str, …)`),
rows are joined with ",", and the batch's text is checked with a few `str` scans: a row whose fields
contain a comma, a double quote, CR or LF, a row of one field, or a value of another type goes through
`csv.writer` itself, so every quoting decision stays the csv module's. Tests pin the output to csv.writer.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from itertools import islice
from typing import IO

BATCH_ROWS = 2_000  # a batch's columns stay in the CPU caches: 20% less CPU than 20,000 (131K GPUs)
NONE = type(None)
PLAIN_TYPES = frozenset({str, int, float, bool, NONE})


def _csv_text(rows: Iterable[Sequence]) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    return buf.getvalue()


def _column_text(col: Sequence) -> Sequence[str] | None:
    kinds = set(map(type, col))
    if kinds == {str}:
        return col
    if kinds == {NONE}:
        return [""] * len(col)
    if kinds == {str, NONE}:
        return [v or "" for v in col]
    if kinds == {int}:
        text = {v: str(v) for v in set(col)}
        return list(map(text.__getitem__, col))
    if kinds == {float}:
        distinct = set(col)
        # equal floats print alike except 0.0 / -0.0, and NaN is not equal to itself: those take str() each
        if len(distinct) * 4 <= len(col) and 0.0 not in distinct and all(v == v for v in distinct):
            text = {v: str(v) for v in distinct}
            return list(map(text.__getitem__, col))
    if not kinds <= PLAIN_TYPES:
        return None
    if NONE in kinds:
        return ["" if v is None else str(v) for v in col]
    return list(map(str, col))


def _plain(line: str, commas: int) -> bool:
    return line.count(",") == commas and '"' not in line and "\r" not in line and "\n" not in line


def _all_plain(text: str, lines: int, commas: int) -> bool:
    """True when `lines` joined lines of `commas` + 1 fields each need no quoting: what `_plain` checks per line,
    over their joined text in a few C-level scans."""
    return (text.count(",") == commas * lines and text.count("\n") == max(lines - 1, 0) and '"' not in text
            and "\r" not in text)


def _quoted(lines: list[str], rows: Iterable[Sequence], commas: int) -> list[str]:
    """`lines`, each row that needs quoting written by csv.writer itself (without its line end)."""
    return [line if _plain(line, commas) else _csv_text((row,))[:-1] for line, row in zip(lines, rows, strict=True)]


def format_rows(rows: list[Sequence]) -> str:
    """The rows as csv.writer writes them, each ended by "\\n"."""
    if not rows:
        return ""
    width = len(rows[0])
    if width < 2 or set(map(len, rows)) != {width}:
        return _csv_text(rows)
    cols = [_column_text(col) for col in zip(*rows, strict=True)]
    if any(c is None for c in cols):
        return _csv_text(rows)
    lines = list(map(",".join, zip(*cols, strict=True)))
    text = "\n".join(lines)
    if _all_plain(text, len(rows), width - 1):
        return text + "\n"
    return "\n".join(_quoted(lines, rows, width - 1)) + "\n"


def column_lines(columns: Sequence[Sequence], *views: Sequence[int]) -> list[list[str]]:
    """For each view (the indices of the table's columns it shows, in order, one or more), every row of a table
    given as its columns (equally long) as csv.writer writes it, without the line end: for tables that are split or
    reordered after formatting (pull sheets). Each column a view shows becomes text once, for all views; rows are joined
    BATCH_ROWS at a time."""
    texts = {i: _column_text(columns[i]) for i in sorted(set().union(*views))}
    out = []
    for view in views:
        if len(view) < 2 or any(texts[i] is None for i in view):
            out.append([_csv_text((row,))[:-1] for row in zip(*(columns[i] for i in view), strict=True)])
            continue
        chosen = [texts[i] for i in view]
        lines: list[str] = []
        for start in range(0, len(chosen[0]), BATCH_ROWS):
            lines += map(",".join, zip(*(t[start:start + BATCH_ROWS] for t in chosen), strict=True))
        if not _all_plain("\n".join(lines), len(lines), len(view) - 1):
            lines = _quoted(lines, zip(*(columns[i] for i in view), strict=True), len(view) - 1)
        out.append(lines)
    return out


def write_rows(fh: IO[str], rows: Iterable[Sequence]) -> None:
    it = iter(rows)
    while batch := list(islice(it, BATCH_ROWS)):
        fh.write(format_rows(batch))


class RowWriter:
    """`writerow`/`writerows` like csv.writer's, buffered into batches; `close` writes the rest and closes."""

    def __init__(self, fh: IO[str]) -> None:
        self.fh = fh
        self.rows: list[Sequence] = []

    def writerow(self, row: Sequence) -> None:
        self.rows.append(row)
        if len(self.rows) >= BATCH_ROWS:
            self.flush()

    def writerows(self, rows: Iterable[Sequence]) -> None:
        it = iter(rows)
        while chunk := list(islice(it, BATCH_ROWS)):
            self.rows += chunk
            if len(self.rows) >= BATCH_ROWS:
                self.flush()

    def flush(self) -> None:
        self.fh.write(format_rows(self.rows))
        self.rows = []

    def close(self) -> None:
        self.flush()
        self.fh.close()
