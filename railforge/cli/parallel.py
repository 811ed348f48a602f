"""Render artifact families in forked worker processes that share the finished plan copy-on-write.

Every family writes its own files into the one staging folder, so the output is byte-identical to a
serial build; per-switch families are split further into shards of switches.

The parent process is one of the workers: `--jobs N` forks N-1 children, and every process takes the next job from
a shared pipe of job numbers until none is left. Written with os.fork rather than ProcessPoolExecutor because the
pool leaves its parent idle, so every worker is a child, and each child copies every page of the plan that it reads
(reading a Python object writes its reference count): with the parent working, the pages it touches after a child
are its own again and are not copied a second time (131K GPUs, `--jobs 2`: 0.96-0.98 M -> 0.87 M minor faults,
8.2-8.9 s -> 7.2 s of system CPU, peak PSS of all processes 2.1 -> 1.6 GiB).
A child reports the files it wrote and its timings, or its exception, through a pipe; the first failure stops
every process from taking further jobs, and the parent kills its children when it fails or is interrupted."""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import pickle
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass

from railforge.cli.progress import StageClock
from railforge.formats.output import Output
from railforge.plan.model import Plan
from railforge.render import Family

_handoff: dict = {}


@dataclass(frozen=True)
class Job:
    families: tuple[str, ...]
    shard: int
    shards: int
    weight: float


@dataclass
class JobResult:
    job: Job
    written: list[str]
    stages: dict[str, dict[str, float]]  # family -> its StageClock figures in this job


class WorkerFailed(RuntimeError):
    """A child failed in a way that could not be sent back as itself: an exception pickle cannot carry, or an end
    without a report (killed by a signal, a crash)."""


def _run(job: Job) -> JobResult:
    plan: Plan = _handoff["plan"]
    parent: Output = _handoff["output"]
    select = parent.selects
    if job.shards > 1:
        order = _handoff["order"]
        base = parent.selects

        def select(name: str) -> bool:
            return order.get(name, 0) % job.shards == job.shard and base(name)

    out = parent.worker(select)
    clock = StageClock(_handoff["measure"])
    for name in job.families:
        with clock.stage(name, out):
            _handoff["families"][name].render(plan, out)
    return JobResult(job, out.written, clock.stages)


def _dispenser(n: int) -> int:
    """The read end of a pipe that holds job numbers 0..n-1 and no writer: each process reads the next number (a
    4-byte read from a pipe takes one whole record) and end of file means no job is left. Unlike a shared counter
    behind a lock, nothing is held that a process killed at any moment would keep from the others."""
    read, write = os.pipe()
    try:
        os.write(write, b"".join(k.to_bytes(4, "little") for k in range(n)))  # ~20 jobs: far below a pipe's 64 KiB
    finally:
        os.close(write)
    return read


def _take(jobs: list[Job], dispenser: int, done: int | None = None) -> list[JobResult]:
    """Run the next job from `dispenser` until there is none; on failure, leave none for the others. Each finished
    job writes its number to `done`, which the parent's progress display reads."""
    results = []
    while record := os.read(dispenser, 4):
        try:
            results.append(_run(jobs[int.from_bytes(record, "little")]))
            if done is not None:
                os.write(done, record)
        except BaseException:
            while os.read(dispenser, 1 << 16):
                pass
            raise
    return results


PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int) -> None:
    """Have the kernel SIGKILL this process when its parent dies (Linux prctl PR_SET_PDEATHSIG), so a killed
    build leaves no worker writing into a staging folder; if the parent is already gone, exit now."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # pragma: no cover - not Linux: the parent's pipe check below remains
        pass
    if os.getppid() != parent:
        os._exit(1)


def _child(jobs: list[Job], dispenser: int, fd: int, parent: int, done: int | None = None) -> None:
    """A forked worker: run jobs, send ("ok", results) or ("error", exception) through `fd`, never return."""
    status = 0
    try:
        die_with_parent(parent)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
        payload = pickle.dumps(("ok", _take(jobs, dispenser, done)))
    except BaseException as exc:  # noqa: BLE001 - every failure goes back to the parent
        status = 1
        try:
            payload = pickle.dumps(("error", exc))
        except Exception:  # noqa: BLE001
            payload = pickle.dumps(("error", WorkerFailed(f"{type(exc).__name__}: {exc}")))
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
    finally:
        os._exit(status)


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def _result(data: bytes, status: int) -> list[JobResult]:
    """A child's report: its results, or its exception raised here."""
    try:
        kind, value = pickle.loads(data)
    except Exception:  # noqa: BLE001 - a child that died before reporting (the kernel's OOM killer, a crash)
        how = (f"killed by signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status)
               else f"exit status {os.waitstatus_to_exitcode(status)}")
        raise WorkerFailed(f"a render worker ended without reporting a result ({how})") from None
    if kind == "error":
        raise value
    return value


def jobs_for(families: list[Family], workers: int) -> list[Job]:
    """One job per family, per shard of a shardable family, and per group of families sharing a view; the
    heaviest first (ties keep the families' order)."""
    groups: dict[str, list[Family]] = {}
    for fam in families:
        groups.setdefault(fam.shares or fam.name, []).append(fam)
    jobs: list[Job] = []
    for group in groups.values():
        shards = workers if len(group) == 1 and group[0].shardable and workers > 1 else 1
        names, weight = tuple(f.name for f in group), sum(f.weight for f in group)
        jobs.extend(Job(names, k, shards, weight / shards) for k in range(shards))
    return sorted(jobs, key=lambda j: -j.weight)


def _end(pid: int, fd: int) -> None:
    """Kill and reap a child that has not reported, and close its pipe."""
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(OSError):
        os.close(fd)
    with contextlib.suppress(OSError):
        os.waitpid(pid, 0)


def _report_done(jobs: list[Job], done_read: int, on_done: Callable[[str], None]) -> threading.Thread:
    """A thread, started after the forks (a child forked from a threaded parent may inherit a held lock), that
    passes each finished job's family names to `on_done` until every writer has closed the pipe."""

    def loop() -> None:
        while record := os.read(done_read, 4):
            on_done("+".join(jobs[int.from_bytes(record, "little")].families))

    thread = threading.Thread(target=loop, name="railforge-progress", daemon=True)
    thread.start()
    return thread


def render_parallel(plan: Plan, families: list[Family], output: Output, workers: int,
                    on_done: Callable[[str], None] | None = None, measure: bool = False) -> dict[str, dict]:
    """Run every family in this process and `workers - 1` forked children; returns {family: {"wall_s", "cpu_s"}}
    over its shards (the longest wall, the summed CPU; with `measure` also the highest peak RSS and the summed
    files and bytes: see StageClock). `on_done(families)` is called in this process, from a thread, as each job ends."""
    jobs = jobs_for(families, workers)
    _handoff.update(plan=plan, families={f.name: f for f in families}, output=output,
                    order={d.name: i for i, d in enumerate(plan.devices)}, measure=measure)
    dispenser = _dispenser(len(jobs))
    done_read, done_write = os.pipe() if on_done is not None else (None, None)
    reporter = None
    children: list[tuple[int, int]] = []
    gc.freeze()
    try:
        parent = os.getpid()
        for _ in range(workers - 1):
            read, write = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(read)
                if done_read is not None:
                    os.close(done_read)
                _child(jobs, dispenser, write, parent, done_write)
            os.close(write)
            children.append((pid, read))
        if done_read is not None and on_done is not None:
            reporter = _report_done(jobs, done_read, on_done)
        results = _take(jobs, dispenser, done_write)
        while children:
            pid, read = children[0]  # a child stays listed, to be killed on failure, until its pipe is read
            data = _read_all(read)
            os.close(read)
            children.pop(0)
            results += _result(data, os.waitpid(pid, 0)[1])
    except BaseException:
        for pid, read in children:
            _end(pid, read)
        raise
    finally:
        os.close(dispenser)
        if done_write is not None:
            os.close(done_write)  # the children's copies closed when they ended: the reporter sees end of file
        if reporter is not None:
            reporter.join(timeout=5)
        if done_read is not None:
            os.close(done_read)
        _handoff.clear()
        gc.unfreeze()
    stages: dict[str, dict] = {}
    for r in sorted(results, key=lambda r: jobs.index(r.job)):
        output.written.extend(r.written)
        for name, figures in r.stages.items():
            s = stages.setdefault(name, dict.fromkeys(figures, 0))
            for key, value in figures.items():
                s[key] = round(max(s[key], value) if key in ("wall_s", "peak_rss_mib") else s[key] + value, 4)
    return stages
