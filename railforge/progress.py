"""Stage timing for `--timings`, and a rich progress display on a terminal (quiet otherwise)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

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
def progress_for(families: list) -> Iterator[Callable[[str], None]]:
    if not sys.stderr.isatty():
        yield lambda name: None
        return
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TimeElapsedColumn(), transient=True) as progress:
        task = progress.add_task("rendering", total=len(families))

        def advance(name: str) -> None:
            progress.update(task, advance=1, description=f"rendered {name}")

        yield advance
