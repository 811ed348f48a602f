"""The two sides of a change: a build folder (plan.json plus the configs beside it) or a plan.json file."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from railforge.inputs import MiB, read_bytes
from railforge.plan import outdir
from railforge.plan.model import Plan
from railforge.plan.outdir import PlanFileError

CONFIG_MAX_BYTES = 64 * MiB


class ChangeInputError(Exception):
    pass


@dataclass(frozen=True)
class Side:
    plan: Plan
    source: Path
    folder: Path | None

    def config_files(self, device: str) -> dict[str, bytes]:
        """configs/<device>/* of a build folder (empty for a bare plan file)."""
        if self.folder is None:
            return {}
        d = self.folder / outdir.config_dir(device)
        if not d.is_dir():
            return {}
        return {f.name: read_bytes(f, CONFIG_MAX_BYTES) for f in sorted(d.iterdir()) if f.is_file()}


def plan_path(path: Path) -> tuple[Path, Path | None]:
    if path.is_dir():
        p = path / outdir.PLAN
        if not p.is_file():
            raise ChangeInputError(f"{path}: build folder without a plan (no {p.name}); build it with "
                                   f"`railforge build SPEC --out {path}` or give a plan.json")
        return p, path
    if path.is_file():
        return path, None
    raise ChangeInputError(f"{path}: no such build folder or plan file")


def read_side(path: Path) -> Side:
    source, folder = plan_path(path)
    try:
        plan = outdir.read(source)
    except PlanFileError as exc:
        raise ChangeInputError(str(exc)) from None
    return Side(plan, source, folder)


def check_comparable(old: Side, new: Side) -> None:
    a, b = old.plan.cluster.name, new.plan.cluster.name
    if a != b:
        raise ChangeInputError(f"the plans are of different clusters: {old.source} is {a!r}, {new.source} is "
                               f"{b!r}; diff compares two plans of the same cluster")
