"""`railforge acceptance`: plan the burn-in from the plan (`plan`), and read its results into suspect cables
(`analyze`)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated

import orjson
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from railforge.acceptance import document, ecmppin, jobs, labrun
from railforge.acceptance.analysis import Analysis, analyse
from railforge.acceptance.ibroutes import TraceError
from railforge.acceptance.lft import LftError, read_lfts
from railforge.acceptance.results import Reader, ReadError, read_acceptance_plan
from railforge.acceptance.rounds import RoundsError
from railforge.acceptance.scope import restrict
from railforge.acceptance.thresholds import Durations
from railforge.acceptance.workorder import write_suspect_work_order
from railforge.lab.scope import ScopeError, lab_topology
from railforge.lab.state import load_state
from railforge.plan import outdir
from railforge.plan.model import Plan
from railforge.plan.tables import PlanIndex

acceptance_app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)
ClusterArg = Annotated[Path, typer.Argument(help="inventory/<cluster> or its cluster.yaml")]
OutOpt = Annotated[Path | None, typer.Option(help="generated folder (default: <cluster>/generated)")]


def _err(msg: str, code: int = 2) -> typer.Exit:
    Console(stderr=True).print(f"[red]error[/red] {escape(str(msg))}", highlight=False, emoji=False)
    return typer.Exit(code)


def load(cluster: Path, out: Path | None, lab: str | None) -> tuple[Plan, Path]:
    try:
        plan, folder = outdir.load(cluster, out)
    except outdir.BuildError as exc:
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
    lfts: Annotated[Path | None, typer.Option(help="InfiniBand: the switches' forwarding tables (dump_fts "
                                                   "output) to trace every pair's upper cables and cover them all")]
    = None,
) -> None:
    """Write acceptance/plan.json and the jobs (pair lists, pair.sh, run-round.sh, Slurm scripts) and print
    the rounds, the bound, flows per pair and the burn-in duration."""
    plan, folder = load(cluster, out, lab)
    durations = Durations(pair_s=pair_seconds, dcgm_level=dcgm_level)
    try:
        tables = read_lfts(lfts) if lfts is not None else None
        ap = document.build(plan, confidence, durations, tables)
        count = jobs.write(ap, to or folder / "acceptance")
    except (RoundsError, LftError, TraceError, ValueError) as exc:
        raise _err(str(exc)) from None
    except OSError as exc:
        raise _err(f"cannot write {exc.filename or ''}: {exc.strerror or exc}") from None
    d = ap.doc
    t = Table(title=Text(f"{d['cluster']}: acceptance burn-in ({count} files in {to or folder / 'acceptance'})"))
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
    if d["routing"]["kind"] == "infiniband-lft":
        r = d["routing"]
        c.print(escape(f"forwarding tables: {r['upper_cables_on_a_path']} of {r['upper_cables']} upper cables on a "
                       f"traced path ({r['added_tests']} tests added for them, in {r['added_rounds']} extra "
                       "rounds)"), highlight=False)
        for cable, why in list(r["not_nameable"].items())[:5]:
            c.print(escape(f"  {cable} cannot be named alone: {why}"), highlight=False)
        if len(r["not_nameable"]) > 5:
            c.print(escape(f"  ... {len(r['not_nameable']) - 5} more in plan.json routing.not_nameable"),
                    highlight=False)
        if r["not_on_any_path"]:
            raise _err(f"{len(r['not_on_any_path'])} upper cables are on no path these forwarding tables route "
                       f"(e.g. {r['not_on_any_path'][0]})", 1)
    if not d["meets_bound"]:
        raise _err(f"{d['rounds_planned']} rounds planned, the bound is {d['bound']['rounds']}", 1)


def suspect_rows(plan: Plan, analysis: Analysis) -> list[dict]:
    idx = PlanIndex(plan)
    links = plan.link_index()
    rows = []
    for rank, s in enumerate(analysis.suspects, 1):
        r = idx.cable_row(links[s.cable])
        rows.append({"rank": rank, "cable": s.cable, "tier": r[2], "slow_paths": s.slow_paths,
                     "lowest_gbps": s.lowest_gbps, "tests": list(s.tests),
                     "a": {"rack": r[5], "u": r[6], "device": r[7], "port": r[8], "label": r[9]},
                     "b": {"rack": r[10], "u": r[11], "device": r[12], "port": r[13], "label": r[14]}})
    return rows


def _end(e: dict) -> Text:
    return Text(f"{e['rack']} U{e['u']} {e['device']} {e['port']} ({e['label']})")


@acceptance_app.command()
def analyze(
    cluster: ClusterArg,
    results: Annotated[Path, typer.Argument(help="results folder the jobs wrote (round-NN/, nccl/, dcgm/)")],
    out: OutOpt = None,
    acceptance: Annotated[Path | None, typer.Option(help="acceptance folder (default: <generated>/acceptance)")]
    = None,
    min_gbps: Annotated[float | None, typer.Option(min=0.0, help="pair pass threshold in Gb/s (default: the "
                                                   "plan's, from link speed and oversubscription)")] = None,
    work_order: Annotated[Path | None, typer.Option(help="write the suspects' work order (.xlsx)")] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="write the analysis as JSON")] = None,
) -> None:
    """Read the results strictly, name suspect cables (on several slow paths and on no healthy one) with both
    ends, and write the work order. Exit 0 when everything passed, 1 when anything is slow, failed or suspect."""
    plan, folder = load(cluster, out, None)
    try:
        doc = read_acceptance_plan((acceptance or folder / outdir.ACCEPTANCE) / outdir.ACCEPTANCE_PLAN)
        if doc.cluster != plan.cluster.name:
            raise ReadError(f"the acceptance plan is for {doc.cluster}, the build is {plan.cluster.name}")
        res = Reader(doc, min_gbps).read(results)
    except ReadError as exc:
        raise _err(str(exc)) from None
    a = analyse(doc, res)
    rows = suspect_rows(plan, a)
    c = Console(highlight=False, emoji=False)
    c.print(Text(f"{doc.cluster}: {a.ok} pair tests passed, {a.slow} slow, {a.failed} failed, {a.missing} without "
                 f"a usable result; {len(res.skipped)} files skipped"))
    if rows:
        t = Table(title="suspect cables (on several slow paths, on no healthy one)")
        for col in ("#", "cable", "tier", "slow paths", "lowest Gb/s", "A end", "B end"):
            t.add_column(col)
        for r in rows:
            low = "failed" if r["lowest_gbps"] is None else f"{r['lowest_gbps']:.3g}"
            t.add_row(str(r["rank"]), Text(r["cable"]), Text(r["tier"]), str(r["slow_paths"]), low, _end(r["a"]),
                      _end(r["b"]))
        c.print(t)
    for b in a.bundles:
        c.print(Text(f"suspect ECMP bundle {b.cable}: on {b.slow_paths} slow tests; one of its cables is bad, "
                     "which one the pair results cannot tell (check its ports' error counters)"))
    for u in a.unexplained:
        where = f"ECMP bundles {', '.join(u.bundles)}" if u.bundles else "no cable left after clearing"
        c.print(Text(f"{u.test} {u.status}, not explained by a suspect: {where}"
                     + (f"; cables on no healthy path: {', '.join(u.weak)}" if u.weak else "")))
    for reason, n in sorted(res.skipped_counts().items()):
        first = next(s for s in res.skipped if s.reason == reason)
        c.print(Text(f"skipped {n} {reason}: e.g. {first.file}: {first.detail}"))
    nccl_bad = {k: v for k, v in res.nccl.items() if v[2] and v[1] < v[2]}
    for k, (_, busbw, th) in sorted(res.nccl.items()):
        c.print(Text(f"NCCL {k}: {busbw:g} GB/s bus bandwidth, pass >= {th:g}: "
                     f"{'FAIL' if k in nccl_bad else 'pass'}"))
    dcgm_bad = {k: v for k, v in res.dcgm.items() if v}
    c.print(Text(f"DCGM: {len(res.dcgm) - len(dcgm_bad)} nodes passed, {len(dcgm_bad)} failed"
                 + (f" ({', '.join(f'{k}: {v[0]}' for k, v in sorted(dcgm_bad.items())[:5])})" if dcgm_bad else "")))
    if work_order is not None and rows:
        steps = write_suspect_work_order(plan, a, work_order)
        c.print(Text(f"work order: {work_order} ({steps} steps)"))
    if json_out is not None:
        json_out.write_bytes(orjson.dumps({
            "suspects": rows,
            "bundles": [{"bundle": b.cable, "slow_paths": b.slow_paths, "tests": list(b.tests)} for b in a.bundles],
            "ok": a.ok, "slow": a.slow, "failed": a.failed, "missing": a.missing,
            "unexplained": [{"test": u.test, "status": u.status, "bundles": list(u.bundles), "weak": list(u.weak)}
                            for u in a.unexplained],
            "skipped": dict(sorted(res.skipped_counts().items())),
            "skipped_files": [{"file": s.file, "reason": s.reason, "detail": s.detail} for s in res.skipped],
            "nccl_failed": sorted(nccl_bad), "dcgm_failed": sorted(dcgm_bad)}, option=orjson.OPT_INDENT_2))
    if a.slow or a.failed or rows or a.bundles or nccl_bad or dcgm_bad:
        raise typer.Exit(1)


@acceptance_app.command("lab-run")
def lab_run(
    cluster: ClusterArg,
    results: Annotated[Path, typer.Argument(help="folder to write the results into (round-NN/<test>.txt)")],
    lab: Annotated[str, typer.Option(help="prefix of the running lab")],
    out: OutOpt = None,
    acceptance: Annotated[Path | None, typer.Option(help="acceptance folder planned with --lab (default: "
                                                    "<generated>/acceptance)")] = None,
    seconds: Annotated[float, typer.Option(min=0.5, max=600, help="iperf3 seconds per test")] = 2.0,
    rate: Annotated[str, typer.Option(help="iperf3 -b rate per test")] = "100M",
    pin_paths: Annotated[bool, typer.Option(help="choose each test's TCP ports so its flows take one path the lab's "
                                            "switches report (ip route get), and record that path's cables in "
                                            "the acceptance plan: a slow test then names exact leaf-spine cables")]
    = False,
) -> None:
    """Run every round of the acceptance plan on the lab's hosts, iperf3 standing in for ib_write_bw (root)."""
    plan, folder = load(cluster, out, lab)
    path = (acceptance or folder / outdir.ACCEPTANCE) / outdir.ACCEPTANCE_PLAN
    try:
        read_acceptance_plan(path)
        doc = orjson.loads(path.read_bytes())
    except ReadError as exc:
        raise _err(str(exc)) from None
    lab_hosts = {d.name for d in plan.devices if d.role == "node"}
    strangers = sorted({t[s]["node"] for r in doc["rounds"] for t in r["tests"] for s in ("a", "b")} - lab_hosts)
    if strangers:
        raise _err(f"{path} pairs hosts the lab does not run ({', '.join(strangers[:3])}): plan it with --lab {lab}")
    if not re.fullmatch(r"[0-9]+(\.[0-9]+)?[KMG]?", rate):
        raise _err(f"--rate {rate!r}: a number with an optional K, M or G suffix, like 100M")
    if pin_paths:
        _pin(cluster, out, lab, doc, path)
    for r in doc["rounds"]:
        took = labrun.run_round(doc, r["round"], lab, results, seconds, rate)
        typer.echo(f"round {r['round']}: {len(r['tests'])} tests in {took:.1f} s")


def _pin(cluster: Path, out: Path | None, lab: str, doc: dict, path: Path) -> None:
    """Pin every test's path in the running lab and rewrite the acceptance plan with it (atomically)."""
    full, _ = outdir.load(cluster, out)
    try:
        ecmppin.pin(doc, ecmppin.topology(full, lab), labrun.server_port)
    except ecmppin.PinError as exc:
        raise _err(str(exc)) from None
    doc["routing"] = {"kind": "lab-pinned", "flows_per_pair": 1, "note": ecmppin.NOTE}
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(document.dumps(doc))
    os.replace(tmp, path)
    pinned = {c for r in doc["rounds"] for t in r["tests"] for c in t["cables"][2:]}
    typer.echo(f"pinned {sum(len(r['tests']) for r in doc['rounds'])} tests: {len(pinned)} upper cables on their "
               f"paths; {path} rewritten")
