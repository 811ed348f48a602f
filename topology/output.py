"""Atomic output: everything is written to a staging folder beside the target, which replaces the
previous output only when the whole build succeeded."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import IO


class UnsafePath(Exception):
    pass


class Output:
    """A staging folder; `open(rel)` creates files strictly inside it."""

    def __init__(self, target: Path):
        self.target = target.resolve() if target.exists() else target.absolute()
        self.target.parent.mkdir(parents=True, exist_ok=True)
        self.stage = self.target.parent / f".{self.target.name}.staging-{os.getpid()}"
        if self.stage.exists():
            shutil.rmtree(self.stage)
        self.stage.mkdir()
        self.written: list[str] = []

    def path(self, rel: str) -> Path:
        p = (self.stage / rel).resolve()
        if self.stage.resolve() not in p.parents:
            raise UnsafePath(f"refusing to write {rel!r}: it resolves outside the output folder")
        p.parent.mkdir(parents=True, exist_ok=True)
        self.written.append(rel)
        return p

    def open(self, rel: str, mode: str = "w") -> IO:
        if "b" in mode:
            return open(self.path(rel), mode)
        return open(self.path(rel), mode, encoding="utf-8", newline="\n")

    def write_text(self, rel: str, text: str) -> None:
        with self.open(rel) as fh:
            fh.write(text)

    def commit(self) -> None:
        old = self.target.parent / f".{self.target.name}.old-{os.getpid()}"
        if self.target.exists():
            os.rename(self.target, old)
        os.rename(self.stage, self.target)
        if old.exists():
            shutil.rmtree(old)

    def abort(self) -> None:
        shutil.rmtree(self.stage, ignore_errors=True)
