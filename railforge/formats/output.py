"""Atomic output: everything is written to a staging folder beside the target, which replaces the
previous output only when the whole build succeeded."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import IO

from railforge.plan.outdir import PLAN


class UnsafePath(Exception):
    pass


class OutputError(Exception):
    """The output folder cannot be used; nothing was touched."""


STAGE_MARK = ".railforge-staging"
OWN_FILE = PLAN


def describe(exc: OSError) -> str:
    where = f" {exc.filename}" if exc.filename else ""
    return f"cannot write{where}: {exc.strerror or exc}"


def write_file(path: Path, data: bytes) -> None:
    """One file written atomically: a temporary file beside `path`, then a rename, so a failed write (a full
    disk, a path such as /proc/version that takes no write) leaves what was there."""
    path = path.absolute()
    tmp = path.parent / f".{path.name}.tmp-{os.getpid()}"
    try:
        with open(tmp, "xb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        if isinstance(exc, OSError):
            raise OSError(exc.errno, exc.strerror, str(path)) from None
        raise


def no_group_or_other_write() -> None:
    """Add group/other write to the process umask (a stricter umask is kept): output folders 0755 and files 0644
    even under `umask 000`, where they would otherwise be world-writable."""
    os.umask(os.umask(0o022) | 0o022)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_stale_stages(parent: Path, name: str, marks: tuple[str | None, str | None] = (STAGE_MARK, OWN_FILE)
                       ) -> list[Path]:
    """Remove `.NAME.staging-PID` and `.NAME.old-PID` folders left by killed builds: only real folders (not links)
    that belong to this user, whose PID is gone, and that carry railforge's mark (a staging folder its
    STAGE_MARK, a previous output moved aside its OWN_FILE; `marks` names others). Returns what was removed."""
    pattern = re.compile(rf"\.{re.escape(name)}\.(staging|old)-(\d+)")
    removed = []
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return removed
    for entry in entries:
        m = pattern.fullmatch(entry.name)
        if not m or int(m.group(2)) == os.getpid() or _pid_alive(int(m.group(2))):
            continue
        try:
            st = entry.stat(follow_symlinks=False)
            if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
                continue
            mark = marks[0] if m.group(1) == "staging" else marks[1]
            if mark is not None and not os.path.isfile(os.path.join(entry.path, mark)):
                continue
            shutil.rmtree(entry.path)
            removed.append(Path(entry.path))
        except OSError:
            continue
    return removed


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
        self.target = self._check_target(target)
        if not partial and self.target.is_dir() and not (self.target / OWN_FILE).is_file() \
                and any(self.target.iterdir()):
            raise OutputError(f"--out {target} is a folder with other files and no {OWN_FILE}: railforge replaces "
                              "the whole output folder, so give a new or empty folder (nothing was written)")
        self.replace_dirs: list[str] = []
        self.stage = self.target.parent / f".{self.target.name}.staging-{os.getpid()}"
        self.stage_str = str(self.stage)
        sweep_stale_stages(self.target.parent, self.target.name)
        try:
            if self.stage.is_symlink() or self.stage.exists():
                raise OutputError(f"{self.stage} is in the way of the staging folder; remove it")
            self.stage.mkdir()
            (self.stage / STAGE_MARK).touch()
        except OSError as exc:
            shutil.rmtree(self.stage, ignore_errors=True)
            raise OutputError(f"--out {target}: {describe(exc)}") from None
        self.written: list[str] = []
        self._dirs: set[str] = {""}

    @staticmethod
    def _check_target(target: Path) -> Path:
        """The output folder as an absolute path, refused (untouched) when it is a link, not a folder, or in
        a place this user cannot write; missing parents are created."""
        where = Path(os.path.normpath(target.absolute()))
        if where == where.parent:
            raise OutputError(f"--out {target} is the root folder; give a folder for the output (nothing was written)")
        if where.is_symlink():
            raise OutputError(f"--out {target} is a symbolic link; give the folder itself (nothing was written)")
        if where.exists() and not where.is_dir():
            raise OutputError(f"--out {target} exists and is not a folder; give a folder path (nothing was written)")
        parent = where.parent
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            raise OutputError(f"--out {target}: {parent} is not a folder (nothing was written)") from None
        except OSError as exc:
            raise OutputError(f"--out {target}: {describe(exc)} (nothing was written)") from None
        parent = parent.resolve()
        if not os.access(parent, os.W_OK | os.X_OK) or (where.exists() and not os.access(where, os.W_OK | os.X_OK)):
            raise OutputError(f"--out {target}: {parent} is not writable by this user (nothing was written)")
        return parent / where.name

    def path(self, rel: str) -> str:
        """Where `rel` (a plain relative path: no empty, `.` or `..` part, no backslash) is written; its folder
        is created. String operations, not pathlib: a 131K-GPU build writes 51,238 files."""
        parts = rel.split("/")
        if any(p in ("..", ".", "") for p in parts) or "\\" in rel or "\0" in rel:
            raise UnsafePath(f"refusing to write {rel!r}: it is not a plain path inside the output folder")
        parent = rel.rpartition("/")[0]
        if parent not in self._dirs:
            (self.stage / parent).mkdir(parents=True, exist_ok=True)
            self._dirs.add(parent)
        self.written.append(rel)
        return f"{self.stage_str}/{rel}"

    def path_of(self, rel: str) -> str:
        """Where an already written `rel` lies in the staging folder."""
        return f"{self.stage_str}/{rel}"

    def open(self, rel: str, mode: str = "w") -> IO:
        if "b" in mode:
            return open(self.path(rel), mode)
        return open(self.path(rel), mode, encoding="utf-8", newline="\n")

    def write_text(self, rel: str, text: str) -> None:
        self.write_bytes(rel, text.encode())

    def write_bytes(self, rel: str, data: bytes) -> None:
        fd = os.open(self.path(rel), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o666)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)

    def commit(self) -> None:
        if self.partial:
            self._merge()
            return
        os.unlink(self.stage / STAGE_MARK)
        old = self.target.parent / f".{self.target.name}.old-{os.getpid()}"
        if self.target.is_symlink() or (self.target.exists() and not self.target.is_dir()):
            raise OutputError(f"{self.target} changed into something other than a folder during the build; "
                              "nothing was written")
        moved = False
        if self.target.exists():
            os.rename(self.target, old)
            moved = True
        try:
            os.rename(self.stage, self.target)
        except OSError:
            if moved:
                os.rename(old, self.target)
            raise
        if moved:
            shutil.rmtree(old, ignore_errors=True)

    def worker(self, select: Callable[[str], bool]) -> Output:
        """An Output for a worker process: the same staging folder, its own list of written files."""
        clone = object.__new__(Output)
        clone.target, clone.stage, clone.partial = self.target, self.stage, self.partial
        clone.stage_str = self.stage_str
        clone.limited, clone.replace_dirs = self.limited, []
        clone.selects = select
        clone.written = []
        clone._dirs = set(self._dirs)
        return clone

    def _merge(self) -> None:
        if self.target.is_symlink() or (self.target.exists() and not self.target.is_dir()):
            raise OutputError(f"{self.target} is not a folder; nothing was written")
        replaced = [] if self.limited else [rel for rel in self.replace_dirs if (self.stage / rel).is_dir()]
        if (self.target / OWN_FILE).is_file():  # railforge's own output: a killed merge's folders moved aside go
            for rel in self.replace_dirs:
                sweep_stale_stages(self.target, PurePosixPath(rel).name, marks=(STAGE_MARK, None))
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
