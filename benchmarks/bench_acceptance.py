"""Scale benchmark: acceptance plan generation (rounds, paths, ECMP flows, plan.json bytes) on the benchmark
ladder, from an in-memory plan (the planner's time is bench_build's), and `railforge acceptance plan` from the
CLI on a built plan.json, side by side in one run with the same work through the full plan.json reader (what the
CLI did before `plan/stream.py`): wall, CPU and peak RSS of each, and their ratios. Checks the bound is met at
every size and the CLI targets (131K GPUs: <= 30 s wall, <= 1.5 GiB); prints a table and writes JSON under
benchmarks/results/.

    python benchmarks/bench_acceptance.py                  # 1K ... 131K GPUs, the CLI on 131K
    python benchmarks/bench_acceptance.py --sizes 16384 --cli 16384
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_build import LADDER, ROOT, TreeMemory, ladder_spec  # noqa: E402

from railforge.acceptance.document import build, dumps  # noqa: E402
from railforge.planner import build_plan  # noqa: E402
from railforge.spec import load_spec  # noqa: E402

TARGET_CPU_S = {131072: 10.0}  # CPU, not wall: this 2-core machine is shared
CLI_TARGETS = {131072: {"wall_s": 30.0, "peak_rss_mib": 1536}}
FULL_READER = """
import sys
from pathlib import Path
from railforge.acceptance import document, jobs
from railforge.plan import outdir
plan, folder = outdir.load(Path(sys.argv[1]), Path(sys.argv[2]))
jobs.write(document.build(plan), Path(sys.argv[3]))
"""


def measure(gpus: int, folder: Path) -> dict:
    path = ladder_spec(gpus, folder)
    spec, lines = load_spec(path)
    plan = build_plan(spec, lines, str(path))
    gc.collect()
    gc.freeze()
    t0, c0 = time.perf_counter(), time.process_time()
    ap = build(plan)
    data = dumps(ap.doc)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    gc.unfreeze()
    d = ap.doc
    return {"gpus": gpus, "rounds": d["rounds_planned"] - d["storage"]["rounds"], "bound": d["bound"]["rounds"],
            "storage_rounds": d["storage"]["rounds"], "storage_bound": d["storage"]["bound"], "meets": d["meets_bound"],
            "tests": d["coverage"]["tests"], "flows_per_pair": d["routing"]["flows_per_pair"],
            "unreachable": len(d["coverage"]["unreachable"]), "burn_in_s": d["durations"]["total_s"],
            "wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "plan_json_mb": round(len(data) / 1e6, 1),
            "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}


def child(cmd: list[str]) -> dict:
    """Wall, CPU and own peak RSS (VmHWM, sampled: see bench_build.TreeMemory) of one command."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    memory = TreeMemory(proc.pid, pss=False)
    memory.start()
    _, status, usage = os.wait4(proc.pid, 0)
    memory.running = False
    memory.join()
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(cmd[:6])} failed:\n{proc.stderr.read().decode() if proc.stderr else ''}")
    return {"wall_s": round(wall, 2), "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
            "peak_rss_mib": round(max(memory.hwm_kib, 1) / 1024)}


def measure_cli(gpus: int, folder: Path) -> dict:
    """`railforge acceptance plan` on a built plan.json, then the same plan through the full reader, one after
    the other in this run."""
    spec = ladder_spec(gpus, folder)
    out = folder / f"gpu-{gpus}-out"
    subprocess.run([sys.executable, "-m", "railforge", "build", str(spec), "--out", str(out), "--only", "plan"],
                   cwd=ROOT, check=True, capture_output=True)
    cli = child([sys.executable, "-m", "railforge", "acceptance", "plan", str(spec), "--out", str(out), "--to",
                 str(folder / f"gpu-{gpus}-acc-cli")])
    full = child([sys.executable, "-c", FULL_READER, str(spec), str(out), str(folder / f"gpu-{gpus}-acc-full")])
    same = all((folder / f"gpu-{gpus}-acc-cli" / p).read_bytes() == (folder / f"gpu-{gpus}-acc-full" / p).read_bytes()
               for p in ("plan.json", "jobs/pairs-round-01.tsv", "jobs/oob-reach.tsv"))
    shutil.rmtree(out, ignore_errors=True)
    return {"gpus": gpus, "cli": cli, "full_reader": full, "same_output": same,
            "ratio_wall": round(cli["wall_s"] / full["wall_s"], 2),
            "ratio_cpu": round(cli["cpu_s"] / full["cpu_s"], 2),
            "ratio_rss": round(cli["peak_rss_mib"] / full["peak_rss_mib"], 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", help="comma-separated GPU counts from the ladder (in-memory plan)")
    parser.add_argument("--cli", default="131072", help="comma-separated GPU counts to plan from the CLI ('' none)")
    parser.add_argument("--results", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else list(LADDER)
    cli_sizes = [int(s) for s in args.cli.split(",") if s]
    rows, cli_rows = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for gpus in cli_sizes:
            r = measure_cli(gpus, Path(tmp))
            cli_rows.append(r)
            c, f = r["cli"], r["full_reader"]
            print(f"{gpus:>7} GPUs  acceptance plan CLI {c['wall_s']:>6.1f} s wall {c['cpu_s']:>5.1f} s cpu "
                  f"{c['peak_rss_mib']:>5} MiB | full reader {f['wall_s']:>6.1f} s wall {f['cpu_s']:>5.1f} s cpu "
                  f"{f['peak_rss_mib']:>5} MiB | ratios wall {r['ratio_wall']} cpu {r['ratio_cpu']} rss "
                  f"{r['ratio_rss']} | same output: {r['same_output']}", flush=True)
        for gpus in sizes:
            rows.append(measure(gpus, Path(tmp)))
            r = rows[-1]
            print(f"{r['gpus']:>7} GPUs  rounds {r['rounds']} (bound {r['bound']}) + storage {r['storage_rounds']} "
                  f"(bound {r['storage_bound']})  tests {r['tests']:>7}  "
                  f"flows/pair {r['flows_per_pair']:>2}  burn-in {r['burn_in_s'] / 3600:.1f} h  "
                  f"plan {r['wall_s']:>5.2f} s wall {r['cpu_s']:>5.2f} s cpu  {r['plan_json_mb']} MB  "
                  f"rss {r['peak_rss_mib']} MiB", flush=True)
    args.results.mkdir(parents=True, exist_ok=True)
    out = args.results / f"acceptance-{time.strftime('%Y%m%dT%H%M%S')}.json"
    out.write_text(json.dumps({"host": platform.node(), "python": platform.python_version(),
                               "load_average": os.getloadavg(), "rows": rows, "cli": cli_rows}, indent=1))
    failed = [r for r in rows if not r["meets"] or r["cpu_s"] > TARGET_CPU_S.get(r["gpus"], float("inf"))]
    for r in failed:
        print(f"FAILED {r['gpus']} GPUs: rounds {r['rounds']} vs bound {r['bound']}, storage {r['storage_rounds']} "
              f"vs {r['storage_bound']}, {r['cpu_s']} s CPU",
              file=sys.stderr)
    cli_failed = [r for r in cli_rows if not r["same_output"] or any(
        r["cli"][k] > v for k, v in CLI_TARGETS.get(r["gpus"], {}).items())]
    for r in cli_failed:
        print(f"FAILED {r['gpus']} GPUs from the CLI: {r['cli']} (targets {CLI_TARGETS.get(r['gpus'])}), same output "
              f"as the full reader: {r['same_output']}", file=sys.stderr)
    return 1 if failed or cli_failed else 0


if __name__ == "__main__":
    sys.exit(main())
