"""`railforge`: build the plan and every artifact from a cluster spec."""

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
from rich.table import Table

from topology.build import build_plan
from topology.lab.cli import lab_app
from topology.output import Output, UnsafePath
from topology.parallel import render_parallel
from topology.plan import Plan
from topology.progress import StageClock, progress_for
from topology.render import families
from topology.spec import load_spec
from topology.spec.errors import SpecError, SpecErrors
from topology.verify.cli import verify_app

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)
app.add_typer(lab_app, name="lab")
app.add_typer(verify_app, name="verify")
err = Console(stderr=True, soft_wrap=True)
INVENTORY_LINKS = ("ansible", "hosts.yml", "host_vars", "group_vars")
STALE_INVENTORY_LINKS = ("nodes",)
PARALLEL_MIN_DEVICES = 2000


def load_plan(spec_path: Path) -> Plan:
    try:
        spec, lines = load_spec(spec_path)
        return build_plan(spec, lines, str(spec_path))
    except SpecErrors as exc:
        for e in exc.errors:
            err.print(f"[red]error[/red] {e.render()}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    except SpecError as exc:
        err.print(f"[red]error[/red] {exc.render()}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None


def default_out(spec_path: Path) -> Path:
    return spec_path.parent / "generated"


def link_inventory(spec_dir: Path) -> None:
    """`inventory/<cluster>/ansible` points at generated/ansible, a folder holding only the inventory, for
    `-i inventory/<cluster>/ansible` from anywhere; hosts.yml, host_vars and group_vars point into it too,
    so `-i inventory/<cluster>` keeps working from the repository root (its ansible.cfg skips the rest)."""
    for name in STALE_INVENTORY_LINKS:
        link = spec_dir / name
        if link.is_symlink() and os.readlink(link).startswith("generated/"):
            link.unlink()
    for name in INVENTORY_LINKS:
        link = spec_dir / name
        target = Path("generated", "ansible") if name == "ansible" else Path("generated", "ansible", name)
        if link.is_symlink() and os.readlink(link) == str(target):
            continue
        if link.is_symlink() or not link.exists():
            tmp = spec_dir / f".{name}.link-{os.getpid()}"
            tmp.unlink(missing_ok=True)
            tmp.symlink_to(target)
            os.replace(tmp, link)


def summary_table(plan: Plan) -> Table:
    c = plan.cluster
    t = Table(title=f"{c.name}: {c.gpus} GPUs, {c.nodes} nodes, {c.fabric} {c.tiers}-tier {c.mode}")
    for col in ("fabric", "tier", "switches", "down", "up", "down Gb/s", "up Gb/s", "ratio"):
        t.add_column(col, justify="right" if col not in ("fabric", "tier") else "left")
    for s in c.tier_summaries:
        t.add_row(s.fabric, s.role, str(s.switches), str(s.downlink_ports), str(s.uplink_ports),
                  str(s.downlink_gbps), str(s.uplink_gbps), s.oversubscription)
    return t


@app.command()
def validate(spec: Annotated[Path, typer.Argument(help="inventory/<cluster>/cluster.yaml")]) -> None:
    """Check the spec and print the design summary."""
    plan = load_plan(spec)
    Console().print(summary_table(plan))
    for fam in families():
        if fam.name == "report":
            from topology.render.report import report_markdown

            Console().print(report_markdown(plan), markup=False, highlight=False)


@app.command()
def build(
    spec: Annotated[Path, typer.Argument(help="inventory/<cluster>/cluster.yaml")],
    out: Annotated[Path | None, typer.Option(help="output folder (default: <spec folder>/generated)")] = None,
    only: Annotated[str | None, typer.Option(help="comma-separated artifact families to write")] = None,
    limit: Annotated[str | None, typer.Option(help="only devices whose name matches this glob")] = None,
    timings: Annotated[Path | None, typer.Option(help="write per-stage wall/CPU seconds as JSON here")] = None,
    jobs: Annotated[int, typer.Option(help="worker processes for rendering (1 = serial)", min=1)] = min(
        2, os.cpu_count() or 1),
) -> None:
    """Write the plan and every artifact, atomically."""
    gc.disable()
    clock = StageClock()
    with clock.stage("spec-to-plan"):
        plan = load_plan(spec)
    fams = families()
    if only:
        wanted = [x.strip() for x in only.split(",") if x.strip()]
        known = {f.name for f in fams}
        bad = [w for w in wanted if w not in known]
        if bad:
            err.print(f"[red]error[/red] --only: unknown families {', '.join(bad)}; known: {', '.join(sorted(known))}")
            raise typer.Exit(2)
        fams = [f for f in fams if f.name in wanted]
    select = None
    if limit:
        names = {d.name for d in plan.devices if fnmatch.fnmatchcase(d.name, limit)}
        if not names:
            err.print(f"[red]error[/red] --limit: no device matches {limit!r}")
            raise typer.Exit(2)
        select = names.__contains__
        fams = [f for f in fams if f.per_device]
    target = out or default_out(spec)
    partial = bool(only or limit)
    output = Output(target, select=select, partial=partial)
    output.replace_dirs = [d for f in fams for d in f.owns]
    try:
        if jobs > 1 and len(plan.devices) >= PARALLEL_MIN_DEVICES:
            with clock.stage("render"):
                clock.stages.update(render_parallel(plan, fams, output, jobs))
        else:
            with progress_for(fams) as advance:
                for fam in fams:
                    with clock.stage(fam.name):
                        fam.render(plan, output)
                    advance(fam.name)
    except (UnsafePath, OSError) as exc:
        output.abort()
        err.print(f"[red]error[/red] {exc}")
        raise typer.Exit(1) from None
    except BaseException:
        output.abort()
        raise
    with clock.stage("commit"):
        output.commit()
    if out is None:
        link_inventory(spec.parent)
    if timings:
        timings.write_text(json.dumps(clock.report(), indent=1) + "\n")
    Console(stderr=True).print(f"wrote {len(output.written)} files to {target}", highlight=False)


def main() -> None:  # pragma: no cover
    sys.exit(app())
