"""Stage timing for `--timings`, and a rich progress display on a terminal (quiet otherwise)."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

if TYPE_CHECKING:
    from railforge.formats.output import Output


def _status_kib(field: str) -> int:
    try:
        with open("/proc/self/status") as fh:
            return next((int(line.split()[1]) for line in fh if line.startswith(field)), 0)
    except OSError:
        return 0


def reset_peak_rss() -> None:
    """Start this process's peak RSS (VmHWM) afresh at its current RSS (Linux `clear_refs` 5; elsewhere nothing),
    so the peak read after a stage is that stage's own."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        pass


def peak_rss_mib() -> float:
    """This process's peak RSS since it started or since `reset_peak_rss`; 0.0 where /proc has no VmHWM."""
    return round(_status_kib("VmHWM:") / 1024, 1)


def written_cost(out: Output, since: int) -> dict[str, int]:
    """Files and bytes `out` wrote from its `since`-th file on: what one family produced."""
    paths = out.written[since:]
    return {"files": len(paths), "bytes": sum(os.stat(out.path_of(rel)).st_size for rel in paths)}


class StageClock:
    """Wall and CPU seconds per stage; with `measure`, also each stage's peak RSS (the process's peak reset at the
    stage's start) and, for a stage given its Output, the files and bytes it wrote: what each family costs, which
    the scale benchmark prints. Off unless `--timings` asks, as the peak reset costs a little and hides the peak
    before it from other readers of VmHWM."""

    def __init__(self, measure: bool = False) -> None:
        self.stages: dict[str, dict[str, float]] = {}
        self.measure = measure

    @contextmanager
    def stage(self, name: str, out: Output | None = None) -> Iterator[None]:
        if self.measure:
            reset_peak_rss()
        since = len(out.written) if out is not None else 0
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            self.stages[name] = {"wall_s": round(time.perf_counter() - wall, 4),
                                 "cpu_s": round(time.process_time() - cpu, 4)}
            if self.measure:
                self.stages[name]["peak_rss_mib"] = peak_rss_mib()
                if out is not None:
                    self.stages[name].update(written_cost(out, since))

    def report(self) -> dict:
        return {"stages": self.stages}


@contextmanager
def progress_for(steps: list | int) -> Iterator[Callable[[str], None]]:
    """A bar of `steps` (a count, or one per list item) on a terminal; `advance(name)` may be called from any
    thread. No refresh thread of its own (auto_refresh off): parallel rendering forks after the bar starts, and
    a child forked from a threaded process may inherit a held lock."""
    if not sys.stderr.isatty():
        yield lambda name: None
        return
    total = steps if isinstance(steps, int) else len(steps)
    lock = threading.Lock()
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TimeElapsedColumn(), transient=True, auto_refresh=False,
                  console=Console(stderr=True, highlight=False)) as progress:
        task = progress.add_task("rendering", total=total)
        progress.refresh()

        def advance(name: str) -> None:
            with lock:
                progress.update(task, advance=1, description=f"rendered {escape(name)}", refresh=True)

        yield advance


@contextmanager
def status(message: str) -> Iterator[None]:
    """A spinner with `message` on a terminal while a long step (planning) runs; nothing otherwise."""
    if not sys.stderr.isatty():
        yield
        return
    with Console(stderr=True, highlight=False).status(escape(message)):
        yield
