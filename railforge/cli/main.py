"""`railforge`: build the plan and every artifact from a cluster spec."""

from __future__ import annotations

import contextlib
import importlib
import math
import os
import stat
import sys
from collections.abc import Iterator
from difflib import get_close_matches
from pathlib import PurePath
from typing import Annotated, NamedTuple

import typer
from typer.core import TyperCommand, TyperGroup

WORK_ORDER = ("init", "validate", "build", "ztp", "verify", "diff", "lab")


class Lazy(NamedTuple):
    """A subcommand by where it lives and its help: the module is imported only when the command runs or its own
    help is asked for, so `railforge --version` and `railforge --help` do not import every tool (that took ~2 s
    of CPU). tests/cli/test_frontdoor.py checks `help` against the loaded command's."""

    module: str
    attr: str
    help: str


COMMANDS = {
    "init": Lazy("railforge.cli.build", "init",
                 "Write FOLDER/cluster.yaml: a small complete spec to edit into your cluster (never overwrites)."),
    "validate": Lazy("railforge.cli.build", "validate",
                     "Check the spec and print the design summary and report (markdown as it is when not on a "
                     "terminal)."),
    "build": Lazy("railforge.cli.build", "build", "Write the plan and every artifact, atomically."),
    "ztp": Lazy("railforge.ztp.cli", "ztp",
                "Write ztp/<switch>/ (SONiC ztp.json, Cumulus script) and ztp/kea-dhcp4.conf; rerun after every "
                "build."),
    "verify": Lazy("railforge.verify.cli", "verify_app",
                   "`railforge verify`: compare what a live fabric reports with the plan."),
    "diff": Lazy("railforge.change.cli", "diff",
                 "Compare two plans: counts, then details; write the work order. Exit 0 if the change only adds, "
                 "1 if anything existing is renumbered, re-labelled, re-cabled, moved or removed, 2 on bad input."),
    "lab": Lazy("railforge.lab.cli", "lab_app",
                "`railforge lab`: emulate the cluster's Ethernet compute fabric in network namespaces, as root, "
                "or its InfiniBand compute fabric on ibsim with real OpenSM (`lab ibsim`)."),
    "acceptance": Lazy("railforge.acceptance.cli", "acceptance_app",
                       "`railforge acceptance`: plan the burn-in from the plan (`plan`), and read its results into "
                       "suspect cables (`analyze`)."),
    "sot": Lazy("railforge.sot.cli", "sot_app",
                "Push the plan into NetBox or Nautobot and report drift (`sot push`, `sot diff`)."),
    "boot": Lazy("railforge.baremetal.cli", "boot_app",
                 "`railforge boot`: the PXE/iPXE files from the plan, and the report-in endpoint booted hosts call."),
    "bmc": Lazy("railforge.baremetal.cli", "bmc_app", "Redfish on the planned BMCs: inventory, one-time PXE, power."),
    "health": Lazy("railforge.health.cli", "health_app",
                   "`railforge health`: the remediation receiver for Alertmanager, and the node health check."),
}
"""Every subcommand of `railforge`; `--help` lists WORK_ORDER first, then the others in this order."""


def _flags_without_type(params: list) -> list:
    for p in params:
        if getattr(p, "is_flag", False) and p.metavar is None:
            p.metavar = ""
    return params


def _not_special(path: PurePath, option: str) -> None:
    """No command reads or writes a device, FIFO or socket: readers would block or grow, and a writer's atomic
    rename would replace the node itself (as root, `--work-order /dev/zero` left a spreadsheet in its place)."""
    from railforge.cli import show
    from railforge.cli.args import ArgumentError

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
        from railforge.cli.args import ArgumentError, check_path

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


# typer's own (vendored click) exception bases: every usage error and bad parameter is one
CLICK_ERROR = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")
USAGE_ERROR = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")


@contextlib.contextmanager
def plain_usage_errors() -> Iterator[None]:
    """A usage error echoes what the user typed ("unexpected extra argument (...)", "No such command ..."); its
    message is shown with control characters escaped, like every other message."""
    try:
        yield
    except CLICK_ERROR as exc:
        from railforge.cli import show

        exc.message = show.plain(exc.message)
        raise


class Group(TyperGroup):
    """A group whose subcommands may be `Lazy` (`lazy` names them): its help lists them with their help without
    importing them; anything else (running one, asking for its own help) loads it."""

    lazy: dict[str, Lazy] = {}

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.listing = False

    def get_params(self, ctx: typer.Context) -> list:
        return _flags_without_type(super().get_params(ctx))

    def make_context(self, *args, **kwargs) -> typer.Context:
        with plain_usage_errors():
            return super().make_context(*args, **kwargs)

    def invoke(self, ctx: typer.Context) -> object:
        with plain_usage_errors():
            return super().invoke(ctx)

    def format_help(self, ctx: typer.Context, formatter: object) -> None:
        self.listing = True
        try:
            return super().format_help(ctx, formatter)
        finally:
            self.listing = False

    def get_command(self, ctx: typer.Context, cmd_name: str) -> TyperCommand | TyperGroup | None:
        cmd = super().get_command(ctx, cmd_name)
        if cmd is not None or cmd_name not in self.lazy:
            return cmd
        if self.listing:
            return Command(name=cmd_name, help=self.lazy[cmd_name].help)
        return self.load(cmd_name)

    def load(self, name: str) -> TyperCommand | TyperGroup:
        entry = self.lazy[name]
        obj = getattr(importlib.import_module(entry.module), entry.attr)
        if isinstance(obj, typer.Typer):
            plain_help(obj)
            cmd = typer.main.get_group(obj)
        else:
            single = typer.Typer(add_completion=False)
            single.command(name=name, cls=Command)(obj)
            cmd = typer.main.get_command(single)
        cmd.name = name
        self.commands[name] = cmd
        return cmd

    def resolve_command(self, ctx: typer.Context, args: list[str]) -> tuple:
        """typer suggests only among the commands loaded so far; the lazy ones are offered too."""
        try:
            return super().resolve_command(ctx, args)
        except USAGE_ERROR as exc:
            if args and "Did you mean" not in exc.message:
                matches = get_close_matches(args[0], self.list_commands(ctx))
                if matches:
                    exc.message = f"{exc.message.rstrip('.')}. Did you mean {', '.join(map(repr, matches))}?"
            raise

    def list_commands(self, ctx: typer.Context) -> list[str]:
        """Commands in the order of the work (WORK_ORDER), then any others in the order they were added."""
        names = list(dict.fromkeys([*self.lazy, *super().list_commands(ctx)]))
        return sorted(names, key=lambda n: (WORK_ORDER.index(n) if n in WORK_ORDER else len(WORK_ORDER),
                                            names.index(n)))


class Railforge(Group):
    lazy = COMMANDS


def plain_help(typer_app: typer.Typer, cls: type[Group] = Group) -> None:
    """Give every command and group of `typer_app` (sub-apps included) the plain help above."""
    typer_app.info.cls = cls
    for info in typer_app.registered_commands:
        if info.cls in (None, TyperCommand):
            info.cls = Command
    for group in typer_app.registered_groups:
        group.cls = Group
        plain_help(group.typer_instance)


def say_error(message: str) -> None:
    """One error line; the message is shown as it is (no markup, no emoji codes)."""
    from rich.console import Console

    from railforge.cli import show

    Console(stderr=True, soft_wrap=True, emoji=False, highlight=False).print(show.line("error", "red", message))


def _version(value: bool) -> None:
    if value:
        import importlib.metadata

        try:
            version = importlib.metadata.version("railforge")
        except importlib.metadata.PackageNotFoundError:
            version = "unknown (not installed)"
        sys.stdout.write(f"railforge {version}\n")
        raise typer.Exit(0)


app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__, pretty_exceptions_enable=False)


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", help="print the version and exit", is_eager=True,
                                          callback=_version)] = False,
) -> None:
    pass


plain_help(app, Railforge)


def main() -> None:  # pragma: no cover
    from railforge.cli.entry import main as entry_main

    entry_main()
