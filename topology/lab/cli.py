"""`railforge lab`: emulate the cluster's Ethernet compute fabric in network namespaces, as root."""

from __future__ import annotations

import contextlib
import json
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from topology.lab import checks, daemons, fabric, failure, runner
from topology.lab.scope import LabTopology, ScopeError, lab_topology
from topology.lab.shell import CommandError, ns_pids
from topology.lab.state import LabState, load_state
from topology.plan import Plan
from topology.verify.names import PlanNames
from topology.verify.source import MissingBuild, load_generated_plan

lab_app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)
ClusterArg = Annotated[Path, typer.Argument(help="inventory/<cluster> or its cluster.yaml")]
OutOpt = Annotated[Path | None, typer.Option(help="generated folder (default: <cluster>/generated)")]
PrefixOpt = Annotated[str, typer.Option(help="namespace name prefix; one lab per cluster and prefix")]


def _console() -> Console:
    return Console()


def _err(msg: str, code: int = 2) -> typer.Exit:
    Console(stderr=True).print(f"[red]error[/red] {msg}", highlight=False)
    return typer.Exit(code)


def _plan(cluster: Path, out: Path | None) -> tuple[Plan, Path]:
    try:
        return load_generated_plan(cluster, out)
    except MissingBuild as exc:
        raise _err(str(exc)) from None


def _running(cluster: Path, out: Path | None, prefix: str) -> tuple[Plan, LabState, LabTopology]:
    plan, _ = _plan(cluster, out)
    state = load_state(plan.cluster.name, prefix)
    if state is None:
        raise _err(f"no lab of {plan.cluster.name} with prefix {prefix!r} is up: `railforge lab up` first")
    o = state.options
    topo = lab_topology(plan, o["sus"], o["spines"], o["hosts_per_su"], state.prefix, o.get("superspines", "all"),
                        o.get("parallel", "all"))
    return plan, state, topo


def memory_per_switch_mib(topo: LabTopology) -> float:
    """Proportional memory of every process in a switch namespace (FRR, lldpd and its privsep child)."""
    kib = sum(daemons.pss_kib(pid) for s in topo.switches for pid in ns_pids(topo.ns(s.name)))
    return kib / 1024 / max(1, len(topo.switches))


@lab_app.command()
def up(
    cluster: ClusterArg,
    out: OutOpt = None,
    sus: Annotated[str, typer.Option(help="how many SUs (the first N) or which (1,9)")] = "2",
    spines: Annotated[str, typer.Option(help="'all' or how many spines (per spine group in 3 tiers)")] = "all",
    superspines: Annotated[str, typer.Option(help="'all' or how many super-spines per plane")] = "all",
    parallel: Annotated[str, typer.Option(help="'all' or at most N parallel cables between two switches")] = "all",
    hosts_per_su: Annotated[int, typer.Option(help="GPU nodes per SU")] = 2,
    prefix: PrefixOpt = "rf-",
    wait: Annotated[float, typer.Option(help="seconds to wait for BGP and the kernel FIBs to converge")] = 120,
) -> None:
    """Create the namespaces, cables and daemons; wait until every FIB holds every ECMP path."""
    plan, folder = _plan(cluster, out)
    try:
        topo = lab_topology(plan, sus, spines, hosts_per_su, prefix, superspines, parallel)
        options = {"sus": sus, "spines": spines, "superspines": superspines, "parallel": parallel,
                   "hosts_per_su": hosts_per_su, "generated": str(folder)}
        state, timings = runner.up(topo, folder / "configs", options, _console().print)
    except (ScopeError, runner.LabError, CommandError) as exc:
        raise _err(str(exc)) from None
    try:
        with runner.interruptible(), checks.FabricFib(topo) as fibs:
            converged = checks.wait_fib(fibs, checks.expected_fib(topo, set()), timeout=wait)
    except KeyboardInterrupt:
        runner.down(state, topo, _console().print)
        raise
    c = _console()
    for row in checks.config_rows(state, topo):
        if not row.ok:
            c.print(f"[yellow]frr.conf of {row.subject}: {row.observed}[/yellow]", highlight=False)
    summary = {"switches": len(topo.switches), "hosts": len(topo.hosts), "cables": len(topo.links),
               "setup_s": round(timings.setup_s, 2), "daemons_s": round(timings.daemons_s, 2),
               "converge_s": None if converged is None else round(converged, 2),
               "mem_per_switch_mib": round(memory_per_switch_mib(topo), 1)}
    state.options["bringup"] = summary
    state.save()
    typer.echo(json.dumps(summary))
    if converged is None:
        raise _err(f"kernel FIBs not converged after {wait:.0f} s: `railforge lab check` shows what is missing", 1)


@lab_app.command()
def down(cluster: ClusterArg, out: OutOpt = None, prefix: PrefixOpt = "rf-") -> None:
    """Stop every daemon and delete every namespace of the lab (safe to repeat)."""
    plan, _ = _plan(cluster, out)
    state = load_state(plan.cluster.name, prefix)
    topo = None
    with contextlib.suppress(ScopeError):
        topo = lab_topology(plan, plan.cluster.sus, "all", 10**6, prefix)
    try:
        runner.down(state, topo, _console().print)
    except runner.LabError as exc:
        raise _err(str(exc), 1) from None


def results_table(title: str, rows: list[checks.Row]) -> Table:
    t = Table(title=title)
    for col in ("check", "subject", "expected", "observed", "ok"):
        t.add_column(col, overflow="fold")
    for r in rows:
        t.add_row(r.check, r.subject, r.expected, r.observed, "[green]yes[/green]" if r.ok else "[red]NO[/red]")
    return t


@lab_app.command()
def check(
    cluster: ClusterArg,
    out: OutOpt = None,
    fail: Annotated[str | None, typer.Option(help="spine=NAME (a spine or super-spine) or link=DEVICE:PORT")] = None,
    how: Annotated[str, typer.Option(help="silent (carrier up, packets dropped) or down (interfaces down)")] = "silent",
    bfd: Annotated[str, typer.Option(help="with --fail: measure with BFD 'on', 'off' or 'both'")] = "both",
    timeout: Annotated[float, typer.Option(help="seconds to wait for reconvergence")] = 60,
    json_out: Annotated[Path | None, typer.Option("--json", help="write results as JSON here")] = None,
    prefix: PrefixOpt = "rf-",
) -> None:
    """Assert BGP, ECMP width in the kernel, cross-SU pings and LLDP against the plan; exit 1 on any miss."""
    plan, state, topo = _running(cluster, out, prefix)
    if how not in failure.HOW or bfd not in ("on", "off", "both"):
        raise _err("--how is silent|down, --bfd is on|off|both")
    try:
        target = failure.parse_target(topo, fail) if fail else None
    except ScopeError as exc:
        raise _err(str(exc)) from None
    c = _console()
    measurements: list[failure.Measurement] = []
    with checks.FabricFib(topo) as fibs:
        rows = checks.config_rows(state, topo)
        rows += checks.bgp_rows(state, topo, checks.port_addresses(plan))
        rows += checks.fib_rows(fibs, checks.expected_fib(topo, set()))
        rows += checks.path_rows(fibs, topo)
        rows += checks.ping_rows(topo)
        rows += checks.lldp_rows(checks.lldp_report(state, topo, PlanNames(plan)), topo)
        c.print(results_table(f"lab {plan.cluster.name}: {len(topo.switches)} switches, {len(topo.hosts)} hosts",
                              rows))
        ok = all(r.ok for r in rows)
        if target and not ok:
            c.print(f"[red]not failing {target.name}: the fabric does not pass its checks[/red]", highlight=False)
        for with_bfd in {"on": [True], "off": [False], "both": [True, False]}[bfd] if target and ok else []:
            with runner.interruptible():  # SIGTERM too repairs the failure (measure's finally) before exiting
                m = failure.measure(state, topo, fibs, target, how, with_bfd, timeout)
            measurements.append(m)
            took = f"{m.converge_s:.2f} s" if m.converge_s is not None else f"more than {timeout:.0f} s"
            back = f"{m.restore_s:.2f} s" if m.restore_s is not None else "never"
            c.print(f"{how} failure of {m.target}, BFD {'on' if with_bfd else 'off'}: FIBs reconverged in {took}, "
                    f"restored in {back}", highlight=False)
            ok = ok and m.converge_s is not None and m.restore_s is not None
    if json_out:
        result = {"rows": [asdict(r) for r in rows], "failures": [asdict(m) for m in measurements],
                  "bringup": state.options.get("bringup")}
        json_out.write_text(json.dumps(result, indent=1))
    raise typer.Exit(0 if ok else 1)


@lab_app.command()
def lldp(cluster: ClusterArg, folder: Annotated[Path, typer.Argument(help="write <device>.json here")],
         out: OutOpt = None, prefix: PrefixOpt = "rf-") -> None:
    """Save every namespace's `lldpcli -f json show neighbors details` as <device>.json (input for verify)."""
    plan, state, topo = _running(cluster, out, prefix)
    folder.mkdir(parents=True, exist_ok=True)
    checks.lldp_observation(state, topo, PlanNames(plan), save=folder)
    _console().print(f"wrote {len(topo.devices())} files to {folder}", highlight=False)


@lab_app.command()
def swap(cluster: ClusterArg, cable_a: str, cable_b: str, out: OutOpt = None, prefix: PrefixOpt = "rf-") -> None:
    """Miswire on purpose: exchange the far ends (b side) of two cables, keeping the port addresses."""
    plan, state, topo = _running(cluster, out, prefix)
    try:
        first, second = topo.link(cable_a), topo.link(cable_b)
    except ScopeError as exc:
        raise _err(str(exc)) from None
    fabric.swap_far_ends(topo, first, second)
    _console().print(f"{first.a.device}:{first.a.port} now reaches {second.b.device}:{second.b.port}, "
                     f"{second.a.device}:{second.a.port} reaches {first.b.device}:{first.b.port}", highlight=False)
