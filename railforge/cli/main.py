"""`railforge`: build the plan and every artifact from a cluster spec."""

from __future__ import annotations

import contextlib
import fnmatch
import gc
import importlib.metadata
import json
import math
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path, PurePath
from typing import Annotated

import typer
from rich.console import Console
from rich.markdown import Markdown
from rich.table import Table
from rich.text import Text
from typer.core import TyperCommand, TyperGroup

from railforge.acceptance.cli import acceptance_app
from railforge.baremetal.cli import bmc_app, boot_app
from railforge.change.cli import diff
from railforge.change.guard import Refused, check_growth
from railforge.cli import show
from railforge.cli.args import ArgumentError, check_path
from railforge.cli.entry import KeepUntilExit
from railforge.cli.growth import growth_note
from railforge.cli.malloc import keep_freed_memory
from railforge.cli.parallel import jobs_for, render_parallel
from railforge.cli.progress import StageClock, progress_for, status
from railforge.formats.output import Output, OutputError, UnsafePath, describe, no_group_or_other_write
from railforge.health.cli import health_app
from railforge.lab.cli import lab_app
from railforge.plan import outdir
from railforge.plan.model import Plan
from railforge.planner import build_plan
from railforge.render import families
from railforge.sot.cli import sot_app
from railforge.spec import load_spec
from railforge.spec.advice import spec_warnings
from railforge.spec.errors import SpecError, SpecErrors
from railforge.verify.cli import verify_app
from railforge.ztp.cli import ztp

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__, pretty_exceptions_enable=False)
app.add_typer(lab_app, name="lab")
app.add_typer(verify_app, name="verify")
app.add_typer(acceptance_app, name="acceptance")
app.add_typer(sot_app, name="sot")
app.add_typer(boot_app, name="boot")
app.add_typer(bmc_app, name="bmc")
app.add_typer(health_app, name="health")
app.command(name="ztp")(ztp)
app.command()(diff)
err = Console(stderr=True, soft_wrap=True, emoji=False, highlight=False)
INVENTORY_LINKS = ("ansible", "hosts.yml", "host_vars", "group_vars")
STALE_INVENTORY_LINKS = ("nodes",)
PARALLEL_MIN_DEVICES = 2000
WORK_ORDER = ("init", "validate", "build", "ztp", "verify", "diff", "lab")


def _flags_without_type(params: list) -> list:
    for p in params:
        if getattr(p, "is_flag", False) and p.metavar is None:
            p.metavar = ""
    return params


def _not_special(path: PurePath, option: str) -> None:
    """No command reads or writes a device, FIFO or socket: readers would block or grow, and a writer's atomic
    rename would replace the node itself (as root, `--work-order /dev/zero` left a spreadsheet in its place)."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise ArgumentError(f"{show.plain(path)}: cannot read: it is not a regular file (a FIFO, device or socket), "
                            f"and no command writes over one ({option}); give a file or a folder")


class Command(TyperCommand):
    """Plain help: `SPEC` rather than `{spec}`, and no `<bool>` type for flags such as --help. Every path a
    command is given passes `args.check_path` before the command runs, so no command (one added later included)
    meets a name the system refuses (ENAMETOOLONG) or prints one that holds a control character; no number
    option is NaN or infinite (click's range checks let NaN through)."""

    def collect_usage_pieces(self, ctx: typer.Context) -> list[str]:
        return [p[1:-1] if p.startswith("{") and p.endswith("}") else p for p in super().collect_usage_pieces(ctx)]

    def get_params(self, ctx: typer.Context) -> list:
        return _flags_without_type(super().get_params(ctx))

    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:
        """An empty path (`--lldp ''`) is refused: typer turns it into `.`, the current folder, which nobody
        typed."""
        given = list(args)
        rest = super().parse_args(ctx, args)
        if "" in given and not any(a == "." or a.endswith("=.") for a in given):
            for param in self.params:
                value = ctx.params.get(param.name)
                if any(isinstance(v, PurePath) and str(v) == "." for v in
                       (value if isinstance(value, (list, tuple)) else (value,))):
                    raise typer.BadParameter("an empty path; give a file or folder name", ctx=ctx, param=param)
        return rest

    def invoke(self, ctx: typer.Context) -> object:
        for param in self.params:
            value = ctx.params.get(param.name)
            name = param.opts[0] if param.param_type_name == "option" else param.name.upper()
            for item in value if isinstance(value, (list, tuple)) else (value,):
                try:
                    if isinstance(item, PurePath):
                        check_path(item, name)
                        if param.param_type_name == "option":  # files written are options; arguments are read
                            _not_special(item, name)
                    elif isinstance(item, float) and not math.isfinite(item):
                        raise ArgumentError(f"{name} {item}: want a finite number")
                except ArgumentError as exc:
                    say_error(str(exc))
                    raise typer.Exit(2) from None
        return super().invoke(ctx)


# typer's own (vendored click) exception base: every usage error and bad parameter is one
CLICK_ERROR = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")


@contextlib.contextmanager
def plain_usage_errors() -> Iterator[None]:
    """A usage error echoes what the user typed ("unexpected extra argument (...)", "No such command ..."); its
    message is shown with control characters escaped, like every other message."""
    try:
        yield
    except CLICK_ERROR as exc:
        exc.message = show.plain(exc.message)
        raise


class Group(TyperGroup):
    def get_params(self, ctx: typer.Context) -> list:
        return _flags_without_type(super().get_params(ctx))

    def make_context(self, *args, **kwargs) -> typer.Context:
        with plain_usage_errors():
            return super().make_context(*args, **kwargs)

    def invoke(self, ctx: typer.Context) -> object:
        with plain_usage_errors():
            return super().invoke(ctx)

    def list_commands(self, ctx: typer.Context) -> list[str]:
        """Commands in the order of the work (WORK_ORDER), then any others in the order they were added."""
        names = super().list_commands(ctx)
        return sorted(names, key=lambda n: (WORK_ORDER.index(n) if n in WORK_ORDER else len(WORK_ORDER),
                                            names.index(n)))


def plain_help(typer_app: typer.Typer) -> None:
    """Give every command and group of `typer_app` (sub-apps included) the plain help above."""
    typer_app.info.cls = Group
    for info in typer_app.registered_commands:
        if info.cls in (None, TyperCommand):
            info.cls = Command
    for group in typer_app.registered_groups:
        group.cls = Group
        plain_help(group.typer_instance)


def say_error(message: str) -> None:
    """One error line; the message is shown as it is (no markup, no emoji codes)."""
    err.print(show.line("error", "red", message))


def load_plan(spec_path: Path) -> Plan:
    try:
        spec, lines = load_spec(spec_path)
        for w in spec_warnings(spec, lines, str(spec_path)):
            err.print(show.line("warning", "yellow", w.render()))
        return build_plan(spec, lines, str(spec_path))
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


def _version(value: bool) -> None:
    if value:
        try:
            version = importlib.metadata.version("railforge")
        except importlib.metadata.PackageNotFoundError:
            version = "unknown (not installed)"
        sys.stdout.write(f"railforge {version}\n")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", help="print the version and exit", is_eager=True,
                                          callback=_version)] = False,
) -> None:
    pass


@app.command()
def init(
    folder: Annotated[Path, typer.Argument(help="folder for the new cluster.yaml, e.g. inventory/my-cluster",
                                           metavar="FOLDER")],
    name: Annotated[str | None, typer.Option(help="cluster name (default: the folder's name)")] = None,
) -> None:
    """Write FOLDER/cluster.yaml: a small complete spec to edit into your cluster (never overwrites)."""
    from railforge.spec.starter import StarterError, write_starter

    try:
        path = write_starter(folder, name)
    except StarterError as exc:
        say_error(str(exc))
        raise typer.Exit(2) from None
    Console(highlight=False).print(Text(show.plain(
        f"wrote {path}\nnext: edit it (every key: docs/spec/reference.md), then\n"
        f"  railforge validate {path}\n  railforge build {path}", newlines=True)))


@app.command()
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


@app.command()
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
    allow_renumber: Annotated[bool, typer.Option(help="replace an earlier plan in the output folder even if this "
                                                      "one renumbers, re-labels or re-cables what it has")] = False,
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
    clock = StageClock()
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
                clock.stages.update(render_parallel(plan, fams, output, jobs, on_done=advance))
        else:
            with progress_for(fams) as advance:
                for fam in fams:
                    with clock.stage(fam.name):
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


plain_help(app)


def main() -> None:  # pragma: no cover
    from railforge.cli.entry import main as entry_main

    entry_main()
