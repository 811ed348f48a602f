"""Stage timing for `--timings`, and a rich progress display on a terminal (quiet otherwise)."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn


class StageClock:
    def __init__(self) -> None:
        self.stages: dict[str, dict[str, float]] = {}

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            self.stages[name] = {"wall_s": round(time.perf_counter() - wall, 4),
                                 "cpu_s": round(time.process_time() - cpu, 4)}

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
