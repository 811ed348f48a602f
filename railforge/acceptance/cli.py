"""`railforge acceptance`: plan the burn-in from the plan (`plan`), and read its results into suspect cables
(`analyze`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from railforge.acceptance import document, jobs
from railforge.acceptance.rounds import RoundsError
from railforge.acceptance.scope import restrict
from railforge.acceptance.thresholds import Durations
from railforge.lab.scope import ScopeError, lab_topology
from railforge.lab.state import load_state
from railforge.plan import Plan
from railforge.verify.source import MissingBuild, load_generated_plan

acceptance_app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)
ClusterArg = Annotated[Path, typer.Argument(help="inventory/<cluster> or its cluster.yaml")]
OutOpt = Annotated[Path | None, typer.Option(help="generated folder (default: <cluster>/generated)")]


def _err(msg: str, code: int = 2) -> typer.Exit:
    Console(stderr=True).print(f"[red]error[/red] {escape(str(msg))}", highlight=False, emoji=False)
    return typer.Exit(code)


def load(cluster: Path, out: Path | None, lab: str | None) -> tuple[Plan, Path]:
    try:
        plan, folder = load_generated_plan(cluster, out)
    except MissingBuild as exc:
        raise _err(str(exc)) from None
    if lab is not None:
        state = load_state(plan.cluster.name, lab)
        if state is None:
            raise _err(f"no lab of {plan.cluster.name} with prefix {lab!r} is up: `railforge lab up` first")
        o = state.options
        try:
            topo = lab_topology(plan, o["sus"], o["spines"], o["hosts_per_su"], state.prefix,
                                o.get("superspines", "all"), o.get("parallel", "all"))
        except ScopeError as exc:
            raise _err(str(exc)) from None
        plan = restrict(plan, topo)
    return plan, folder


def hms(seconds: int) -> str:
    h, rest = divmod(int(seconds), 3600)
    return f"{h}h{rest // 60:02d}m"


@acceptance_app.command("plan")
def plan_cmd(
    cluster: ClusterArg,
    out: OutOpt = None,
    to: Annotated[Path | None, typer.Option(help="folder to write (default: <generated>/acceptance)")] = None,
    confidence: Annotated[float, typer.Option(min=0.5, max=0.999999,
                                              help="chance that ECMP flows cross every upper cable")] = 0.99,
    pair_seconds: Annotated[int, typer.Option(min=1, help="ib_write_bw duration per pair test")] = 30,
    dcgm_level: Annotated[int, typer.Option(min=1, max=4, help="dcgmi diag run level")] = 3,
    lab: Annotated[str | None, typer.Option(help="plan for the running lab with this prefix only")] = None,
) -> None:
    """Write acceptance/plan.json and the jobs (pair lists, pair.sh, run-round.sh, Slurm scripts) and print
    the rounds, the bound, flows per pair and the burn-in duration."""
    plan, folder = load(cluster, out, lab)
    durations = Durations(pair_s=pair_seconds, dcgm_level=dcgm_level)
    try:
        ap = document.build(plan, confidence, durations)
        count = jobs.write(ap, to or folder / "acceptance")
    except RoundsError as exc:
        raise _err(str(exc)) from None
    except OSError as exc:
        raise _err(f"cannot write {exc.filename or ''}: {exc.strerror or exc}") from None
    d = ap.doc
    t = Table(title=f"{d['cluster']}: acceptance burn-in ({count} files in {to or folder / 'acceptance'})")
    for col in ("rounds", "bound", "tests", "flows/pair", "pair pass Gb/s", "NCCL pass GB/s", "duration"):
        t.add_column(col)
    th = d["thresholds"]
    t.add_row(str(d["rounds_planned"]), str(d["bound"]["rounds"]), f"{d['coverage']['tests']:,}",
              str(d["routing"]["flows_per_pair"]), str(th["ib_write_bw_gbps"]["across_fabric"]),
              f"{th['all_reduce_busbw_gbytes']['per_su']} / {th['all_reduce_busbw_gbytes']['cluster']}",
              hms(d["durations"]["total_s"]))
    c = Console()
    c.print(t)
    c.print(escape(f"bound: {d['bound']['explain']}"), highlight=False)
    if d["coverage"]["unreachable"]:
        c.print(escape(f"{len(d['coverage']['unreachable'])} upper cables no host pair can cross "
                       f"(e.g. {d['coverage']['unreachable'][0]})"), highlight=False)
    if d["routing"]["kind"] == "infiniband":
        c.print(escape(d["routing"]["note"]), highlight=False)
    if not d["meets_bound"]:
        raise _err(f"{d['rounds_planned']} rounds planned, the bound is {d['bound']['rounds']}", 1)
