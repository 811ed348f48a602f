"""The lab's state file: every namespace and process it made, so `down` can undo all of it."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

RUN_ROOT = Path("/run/railforge-lab")


@dataclass(slots=True)
class Process:
    pid: int
    ns: str
    name: str


@dataclass(slots=True)
class LabState:
    cluster: str
    run_dir: str
    prefix: str
    namespaces: list[str] = field(default_factory=list)
    processes: list[Process] = field(default_factory=list)
    options: dict = field(default_factory=dict)

    @property
    def path(self) -> Path:
        return Path(self.run_dir) / "state.json"

    def save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=1))
        os.replace(tmp, self.path)

    def add_namespace(self, ns: str) -> None:
        self.namespaces.append(ns)
        self.save()

    def add_process(self, pid: int, ns: str, name: str) -> None:
        self.processes.append(Process(pid, ns, name))
        self.save()


def run_dir(cluster: str, prefix: str) -> Path:
    """One folder per lab: several labs (other prefixes) of the same cluster may run side by side."""
    return RUN_ROOT / f"{prefix}{cluster}"


def load_state(cluster: str, prefix: str) -> LabState | None:
    path = run_dir(cluster, prefix) / "state.json"
    if not path.exists():
        return None
    raw = json.loads(path.read_text())
    raw["processes"] = [Process(**p) for p in raw["processes"]]
    return LabState(**raw)
