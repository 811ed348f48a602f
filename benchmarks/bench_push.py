"""Push-mode benchmark: controller CPU per host per task, `ansible-playbook -c local` over N nodes of a
generated inventory (benchmarks/playbooks/push-tasks.yml, five tasks of site.yml's kinds). With the local
connection the modules run on this machine too, so the figure is controller plus module CPU, an upper bound
for the controller alone.

    python benchmarks/bench_push.py                 # 32 nodes of roce-a800-4nic, 32 and 128 of the 16K example
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PLAYBOOK = ROOT / "benchmarks" / "playbooks" / "push-tasks.yml"
SITE_TASKS_PER_HOST = 79
CASES = (("roce-a800-4nic", 32), ("roce-16k-railplane", 32), ("roce-16k-railplane", 128))


def build(cluster: str, work: Path) -> Path:
    out = work / cluster
    if not out.exists():
        subprocess.run([sys.executable, "-m", "railforge", "build", str(ROOT / "inventory" / cluster / "cluster.yaml"),
                        "--out", str(out), "--only", "inventory"], cwd=ROOT, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return out / "ansible"


def run(inventory: Path, hosts: int, work: Path) -> dict:
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_CACHE_PLUGIN_CONNECTION=str(work / "facts"))
    cmd = ["ansible-playbook", "-i", str(inventory), str(PLAYBOOK), "-c", "local", "--limit", f"nodes[0:{hosts - 1}]",
           "-e", f"ansible_python_interpreter={sys.executable}"]
    before, start = os.times(), time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    wall, after = time.perf_counter() - start, os.times()
    if proc.returncode != 0:
        raise SystemExit(proc.stdout[-3000:] + proc.stderr[-2000:])
    tasks = sum(int(ok) for ok in re.findall(r"^\S+\s+: ok=(\d+)", proc.stdout, re.M))
    cpu = after.children_user - before.children_user + after.children_system - before.children_system
    return {"hosts": hosts, "host_tasks": tasks, "wall_s": round(wall, 1), "cpu_s": round(cpu, 1),
            "ms_cpu_per_host_task": round(1000 * cpu / tasks, 1)}


def main() -> int:
    results = []
    with tempfile.TemporaryDirectory(prefix="rf-bench-push-") as tmp:
        work = Path(tmp)
        for cluster, hosts in CASES:
            r = {"cluster": cluster, **run(build(cluster, work), hosts, work)}
            per_task = r["ms_cpu_per_host_task"] / 1000
            r["site_cpu_hours"] = {str(n): round(n * SITE_TASKS_PER_HOST * per_task / 3600, 1) for n in (2048, 16384)}
            results.append(r)
            print(json.dumps(r), flush=True)
    dest = ROOT / "benchmarks" / "results" / f"push-{time.strftime('%Y%m%d-%H%M%S')}.json"
    dest.parent.mkdir(exist_ok=True)
    dest.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
