"""`railforge sot`: keep NetBox in step with the plan (push) and report what differs from it (diff)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Annotated
from urllib.parse import urlsplit

import pynautobot
import pynetbox
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from railforge.change.sides import ChangeInputError, read_side
from railforge.cli import show
from railforge.inputs import shown
from railforge.sot.desired import desired
from railforge.sot.nautobot import Nautobot
from railforge.sot.netbox import NetBox
from railforge.sot.sync import RESUME, Change, Refused, SotError

sot_app = typer.Typer(add_completion=False, no_args_is_help=True,
                      help="Push the plan into NetBox or Nautobot and report drift (`sot push`, `sot diff`).")
TOKEN_ENVS = {"NetBox": "RAILFORGE_NETBOX_TOKEN", "Nautobot": "RAILFORGE_NAUTOBOT_TOKEN"}
MAX_TOKEN_FILE = 4096

BuildArg = Annotated[Path, typer.Argument(help="build folder (with plan.json) or a plan.json file")]
NetBoxOpt = Annotated[str | None, typer.Option("--netbox", help="NetBox base URL, e.g. https://netbox.example.net")]
NautobotOpt = Annotated[str | None, typer.Option("--nautobot", help="Nautobot base URL (instead of --netbox)")]
TokenFileOpt = Annotated[Path | None, typer.Option(
    help="file holding the API token (else $RAILFORGE_NETBOX_TOKEN / $RAILFORGE_NAUTOBOT_TOKEN); the token is "
         "never printed or written")]
WorkersOpt = Annotated[int, typer.Option(min=1, max=16, help="concurrent bulk API requests")]


def _token(token_file: Path | None, product: str = "NetBox") -> str:
    if token_file is not None:
        if not token_file.is_file():
            raise SotError(f"--token-file {token_file}: not a regular file")
        if token_file.stat().st_size > MAX_TOKEN_FILE:
            raise SotError(f"--token-file {token_file}: larger than {MAX_TOKEN_FILE} bytes: not a token file")
        try:
            token = token_file.read_text(encoding="ascii").strip()
        except UnicodeDecodeError:
            raise SotError(f"--token-file {token_file}: not ASCII: an API token is ASCII") from None
    else:
        token = os.environ.get(TOKEN_ENVS[product], "").strip()
    if not token:
        raise SotError(f"no {product} API token: give --token-file FILE or set {TOKEN_ENVS[product]}")
    if any(not (33 <= ord(ch) < 127) for ch in token):
        raise SotError("the API token holds spaces or control characters: check the token file")
    return token


def _url(url: str, option: str = "--netbox") -> str:
    try:
        parts = urlsplit(url)
    except ValueError:
        raise SotError(f"{option} {url!r}: expected an http:// or https:// URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname or any(ch.isspace() or ord(ch) < 32
                                                                          for ch in url):
        raise SotError(f"{option} {url!r}: expected an http:// or https:// URL without spaces")
    try:
        parts.port  # noqa: B018 - raises for a port outside 0-65535
    except ValueError:
        raise SotError(f"{option} {url!r}: the port is not 1-65535") from None
    return url.rstrip("/")


def _client(build: Path, netbox: str | None, nautobot: str | None, token_file: Path | None, workers: int):
    if (netbox is None) == (nautobot is None):
        raise SotError("give exactly one of --netbox URL and --nautobot URL")
    try:
        side = read_side(build)
    except ChangeInputError as e:
        raise SotError(str(e)) from None
    if netbox is not None:
        return side.plan, NetBox(_url(netbox), _token(token_file, "NetBox"), side.plan.cluster.name, workers=workers)
    return side.plan, Nautobot(_url(nautobot, "--nautobot"), _token(token_file, "Nautobot"), side.plan.cluster.name,
                               workers=workers)


UNEXPECTED = (KeyError, IndexError, TypeError, ValueError, AttributeError, RecursionError, pynetbox.ContentError,
              pynautobot.ContentError)
"""What pynetbox/pynautobot raise on a well-formed answer of the wrong shape (no `count`, a list for an object,
100,000 `[`): the server is not the product's API, or not a version railforge reads."""


def _unexpected(netbox: str | None, nautobot: str | None, exc: Exception, resume: str = "") -> str:
    if os.environ.get("RAILFORGE_DEBUG"):
        raise exc
    product, url = ("NetBox", netbox) if netbox is not None else ("Nautobot", nautobot)
    return (f"{product} at {url} answered, but not what the {product} API answers ({type(exc).__name__}: "
            f"{shown(str(exc), 80)}): check that the URL is the {product} server itself, not a proxy or another "
            f"service{resume}")


def _changes_table(title: str, changes: list[Change], limit: int = 200) -> Table:
    table = Table(title=escape(title), title_justify="left")
    for col in ("change", "object", "name", "detail"):
        table.add_column(col)
    for c in changes[:limit]:
        table.add_row(escape(c.kind), escape(c.cls), escape(c.key), escape(c.detail))
    if len(changes) > limit:
        table.add_row("…", "", f"{len(changes) - limit} more", "")
    return table


@sot_app.command()
def push(build: BuildArg, netbox: NetBoxOpt = None, nautobot: NautobotOpt = None, token_file: TokenFileOpt = None,
         workers: WorkersOpt = 4,
         apply_changes: Annotated[bool, typer.Option(
             "--apply-changes", show_default=False,
             help="also change objects railforge owns that differ from the plan (re-terminate, move)")] = False,
         dry_run: Annotated[bool, typer.Option(
             "--dry-run", show_default=False, help="show what would be written, write nothing")] = False) -> None:
    """Create in NetBox or Nautobot everything of the plan that is missing. Exit 0 done, 1 refused (owned objects
    differ from the plan: a renumbering or a hand edit), 2 on bad input or an API error."""
    out, err = Console(soft_wrap=True, highlight=False), Console(stderr=True, soft_wrap=True, highlight=False)
    try:
        plan, nb = _client(build, netbox, nautobot, token_file, workers)
        version = nb.check()
        started = time.monotonic()
        result = nb.push(desired(plan), apply_changes=apply_changes, dry_run=dry_run)
    except Refused as e:
        err.print(_changes_table("owned objects that differ from the plan", e.changes))
        err.print(show.line("error", "red", str(e)))
        raise typer.Exit(1) from None
    except SotError as e:
        err.print(show.line("error", "red", str(e)))
        raise typer.Exit(2) from None
    except UNEXPECTED as e:
        err.print(show.line("error", "red", _unexpected(netbox, nautobot, e, RESUME)))
        raise typer.Exit(2) from None
    took = time.monotonic() - started
    for note in nb.notes:
        err.print(show.line("note", "yellow", note))
    verb = "would write" if dry_run else "wrote"
    created = ", ".join(f"{n} {cls}" for cls, n in result.created.items()) or "nothing new"
    out.print(f"{nb.product} {escape(version)}: {verb} {result.writes} objects in {took:.1f} s ({escape(created)})")


@sot_app.command(name="diff")
def diff_cmd(build: BuildArg, netbox: NetBoxOpt = None, nautobot: NautobotOpt = None,
             token_file: TokenFileOpt = None) -> None:
    """Read NetBox or Nautobot back and list, by cable label and device, what differs from the plan. Exit 0 in step,
    1 differences, 2 on bad input or an API error."""
    out, err = Console(soft_wrap=True, highlight=False), Console(stderr=True, soft_wrap=True, highlight=False)
    try:
        plan, nb = _client(build, netbox, nautobot, token_file, 1)
        nb.check()
        changes = nb.drift(desired(plan))
    except SotError as e:
        err.print(show.line("error", "red", str(e)))
        raise typer.Exit(2) from None
    except UNEXPECTED as e:
        err.print(show.line("error", "red", _unexpected(netbox, nautobot, e)))
        raise typer.Exit(2) from None
    for note in nb.notes:
        err.print(show.line("note", "yellow", note))
    if not changes:
        out.print(f"{nb.product} holds {escape(plan.cluster.name)} exactly as planned")
        return
    out.print(_changes_table(f"{len(changes)} differences between {nb.product} and the plan", changes))
    raise typer.Exit(1)
