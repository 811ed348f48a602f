"""The parallel renderer: the parent renders beside its forked children, and a failure anywhere ends the build
with that failure, leaving no child behind."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from railforge.cli.parallel import WorkerFailed, jobs_for, render_parallel
from railforge.formats.output import Output
from railforge.plan.model import Plan
from railforge.planner import build_plan
from railforge.render import Family
from railforge.spec import load_spec

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "tests" / "specs" / "tiny-roce.yaml"


@pytest.fixture(scope="module")
def plan() -> Plan:
    spec, lines = load_spec(TINY)
    return build_plan(spec, lines, str(TINY))


def _writer(name: str):
    def render(plan: Plan, out: Output) -> None:
        out.write_text(f"{name}.txt", f"{name} {os.getpid()}\n")
    return render


def _all_children_of(pid: int) -> set[str]:
    tasks = Path(f"/proc/{pid}/task")
    return {c for t in tasks.iterdir() for c in (t / "children").read_text().split()}


@pytest.fixture(autouse=True)
def _earlier_children():
    """Children this process had before the test (servers of session fixtures of other test modules, alive
    until the session ends): not the render workers this module checks for."""
    return _all_children_of(os.getpid())


def _children_of(pid: int, before: set[str] | None = None) -> list[str]:
    return sorted(_all_children_of(pid) - (before or set()))


@pytest.mark.parametrize("workers", [2, 3])
def test_parent_and_children_render_and_every_file_is_reported(plan: Plan, tmp_path: Path, workers: int,
                                                               _earlier_children: set[str]) -> None:
    def slow(name: str):
        def render(plan: Plan, out: Output) -> None:
            time.sleep(0.5)
            _writer(name)(plan, out)
        return render

    fams = [Family(f"f{i}", "", slow(f"f{i}")) for i in range(4)]
    out = Output(tmp_path / "out")
    stages = render_parallel(plan, fams, out, workers)
    out.commit()
    assert sorted(stages) == ["f0", "f1", "f2", "f3"]
    assert out.written == [f"f{i}.txt" for i in range(4)]  # in job order, whoever wrote them
    pids = {(tmp_path / "out" / f"f{i}.txt").read_text().split()[1] for i in range(4)}
    assert str(os.getpid()) in pids and 2 <= len(pids) <= workers, pids
    assert _children_of(os.getpid(), _earlier_children) == []


def _unpicklable() -> Exception:
    class Local(Exception):  # defined in a function: pickle cannot find it by name
        pass

    return Local("disk on fire")


def _sigkill() -> None:
    os.kill(os.getpid(), signal.SIGKILL)  # what the kernel's OOM killer does


@pytest.mark.parametrize(("failure", "raised", "message"), [
    (lambda: ValueError("boom in a child"), ValueError, "boom in a child"),
    (_unpicklable, WorkerFailed, "Local: disk on fire"),
    (_sigkill, WorkerFailed, "killed by signal 9"),
], ids=["exception", "unpicklable-exception", "sigkill"])
def test_a_childs_failure_is_raised_in_the_parent(plan: Plan, tmp_path: Path, failure, raised, message,
                                                  _earlier_children: set[str]) -> None:
    parent = os.getpid()

    def fails_in_child(plan: Plan, out: Output) -> None:
        if os.getpid() != parent:
            raise failure()
        time.sleep(2)  # the parent holds one job while the child takes the other

    fams = [Family("a", "", fails_in_child, weight=2), Family("b", "", fails_in_child)]
    out = Output(tmp_path / "out")
    with pytest.raises(raised, match=message):
        render_parallel(plan, fams, out, 2)
    out.abort()
    assert _children_of(parent, _earlier_children) == []


def test_a_parent_failure_kills_the_children(plan: Plan, tmp_path: Path, _earlier_children: set[str]) -> None:
    parent = os.getpid()

    def render(plan: Plan, out: Output) -> None:
        if os.getpid() == parent:
            time.sleep(0.3)
            raise RuntimeError("parent failed")
        time.sleep(60)  # a child that would outlive the build if it were not killed

    fams = [Family("a", "", render, weight=2), Family("b", "", render)]
    out = Output(tmp_path / "out")
    start = time.monotonic()
    with pytest.raises(RuntimeError, match="parent failed"):
        render_parallel(plan, fams, out, 2)
    out.abort()
    assert time.monotonic() - start < 30
    assert _children_of(parent, _earlier_children) == []


def test_jobs_start_with_the_heaviest_and_shard_shardable_families() -> None:
    fams = [Family("light", "", _writer("light")), Family("sharded", "", _writer("s"), shardable=True, weight=8),
            Family("heavy", "", _writer("heavy"), weight=5)]
    jobs = jobs_for(fams, 2)
    assert [(j.families, j.shard, j.shards) for j in jobs] == [
        (("heavy",), 0, 1), (("sharded",), 0, 2), (("sharded",), 1, 2), (("light",), 0, 1)]
