"""Ansible inventory benchmark: how long Ansible takes to load a generated inventory, before any task.

For each cluster it runs `railforge build --only inventory`, then, in the same run, times
`ansible-inventory --list` and `ansible-playbook playbooks/site.yml --list-hosts` (wall and CPU seconds of
the Ansible process) on

  - `host_vars`: the layout railforge writes (groups-only hosts.yml, host_vars/<host>.json, group_vars/all
    split by topic), from the repository root and from a foreign folder (no ansible.cfg);
  - `per-su`: the layout railforge wrote before (each SU's nodes with their vars inline in nodes/suNNN.yml,
    one group_vars file), rebuilt here from the same data, with Ansible's default inventory plugins
    (ansible.cfg had no `enable_plugins` then).

Both layouts must give the same `ansible-inventory --list` output (checked), and no run may print a warning.
It also reports the cost of writing each layout (files, wall and CPU seconds).

    python benchmarks/bench_ansible.py                          # the 16K-GPU example
    python benchmarks/bench_ansible.py --sizes 131072 --no-railplane --no-per-su
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.bench_build import RAILPLANE, ladder_spec  # noqa: E402
from railforge.formats.yamlout import dumps

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "playbooks" / "site.yml"
DEFAULT_PLUGINS = "host_list,script,auto,yaml,ini,toml"
TARGETS = {"list_hosts": 20.0, "list": 5.0}


def run_ansible(cmd: list[str], cwd: Path, env: dict[str, str]) -> dict:
    """Wall and CPU seconds of one Ansible command (its own and its children's CPU)."""
    before, start = os.times(), time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True)
    wall, after = time.perf_counter() - start, os.times()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr.decode()[-3000:]}")
    cpu = after.children_user - before.children_user + after.children_system - before.children_system
    result = {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "stdout": proc.stdout, "stderr": proc.stderr.decode()}
    warnings = [line for line in result["stderr"].splitlines() if "WARNING" in line or "ERROR" in line]
    if warnings:
        raise SystemExit(f"{' '.join(cmd)} printed warnings:\n" + "\n".join(warnings[:20]))
    return result


def per_su_layout(new: Path, dest: Path) -> dict:
    """The layout railforge wrote before this one, from the same hosts and vars; returns its write cost."""
    start, cpu = time.perf_counter(), time.process_time()
    hosts = yaml.load((new / "hosts.yml").read_text(), Loader=yaml.CSafeLoader)
    groups = hosts["all"]["children"]
    hv_dir = new / "host_vars"
    su_files: dict[str, dict] = {}
    for name in list(groups):
        members = groups[name].get("hosts") or {}
        if name.startswith("su") and name[2:].isdigit():
            su_files[name] = {name: {"hosts": {h: json.loads((hv_dir / f"{h}.json").read_text()) for h in members}}}
            del groups[name]
        else:
            for h in members:
                if (hv_dir / f"{h}.json").exists():
                    members[h] = json.loads((hv_dir / f"{h}.json").read_text())
    combined: dict = {}
    for part in sorted((new / "group_vars" / "all").iterdir()):
        combined.update(yaml.safe_load(part.read_text()))
    start, cpu = time.perf_counter(), time.process_time()
    (dest / "nodes").mkdir(parents=True)
    (dest / "group_vars" / "all").mkdir(parents=True)
    (dest / "hosts.yml").write_text(dumps(hosts))
    (dest / "group_vars" / "all" / "railforge.yml").write_text(dumps(combined))
    for su, data in su_files.items():
        (dest / "nodes" / f"{su}.yml").write_text(dumps({"all": {"children": data}}))
    return {"files": 2 + len(su_files), "wall_s": round(time.perf_counter() - start, 2),
            "cpu_s": round(time.process_time() - cpu, 2)}


def normalised(listing: bytes) -> dict:
    data = json.loads(listing)
    for group in data.values():
        if isinstance(group, dict):
            for key in ("hosts", "children"):
                if key in group:
                    group[key] = sorted(group[key])
    return data


def bench_cluster(name: str, spec: Path, work: Path, per_su: bool) -> dict:
    out = work / name
    timings = work / f"{name}.timings.json"
    subprocess.run([sys.executable, "-m", "railforge", "build", str(spec), "--out", str(out), "--only", "inventory",
                    "--timings", str(timings)], cwd=ROOT, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    new = out / "ansible"
    stage = json.loads(timings.read_text())["stages"]["inventory"]
    files = sum(1 for p in new.rglob("*") if p.is_file())
    legacy = work / f"{name}-per-su"
    legacy_cost = per_su_layout(new, legacy)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env |= {"ANSIBLE_NOCOLOR": "1", "ANSIBLE_CACHE_PLUGIN_CONNECTION": str(work / "facts")}
    foreign = work / "elsewhere"
    foreign.mkdir(exist_ok=True)
    foreign_env = env | {"ANSIBLE_ROLES_PATH": str(ROOT / "roles"), "ANSIBLE_CONFIG": str(foreign / "none.cfg")}
    legacy_env = env | {"ANSIBLE_INVENTORY_ENABLED": DEFAULT_PLUGINS}

    runs: dict[str, dict] = {}
    listings: dict[str, dict] = {}
    cases = [("host_vars", new, ROOT, env), ("host_vars, foreign folder", new, foreign, foreign_env)]
    if per_su:
        cases.append(("per-su", legacy, ROOT, legacy_env))
    for label, inv, cwd, e in cases:
        r = {}
        listed = run_ansible(["ansible-inventory", "-i", str(inv), "--list"], cwd, e)
        listings[label] = normalised(listed.pop("stdout"))
        r["list"] = {k: v for k, v in listed.items() if k != "stderr"}
        hosts_run = run_ansible(["ansible-playbook", "-i", str(inv), str(SITE), "--list-hosts"], cwd, e)
        r["list_hosts"] = {k: v for k, v in hosts_run.items() if k not in ("stderr", "stdout")}
        runs[label] = r
        print(f"  {name} {label}: " + ", ".join(f"{k} {v['wall_s']} s wall {v['cpu_s']} s CPU" for k, v in r.items()),
              flush=True)
    first = listings["host_vars"]
    for label, listing in listings.items():
        if listing != first:
            raise SystemExit(f"{name}: ansible-inventory --list differs between host_vars and {label}")
    hosts = len(first["_meta"]["hostvars"])
    return {"name": name, "hosts": hosts,
            "build": {"host_vars": {"files": files, "wall_s": stage["wall_s"], "cpu_s": stage["cpu_s"]},
                      "per-su": legacy_cost},
            "runs": runs}


def ratios(result: dict) -> dict:
    if "per-su" not in result["runs"]:
        return {}
    base, new = result["runs"]["per-su"], result["runs"]["host_vars"]
    return {kind: {"wall": round(base[kind]["wall_s"] / new[kind]["wall_s"], 1),
                   "cpu": round(base[kind]["cpu_s"] / new[kind]["cpu_s"], 1)}
            for kind in ("list", "list_hosts")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="", help="comma-separated GPU counts from benchmarks/specs/gpu-131k.yaml")
    ap.add_argument("--no-railplane", action="store_true", help="skip the bundled 16K rail-plane example")
    ap.add_argument("--no-per-su", action="store_true",
                    help="skip the old layout (about 20 CPU-minutes per command at 131K GPUs)")
    args = ap.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="rf-bench-ansible-") as tmp:
        work = Path(tmp)
        clusters = [] if args.no_railplane else [("roce-16k-railplane", RAILPLANE)]
        clusters += [(f"gpu-{g}", ladder_spec(int(g), work)) for g in args.sizes.split(",") if g]
        for name, spec in clusters:
            r = bench_cluster(name, spec, work, not args.no_per_su)
            r["ratios"] = ratios(r)
            results.append(r)
            print(f"{name}: {r['hosts']} hosts; old/new: {json.dumps(r['ratios'])}; build {json.dumps(r['build'])}",
                  flush=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    dest = ROOT / "benchmarks" / "results" / f"ansible-{stamp}.json"
    dest.parent.mkdir(exist_ok=True)
    dest.write_text(json.dumps({"machine": platform.node(), "cpus": os.cpu_count(), "results": results}, indent=1))
    print(f"wrote {dest}")
    missed = [f"{r['name']} {k} {v['cpu']}x < {TARGETS[k]}x" for r in results if r["name"] == "roce-16k-railplane"
              for k, v in r["ratios"].items() if v["cpu"] < TARGETS[k]]
    for m in missed:
        print(f"target missed: {m}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
