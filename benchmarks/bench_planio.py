"""Benchmark: reading plan.json the strict way (`planio.read_plan`) against the plain way it was read before the
strict reader (orjson.loads, then the plan's dataclasses built by hand, nothing checked), side by side.

The machine this runs on is shared and noisy, so the readers alternate within each round, each read runs in a
fresh process (no heap left over from the previous read), and the result is the ratio strict / plain per round
(its median and range), beside the times. The plain reader is also timed with the garbage collector paused, as the
strict one reads, to show what the pause alone is worth.

    python benchmarks/bench_planio.py                       # plans inventory/roce-16k-railplane first (41 MB)
    python benchmarks/bench_planio.py --plan PATH/plan.json --rounds 7
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
RAILPLANE = ROOT / "inventory" / "roce-16k-railplane" / "cluster.yaml"
READERS = ("plain", "plain-gc-paused", "strict")
TARGET_RATIO = 1.3


def plain_read(path: Path):
    """plan.json as railforge read it before the strict reader: trusted, built by hand."""
    from railforge.plan import model as p

    def device(x: dict) -> p.Device:
        x = dict(x)
        x["ports"] = [p.Port(**port) for port in x["ports"]]
        x["host_subnets"] = [p.HostSubnet(**h) for h in x["host_subnets"]]
        x["rails"] = [p.RailInterface(**r) for r in x["rails"]]
        if x["bond"]:
            b = dict(x["bond"])
            b["members"] = [p.BondMember(**m) for m in b["members"]]
            b["storage_vlan"] = p.VlanInterface(**b["storage_vlan"]) if b["storage_vlan"] else None
            x["bond"] = p.Bond(**b)
        x["bmc"] = p.Bmc(**x["bmc"]) if x["bmc"] else None
        x["topology"] = p.NodeTopology(**x["topology"]) if x["topology"] else None
        return p.Device(**x)

    def link(x: dict) -> p.Link:
        x = dict(x)
        x["a"] = p.Endpoint(**x["a"])
        x["b"] = p.Endpoint(**x["b"])
        return p.Link(**x)

    def slurm(x: dict | None) -> p.SlurmSettings | None:
        if x is None:
            return None
        x = dict(x)
        x["qos"] = [p.SlurmQos(**q) for q in x["qos"]]
        x["partitions"] = [p.SlurmPartition(**q) for q in x["partitions"]]
        x["node"] = p.SlurmNodeHardware(**x["node"])
        return p.SlurmSettings(**x)

    raw = orjson.loads(path.read_bytes())
    cluster = dict(raw["cluster"])
    cluster["tier_summaries"] = [p.TierSummary(**t) for t in cluster["tier_summaries"]]
    return p.Plan(
        cluster=p.ClusterSummary(**cluster),
        qos=p.Qos(**raw["qos"]),
        pools=[p.Pool(**x) for x in raw["pools"]],
        asn_pools=[p.AsnPool(**x) for x in raw["asn_pools"]],
        racks=[p.Rack(**r) for r in raw["racks"]],
        devices=[device(d) for d in raw["devices"]],
        links=[link(x) for x in raw["links"]],
        pod_networks=[p.PodNetwork(**x) for x in raw["pod_networks"]],
        reliability=p.Reliability(**raw["reliability"]),
        tenants=[p.Tenant(**t) for t in raw["tenants"]],
        device_types=[p.DeviceType(**t) for t in raw.get("device_types", [])],
        schema_version=raw["schema_version"],
        twin_parts=dict(raw.get("twin_parts", {})),
        slurm=slurm(raw.get("slurm")),
    )


def one(reader: str, path: Path) -> float:
    """Seconds for one read by `reader`, in this (fresh) process."""
    from railforge.plan.io import read_plan

    if reader == "plain-gc-paused":
        gc.disable()
    start = time.perf_counter()
    plan = read_plan(path) if reader == "strict" else plain_read(path)
    seconds = time.perf_counter() - start
    assert plan.devices and plan.links
    return seconds


def write_plan_of(spec: Path, folder: Path) -> Path:
    from railforge.plan.io import write_plan
    from railforge.planner import build_plan
    from railforge.spec import load_spec

    spec_model, lines = load_spec(spec)
    path = folder / "plan.json"
    with path.open("wb") as fh:
        write_plan(build_plan(spec_model, lines, str(spec)), fh)
    return path


def in_fresh_process(reader: str, path: Path) -> float:
    out = subprocess.run([sys.executable, __file__, "--one", reader, "--plan", str(path)], check=True,
                         capture_output=True, text=True, cwd=ROOT).stdout
    return float(out.strip().splitlines()[-1])


def same_plan(path: Path) -> bool:
    """The strict reader and the plain one give the same plan (the comparison is of equal work)."""
    from railforge.plan.io import read_plan

    return read_plan(path) == plain_read(path)


def run(path: Path, rounds: int) -> dict:
    times: dict[str, list[float]] = {r: [] for r in READERS}
    for i in range(rounds):
        order = READERS if i % 2 == 0 else READERS[::-1]
        for reader in order:
            times[reader].append(in_fresh_process(reader, path))
    ratios = {r: [t / p for t, p in zip(times[r], times["plain"], strict=True)] for r in READERS if r != "plain"}
    return {
        "plan": str(path), "bytes": path.stat().st_size, "rounds": rounds, "same_plan": same_plan(path),
        "seconds": {r: {"median": round(statistics.median(v), 3), "min": round(min(v), 3), "max": round(max(v), 3),
                        "all": [round(x, 3) for x in v]} for r, v in times.items()},
        "ratio_to_plain": {r: {"median": round(statistics.median(v), 2), "min": round(min(v), 2),
                               "max": round(max(v), 2)} for r, v in ratios.items()},
        "target_ratio": TARGET_RATIO,
        "host": {"python": platform.python_version(), "machine": platform.machine()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plan", type=Path, help="an existing plan.json (default: plan roce-16k-railplane first)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--one", choices=READERS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(one(args.one, args.plan))
        return
    with tempfile.TemporaryDirectory(prefix="rf-bench-planio-") as tmp:
        path = args.plan or write_plan_of(RAILPLANE, Path(tmp))
        result = run(path, args.rounds)
    results = ROOT / "benchmarks" / "results"
    results.mkdir(exist_ok=True)
    (results / "planio.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"plan {result['plan']} ({result['bytes']:,} bytes), {args.rounds} rounds, "
          f"same plan from both readers: {result['same_plan']}")
    for reader, s in result["seconds"].items():
        ratio = result["ratio_to_plain"].get(reader)
        shown = f"  x{ratio['median']} of plain (range {ratio['min']}-{ratio['max']})" if ratio else ""
        print(f"{reader:16} median {s['median']:.3f} s  min {s['min']:.3f}  max {s['max']:.3f}{shown}")
    strict = result["ratio_to_plain"]["strict"]["median"]
    verdict = "met" if strict <= TARGET_RATIO else "NOT met"
    print(f"strict / plain median {strict} (target <= {TARGET_RATIO}): {verdict}")


if __name__ == "__main__":
    main()
