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

from railforge.acceptance import document, ecmppin, jobs, labrun, oob
from railforge.acceptance.analysis import Analysis, analyse
from railforge.acceptance.ibroutes import TraceError
from railforge.acceptance.lft import LftError, read_lfts
from railforge.acceptance.results import LLDP_DIR, Reader, ReadError, Results, read_acceptance_plan
from railforge.acceptance.retest import RetestError, plan_retest
from railforge.acceptance.rounds import RoundsError
from railforge.acceptance.scope import restrict
from railforge.acceptance.thresholds import Durations
from railforge.acceptance.workorder import write_suspect_work_order
from railforge.formats.output import describe, write_file
from railforge.lab.scope import ScopeError, lab_topology
from railforge.lab.state import load_state
from railforge.plan import outdir
from railforge.plan.model import Plan
from railforge.plan.tables import PlanIndex
from railforge.verify.lldp import LldpFormatError

acceptance_app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)
ClusterArg = Annotated[Path, typer.Argument(help="inventory/<cluster> or its cluster.yaml")]
OutOpt = Annotated[Path | None, typer.Option(help="generated folder (default: the cluster's generated/)")]


def _err(msg: str, code: int = 2) -> typer.Exit:
    Console(stderr=True).print(f"[red]error[/red] {escape(str(msg))}", highlight=False, emoji=False)
    return typer.Exit(code)


def load(cluster: Path, out: Path | None, lab: str | None, lean: bool = False) -> tuple[Plan, Path]:
    """The build's plan (`lean`: without switch ports, read item by item: what planning the burn-in needs), cut
    down to the running lab's part with `lab`."""
    try:
        plan, folder = outdir.load(cluster, out, lean=lean and lab is None)
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
    to: Annotated[Path | None, typer.Option(help="folder to write (default: generated/acceptance)")] = None,
    confidence: Annotated[float, typer.Option(min=0.5, max=0.999999,
                                              help="chance that ECMP flows cross every upper cable")] = 0.99,
    pair_seconds: Annotated[int, typer.Option(min=1, help="ib_write_bw duration per pair test")] = 30,
    dcgm_level: Annotated[int, typer.Option(min=1, max=4, help="dcgmi diag run level")] = 3,
    lab: Annotated[str | None, typer.Option(help="plan for the running lab with this prefix only")] = None,
    lfts: Annotated[Path | None, typer.Option(help="InfiniBand: the switches' forwarding tables (dump_fts "
                                                   "output) to trace every pair's upper cables and cover them all")]
    = None,
    storage_hca: Annotated[str, typer.Option(help="RDMA device of each host's storage bond (ConnectX RoCE LAG: "
                                                  "mlx5_bond_0)")] = document.STORAGE_HCA,
) -> None:
    """Write acceptance/plan.json and the jobs (pair lists, pair.sh, run-round.sh, Slurm scripts, the OOB
    reachability and LLDP scripts) and print the rounds, the bound, flows per pair, the burn-in duration and how
    many of the plan's cables the checks cover."""
    if not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", storage_hca):
        raise _err(f"--storage-hca {storage_hca!r}: an RDMA device name (letters, digits, '_', '.', '-'), like "
                   f"{document.STORAGE_HCA}")
    plan, folder = load(cluster, out, lab, lean=lfts is None)
    durations = Durations(pair_s=pair_seconds, dcgm_level=dcgm_level)
    try:
        tables = read_lfts(lfts) if lfts is not None else None
        ap = document.build(plan, confidence, durations, tables, storage_hca)
        del plan
        count = jobs.write(ap, to or folder / "acceptance")
    except (RoundsError, LftError, TraceError, ValueError) as exc:
        raise _err(str(exc)) from None
    except OSError as exc:
        raise _err(f"cannot write {exc.filename or ''}: {exc.strerror or exc}") from None
    d = ap.doc
    t = Table(title=Text(f"{d['cluster']}: acceptance burn-in ({count} files in {to or folder / 'acceptance'})"))
    for col in ("fabric", "rounds", "bound", "tests", "flows/pair", "pair pass Gb/s (both ways)", "duration"):
        t.add_column(col, overflow="fold")
    th = d["thresholds"]
    s = d["storage"]
    t.add_row("compute", str(d["rounds_planned"] - s["rounds"]), str(d["bound"]["rounds"]),
              f"{d['coverage']['tests']:,}", str(d["routing"]["flows_per_pair"]),
              str(th["ib_write_bw_gbps"]["across_fabric"]), hms(d["durations"]["total_s"]))
    if s["tests"]:
        t.add_row("storage", str(s["rounds"]), str(s["bound"]), f"{s['tests']:,}", str(s["flows_per_pair"]),
                  str(th["storage_ib_write_bw_gbps"]["across_fabric"]), "")
    c = Console()
    c.print(t)
    c.print(escape(f"bound: {d['bound']['explain']}"), highlight=False)
    nccl = th["all_reduce_busbw_gbytes"]
    c.print(escape(f"NCCL pass: {nccl['per_su']} GB/s per SU, {nccl['cluster']} GB/s cluster-wide"), highlight=False)
    cab = d["cables"]
    classes = ", ".join(f"{k} {v:,}" for k, v in cab["by_class"].items())
    oob = d["oob"]
    c.print(escape(f"cables: {cab['covered']:,} of {cab['total']:,} covered ({classes}); OOB: "
                   f"{len(oob['reach']):,} addresses to reach, {len(oob['lldp']['switches']):,} LLDP tables"),
            highlight=False)
    if cab["not_covered"]:
        first, why = next(iter(cab["not_covered"].items()))
        c.print(escape(f"{len(cab['not_covered']):,} cables no check covers, each with its reason in plan.json "
                       f"cables.not_covered (e.g. {first}: {why})"), highlight=False)
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


def suspect_rows(plan: Plan, analysis: Analysis, suspects: list | None = None) -> list[dict]:
    idx = PlanIndex(plan)
    links = plan.link_index()
    rows = []
    for rank, s in enumerate(analysis.suspects if suspects is None else suspects, 1):
        r = idx.cable_row(links[s.cable])
        rows.append({"rank": rank, "cable": s.cable, "tier": r[2], "slow_paths": s.slow_paths,
                     "lowest_gbps": s.lowest_gbps, "tests": list(s.tests),
                     "a": {"rack": r[5], "u": r[6], "device": r[7], "port": r[8], "label": r[9]},
                     "b": {"rack": r[10], "u": r[11], "device": r[12], "port": r[13], "label": r[14]}})
    return rows


def _end(e: dict) -> Text:
    return Text(f"{e['rack']} U{e['u']} {e['device']} {e['port']} ({e['label']})")


def _read(cluster: Path, out: Path | None, acceptance: Path | None, results: Path, min_gbps: float | None,
          lab: str | None = None, lean: bool = False):
    """The build's plan, the acceptance plan (as the model and as written) and the results, read strictly."""
    plan, folder = load(cluster, out, lab, lean=lean)
    path = (acceptance or folder / outdir.ACCEPTANCE) / outdir.ACCEPTANCE_PLAN
    try:
        doc = read_acceptance_plan(path)
        if doc.cluster != plan.cluster.name:
            raise ReadError(f"the acceptance plan is for {doc.cluster}, the build is {plan.cluster.name}")
        res = Reader(doc, min_gbps).read(results)
    except ReadError as exc:
        raise _err(str(exc)) from None
    return plan, path, doc, res


@acceptance_app.command()
def analyze(
    cluster: ClusterArg,
    results: Annotated[Path, typer.Argument(help="results folder the jobs wrote (round-NN/, nccl/, dcgm/, oob/, "
                                                 "lldp/)")],
    out: OutOpt = None,
    acceptance: Annotated[Path | None, typer.Option(help="acceptance folder (default: generated/acceptance)")]
    = None,
    min_gbps: Annotated[float | None, typer.Option(min=0.0, help="pair pass threshold in Gb/s (default: the "
                                                   "plan's, from link speed and oversubscription)")] = None,
    work_order: Annotated[Path | None, typer.Option(help="write the suspects' work order (.xlsx)")] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="write the analysis as JSON")] = None,
) -> None:
    """Read the results strictly, name suspect cables (on several slow paths, on no healthy one, and slow again
    in the re-test round) with both ends, the OOB addresses that did not answer and the LLDP findings, and
    write the work order. Exit 0 when everything passed (a slow test its re-test did not reproduce included), 1
    when anything is slow, failed, suspect or waiting for its re-test."""
    plan, _, doc, res = _read(cluster, out, acceptance, results, min_gbps)
    a = analyse(doc, res, require_retest=True)
    rows = suspect_rows(plan, a, a.suspects)
    pending = suspect_rows(plan, a, [s for s in a.to_retest if not s.bundle])
    c = Console(highlight=False, emoji=False)
    if not c.is_terminal:  # piped or logged: rows whole on one line each, for grep
        c = Console(highlight=False, emoji=False, width=250)
    c.print(Text(f"{doc.cluster}: {a.ok} pair tests passed, {a.slow} slow, {a.failed} failed, {a.missing} without "
                 f"a usable result; {len(res.skipped)} files skipped"))
    for title, table in (("suspect cables (on several slow paths, on no healthy one, slow on re-test)", rows),
                         ("suspicious cables: run the re-test round before blaming them", pending)):
        if table:
            c.print(_suspect_table(title, table))
    for b in a.bundles:
        c.print(Text(f"suspect ECMP bundle {b.cable}: on {b.slow_paths} slow tests; one of its cables is bad, "
                     "which one the pair results cannot tell (check its ports' error counters)"))
    for b in (s for s in a.to_retest if s.bundle):
        c.print(Text(f"suspicious ECMP bundle {b.cable}: on {b.slow_paths} slow tests; re-test before blaming it"))
    if a.to_retest:
        c.print(Text("re-test first: `railforge acceptance retest` plans the round (the slow pairs again, each "
                     "suspicious NIC with two new healthy partners), then run it and analyze again"))
    for u in a.unexplained:
        where = f"ECMP bundles {', '.join(u.bundles)}" if u.bundles else "no cable left after clearing"
        c.print(Text(f"{u.test} {u.status}, not explained by a suspect: {where}"
                     + (f"; cables on no healthy path: {', '.join(u.weak)}" if u.weak else "")))
    if a.not_reproduced:
        c.print(Text(f"{len(a.not_reproduced)} slow tests not reproduced by their re-test (transient, not blamed): "
                     f"{', '.join(a.not_reproduced[:10])}{' ...' if len(a.not_reproduced) > 10 else ''}"))
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
    reach = oob.judge_reach(doc.oob.reach if doc.oob else [], res.reach)
    if res.reach:
        c.print(Text(f"OOB: {reach.answered} of {reach.checked} addresses answered, {len(reach.lost)} did not, "
                     f"{reach.missing} without a result"))
        for sw, n in reach.dark:
            c.print(Text(f"OOB: none of the {n} addresses behind {sw} answered: the switch or its uplinks"))
        for lost in reach.lost[:20]:
            c.print(Text(f"OOB: {lost['address']} ({lost['device']} {lost['port']}) did not answer: cable "
                         f"{lost['cable']} to {lost['switch']}, or the device"))
    lldp = _lldp(plan, results, doc, c)
    try:
        if work_order is not None and rows:
            steps = write_suspect_work_order(plan, a, work_order)
            c.print(Text(f"work order: {work_order} ({steps} steps)"))
        if json_out is not None:
            _write_analysis(json_out, a, res, rows, pending, nccl_bad, dcgm_bad, reach, lldp)
    except OSError as exc:
        raise _err(describe(exc)) from None
    if not a.clean or nccl_bad or dcgm_bad or reach.lost or reach.dark or (lldp and lldp["findings"]):
        raise typer.Exit(1)


def _write_analysis(json_out: Path, a: Analysis, res: Results, rows: list[dict], pending: list[dict], nccl_bad: dict,
                    dcgm_bad: dict, reach: oob.ReachVerdict, lldp: dict | None) -> None:
    write_file(json_out, orjson.dumps({
            "suspects": rows, "to_retest": pending + [{"bundle": b.cable, "slow_paths": b.slow_paths,
                                                       "tests": list(b.tests)} for b in a.to_retest if b.bundle],
            "not_reproduced": list(a.not_reproduced),
            "bundles": [{"bundle": b.cable, "slow_paths": b.slow_paths, "tests": list(b.tests)} for b in a.bundles],
            "ok": a.ok, "slow": a.slow, "failed": a.failed, "missing": a.missing,
            "unexplained": [{"test": u.test, "status": u.status, "bundles": list(u.bundles), "weak": list(u.weak)}
                            for u in a.unexplained],
            "skipped": dict(sorted(res.skipped_counts().items())),
            "skipped_files": [{"file": s.file, "reason": s.reason, "detail": s.detail} for s in res.skipped],
            "nccl_failed": sorted(nccl_bad), "dcgm_failed": sorted(dcgm_bad),
            "oob": {"checked": reach.checked, "answered": reach.answered, "missing": reach.missing,
                    "lost": reach.lost, "dark_switches": [sw for sw, _ in reach.dark]},
            "lldp": lldp}, option=orjson.OPT_INDENT_2))


def _suspect_table(title: str, rows: list[dict]) -> Table:
    t = Table(title=title)
    for col in ("#", "cable", "tier", "slow paths", "lowest Gb/s", "A end", "B end"):
        t.add_column(col, overflow="fold")
    for r in rows:
        low = "failed" if r["lowest_gbps"] is None else f"{r['lowest_gbps']:.3g}"
        t.add_row(str(r["rank"]), Text(r["cable"]), Text(r["tier"]), str(r["slow_paths"]), low, _end(r["a"]),
                  _end(r["b"]))
    return t


def _lldp(plan: Plan, results: Path, doc, c: Console) -> dict | None:
    """The LLDP-checked cables against `results/lldp/` when the folder is there."""
    folder = results / LLDP_DIR
    if not folder.is_dir() or doc.oob is None:
        return None
    try:
        checked, matched, findings = oob.lldp_findings(plan, folder, doc.oob.lldp.cables)
    except LldpFormatError as exc:
        raise _err(str(exc)) from None
    c.print(Text(f"LLDP: {matched} of {checked} checked cables as planned"))
    for kind, _, message in findings:
        c.print(Text(f"LLDP {kind}: {message}"))
    return {"checked": checked, "matched": matched,
            "findings": [{"kind": k, "cables": cs, "message": m} for k, cs, m in findings]}


@acceptance_app.command()
def retest(
    cluster: ClusterArg,
    results: Annotated[Path, typer.Argument(help="results folder of the rounds run so far")],
    out: OutOpt = None,
    acceptance: Annotated[Path | None, typer.Option(help="acceptance folder (default: <generated>/acceptance)")]
    = None,
    min_gbps: Annotated[float | None, typer.Option(min=0.0, help="pair pass threshold in Gb/s, as given to "
                                                   "analyze (default: the plan's)")] = None,
    lab: Annotated[str | None, typer.Option(help="the acceptance plan was made with --lab for this prefix")] = None,
    lfts: Annotated[Path | None, typer.Option(help="InfiniBand: the forwarding tables the plan was traced with")]
    = None,
) -> None:
    """Plan the re-test round from the results so far and add it to the acceptance plan and its jobs: every slow
    or failed pair again, each suspicious NIC with two new partners that passed everything, two healthy pairs
    over each suspicious upper cable. Exit 0 (with nothing to do when every test passed)."""
    plan, path, doc, res = _read(cluster, out, acceptance, results, min_gbps, lab, lean=lfts is None)
    try:
        tables = read_lfts(lfts) if lfts is not None else None
        raw = orjson.loads(path.read_bytes())
        summary = plan_retest(plan, raw, doc, res, tables)
        if summary["tests"]:
            jobs.write(raw, path.parent)
    except (RetestError, LftError, TraceError) as exc:
        raise _err(str(exc)) from None
    except OSError as exc:
        raise _err(f"cannot write {exc.filename or ''}: {exc.strerror or exc}") from None
    c = Console(highlight=False, emoji=False)
    if not summary["tests"]:
        c.print(Text(f"{doc.cluster}: nothing to re-test"))
        return
    rounds = summary["rounds"]
    c.print(Text(f"{doc.cluster}: re-test round{'s' if len(rounds) > 1 else ''} {', '.join(map(str, rounds))}: "
                 f"{summary['tests']} tests ({summary['reruns']} slow pairs again, the rest with new partners) "
                 f"added to {path}"))
    for item, why in summary["not_retested"].items():
        c.print(Text(f"not re-tested: {item}: {why}"))
    c.print(Text("run them (jobs/run-round.sh N, jobs/slurm/round-NN.sbatch, or lab-run --round N), then "
                 "`railforge acceptance analyze`"))


@acceptance_app.command("lab-run")
def lab_run(
    cluster: ClusterArg,
    results: Annotated[Path, typer.Argument(help="folder to write the results into (round-NN/<test>.txt)")],
    lab: Annotated[str, typer.Option(help="prefix of the running lab")],
    out: OutOpt = None,
    acceptance: Annotated[Path | None, typer.Option(help="acceptance folder planned with --lab (default: "
                                                    "acceptance/ in the generated folder)")] = None,
    seconds: Annotated[float, typer.Option(min=0.5, max=600, help="iperf3 seconds per test")] = 2.0,
    rate: Annotated[str, typer.Option(help="iperf3 -b rate per test")] = "100M",
    pin_paths: Annotated[bool, typer.Option(help="choose each test's TCP ports so its flows take one path the lab's "
                                            "switches report (ip route get), and record that path's cables in "
                                            "the acceptance plan: a slow test then names exact leaf-spine cables")]
    = False,
    only: Annotated[list[int] | None, typer.Option("--round", help="run this round only (repeat for several; "
                                                   "default: every compute round)")] = None,
) -> None:
    """Run the compute rounds of the acceptance plan on the lab's hosts, iperf3 standing in for ib_write_bw
    (root). The lab has no storage fabric: storage rounds are not run here."""
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
    numbers = [r["round"] for r in doc["rounds"]]
    unknown = sorted(set(only or ()) - set(numbers))
    if unknown:
        raise _err(f"--round {unknown[0]}: {path} has rounds {numbers[0]}..{numbers[-1]}")
    chosen = [r for r in doc["rounds"] if (not only or r["round"] in only) and r.get("kind", "compute") == "compute"]
    if only and len(chosen) < len(set(only)):
        raise _err(f"--round: rounds {', '.join(str(r) for r in sorted(set(only) - {r['round'] for r in chosen}))} "
                   "are storage rounds; the lab has no storage fabric")
    if pin_paths:
        _pin(cluster, out, lab, doc, path, [r for r in chosen if not all(t.get("ports") for t in r["tests"])])
    for r in chosen:
        took = labrun.run_round(doc, r["round"], lab, results, seconds, rate)
        typer.echo(f"round {r['round']}: {len(r['tests'])} tests in {took:.1f} s")


def _pin(cluster: Path, out: Path | None, lab: str, doc: dict, path: Path, rounds: list[dict]) -> None:
    """Pin the paths of `rounds`' tests in the running lab and rewrite the acceptance plan with them
    (atomically); rounds pinned before keep their paths (their results may be in)."""
    if not rounds:
        return
    full, _ = outdir.load(cluster, out)
    try:
        ecmppin.pin({**doc, "rounds": rounds}, ecmppin.topology(full, lab), labrun.server_port)
    except ecmppin.PinError as exc:
        raise _err(str(exc)) from None
    doc["routing"] = {"kind": "lab-pinned", "flows_per_pair": 1, "note": ecmppin.NOTE}
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(document.dumps(doc))
    os.replace(tmp, path)
    pinned = {c for r in rounds for t in r["tests"] for c in t["cables"][2:]}
    typer.echo(f"pinned {sum(len(r['tests']) for r in rounds)} tests: {len(pinned)} upper cables on their "
               f"paths; {path} rewritten")
