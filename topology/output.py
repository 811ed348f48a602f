"""Atomic output: everything is written to a staging folder beside the target, which replaces the
previous output only when the whole build succeeded."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import IO


class UnsafePath(Exception):
    pass


class Output:
    """A staging folder; `open(rel)` creates files strictly inside it.

    A full build replaces the target folder as a whole. A partial build (`--only`, `--limit`) replaces
    just the files it wrote, each atomically, and keeps the rest of the previous output, except the
    folders named in `replace_dirs`, which are replaced as a whole (a family that owns a folder).
    `selects(device)` tells per-device renderers whether a device is in `--limit`; `limited` whether
    there is a `--limit` at all."""

    def __init__(self, target: Path, select: Callable[[str], bool] | None = None, partial: bool = False):
        self.selects: Callable[[str], bool] = select or (lambda name: True)
        self.limited = select is not None
        self.partial = partial
        self.replace_dirs: list[str] = []
        self.target = target.resolve() if target.exists() else target.absolute()
        self.target.parent.mkdir(parents=True, exist_ok=True)
        self.stage = self.target.parent / f".{self.target.name}.staging-{os.getpid()}"
        if self.stage.exists():
            shutil.rmtree(self.stage)
        self.stage.mkdir()
        self.written: list[str] = []
        self._dirs: set[str] = {""}

    def path(self, rel: str) -> Path:
        parts = PurePosixPath(rel).parts
        if not parts or PurePosixPath(rel).is_absolute() or any(p in ("..", ".", "") for p in parts) or "\\" in rel:
            raise UnsafePath(f"refusing to write {rel!r}: it is not a plain path inside the output folder")
        parent = "/".join(parts[:-1])
        if parent not in self._dirs:
            (self.stage / parent).mkdir(parents=True, exist_ok=True)
            self._dirs.add(parent)
        self.written.append(rel)
        return self.stage / rel

    def open(self, rel: str, mode: str = "w") -> IO:
        if "b" in mode:
            return open(self.path(rel), mode)
        return open(self.path(rel), mode, encoding="utf-8", newline="\n")

    def write_text(self, rel: str, text: str) -> None:
        with self.open(rel) as fh:
            fh.write(text)

    def commit(self) -> None:
        if self.partial:
            self._merge()
            return
        old = self.target.parent / f".{self.target.name}.old-{os.getpid()}"
        if self.target.exists():
            os.rename(self.target, old)
        os.rename(self.stage, self.target)
        if old.exists():
            shutil.rmtree(old)

    def worker(self, select: Callable[[str], bool]) -> Output:
        """An Output for a worker process: the same staging folder, its own list of written files."""
        clone = object.__new__(Output)
        clone.target, clone.stage, clone.partial = self.target, self.stage, self.partial
        clone.limited, clone.replace_dirs = self.limited, []
        clone.selects = select
        clone.written = []
        clone._dirs = set(self._dirs)
        return clone

    def _merge(self) -> None:
        replaced = [] if self.limited else [rel for rel in self.replace_dirs if (self.stage / rel).is_dir()]
        for rel in replaced:
            old = self.target / f".{PurePosixPath(rel).name}.old-{os.getpid()}"
            if (self.target / rel).exists():
                os.rename(self.target / rel, old)
            (self.target / rel).parent.mkdir(parents=True, exist_ok=True)
            os.rename(self.stage / rel, self.target / rel)
            shutil.rmtree(old, ignore_errors=True)
        moved = tuple(f"{rel}/" for rel in replaced)
        for rel in self.written:
            if rel.startswith(moved):
                continue
            dest = self.target / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.replace(self.stage / rel, dest)
        shutil.rmtree(self.stage)

    def abort(self) -> None:
        shutil.rmtree(self.stage, ignore_errors=True)
