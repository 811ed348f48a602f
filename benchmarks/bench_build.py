"""Scale benchmark: full `railforge build` (cold CLI start) for a ladder of cluster sizes.

Reports wall time, CPU time, peak RSS, milliseconds per switch, what each stage and artifact family costs (wall,
CPU, the peak RSS of the process that ran it, files and bytes written: the build's `--timings`), and the floor
(CPU to write the same files again plainly, in the same run; see write_floor), prints a table and writes JSON
under benchmarks/results/ so runs can be compared.

    ./tasks bench                       # the whole ladder: 1K ... 131K GPUs, plus the 16K rail-plane example
    ./tasks bench --sizes 1024,16384    # a subset (GPU counts)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
BASE_SPEC = ROOT / "benchmarks" / "specs" / "gpu-131k.yaml"
RAILPLANE = ROOT / "inventory" / "roce-16k-railplane" / "cluster.yaml"
LADDER = (1024, 4096, 16384, 32768, 65536, 131072)
FLOOR_RUNS = 3
KEEP_FREE = 40 << 30  # a 131K size writes 12.8 GB: two builds, three floors
RECENTLY_DELETED_S = 360  # how long ext4 without a journal avoids a deleted inode: 60 s, 360 s while its block is dirty
CLEANED = Path(tempfile.gettempdir()) / "railforge-bench.cleaned"  # when a benchmark last emptied its work folder
MANY_FILES = 20_000  # deleting fewer files than this costs the next steps little
TARGETS = {"gpu-131072": {"wall_s": 20.0, "cpu_over_floor": 5.0, "peak_rss_mib": 4096.0, "peak_tree_pss_mib": 4096.0},
           "roce-16k-railplane": {"wall_s": 6.0}}


def ladder_spec(gpus: int, folder: Path) -> Path:
    data = yaml.safe_load(BASE_SPEC.read_text())
    per_su = data["scalable_units"]["nodes_per_su"] * data["node"]["gpus"]
    data["name"] = f"gpu-{gpus}"
    data["scalable_units"]["count"] = gpus // per_su
    path = folder / f"gpu-{gpus}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def family_sizes(out: Path) -> dict[str, dict[str, int]]:
    sizes: dict[str, dict[str, int]] = {}
    for entry in sorted(out.iterdir()):
        files = [entry] if entry.is_file() else [p for p in entry.rglob("*") if p.is_file()]
        sizes[entry.name] = {"files": len(files), "bytes": sum(p.stat().st_size for p in files)}
    return sizes


def _tree(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as fh:
                    todo.extend(int(c) for c in fh.read().split())
        except OSError:
            continue
    return out


def _proc_kib(pid: int, file: str, field: str) -> int:
    """A kB figure of /proc/<pid>/<file> (e.g. smaps_rollup Pss:, status VmHWM:); 0 once the process is gone."""
    try:
        with open(f"/proc/{pid}/{file}") as fh:
            return next(int(line.split()[1]) for line in fh if line.startswith(field))
    except (OSError, StopIteration):
        return 0


class TreeMemory(threading.Thread):
    """The CLI process's own peak RSS (VmHWM, which starts afresh at exec: wait4's ru_maxrss would also count the
    pages the child shared with this benchmark process between fork and exec, and this process grows with the
    ladder) and, with `pss`, the peak of the summed proportional set size (PSS) of the build and its workers.
    PSS makes the kernel walk every page table of every process each time (`smaps_rollup`); sampled every 0.1 s
    during a 131K build, that cost 2 s of its wall time (23.0-23.4 s against 20.7-21.7 s), so timed runs do
    not sample it: `run_one` measures PSS in a second, untimed build."""

    def __init__(self, pid: int, pss: bool):
        super().__init__(daemon=True)
        self.pid, self.pss, self.peak_kib, self.hwm_kib, self.running = pid, pss, 0, 0, True

    def run(self) -> None:
        while self.running:
            if self.pss:
                self.peak_kib = max(self.peak_kib, sum(_proc_kib(p, "smaps_rollup", "Pss:")
                                                       for p in _tree(self.pid)))
            self.hwm_kib = max(self.hwm_kib, _proc_kib(self.pid, "status", "VmHWM:"))
            time.sleep(0.1)


def settle() -> None:
    """Start every measured step from the same kernel state: dirty pages written back and, where allowed (root),
    the page, dentry and inode caches dropped, so no step pays for writing back what an earlier one left.

    Nothing is deleted between measured steps either (each writes a folder of its own; the work folder is emptied
    between sizes only when the disk runs short): on ext4 without a journal, as here, every inode allocation first
    skips the free inodes deleted in the last 60-360 s (`recently_deleted` in fs/ext4/ialloc.c, seen with perf),
    and deleting a 131K build's 51,238 files before a step added 1-1.5 s of system CPU to a build (measured,
    `--jobs 2`, four builds) and up to 6 s without a cache drop."""
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as fh:
            fh.write("3\n")
    except OSError:
        pass


def journalless_ext4(path: Path) -> bool:
    """True when `path` lies on ext4 without a journal, where recent deletions cost file creation (see settle)."""
    try:
        with open("/proc/self/mountinfo") as fh:
            mounts = [line.split() for line in fh]
        where = str(path.resolve())
        fields = max((f for f in mounts if where == f[4] or where.startswith(f[4].rstrip("/") + "/")),
                     key=lambda f: len(f[4]))
        fstype, source = fields[fields.index("-") + 1:fields.index("-") + 3]
        if fstype != "ext4":
            return False
        return Path(f"/sys/fs/ext4/{Path(source).name}/journal_task").read_text().strip() == "<none>"
    except (OSError, ValueError):
        return False


def last_cleanup() -> tuple[float, int]:
    """(when, how many files) a benchmark last deleted with its work folder; (0, 0) when unknown."""
    try:
        return CLEANED.stat().st_mtime, int(CLEANED.read_text().strip() or 0)
    except (OSError, ValueError):
        return 0.0, 0


def wait_out_deletions(folder: Path, since: float) -> None:
    """Sleep until RECENTLY_DELETED_S after a mass deletion at `since` (a previous benchmark's clean-up), when
    `folder` is on ext4 without a journal: otherwise the first steps measured pay for it."""
    left = since + RECENTLY_DELETED_S - time.time()
    if left > 0 and journalless_ext4(folder):
        print(f"waiting {left:.0f} s: files were deleted {time.time() - since:.0f} s ago on this ext4 without a "
              "journal, which charges creating files for it for up to 6 minutes (see settle)", flush=True)
        time.sleep(left)


def python_speed() -> float:
    """CPU seconds of a fixed pure-Python workload (string formatting, dict and tuple work, like a renderer's):
    comparing it between runs tells a slower machine from a slower build. 2026-11-23 on this VM: 3.0-3.2 s."""
    start = time.process_time()
    table: dict[str, tuple] = {}
    for i in range(1_500_000):
        key = f"su{i % 997:03d}-leaf{i % 8}|Ethernet{i % 128}"
        table[key] = (i, key.upper(), i * 0.5)
        if len(table) > 50_000:
            table.clear()
    return round(time.process_time() - start, 3)


def write_floor(out: Path, work: Path, runs: int = FLOOR_RUNS) -> dict:
    """CPU and wall to write the build's files again, same folders, names and bytes, one plain
    open/write/close each: what any tool must at least pay to produce this output. Written `runs` times, each
    into a folder of its own (nothing is deleted between measured steps: see `settle`) from a settled kernel,
    and the median kept: one write's CPU moves by ±25% between runs on this VM."""
    files = [(p.relative_to(out), p.read_bytes()) for p in sorted(out.rglob("*")) if p.is_file()]
    walls, cpus = [], []
    for run in range(1, runs + 1):
        dest = work / f"{out.name}.floor-{run}"
        settle()
        before, start = os.times(), time.perf_counter()
        made: set[Path] = set()
        for rel, data in files:
            parent = dest / rel.parent
            if parent not in made:
                parent.mkdir(parents=True, exist_ok=True)
                made.add(parent)
            with open(dest / rel, "wb") as fh:
                fh.write(data)
        after = os.times()
        walls.append(time.perf_counter() - start)
        cpus.append((after.user - before.user) + (after.system - before.system))
    return {"files": len(files), "bytes": sum(len(d) for _, d in files), "wall_s": round(statistics.median(walls), 3),
            "cpu_s": round(statistics.median(cpus), 3), "cpu_runs_s": [round(c, 3) for c in cpus]}


def build(name: str, cmd: list[str], pss: bool) -> tuple[float, os.struct_rusage, TreeMemory]:
    """One `railforge build` from a settled kernel: (wall seconds, its rusage, its memory samples)."""
    settle()
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    memory = TreeMemory(proc.pid, pss)
    memory.start()
    _, status, usage = os.wait4(proc.pid, 0)
    memory.running = False
    memory.join()
    wall = time.perf_counter() - start
    stderr = proc.stderr.read().decode() if proc.stderr else ""
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{name}: railforge build failed ({proc.returncode}):\n{stderr}")
    return wall, usage, memory


def run_one(name: str, spec: Path, work: Path, jobs: int | None = None) -> dict:
    out = work / name
    timings = work / f"{name}.timings.json"
    cmd = [sys.executable, "-m", "railforge", "build", str(spec), "--out", str(out), "--timings", str(timings)]
    if jobs:
        cmd += ["--jobs", str(jobs)]
    memory_cmd = [*cmd[:cmd.index("--out") + 1], str(work / f"{name}.memory"), *cmd[cmd.index("--out") + 2:]]
    _, _, pss = build(name, memory_cmd, pss=True)
    wall, usage, memory = build(name, cmd, pss=False)  # from nothing too, as the first: no plan to compare with
    stages = json.loads(timings.read_text())["stages"]
    plan = json.loads((out / "plan.json").read_bytes())
    switches = sum(1 for d in plan["devices"] if d["role"] not in ("node", "ufm", "mgmt"))
    result = {
        "name": name,
        "gpus": plan["cluster"]["gpus"],
        "devices": len(plan["devices"]),
        "switches": switches,
        "links": len(plan["links"]),
        "wall_s": round(wall, 3),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
        # the largest process: the build resets its peak at each stage to measure the stage's own (see StageClock),
        # so the sampled VmHWM can miss a peak between samples that the stages' figures hold
        "peak_rss_mib": max(round(memory.hwm_kib / 1024, 1), *(s.get("peak_rss_mib", 0.0) for s in stages.values())),
        "peak_tree_pss_mib": round(pss.peak_kib / 1024, 1),
        "ms_per_switch": round(1000 * wall / switches, 3),
        "stages": stages,
        "artifacts": family_sizes(out),
        "floor": write_floor(out, work),
        "python_speed_s": python_speed(),
    }
    result["cpu_over_floor"] = round(result["cpu_s"] / max(result["floor"]["cpu_s"], 1e-3), 2)
    del plan
    return result


def measure(name: str, spec: Path, work: Path, jobs: int | None, wait: bool) -> dict:
    """`run_one`, printed; the work folder is emptied first when the disk runs short."""
    if shutil.disk_usage(work).free < KEEP_FREE:
        print(f"less than {KEEP_FREE >> 30} GiB free: emptying the work folder")
        for entry in work.iterdir():
            if entry.is_dir():
                shutil.rmtree(entry)
        if wait:
            wait_out_deletions(work, time.time())
    r = run_one(name, spec, work, jobs)
    print(f"{name:>20}  {r['gpus']:>7} GPUs  {r['switches']:>6} switches  {r['links']:>7} links  "
          f"wall {r['wall_s']:>7.2f} s  cpu {r['cpu_s']:>7.2f} s  rss {r['peak_rss_mib']:>7.1f} MiB  "
          f"all workers {r['peak_tree_pss_mib']:>7.1f} MiB  "
          f"{r['ms_per_switch']:>6.2f} ms/switch", flush=True)
    f = r["floor"]
    print(f"{'':>22}floor: writing the same {f['files']} files ({f['bytes'] / 2**20:.1f} MiB) plainly: "
          f"wall {f['wall_s']:.2f} s  cpu {f['cpu_s']:.2f} s "
          f"(median of {' / '.join(map(str, f['cpu_runs_s']))});  "
          f"build cpu / floor cpu = {r['cpu_over_floor']:.2f};  python speed probe {r['python_speed_s']:.2f} s")
    for stage, t in r["stages"].items():
        wrote = f"  {t['files']:>6} files {t['bytes'] / 2**20:>8.1f} MiB" if "files" in t else ""
        print(f"{'':>22}{stage:<14} wall {t['wall_s']:>7.2f} s  cpu {t['cpu_s']:>7.2f} s  "
              f"peak rss {t.get('peak_rss_mib', 0.0):>7.1f} MiB{wrote}")
    return r


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", help="comma-separated GPU counts from the ladder", default=None)
    parser.add_argument("--no-railplane", action="store_true", help="skip the bundled 16K rail-plane example")
    parser.add_argument("--jobs", type=int, default=None, help="pass --jobs to railforge build (default: its own)")
    parser.add_argument("--results", type=Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument("--no-wait", action="store_true",
                        help="do not wait out a recent mass deletion on ext4 without a journal (see settle)")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else list(LADDER)
    results = []
    if not args.no_wait and last_cleanup()[1] >= MANY_FILES:
        wait_out_deletions(CLEANED.parent, last_cleanup()[0])
    try:
        with tempfile.TemporaryDirectory(prefix="railforge-bench-") as tmp:
            work = Path(tmp)
            runs = [] if args.no_railplane else [("roce-16k-railplane", RAILPLANE)]
            runs += [(f"gpu-{g}", ladder_spec(g, work)) for g in sizes]
            for name, spec in runs:
                results.append(measure(name, spec, work, args.jobs, wait=not args.no_wait))
    finally:  # what the clean-up deleted: two builds and three floors per size
        CLEANED.write_text(f"{5 * sum(r['floor']['files'] for r in results)}\n")
    verdicts = []
    for r in results:
        for key, limit in TARGETS.get(r["name"], {}).items():
            ok = r[key] <= limit
            verdicts.append({"run": r["name"], "metric": key, "value": r[key], "limit": limit, "ok": ok})
            print(f"target {r['name']} {key} {r[key]} <= {limit}: {'met' if ok else 'MISSED'}")
    if len(results) > 2:
        ladder = [r for r in results if r["name"].startswith("gpu-")]
        for a, b in zip(ladder, ladder[1:], strict=False):
            growth = (b["cpu_s"] / a["cpu_s"]) / (b["gpus"] / a["gpus"])
            print(f"scaling {a['gpus']}->{b['gpus']} GPUs: CPU grew {growth:.2f}x the size ratio (1.00 = linear)")
    args.results.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    path = args.results / f"bench-{stamp}.json"
    path.write_text(json.dumps({"machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                                            "platform": platform.platform()},
                                "results": results, "targets": verdicts}, indent=1) + "\n")
    print(f"wrote {path}")
    return 0 if all(v["ok"] for v in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
