"""The work's own commands: `init` (a starter spec), `validate` (the summary and report) and `build` (the plan
and every artifact). Loaded only when one of them runs (see `railforge.cli.main`)."""

from __future__ import annotations

import fnmatch
import gc
import json
import os
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markdown import Markdown
from rich.table import Table
from rich.text import Text

from railforge.change.guard import Refused, check_growth
from railforge.cli import show
from railforge.cli.args import ArgumentError, check_path
from railforge.cli.entry import KeepUntilExit
from railforge.cli.growth import growth_note
from railforge.cli.main import say_error
from railforge.cli.malloc import keep_freed_memory
from railforge.cli.parallel import jobs_for, render_parallel
from railforge.cli.progress import StageClock, progress_for, status
from railforge.formats.output import Output, OutputError, UnsafePath, describe, no_group_or_other_write
from railforge.plan import outdir
from railforge.plan.model import Plan
from railforge.plan.power import warnings as power_warnings
from railforge.planner import build_plan
from railforge.render import families
from railforge.spec import load_spec
from railforge.spec.advice import spec_warnings
from railforge.spec.errors import SpecError, SpecErrors

err = Console(stderr=True, soft_wrap=True, emoji=False, highlight=False)
INVENTORY_LINKS = ("ansible", "hosts.yml", "host_vars", "group_vars")
STALE_INVENTORY_LINKS = ("nodes",)
PARALLEL_MIN_DEVICES = 2000


def load_plan(spec_path: Path) -> Plan:
    try:
        spec, lines = load_spec(spec_path)
        for w in spec_warnings(spec, lines, str(spec_path)):
            err.print(show.line("warning", "yellow", w.render()))
        plan = build_plan(spec, lines, str(spec_path))
        for w in power_warnings(plan):
            err.print(show.line("warning", "yellow", f"{spec_path}: {w}"))
        return plan
    except SpecErrors as exc:
        for e in exc.errors:
            say_error(e.render())
        raise typer.Exit(2) from None
    except SpecError as exc:
        say_error(exc.render())
        raise typer.Exit(2) from None


def default_out(spec_path: Path) -> Path:
    return outdir.default_out(spec_path)


def link_inventory(spec_dir: Path) -> None:
    """`inventory/<cluster>/ansible` points at generated/ansible, a folder holding only the inventory, for
    `-i inventory/<cluster>/ansible` from anywhere; hosts.yml, host_vars and group_vars point into it too,
    so `-i inventory/<cluster>` keeps working from the repository root (its ansible.cfg skips the rest)."""
    for name in STALE_INVENTORY_LINKS:
        link = spec_dir / name
        if link.is_symlink() and os.readlink(link).startswith(f"{outdir.GENERATED}/"):
            link.unlink()
    for name in INVENTORY_LINKS:
        link = spec_dir / name
        target = Path(outdir.GENERATED, "ansible", *([] if name == "ansible" else [name]))
        if link.is_symlink() and os.readlink(link) == str(target):
            continue
        if link.is_symlink() or not link.exists():
            tmp = spec_dir / f".{name}.link-{os.getpid()}"
            tmp.unlink(missing_ok=True)
            tmp.symlink_to(target)
            os.replace(tmp, link)


def summary_table(plan: Plan) -> Table:
    from railforge.render.report import cabled_ports, ratio_label

    c = plan.cluster
    cabled = cabled_ports(plan)
    t = Table(title=show.text(f"{c.name}: {c.gpus} GPUs, {c.nodes} nodes, {c.fabric} {c.tiers}-tier {c.mode}"),
              caption=f"down: ports per switch laid out for {c.max_sus} SUs; cabled: the most on one switch now")
    for col in ("fabric", "tier", "switches", "down", "cabled", "up", "down Gb/s", "up Gb/s", "ratio"):
        t.add_column(col, justify="right" if col not in ("fabric", "tier") else "left")
    for s in c.tier_summaries:
        t.add_row(s.fabric, s.role, str(s.switches), str(s.downlink_ports),
                  str(cabled.get((s.fabric, s.role), (0, 0))[0]), str(s.uplink_ports),
                  str(s.downlink_gbps), str(s.uplink_gbps), ratio_label(s))
    return t


SpecArg = Annotated[Path, typer.Argument(help="inventory/<cluster>/cluster.yaml", metavar="SPEC")]


def init(
    folder: Annotated[Path, typer.Argument(help="folder for the new cluster.yaml, e.g. inventory/my-cluster",
                                           metavar="FOLDER")],
    name: Annotated[str | None, typer.Option(help="cluster name (default: the folder's name)")] = None,
) -> None:
    """Write FOLDER/cluster.yaml: a small complete spec to edit into your cluster (never overwrites)."""
    from railforge.spec.starter import SCHEMA_FILE, StarterError, reference_doc, write_starter

    try:
        path = write_starter(folder, name)
    except StarterError as exc:
        say_error(str(exc))
        raise typer.Exit(2) from None
    Console(highlight=False).print(Text(show.plain(
        f"wrote {path} and {SCHEMA_FILE} beside it (editors complete and check the spec through the schema line "
        f"at its top)\nnext: edit it (every key, its type, range and an example: {reference_doc()}), then\n"
        f"  railforge validate {path}\n  railforge build {path}", newlines=True)))


def validate(spec: SpecArg) -> None:
    """Check the spec and print the design summary and report (markdown as it is when not on a terminal)."""
    plan = load_plan(spec)
    out = Console(emoji=False, highlight=False)
    if not out.is_terminal:
        out = Console(emoji=False, highlight=False, width=160)
    out.print(summary_table(plan))
    out.print(Text(show.plain(growth_note(plan), newlines=True)))
    for fam in families():
        if fam.name == "report":
            from railforge.render.report import report_markdown

            text = report_markdown(plan)
            if out.is_terminal:
                out.print(Markdown(text))
            else:
                sys.stdout.write(text if text.endswith("\n") else text + "\n")


def build(
    ctx: typer.Context,
    spec: SpecArg,
    out: Annotated[Path | None, typer.Option(help="output folder (default: <spec folder>/generated)")] = None,
    only: Annotated[str | None, typer.Option(help="comma-separated artifact families to write, of: "
                                                  + ", ".join(f.name for f in families()))] = None,
    limit: Annotated[str | None, typer.Option(help="only devices whose name matches this glob")] = None,
    timings: Annotated[Path | None, typer.Option(help="write per-stage wall/CPU seconds as JSON here")] = None,
    jobs: Annotated[int, typer.Option(help="worker processes for rendering (1 = serial)", min=1, max=256)] = min(
        2, os.cpu_count() or 1),
    allow_renumber: Annotated[bool, typer.Option(
        "--allow-renumber", show_default=False,
        help="replace an earlier plan in the output folder even if this one renumbers, re-labels or re-cables what "
             "it has")] = False,
) -> None:
    """Write the plan and every artifact, atomically."""
    try:
        for path, option in ((spec, "SPEC"), (out, "--out"), (timings, "--timings")):
            if path is not None:
                check_path(path, option)
    except ArgumentError as exc:
        say_error(str(exc))
        raise typer.Exit(2) from None
    no_group_or_other_write()
    gc.disable()
    keep_freed_memory()
    clock = StageClock(measure=timings is not None)
    with clock.stage("spec-to-plan"), status(f"planning {spec}"):
        plan = load_plan(spec)
    fams = families()
    if only:
        wanted = [x.strip() for x in only.split(",") if x.strip()]
        known = {f.name for f in fams}
        bad = [w for w in wanted if w not in known]
        if bad:
            say_error(f"--only: unknown families {', '.join(bad)}; known: {', '.join(sorted(known))}")
            raise typer.Exit(2)
        fams = [f for f in fams if f.name in wanted]
    select = None
    if limit:
        names = {d.name for d in plan.devices if fnmatch.fnmatchcase(d.name, limit)}
        if not names:
            say_error(f"--limit: no device matches {limit!r}")
            raise typer.Exit(2)
        select = names.__contains__
        fams = [f for f in fams if f.per_device]
    target = out or default_out(spec)
    if not allow_renumber:
        try:
            with clock.stage("renumber-guard"):
                check_growth(plan, target, spec, "--allow-renumber")
        except Refused as exc:
            say_error(str(exc))
            raise typer.Exit(1) from None
    partial = bool(only or limit)
    try:
        output = Output(target, select=select, partial=partial)
    except OutputError as exc:
        say_error(str(exc))
        raise typer.Exit(1) from None
    output.replace_dirs = [d for f in fams for d in f.owns]
    try:
        if jobs > 1 and len(plan.devices) >= PARALLEL_MIN_DEVICES:
            with clock.stage("render"), progress_for(len(jobs_for(fams, jobs))) as advance:
                clock.stages.update(render_parallel(plan, fams, output, jobs, on_done=advance,
                                                             measure=clock.measure))
        else:
            with progress_for(fams) as advance:
                for fam in fams:
                    with clock.stage(fam.name, output):
                        fam.render(plan, output)
                    advance(fam.name)
        with clock.stage("commit"):
            output.commit()
    except (UnsafePath, OutputError, OSError) as exc:
        output.abort()
        say_error(f"{describe(exc)}; the previous output in {target} is untouched" if isinstance(exc, OSError)
                  else str(exc))
        raise typer.Exit(1) from None
    except BaseException:
        output.abort()
        raise
    try:
        if out is None:
            link_inventory(spec.parent)
        if timings:
            timings.write_text(json.dumps(clock.report(), indent=1) + "\n")
    except OSError as exc:
        say_error(f"wrote {target}, but then {describe(exc)}")
        raise typer.Exit(1) from None
    err.print(show.text(f"wrote {len(output.written)} files to {target}"))
    if not partial:
        err.print(Text(show.plain(growth_note(plan), newlines=True)))
    if isinstance(ctx.obj, KeepUntilExit):
        ctx.obj.keep(plan)
