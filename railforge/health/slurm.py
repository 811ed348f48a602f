"""Drain and resume Slurm nodes with the real `scontrol`, and read back what Slurm says about a node."""

from __future__ import annotations

import shlex
import subprocess
from dataclasses import dataclass


class SlurmError(RuntimeError):
    pass


@dataclass(frozen=True, slots=True)
class NodeState:
    state: str  # e.g. IDLE, IDLE+DRAIN, ALLOCATED+DRAIN (scontrol's State= field)
    reason: str

    @property
    def drained(self) -> bool:
        return "DRAIN" in self.state


@dataclass(slots=True)
class Scontrol:
    binary: str = "scontrol"
    env: dict[str, str] | None = None
    timeout: float = 20

    def _run(self, *args: str) -> str:
        cmd = [self.binary, *args]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, env=self.env, timeout=self.timeout)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SlurmError(f"{shlex.join(cmd)}: {exc}") from None
        if proc.returncode != 0:
            raise SlurmError(f"{shlex.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()[:300]}")
        return proc.stdout

    def node(self, name: str) -> NodeState:
        """State and Reason from `scontrol -o show node` (one line of Key=Value; Reason runs to the next key)."""
        line = self._run("-o", "show", "node", name).strip()
        state = reason = ""
        for part in line.split(" "):
            if part.startswith("State="):
                state = part.split("=", 1)[1]
        if " Reason=" in line:
            reason = line.split(" Reason=", 1)[1]
            reason = reason.split(" [", 1)[0].strip()
        return NodeState(state, reason)

    def drain(self, name: str, reason: str) -> None:
        self._run("update", f"NodeName={name}", "State=DRAIN", f"Reason={reason}")

    def resume(self, name: str) -> None:
        self._run("update", f"NodeName={name}", "State=RESUME")
