"""Find a cluster's generated artifacts: `inventory/<cluster>` or its cluster.yaml, or an explicit --out."""

from __future__ import annotations

from pathlib import Path

from railforge.plan import Plan
from railforge.planio import read_plan


class MissingBuild(FileNotFoundError):
    pass


def generated_dir(cluster: Path, out: Path | None = None) -> Path:
    if out is not None:
        folder = out
    else:
        base = cluster.parent if cluster.is_file() or cluster.suffix in (".yaml", ".yml") else cluster
        folder = base / "generated"
    if not (folder / "plan.json").is_file():
        raise MissingBuild(f"{folder / 'plan.json'} not found: run `railforge build` first (or pass --out)")
    return folder


def load_generated_plan(cluster: Path, out: Path | None = None) -> tuple[Plan, Path]:
    folder = generated_dir(cluster, out)
    return read_plan(folder / "plan.json"), folder
