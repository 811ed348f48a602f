"""Find a cluster's generated artifacts: `inventory/<cluster>` or its cluster.yaml, or an explicit --out
(the folder and its plan.json are railforge/plan/outdir.py's; these names stay for the tools that use them)."""

from __future__ import annotations

from pathlib import Path

from railforge.plan import outdir
from railforge.plan.model import Plan
from railforge.plan.outdir import BuildError, MissingBuild

__all__ = ["BuildError", "MissingBuild", "generated_dir", "load_generated_plan"]


def generated_dir(cluster: Path, out: Path | None = None) -> Path:
    return outdir.locate(cluster, out)


def load_generated_plan(cluster: Path, out: Path | None = None) -> tuple[Plan, Path]:
    return outdir.load(cluster, out)
