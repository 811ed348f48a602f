"""The batched CSV writer against the csv module it stands in for: same bytes, every quoting case."""

from __future__ import annotations

import csv
import enum
import io

from hypothesis import given, settings
from hypothesis import strategies as st

from railforge.formats import csvrows

_TEXT = st.text(st.sampled_from(["a", "Z", "0", " ", ",", '"', "\r", "\n", "\x00", "\t", "é", "\u2028"]),
                max_size=5)
_VALUE = st.one_of(_TEXT, st.none(), st.integers(-10**20, 10**20), st.floats(allow_nan=True), st.booleans())


class Colour(str, enum.Enum):  # noqa: UP042 - the mix-in whose str() is not its value
    RED = "red,ish"


def _by_csv(rows) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    return buf.getvalue()


@settings(max_examples=400, deadline=None)
@given(st.integers(1, 4).flatmap(lambda n: st.lists(st.tuples(*[_VALUE] * n), max_size=20)))
def test_rectangular_rows_match_csv_writer(rows):
    assert csvrows.format_rows(rows) == _by_csv(rows)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(_VALUE, max_size=4), max_size=12))
def test_ragged_rows_match_csv_writer(rows):
    assert csvrows.format_rows(rows) == _by_csv(rows)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b,c"]),
                          st.sampled_from([0.0, -0.0, 1.5, 2.0, 1e-7, float("inf"), float("nan"), 3.25])),
                min_size=4, max_size=40))
def test_float_columns_of_few_values_match_csv_writer(rows):
    """A float column of few distinct values is formatted once per value: -0.0, 0.0 and NaN must still print
    as csv.writer prints them."""
    assert csvrows.format_rows(rows) == _by_csv(rows)


def test_values_of_other_types_are_left_to_csv():
    """A str-mixin enum: str() gives 'Colour.RED', csv writes its value; the batch must not guess."""
    rows = [("a", Colour.RED), ("b", "c")]
    assert csvrows.format_rows(rows) == _by_csv(rows) == 'a,"red,ish"\nb,c\n'


def test_row_writer_across_batches(monkeypatch):
    monkeypatch.setattr(csvrows, "BATCH_ROWS", 7)
    rows = [(i, f"n{i}", None if i % 3 else "x,y", i / 4) for i in range(30)]
    buf = io.StringIO()
    w = csvrows.RowWriter(buf)
    w.writerow(("a", "b", "c", "d"))
    w.writerows(rows[:11])
    for row in rows[11:]:
        w.writerow(row)
    w.flush()
    assert buf.getvalue() == _by_csv([("a", "b", "c", "d"), *rows])
    out = io.StringIO()
    csvrows.write_rows(out, iter(rows))
    assert out.getvalue() == _by_csv(rows)


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 4).flatmap(lambda n: st.lists(st.tuples(*[_VALUE] * n), max_size=12)),
       st.lists(st.lists(st.integers(0, 3), min_size=1, max_size=5), min_size=1, max_size=3))
def test_column_lines_match_csv_writer_per_view(rows, views):
    """Every view (columns chosen and reordered) of a table given as columns: csv.writer's line for each row."""
    width = len(rows[0]) if rows else 4
    views = [[i % width for i in view] for view in views]
    columns = list(zip(*rows, strict=True)) if rows else [()] * width
    got = csvrows.column_lines(columns, *views)
    assert got == [[_by_csv([[row[i] for i in view]])[:-1] for row in rows] for view in views]


def test_column_lines_across_batches(monkeypatch):
    monkeypatch.setattr(csvrows, "BATCH_ROWS", 3)
    rows = [(i, f"n{i}", "x,y" if i == 5 else None, i / 4) for i in range(11)]
    columns = list(zip(*rows, strict=True))
    assert csvrows.column_lines(columns, (3, 1, 2)) == [[_by_csv([(r[3], r[1], r[2])])[:-1] for r in rows]]
