"""Render artifact families in forked worker processes that share the finished plan copy-on-write.

Every family writes its own files into the one staging folder, so the output is byte-identical to a
serial build; per-switch families are split further into shards of switches."""

from __future__ import annotations

import gc
import multiprocessing
import signal
import time
from concurrent.futures import FIRST_EXCEPTION, ProcessPoolExecutor, wait
from dataclasses import dataclass

from topology.output import Output
from topology.plan import Plan
from topology.render import Family

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
    seconds: dict[str, tuple[float, float]]  # family -> (wall, cpu)


def _leave_sigint_to_parent() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


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
    seconds = {}
    for name in job.families:
        wall, cpu = time.perf_counter(), time.process_time()
        _handoff["families"][name].render(plan, out)
        seconds[name] = (time.perf_counter() - wall, time.process_time() - cpu)
    return JobResult(job, out.written, seconds)


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


def render_parallel(plan: Plan, families: list[Family], output: Output, workers: int) -> dict[str, dict]:
    """Run every family; returns {family: {"wall_s", "cpu_s"}} summed over its shards."""
    _handoff.update(plan=plan, families={f.name: f for f in families}, output=output,
                    order={d.name: i for i, d in enumerate(plan.devices)})
    gc.freeze()
    stages: dict[str, dict] = {}
    try:
        ctx = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_leave_sigint_to_parent) as pool:
            futures = [pool.submit(_run, job) for job in jobs_for(families, workers)]
            done, _ = wait(futures, return_when=FIRST_EXCEPTION)
            for fut in futures:
                if fut in done and fut.exception() is not None:
                    for other in futures:
                        other.cancel()
                    raise fut.exception()
            for fut in futures:
                r = fut.result()
                output.written.extend(r.written)
                for name, (wall, cpu) in r.seconds.items():
                    s = stages.setdefault(name, {"wall_s": 0.0, "cpu_s": 0.0})
                    s["wall_s"] = round(max(s["wall_s"], wall), 4)
                    s["cpu_s"] = round(s["cpu_s"] + cpu, 4)
    finally:
        _handoff.clear()
        gc.unfreeze()
    return stages
