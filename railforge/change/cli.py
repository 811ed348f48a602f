"""`railforge diff OLD NEW`: what a change means on the floor, and the work order to carry it out."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from railforge.change.compare import ChangeSet, Item, compare_sides
from railforge.change.sides import ChangeInputError, check_comparable, read_side
from railforge.change.workorder import write_work_order
from railforge.cli import show
from railforge.cli.args import ArgumentError, check_path
from railforge.inputs import InputError

PlanArg = Annotated[Path, typer.Argument(help="build folder (with plan.json) or a plan.json file")]


def counts_table(cs: ChangeSet) -> Table:
    o, n = cs.old.cluster, cs.new.cluster
    t = Table(title=show.text(f"{n.name}: {o.sus} -> {n.sus} SUs (designed for {o.max_sus} -> {n.max_sus}), "
                              f"{o.nodes} -> {n.nodes} nodes"))
    for col in ("kind", "action", "count", "breaks existing"):
        t.add_column(col, justify="right" if col == "count" else "left")
    for (kind, action), count in sorted(cs.counts().items()):
        breaks = Text("yes", "red") if Item(kind, action, "").breaking else Text("no")
        t.add_row(show.text(kind), show.text(action), Text(f"{count:,}"), breaks)
    return t


def diff(
    old: PlanArg,
    new: PlanArg,
    work_order: Annotated[Path, typer.Option(help="work-order workbook to write")] = Path("work-order.xlsx"),
    details: Annotated[int, typer.Option(help="detail lines per kind of change (0: none)", min=0)] = 10,
) -> None:
    """Compare two plans: counts, then details; write the work order. Exit 0 if the change only adds,
    1 if anything existing is renumbered, re-labelled, re-cabled, moved or removed, 2 on bad input."""
    err = show.console(stderr=True)
    try:
        for path, option in ((old, "OLD"), (new, "NEW"), (work_order, "--work-order")):
            check_path(path, option)
        a, b = read_side(old), read_side(new)
        check_comparable(a, b)
        cs = compare_sides(a, b)
    except (ChangeInputError, InputError, ArgumentError) as exc:
        show.error(err, exc)
        raise typer.Exit(2) from None
    con = show.console()
    con.print(counts_table(cs))
    groups: dict[tuple[str, str], list] = {}
    for it in cs.items:
        groups.setdefault((it.kind, it.action), []).append(it)
    for (kind, action), items in sorted(groups.items(), key=lambda kv: (not kv[1][0].breaking, kv[0])):
        if not details:
            break
        con.print(Text.assemble("\n", (show.plain(f"{kind} {action}"), "bold"), f" ({len(items):,})"))
        for it in items[:details]:
            arrow = f"{it.old} -> {it.new}" if it.old and it.new else (it.new or it.old)
            con.print(show.text(f"  {it.subject}: {arrow}"))
        if len(items) > details:
            con.print(f"  ... and {len(items) - details:,} more (sheet 'changes' of the work order)")
    try:
        steps = write_work_order(cs, work_order)
    except OSError as exc:
        show.error(err, f"cannot write the work order {work_order}: {exc}")
        raise typer.Exit(2) from None
    breaking = cs.breaking()
    elev = f"; rack elevations in {b.folder / 'elevations'}" if b.folder else ""
    con.print(Text.assemble("\n", show.plain(f"work order: {work_order} ({steps} steps{elev})")))
    if breaking:
        con.print(Text.assemble((f"{len(breaking):,} changes to what exists", "red"), ": this is not a pure addition"))
        raise typer.Exit(1)
    con.print(Text.assemble(("only additions", "green"),
                            ": existing devices, cables, ports, addresses and ASNs are unchanged"))
