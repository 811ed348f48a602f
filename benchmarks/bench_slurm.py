"""Scale benchmark: the Slurm configuration of the 131K-GPU cluster (16,384 nodes) loaded by a real slurmctld.

Builds the benchmark spec (benchmarks/specs/gpu-131k.yaml, or a ladder size) with `slurm: {}` (only the
plan and the slurm family), starts the controller side of tests/helpers/slurm_cluster.py (munge, MariaDB,
slurmdbd, slurmctld: no slurmd, so every node stays unreachable) and measures: the build, slurmctld start-up
until `scontrol ping` answers, `scontrol show topology`, `sinfo` over every node, and the generated files'
sizes. Prints a table and writes JSON under benchmarks/results/. Needs root; run it alone (flock):

    flock /tmp/rf-live.lock python benchmarks/bench_slurm.py              # 131,072 GPUs
    flock /tmp/rf-live.lock python benchmarks/bench_slurm.py --gpus 16384
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bench_build import ladder_spec  # noqa: E402
from tests.helpers.slurm_cluster import SlurmCluster, SlurmClusterConfig  # noqa: E402

CONFIG = SlurmClusterConfig(prefix="rfbench", subnet="10.229.0.0/24", slurmctld_port=29817, slurmd_port=29818,
                            slurmdbd_port=29819, mariadb_port=29306, start_timeout=600)


def timed(cluster: SlurmCluster, *cmd: str) -> tuple[float, str]:
    started = time.monotonic()
    out = cluster.slurm(*cmd, timeout=600).stdout
    return time.monotonic() - started, out


def run(gpus: int, work: Path) -> dict:
    spec = ladder_spec(gpus, work)
    data = yaml.safe_load(spec.read_text())
    data["slurm"] = {}
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    out = work / "out"
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "railforge", "build", str(spec), "--out", str(out), "--only", "slurm"],
                   check=True, cwd=ROOT, capture_output=True)
    build_s = time.monotonic() - started
    slurm_dir = out / "slurm"
    files = {p.name: {"bytes": p.stat().st_size, "lines": len(p.read_text().splitlines())}
             for p in sorted(slurm_dir.iterdir())}
    cluster = SlurmCluster(slurm_dir, work / "cluster", CONFIG)
    try:
        cluster.start(slurmd=False)
        topo_s, topo = timed(cluster, "scontrol", "show", "topology")
        sinfo_s, sinfo = timed(cluster, "sinfo", "-h", "-N", "-o", "%N")
        part_s, _ = timed(cluster, "scontrol", "show", "partition")
    finally:
        cluster.stop()
    switches = [line for line in topo.splitlines() if line.startswith("SwitchName=")]
    nodes = sinfo.split()
    return {
        "gpus": gpus, "nodes": len(set(nodes)), "build_s": round(build_s, 2),
        "slurmctld_start_s": round(cluster.slurmctld_seconds, 2), "show_topology_s": round(topo_s, 3),
        "topology_switches": len(switches), "sinfo_all_nodes_s": round(sinfo_s, 3),
        "show_partition_s": round(part_s, 3), "files": files,
        "host": {"cpus": __import__("os").cpu_count(), "python": platform.python_version(),
                 "slurm": subprocess.run(["slurmctld", "-V"], capture_output=True, text=True).stdout.strip()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=131072)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rf-bench-slurm-") as tmp:
        result = run(args.gpus, Path(tmp))
    results = ROOT / "benchmarks" / "results"
    results.mkdir(exist_ok=True)
    (results / f"slurm-gpu-{args.gpus}.json").write_text(json.dumps(result, indent=2) + "\n")
    for key in ("gpus", "nodes", "build_s", "slurmctld_start_s", "show_topology_s", "topology_switches",
                "sinfo_all_nodes_s", "show_partition_s"):
        print(f"{key:22} {result[key]}")
    for name, f in result["files"].items():
        print(f"{name:22} {f['bytes']:>9} bytes {f['lines']:>6} lines")


if __name__ == "__main__":
    main()
