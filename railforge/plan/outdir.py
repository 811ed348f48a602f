"""The generated folder: where it is, its plan.json read with the schema check, and the path of every
artifact in it that more than one module names (renderers write them, day-2 tools read them, ZTP serves
them). Paths are relative to the folder, with `/`, as `Output` and the ZTP HTTP server take them."""

from __future__ import annotations

from pathlib import Path

from railforge.inputs import InputError, plain
from railforge.plan.io import read_plan
from railforge.plan.model import Plan

GENERATED = "generated"
PLAN = "plan.json"
CONFIGS = "configs"
OPENSM = f"{CONFIGS}/opensm"
ZTP = "ztp"
KEA = f"{ZTP}/kea-dhcp4.conf"
SWITCH_MACS = "switch-macs.csv"
ACCEPTANCE = "acceptance"
ACCEPTANCE_PLAN = "plan.json"  # inside the acceptance folder
GRAFANA = "grafana"


class BuildError(Exception):
    """The generated folder or its plan cannot be used."""


class MissingBuild(BuildError, FileNotFoundError):
    pass


class PlanFileError(BuildError, ValueError):
    pass


def default_out(spec_path: Path) -> Path:
    """Where `railforge build SPEC` writes when no --out is given: `generated/` beside the spec."""
    return spec_path.parent / GENERATED


def locate(cluster: Path, out: Path | None = None) -> Path:
    """The generated folder of `cluster` (`inventory/<cluster>`, or its cluster.yaml), or `out`; it must hold a
    plan.json."""
    if out is not None:
        folder = out
    else:
        base = cluster.parent if cluster.is_file() or cluster.suffix in (".yaml", ".yml") else cluster
        folder = default_out(base / "cluster.yaml")
    try:
        found = (folder / PLAN).is_file()
    except OSError as exc:
        raise MissingBuild(f"{plain(folder / PLAN)}: cannot be read: {exc.strerror or exc}") from None
    if not found:
        raise MissingBuild(f"{plain(folder / PLAN)} not found: run `railforge build` first (or pass --out)")
    return folder


def read(source: Path) -> Plan:
    """A plan.json of the schema version this railforge writes, through the strict reader (`planio.read_plan`:
    regular file, bounded, every field's type, every reference); any other file is refused by name and place."""
    try:
        return read_plan(source)
    except InputError as exc:
        raise PlanFileError(str(exc)) from None


def load(cluster: Path, out: Path | None = None) -> tuple[Plan, Path]:
    folder = locate(cluster, out)
    return read(folder / PLAN), folder


def config_dir(device: str) -> str:
    """A switch's folder of configuration files (`configs/<switch>`)."""
    return f"{CONFIGS}/{device}"


def config_file(device: str, name: str) -> str:
    return f"{CONFIGS}/{device}/{name}"


def opensm_file(name: str) -> str:
    return f"{OPENSM}/{name}"


def ztp_file(device: str, name: str) -> str:
    return f"{ZTP}/{device}/{name}"


def grafana_dashboard(name: str) -> str:
    """A Grafana dashboard's JSON file (`grafana/<name>.json`)."""
    return f"{GRAFANA}/{name}.json"
