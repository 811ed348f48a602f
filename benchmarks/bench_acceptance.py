"""Scale benchmark: acceptance plan generation (rounds, paths, ECMP flows, plan.json bytes) on the benchmark
ladder, from an in-memory plan (the planner's time is bench_build's). Checks the bound is met at every size and
that 131K GPUs plan in seconds; prints a table and writes JSON under benchmarks/results/.

    python benchmarks/bench_acceptance.py                  # 1K ... 131K GPUs
    python benchmarks/bench_acceptance.py --sizes 16384
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_build import LADDER, ROOT, ladder_spec  # noqa: E402

from railforge.acceptance.document import build, dumps  # noqa: E402
from railforge.planner import build_plan  # noqa: E402
from railforge.spec import load_spec  # noqa: E402

TARGET_CPU_S = {131072: 10.0}  # CPU, not wall: this 2-core machine is shared


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
    return {"gpus": gpus, "rounds": d["rounds_planned"], "bound": d["bound"]["rounds"], "meets": d["meets_bound"],
            "tests": d["coverage"]["tests"], "flows_per_pair": d["routing"]["flows_per_pair"],
            "unreachable": len(d["coverage"]["unreachable"]), "burn_in_s": d["durations"]["total_s"],
            "wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "plan_json_mb": round(len(data) / 1e6, 1),
            "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", help="comma-separated GPU counts from the ladder")
    parser.add_argument("--results", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else list(LADDER)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for gpus in sizes:
            rows.append(measure(gpus, Path(tmp)))
            r = rows[-1]
            print(f"{r['gpus']:>7} GPUs  rounds {r['rounds']} (bound {r['bound']})  tests {r['tests']:>7}  "
                  f"flows/pair {r['flows_per_pair']:>2}  burn-in {r['burn_in_s'] / 3600:.1f} h  "
                  f"plan {r['wall_s']:>5.2f} s wall {r['cpu_s']:>5.2f} s cpu  {r['plan_json_mb']} MB  "
                  f"rss {r['peak_rss_mib']} MiB", flush=True)
    args.results.mkdir(parents=True, exist_ok=True)
    out = args.results / f"acceptance-{time.strftime('%Y%m%dT%H%M%S')}.json"
    out.write_text(json.dumps({"host": platform.node(), "python": platform.python_version(), "rows": rows}, indent=1))
    failed = [r for r in rows if not r["meets"] or r["cpu_s"] > TARGET_CPU_S.get(r["gpus"], float("inf"))]
    for r in failed:
        print(f"FAILED {r['gpus']} GPUs: rounds {r['rounds']} vs bound {r['bound']}, {r['cpu_s']} s CPU",
              file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
