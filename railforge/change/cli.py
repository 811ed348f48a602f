"""`railforge diff OLD NEW`: what a change means on the floor, and the work order to carry it out."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from railforge.change.compare import ChangeSet, Item, compare_sides
from railforge.change.sides import ChangeInputError, check_comparable, read_side
from railforge.change.workorder import write_work_order

PlanArg = Annotated[Path, typer.Argument(help="build folder (with plan.json) or a plan.json file")]


def counts_table(cs: ChangeSet) -> Table:
    o, n = cs.old.cluster, cs.new.cluster
    t = Table(title=f"{n.name}: {o.sus} -> {n.sus} SUs (designed for {o.max_sus} -> {n.max_sus}), "
                    f"{o.nodes} -> {n.nodes} nodes")
    for col in ("kind", "action", "count", "breaks existing"):
        t.add_column(col, justify="right" if col == "count" else "left")
    for (kind, action), count in sorted(cs.counts().items()):
        t.add_row(kind, action, f"{count:,}", "[red]yes[/red]" if Item(kind, action, "").breaking else "no")
    return t


def diff(
    old: PlanArg,
    new: PlanArg,
    work_order: Annotated[Path, typer.Option(help="work-order workbook to write")] = Path("work-order.xlsx"),
    details: Annotated[int, typer.Option(help="detail lines per kind of change (0: none)", min=0)] = 10,
) -> None:
    """Compare two plans: counts, then details; write the work order. Exit 0 if the change only adds,
    1 if anything existing is renumbered, re-labelled, re-cabled, moved or removed, 2 on bad input."""
    err = Console(stderr=True, soft_wrap=True)
    try:
        a, b = read_side(old), read_side(new)
        check_comparable(a, b)
    except ChangeInputError as exc:
        err.print(f"[red]error[/red] {exc}", highlight=False)
        raise typer.Exit(2) from None
    cs = compare_sides(a, b)
    con = Console(soft_wrap=True)
    con.print(counts_table(cs))
    groups: dict[tuple[str, str], list] = {}
    for it in cs.items:
        groups.setdefault((it.kind, it.action), []).append(it)
    for (kind, action), items in sorted(groups.items(), key=lambda kv: (not kv[1][0].breaking, kv[0])):
        if not details:
            break
        con.print(f"\n[bold]{kind} {action}[/bold] ({len(items):,})", highlight=False)
        for it in items[:details]:
            arrow = f"{it.old} -> {it.new}" if it.old and it.new else (it.new or it.old)
            con.print(f"  {it.subject}: {arrow}", highlight=False, markup=False)
        if len(items) > details:
            con.print(f"  ... and {len(items) - details:,} more (sheet 'changes' of the work order)", highlight=False)
    try:
        steps = write_work_order(cs, work_order)
    except OSError as exc:
        err.print(f"[red]error[/red] cannot write the work order {work_order}: {exc}", highlight=False)
        raise typer.Exit(2) from None
    breaking = cs.breaking()
    elev = f"; rack elevations in {b.folder / 'elevations'}" if b.folder else ""
    con.print(f"\nwork order: {work_order} ({steps} steps{elev})", highlight=False)
    if breaking:
        con.print(f"[red]{len(breaking):,} changes to what exists[/red]: this is not a pure addition", highlight=False)
        raise typer.Exit(1)
    con.print("[green]only additions[/green]: existing devices, cables, ports, addresses and ASNs are unchanged",
              highlight=False)
