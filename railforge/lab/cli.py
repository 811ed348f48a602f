"""`railforge lab`: emulate the cluster's Ethernet compute fabric in network namespaces, as root, or its
InfiniBand compute fabric on ibsim with real OpenSM (`lab ibsim`)."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from railforge.change.compare import compare as compare_plans
from railforge.cli import show
from railforge.inputs import InputError
from railforge.lab import checks, daemons, fabric, failure, hitless, ibsim, runner
from railforge.lab.scope import LabTopology, ScopeError, lab_topology, parse_sus
from railforge.lab.shell import CommandError, ns_pids
from railforge.lab.state import LabState, load_state
from railforge.plan import outdir
from railforge.plan.model import Plan
from railforge.plan.outdir import BuildError
from railforge.plan.outdir import load as load_generated_plan
from railforge.render import ibnetdiscover
from railforge.verify.cabling import compare
from railforge.verify.cli import report_table
from railforge.verify.fabric import peer_key, port_addresses
from railforge.verify.ibnet import parse_ibnetdiscover
from railforge.verify.names import PlanNames

lab_app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)
ClusterArg = Annotated[Path, typer.Argument(help="inventory/<cluster> or its cluster.yaml")]
OutOpt = Annotated[Path | None, typer.Option(help="generated folder (default: <cluster>/generated)")]
PrefixOpt = Annotated[str, typer.Option(help="namespace name prefix; one lab per cluster and prefix")]


def _console() -> Console:
    return show.console()


def _err(msg: str, code: int = 2) -> typer.Exit:
    show.error(show.console(stderr=True), msg)
    return typer.Exit(code)


def _plan(cluster: Path, out: Path | None) -> tuple[Plan, Path]:
    try:
        return load_generated_plan(cluster, out)
    except (BuildError, InputError) as exc:
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
        state, timings = runner.up(topo, folder / outdir.CONFIGS, options, _console().print)
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
            c.print(show.text(f"frr.conf of {row.subject}: {row.observed}", "yellow"))
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
    except (runner.LabError, CommandError) as exc:
        raise _err(str(exc), 1) from None


def results_table(title: str, rows: list[checks.Row]) -> Table:
    return show.table(title, ("check", "subject", "expected", "observed", "ok"),
                      [(r.check, r.subject, r.expected, r.observed, Text("yes", "green") if r.ok else Text("NO", "red"))
                       for r in rows], overflow="fold")


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
        rows += checks.bgp_rows(state, topo, port_addresses(plan.devices))
        rows += checks.fib_rows(fibs, checks.expected_fib(topo, set()))
        rows += checks.path_rows(fibs, topo)
        rows += checks.ping_rows(topo)
        rows += checks.lldp_rows(checks.lldp_report(state, topo, PlanNames(plan)), topo)
        c.print(results_table(f"lab {plan.cluster.name}: {len(topo.switches)} switches, {len(topo.hosts)} hosts",
                              rows))
        ok = all(r.ok for r in rows)
        if target and not ok:
            c.print(show.text(f"not failing {target.name}: the fabric does not pass its checks", "red"))
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
    """Save every namespace's `lldpcli -f json show neighbors details` as <device>.json, the input of
    `railforge verify cabling CLUSTER --lldp FOLDER --partial --no-speed`. Both flags are needed on the lab's
    files: the lab keeps only some SUs, spines and hosts (`--partial` judges only cables with both ends in
    the files) and its veth links report no real speed (`--no-speed`); without them every cable outside the
    lab and every port speed is a finding."""
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


@lab_app.command()
def dump(cluster: ClusterArg, folder: Annotated[Path, typer.Argument(help="write <switch>/*.json here")],
         out: OutOpt = None, prefix: PrefixOpt = "rf-") -> None:
    """Save each switch's `show bgp summary json`, `show ip route json` and LLDP neighbours as a real switch
    prints them, laid out as `railforge verify fabric --frr` reads them."""
    plan, state, topo = _running(cluster, out, prefix)
    for sw in topo.switches:
        target = folder / sw.name
        target.mkdir(parents=True, exist_ok=True)
        (target / "bgp-summary.json").write_text(daemons.vtysh(state, sw.name, "show bgp summary json"))
        (target / "ip-route.json").write_text(daemons.vtysh(state, sw.name, "show ip route json"))
        (target / "lldp.json").write_text(daemons.lldp_neighbors(state, sw.name))
    _console().print(f"wrote {len(topo.switches)} switches to {folder}", highlight=False)

GrowTo = Annotated[Path, typer.Option("--to", help="build folder of the grown spec (within scalable_units.max)")]
JsonOpt = Annotated[Path | None, typer.Option("--json", help="write the measurements as JSON here")]
WaitOpt = Annotated[float, typer.Option(help="seconds to wait for BGP and the kernel FIBs to converge")]


def _finish(result: dict, json_out: Path | None, ok: bool) -> None:
    typer.echo(json.dumps(result))
    if json_out:
        json_out.write_text(json.dumps(result, indent=1) + "\n")
    raise typer.Exit(0 if ok else 1)


@contextlib.contextmanager
def _pinging(topo: LabTopology, advice: str) -> Iterator[hitless.Pings]:
    """Pings across the fabric for the length of a change; a lab error ends them and says `advice`."""
    pings = hitless.Pings(topo)
    try:
        yield pings
    except (CommandError, runner.LabError) as exc:
        pings.kill()
        raise _err(f"{exc}; {advice}", 1) from None
    except BaseException:
        pings.kill()
        raise


@lab_app.command()
def grow(cluster: ClusterArg, to: GrowTo, out: OutOpt = None, prefix: PrefixOpt = "rf-", wait: WaitOpt = 120,
         json_out: JsonOpt = None) -> None:
    """Grow the running lab to the new build: frr-reload.py on every running switch whose frr.conf changed (no
    restart), then the new SU's switches and nodes; measure session resets, ping loss and reachability."""
    plan, state, topo = _running(cluster, out, prefix)
    try:
        new = load_generated_plan(to, to)[0]
    except (BuildError, InputError) as exc:
        raise _err(str(exc)) from None
    if new.cluster.name != plan.cluster.name:
        raise _err(f"{to} is a build of {new.cluster.name}, the lab runs {plan.cluster.name}")
    breaking = compare_plans(plan, new).breaking()
    if breaking:
        raise _err(f"{to} changes what the running lab has ({len(breaking)} changes, e.g. {breaking[0].kind} "
                   f"{breaking[0].subject}): growth must only add; see `railforge diff {state.options['generated']} "
                   f"{to}`")
    o = state.options
    try:
        grown = parse_sus(o["sus"], plan.cluster.sus) + list(range(plan.cluster.sus + 1, new.cluster.sus + 1))
        new_topo = lab_topology(new, ",".join(map(str, grown)), o["spines"], o["hosts_per_su"], state.prefix,
                                o.get("superspines", "all"), o.get("parallel", "all"))
    except ScopeError as exc:
        raise _err(str(exc)) from None
    old_dir, new_dir = Path(o["generated"]) / outdir.CONFIGS, to / outdir.CONFIGS
    running = [s.name for s in topo.switches]
    c = _console()
    before = hitless.snapshot(state, running)
    with _pinging(topo, "the lab is partly grown: `railforge lab down` removes all of it") as pings:
        time.sleep(2)
        reloaded, t0 = [], time.monotonic()
        for name in running:
            if (old_dir / name / "frr.conf").read_bytes() != (new_dir / name / "frr.conf").read_bytes():
                hitless.frr_reload(state, name, new_dir / name / "frr.conf")
                reloaded.append(name)
        reload_s = time.monotonic() - t0
        c.print(f"frr-reload.py applied the new frr.conf to {len(reloaded)} running switches in {reload_s:.1f} s",
                highlight=False)
        t1 = time.monotonic()
        added, cables = hitless.add_devices(state, topo, new_topo, new_dir)
        o.update(sus=",".join(map(str, grown)), generated=str(to))
        state.save()
        with checks.FabricFib(new_topo) as fibs:
            converged = checks.wait_fib(fibs, checks.expected_fib(new_topo, set()), timeout=wait)
        grow_s = time.monotonic() - t1
        time.sleep(2)
    tx, rx, lossy = pings.stop()
    rep = hitless.compare_sessions(before, hitless.snapshot(state, running))
    new_hosts = {d.name for d in added if d in new_topo.hosts}
    reach = [r for r in checks.ping_rows(new_topo) if r.subject.split(" -> ")[0] in new_hosts
             or r.subject.split(" -> ")[1].split()[0] in new_hosts]
    result = {"sessions_before": len(before.sessions), "reloaded_switches": len(reloaded),
              "reload_s": round(reload_s, 2),
              "new_devices": len(added), "new_cables": cables,
              "converge_s": None if converged is None else round(grow_s, 2),
              "sessions_kept": rep.kept, "sessions_reset": rep.reset, "sessions_new": rep.new,
              "min_uptime_gain_s": rep.min_uptime_gain_s,
              "pings_sent": tx, "pings_lost": tx - rx, "lossy_pairs": lossy,
              "new_su_pairs": len(reach), "new_su_unreachable": [r.subject for r in reach if not r.ok]}
    ok = converged is not None and not rep.reset and tx > 0 and tx == rx and reach and all(r.ok for r in reach)
    _finish(result, json_out, bool(ok))


@lab_app.command()
def rma(cluster: ClusterArg, switch: Annotated[str, typer.Argument(help="the switch replaced")],
        out: OutOpt = None, prefix: PrefixOpt = "rf-", wait: WaitOpt = 120, json_out: JsonOpt = None,
        drain: Annotated[bool, typer.Option(help="BGP graceful-shutdown on the switch, and wait for every other FIB "
                                                 "to route around it, before pulling it")] = True) -> None:
    """Replace one running switch (its namespace goes and comes back with the same generated frr.conf); show
    that no session elsewhere resets, how long until its own sessions and the FIBs are back, and ping loss."""
    plan, state, topo = _running(cluster, out, prefix)
    if switch not in {s.name for s in topo.switches}:
        raise _err(f"{switch} is not a switch of the running lab; it has: "
                   f"{', '.join(s.name for s in topo.switches)}")
    others = [s.name for s in topo.switches if s.name != switch]
    addrs = port_addresses(plan.devices)
    to_it = {(far, peer_key(addrs, link, far)) for link in topo.uplinks(switch)
             for far in (link.a.device, link.b.device) if far != switch}
    before = hitless.snapshot(state, others)
    own = len(topo.uplinks(switch))
    with _pinging(topo, "`railforge lab down` removes the lab") as pings:
        time.sleep(2)
        drain_s = None
        if drain:
            t_drain = time.monotonic()
            hitless.drain(state, switch, next(s for s in topo.switches if s.name == switch).asn)
            with checks.FabricFib(topo) as fibs:
                dead = {link.id for link in topo.uplinks(switch)}
                want = {k: v for k, v in checks.expected_fib(topo, dead).items() if k != switch}
                drained = checks.wait_fib(fibs, want, timeout=wait)
            drain_s = None if drained is None else round(time.monotonic() - t_drain, 2)
        t0 = time.monotonic()
        hitless.replace_switch(state, topo, switch, Path(state.options["generated"]) / outdir.CONFIGS)
        back = hitless.wait_established(state, [switch], {switch: own}, wait)
        with checks.FabricFib(topo) as fibs:
            converged = checks.wait_fib(fibs, checks.expected_fib(topo, set()), timeout=wait)
        restore_s = time.monotonic() - t0
        time.sleep(2)
    tx, rx, lossy = pings.stop()
    rep = hitless.compare_sessions(before, hitless.snapshot(state, others), skip=to_it)
    result = {"switch": switch, "drained_s": drain_s, "its_sessions": own,
              "other_sessions": sum(1 for k in before.sessions if k not in to_it),
              "its_sessions_back_s": None if back is None else round(back, 2),
              "fib_restored_s": None if converged is None else round(restore_s, 2),
              "other_sessions_kept": rep.kept, "other_sessions_reset": rep.reset,
              "pings_sent": tx, "pings_lost": tx - rx, "lossy_pairs": lossy}
    _finish(result, json_out, back is not None and converged is not None and not rep.reset)

@lab_app.command("ibsim")
def ibsim_cmd(
    cluster: ClusterArg,
    out: OutOpt = None,
    net: Annotated[Path | None, typer.Option(help="only write ibsim's net file of the plan here and exit")] = None,
    workdir: Annotated[Path | None, typer.Option(help="keep the run's files here (default: a temporary folder)")]
    = None,
    swap: Annotated[list[str] | None, typer.Option(help="seed a miswire: two cable labels 'CMP-000001,CMP-000002' "
                                                        "whose upper ends are exchanged (repeatable)")] = None,
) -> None:
    """Run the InfiniBand compute fabric on ibsim with real OpenSM and the generated configs/opensm files:
    ibnetdiscover, make-root-guids, make-partitions, OpenSM, then check MASTER, ftree on the planned roots
    and the cabling (speed is not judged: ibsim links train at SDR). Exit 1 on any failed check."""
    plan, folder = _plan(cluster, out)
    if plan.cluster.fabric != "infiniband":
        raise _err(f"{plan.cluster.name} has a {plan.cluster.fabric} compute fabric; ibsim simulates InfiniBand")
    links = {lk.id for lk in plan.links if lk.fabric == "compute"}
    swaps = [tuple(s.split(",")) for s in swap or []]
    bad = [s for pair in swaps for s in pair if s not in links] + [",".join(p) for p in swaps if len(p) != 2]
    if bad:
        raise _err(f"--swap takes two compute cable labels joined by ',' (e.g. CMP-000001,CMP-000002): {bad[0]!r}")
    if net is not None:
        net.write_text(ibsim.net_file(plan, swaps))
        _console().print(f"wrote {net}")
        return
    if ibsim.missing_tools():
        raise _err(f"needs {', '.join(ibsim.missing_tools())}: apt-get install ibsim-utils libumad2sim0 opensm "
                   "infiniband-diags")
    with contextlib.ExitStack() as stack:
        work = workdir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="railforge-ibsim-")))
        work.mkdir(parents=True, exist_ok=True)
        (work / "net").write_text(ibsim.net_file(plan, swaps))
        sim = ibsim.IbSim(work, f"railforge-{os.getpid()}-{plan.cluster.name}", ibsim.sm_host(plan))
        stack.callback(sim.stop)
        try:
            sim.start(work / "net")
            run = ibsim.day_one(sim, folder / outdir.OPENSM)
        except ibsim.SimError as exc:
            raise _err(str(exc), 1) from None
        roots = ibnetdiscover.read_names((folder / outdir.opensm_file("root-switches.txt")).read_text())
        rows = ibsim.sm_checks(run, roots)
        report = compare([lk for lk in plan.links if lk.fabric == "compute"],
                         parse_ibnetdiscover(run.after.read_text(), plan, str(run.after)), check_speed=False)
        rows.append(("cabling", report.ok, f"{report.matched} of {report.checked} cables as planned, "
                                           f"{len(report.findings)} findings (speed not judged)"))
    table = show.table(f"{plan.cluster.name} on ibsim (SM at {sim.sim_host})", ("check", "result", "detail"),
                       [(name, Text("ok") if ok else Text("FAIL", "red"), detail) for name, ok, detail in rows])
    console = _console()
    console.print(table)
    if report.findings:
        console.print(report_table(report, "cabling mismatches (ibnetdiscover)"))
    raise typer.Exit(0 if all(ok for _, ok, _ in rows) else 1)
