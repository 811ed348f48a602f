from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from railforge.plan.model import Plan
from railforge.planner import build_plan
from railforge.spec import load_spec

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ("dgx-h100-4su", "roce-a800-4nic", "roce-16k-railplane")


def example_spec(name: str) -> Path:
    return ROOT / "inventory" / name / "cluster.yaml"


def plan_of(name: str) -> Plan:
    spec, lines = load_spec(example_spec(name))
    return build_plan(spec, lines, str(example_spec(name)))


def run_cli(*args: str, env: dict | None = None, check: bool = True) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-c", "from railforge.cli.main import app; app()", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **(env or {})}, cwd=ROOT)
    if check and proc.returncode != 0:
        raise AssertionError(f"railforge {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
    return proc


@pytest.fixture(scope="session")
def built(tmp_path_factory):
    """built(name) -> output folder of `railforge build` for an example, built once per session."""
    cache: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in cache:
            out = tmp_path_factory.mktemp(name) / "out"
            run_cli("build", str(example_spec(name)), "--out", str(out))
            cache[name] = out
        return cache[name]

    return get


def tool_path(name: str) -> str | None:
    """A tool on PATH, or installed in this interpreter's venv."""
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else shutil.which(name)


def require_tool(*tools: str) -> None:
    """Skip off-CI when a system tool or root is missing; under CI=true that is a failure."""
    missing = [t for t in tools if t != "root" and tool_path(t) is None]
    if "root" in tools and os.geteuid() != 0:
        missing.append("root")
    if missing:
        msg = f"needs {', '.join(missing)}"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{msg}, and CI=true forbids skipping")
        pytest.skip(msg)
