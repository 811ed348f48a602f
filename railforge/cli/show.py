"""Printing what came from a user or a file without letting it act: never parsed as rich markup, and every
control character (an escape sequence, a carriage return, a bidirectional override) shown escaped.

rich parses `[...]` in any plain string it prints, in table cells and titles too; one `[/x]` in a switch name
raised MarkupError after the work was done. Everything printed goes through `Text` built here instead.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from railforge.inputs import plain


def text(value: object, style: str = "") -> Text:
    return Text(plain(value), style=style)


def line(label: str, style: str, message: object) -> Text:
    """`error ...`, `note ...`: a coloured label and the message as it is (its own newlines kept)."""
    return Text.assemble((label, style), " ", plain(message, newlines=True))


def console(stderr: bool = False) -> Console:
    """A console that adds nothing of its own: no emoji codes, no highlighting, no markup in plain strings."""
    return Console(stderr=stderr, soft_wrap=True, emoji=False, highlight=False, markup=False)


def error(con: Console, message: object) -> None:
    con.print(line("error", "red", message))


def note(con: Console, message: object) -> None:
    con.print(line("note", "yellow", message))


def table(title: object, columns: tuple[str, ...], rows: list[tuple[object, ...]], **column: object) -> Table:
    """A table whose title and cells are data: each is a Text, never markup."""
    t = Table(title=text(title))
    for col in columns:
        t.add_column(col, **column)
    for row in rows:
        t.add_row(*(cell if isinstance(cell, Text) else text(cell) for cell in row))
    return t
