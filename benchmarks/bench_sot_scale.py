"""Where a `sot push` / `sot diff` spends its time as the plan grows: per object class, client CPU against server CPU.

For each size it runs, in this process against one real NetBox or Nautobot (started here on free loopback ports, so
no fixed port and no lock), a first push, a no-op push and a diff, and records per phase (the read-back, then one
bulk create per object class and wave): objects, requests, wall seconds, objects/s, this client's CPU seconds
(`os.times`) and the server's CPU seconds (every process of the server: the gunicorn/uwsgi workers, PostgreSQL's
backends, Redis, read from /proc including reaped children); per run also PostgreSQL's own execution time and
statement count (pg_stat_statements), which tells the database from the application server. On this shared
2-core machine wall time depends on the other engineers' load; CPU seconds per object do not, which is what the
16K extrapolation uses.

    python benchmarks/bench_sot_scale.py netbox roce-a800-4nic roce-16k-railplane:R001-0
    python benchmarks/bench_sot_scale.py nautobot roce-a800-4nic --json out.json
    python benchmarks/bench_sot_scale.py netbox roce-16k-railplane:R001 --profile prof.txt  # + client cProfile
    python benchmarks/bench_sot_scale.py nautobot roce-16k-railplane:R001-0 --baseline 31525e3  # reads: old vs new

With `--baseline REF`, the no-op push and the diff run twice on the same server and data, once with railforge/sot
as it was at git commit REF (loaded from git under another package name) and once with this tree's: the read path
side by side.

A size is an inventory example, or `roce-16k-railplane:PREFIX[,PREFIX]`: the 16K example's plan cut to the racks
whose names start so (their devices, interfaces, addresses, the cables with both ends in them, and every catalog
object): `R001-0` is the first 32 nodes of scalable unit 1 and its leaf rack, `R001` the whole unit. Its own site,
so sizes do not meet in the server.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import subprocess
import sys
import tempfile
import threading
import time
import types
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from railforge.change.sides import read_side  # noqa: E402
from railforge.sot import rest as rest_module  # noqa: E402
from railforge.sot.desired import Desired, desired  # noqa: E402
from railforge.sot.nautobot import Nautobot  # noqa: E402
from railforge.sot.netbox import NetBox  # noqa: E402
from tests.helpers import sot_servers  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def tree_cpu(roots: list[int]) -> float:
    """CPU seconds of the processes under `roots` (themselves included), with their reaped children's."""
    parent: dict[int, int] = {}
    stat: dict[int, list[str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parent[int(entry)], stat[int(entry)] = int(fields[1]), fields
    keep = set(roots)
    changed = True
    while changed:
        changed = False
        for pid, ppid in parent.items():
            if ppid in keep and pid not in keep:
                keep.add(pid)
                changed = True
    return sum(sum(int(x) for x in stat[p][11:15]) for p in keep if p in stat) / TICK


def database(pg_port: int) -> tuple[float, int]:
    """PostgreSQL's own execution seconds and statements so far (pg_stat_statements, loaded by the test servers)."""
    proc = subprocess.run(["psql", "-h", "127.0.0.1", "-p", str(pg_port), "-U", "postgres", "-d", "sot", "-Atc",
                           "select coalesce(sum(total_exec_time), 0) / 1000, coalesce(sum(calls), 0) "
                           "from pg_stat_statements"], capture_output=True, text=True, check=True)
    seconds, calls = proc.stdout.strip().split("|")
    return float(seconds), int(calls)


def client_cpu() -> float:
    t = os.times()
    return t.user + t.system


def subset(want: Desired, prefixes: list[str]) -> Desired:
    """The plan cut to the racks whose names start with one of `prefixes`: everything in them, the cables between
    them, every catalog object."""
    kept_racks = [r for r in want.racks if r.name.startswith(tuple(prefixes))]
    names = {r.name for r in kept_racks}
    devices = [d for d in want.devices if d.rack in names]
    kept = {d.name for d in devices}
    return replace(want, racks=kept_racks, devices=devices,
                   interfaces=[i for i in want.interfaces if i.device in kept],
                   cables=[c for c in want.cables if c.a_device in kept and c.b_device in kept],
                   addresses=[a for a in want.addresses if a.device in kept],
                   bgp=[b for b in want.bgp if b.device in kept],
                   asns=sorted({b.asn for b in want.bgp if b.device in kept}) or want.asns)


class Meter:
    """Per phase: objects, requests, wall, client CPU, server CPU. Phases are the read-back and each bulk write."""

    def __init__(self, server_roots: list[int]):
        self.roots = server_roots
        self.rows: list[dict] = []
        self.requests: dict[str, int] = defaultdict(int)
        self.lock = threading.Lock()

    def snapshot(self) -> tuple[float, float, float, int]:
        return time.monotonic(), client_cpu(), tree_cpu(self.roots), sum(self.requests.values())

    def record(self, phase: str, cls: str, objects: int, before: tuple) -> None:
        after = self.snapshot()
        self.rows.append({"phase": phase, "class": cls, "objects": objects, "requests": after[3] - before[3],
                          "wall_s": after[0] - before[0], "client_cpu_s": after[1] - before[1],
                          "server_cpu_s": after[2] - before[2]})

    def install(self, packages: list) -> None:
        for package in packages:
            self._install(package)

    def _install(self, package) -> None:
        meter, rest = self, package.Rest
        request, create, update, delete = rest.request, rest.create, rest.update, rest.delete

        def counted(self, method, path, what, params=None, body=None):
            with meter.lock:
                meter.requests[method] += 1
            return request(self, method, path, what, params=params, body=body)

        def writer(name, inner):
            def write(self, path, what, items, *args, **kwargs):
                before = meter.snapshot()
                out = inner(self, path, what, items, *args, **kwargs)
                if items:
                    meter.record(name, what, len(items), before)
                return out
            return write

        rest.request = counted
        rest.create, rest.update, rest.delete = (writer("create", create), writer("update", update),
                                                 writer("delete", delete))
        for cls in (package.NetBox, package.Nautobot):
            inner = cls.read_state

            def timed_read(self, want, inner=inner):
                before = meter.snapshot()
                st = inner(self, want)
                meter.record("read", "everything in scope", sum(len(v) for v in st.objects.values()), before)
                return st
            cls.read_state = timed_read


def this_tree() -> types.SimpleNamespace:
    return types.SimpleNamespace(name="this tree", Rest=rest_module.Rest, NetBox=NetBox, Nautobot=Nautobot)


def baseline(ref: str, work: Path) -> types.SimpleNamespace:
    """railforge/sot as it was at git commit `ref`, imported as the package `rf_baseline_sot` (its own Rest, sync
    and desired too), so both read paths run in this process against the same server."""
    folder = work / "baseline" / "rf_baseline_sot"
    folder.mkdir(parents=True)
    names = subprocess.run(["git", "ls-tree", "--name-only", f"{ref}:railforge/sot"], capture_output=True,
                           text=True, check=True, cwd=ROOT).stdout.split()
    for name in (n for n in names if n.endswith(".py")):
        text = subprocess.run(["git", "show", f"{ref}:railforge/sot/{name}"], capture_output=True, text=True,
                              check=True, cwd=ROOT).stdout
        (folder / name).write_text(text.replace("railforge.sot.", "rf_baseline_sot."))
    sys.path.insert(0, str(folder.parent))
    import importlib

    mods = {n: importlib.import_module(f"rf_baseline_sot.{n}") for n in ("rest", "netbox", "nautobot", "desired")}
    return types.SimpleNamespace(name=f"git {ref}", Rest=mods["rest"].Rest, NetBox=mods["netbox"].NetBox,
                                 Nautobot=mods["nautobot"].Nautobot, desired=mods["desired"].desired)


def run_size(product: str, server, plan, want: Desired, racks: list[str], meter: Meter,
             profile: cProfile.Profile | None, packages: list) -> dict:
    """A first push with this tree, then per package (a baseline first, if any, then this tree) a no-op push and a
    diff."""
    out: dict = {"objects": {}, "runs": {}}
    current = packages[-1]
    steps = [("first push", current)] + [(f"{step} [{p.name}]" if len(packages) > 1 else step, p)
                                         for p in packages for step in ("no-op push", "diff")]
    for step, package in steps:
        meter.rows = []
        start, db_start = meter.snapshot(), database(server.pg_port)
        if profile is not None:
            profile.enable()
        make = package.NetBox if product == "netbox" else package.Nautobot
        client = make(server.url, server.token, plan.cluster.name, workers=4)
        client.check()
        target = want if package is current else package.desired(plan)
        if package is not current and racks:
            target = subset(target, racks)
        if step.startswith("diff"):
            changes = client.drift(target)
            if changes:
                raise SystemExit(f"{step} after two pushes is not clean: {len(changes)} changes, first {changes[0]}")
            writes = 0
        else:
            result = client.push(target)
            writes = result.writes
            if step == "first push":
                out["objects"] = dict(result.created)
            elif writes:
                raise SystemExit(f"the {step} wrote {writes} objects")
        if profile is not None:
            profile.disable()
        end, db_end = meter.snapshot(), database(server.pg_port)
        out["runs"][step] = {"writes": writes, "requests": end[3] - start[3], "wall_s": end[0] - start[0],
                             "client_cpu_s": end[1] - start[1], "server_cpu_s": end[2] - start[2],
                             "sql_s": db_end[0] - db_start[0], "sql_statements": db_end[1] - db_start[1],
                             "load": os.getloadavg()[0], "phases": meter.rows}
    return out


def load(size: str, work: Path) -> tuple:
    name, _, racks = size.partition(":")
    folder = work / name
    if not folder.exists():
        proc = subprocess.run([sys.executable, "-m", "railforge", "build", str(ROOT / "inventory" / name /
                                                                              "cluster.yaml"), "--out", str(folder)],
                              capture_output=True, text=True, cwd=ROOT)
        if proc.returncode != 0:
            raise SystemExit(proc.stderr)
    plan = read_side(folder).plan
    if not racks:
        return plan, desired(plan)
    plan = replace(plan, cluster=replace(plan.cluster, name=f"{name}-{racks.replace(',', '-').lower()}"))
    return plan, subset(desired(plan), racks.split(","))


def report(product: str, size: str, res: dict) -> str:
    lines = [f"{product} {size}: {sum(res['objects'].values())} objects "
             f"({', '.join(f'{n} {c}' for c, n in res['objects'].items())})"]
    for step, r in res["runs"].items():
        lines.append(f"  {step:10} {r['writes']:7} writes {r['requests']:6} requests {r['wall_s']:8.1f} s wall  "
                     f"client {r['client_cpu_s']:7.1f} s CPU  server {r['server_cpu_s']:7.1f} s CPU, of it SQL "
                     f"{r['sql_s']:5.1f} s in {r['sql_statements']} statements")
        for p in r["phases"]:
            rate = p["objects"] / p["wall_s"] if p["wall_s"] else 0
            lines.append(f"    {p['phase']:6} {p['class'][:22]:22} {p['objects']:7} obj {p['requests']:5} req "
                         f"{p['wall_s']:8.1f} s {rate:7.1f}/s  client {p['client_cpu_s']:6.1f}  server "
                         f"{p['server_cpu_s']:7.1f} CPU-s  server ms/obj "
                         f"{1000 * p['server_cpu_s'] / max(1, p['objects']):6.1f}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("product", choices=("netbox", "nautobot"))
    ap.add_argument("sizes", nargs="+")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--baseline", metavar="REF", help="also run the no-op push and diff with railforge/sot as it "
                    "was at this git commit, on the same server and data")
    ap.add_argument("--profile", type=Path, help="write the client's cProfile (all sizes, top 40 by tottime)")
    args = ap.parse_args()
    profile = cProfile.Profile() if args.profile else None
    with tempfile.TemporaryDirectory(prefix="rf-bench-sot-scale-") as tmp:
        work = Path(tmp)
        server = (sot_servers.start_nautobot if args.product == "nautobot" else sot_servers.start_netbox)(
            work / args.product)
        try:
            postmaster = (server.pg / "data" / "postmaster.pid").read_text().split()[0]
            meter = Meter([*server.pids, int(postmaster)])
            packages = ([baseline(args.baseline, work)] if args.baseline else []) + [this_tree()]
            meter.install(packages)
            results = {}
            for size in args.sizes:
                plan, want = load(size, work)
                print(f"{time.strftime('%H:%M:%S')} {size}: load {os.getloadavg()[0]:.1f}", flush=True)
                racks = size.partition(":")[2].split(",") if ":" in size else []
                results[size] = run_size(args.product, server, plan, want, racks, meter, profile, packages)
                results[size]["load_after"] = os.getloadavg()
                print(report(args.product, size, results[size]), flush=True)
                if args.json:
                    args.json.write_text(json.dumps(results, indent=1))
        finally:
            server.stop()
    if profile is not None:
        text = io.StringIO()
        pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(40)
        args.profile.write_text(text.getvalue())


if __name__ == "__main__":
    main()
