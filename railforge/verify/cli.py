"""`railforge verify`: compare what a live fabric reports with the plan."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from railforge import nos
from railforge.cli import show
from railforge.cli.args import ArgumentError, check_path
from railforge.inputs import InputError
from railforge.plan.model import Link
from railforge.verify.cabling import CablingReport, compare
from railforge.verify.fabric import FabricReport
from railforge.verify.fabric_check import verify_fabric
from railforge.verify.ibnet import IbnetFormatError, parse_ibnetdiscover, read_ibnetdiscover
from railforge.verify.lldp import LldpFormatError, load_lldp
from railforge.verify.names import PlanNames
from railforge.verify.observed import Observation
from railforge.verify.source import BuildError, MissingBuild, load_generated_plan


def _check_paths(**paths: Path | None) -> None:
    for name, path in paths.items():
        if path is not None:
            check_path(path, "CLUSTER" if name == "cluster" else f"--{name}")


verify_app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)


def report_table(report: CablingReport, title: str) -> Table:
    return show.table(title, ("finding", "cables", "detail"),
                      [(f.kind, ", ".join(f.cables) or "-", f.message) for f in report.findings])


LLDP_HELP = (f"lldpcli JSON or {' or '.join(t.title for t in nos.lldp_tables())} file per device "
             "(named <device>.json/.txt), or a folder of them")


@verify_app.command()
def cabling(
    cluster: Annotated[Path, typer.Argument(help="inventory/<cluster> or its cluster.yaml")],
    lldp: Annotated[Path | None, typer.Option(help=LLDP_HELP)] = None,
    ibnetdiscover: Annotated[Path | None, typer.Option(help="ibnetdiscover output")] = None,
    out: Annotated[Path | None, typer.Option(help="generated folder (default: <cluster>/generated)")] = None,
    speed: Annotated[bool, typer.Option(help="flag cables running at another speed than planned")] = True,
    partial: Annotated[bool, typer.Option(help="judge only cables with both ends in the input (a partial "
                                                "collection or a lab); otherwise one observed end suffices")] = False,
) -> None:
    """Print a miswire report: swapped, wrong switch/port, missing, unexpected, wrong speed. Exit 1 on any."""
    console, err = show.console(), show.console(stderr=True)
    if lldp is None and ibnetdiscover is None:
        show.error(err, "give --lldp and/or --ibnetdiscover")
        raise typer.Exit(2)
    try:
        _check_paths(cluster=cluster, out=out, lldp=lldp, ibnetdiscover=ibnetdiscover)
        plan, _ = load_generated_plan(cluster, out)
        ib = plan.cluster.fabric == "infiniband"
        runs: list[tuple[str, list[Link], Observation]] = []
        if lldp is not None:
            links = [lk for lk in plan.links if not (ib and lk.fabric == "compute")]
            runs.append(("LLDP", links, load_lldp(lldp, PlanNames(plan))))
        if ibnetdiscover is not None:
            links = [lk for lk in plan.links if lk.fabric == "compute"]
            runs.append(("ibnetdiscover", links, parse_ibnetdiscover(read_ibnetdiscover(ibnetdiscover), plan,
                                                                      str(ibnetdiscover))))
    except (BuildError, LldpFormatError, IbnetFormatError, InputError, ArgumentError, OSError) as exc:
        show.error(err, exc)
        raise typer.Exit(2) from None
    ok = True
    for source, links, obs in runs:
        report = compare(links, obs, check_speed=speed, partial=partial)
        for u in report.unresolved:
            show.note(err, u)
        if report.findings:
            console.print(report_table(report, f"{plan.cluster.name}: cabling mismatches ({source})"))
        console.print(f"{source}: {len(obs.devices)} devices observed, {report.checked} planned cables in view, "
                      f"{report.matched} match, {len(report.findings)} findings")
        ok = ok and report.ok
    raise typer.Exit(0 if ok else 1)


def fabric_table(report: FabricReport, title: str) -> Table:
    return show.table(title, ("finding", "switch", "cables", "detail"),
                      [(f.kind, f.device, ", ".join(f.cables) or "-", f.message) for f in report.findings],
                      overflow="fold")


@verify_app.command()
def fabric(
    cluster: Annotated[Path, typer.Argument(help="inventory/<cluster> or its cluster.yaml")],
    frr: Annotated[Path, typer.Option(help="folder with one <switch>/ folder per switch holding bgp-summary.json, "
                                           "ip-route.json and optionally lldp.json or lldp.txt")],
    out: Annotated[Path | None, typer.Option(help="generated folder (default: <cluster>/generated)")] = None,
    speed: Annotated[bool, typer.Option(help="LLDP: flag cables running at another speed than planned")] = True,
    partial: Annotated[bool, typer.Option(help="LLDP: judge only cables with both ends in the input")] = False,
) -> None:
    """Judge live BGP sessions, routes and ECMP width (and LLDP) against the plan, per switch and cable label.
    Exit 1 on any finding, 2 when the plan or the folder cannot be read."""
    console, err = show.console(), show.console(stderr=True)
    try:
        _check_paths(cluster=cluster, out=out, frr=frr)
        plan, _ = load_generated_plan(cluster, out)
        if not frr.is_dir():
            raise MissingBuild(f"{frr}: not a folder (want one <switch>/ folder per switch)")
        result = verify_fabric(plan, frr, check_speed=speed, partial=partial)
    except (BuildError, InputError, ArgumentError, OSError) as exc:
        show.error(err, exc)
        raise typer.Exit(2) from None
    report = result.report
    if report.findings:
        console.print(fabric_table(report, f"{plan.cluster.name}: fabric findings"))
    console.print(f"BGP/FIB: {result.switches} switches read, {report.sessions_up} of {report.sessions_checked} "
                  f"planned sessions Established, {report.prefixes_complete} of {report.prefixes_checked} routes with "
                  f"full ECMP, {len(report.findings)} findings")
    ok = report.ok
    if result.cabling is not None:
        for u in result.cabling.unresolved:
            show.note(err, u)
        if result.cabling.findings:
            console.print(report_table(result.cabling, f"{plan.cluster.name}: cabling mismatches (LLDP)"))
        console.print(f"LLDP: {result.cabling.checked} planned cables in view, {result.cabling.matched} match, "
                      f"{len(result.cabling.findings)} findings")
        ok = ok and result.cabling.ok
    raise typer.Exit(0 if ok else 1)
