"""Running iproute2, FRR and lldpd commands, in the root namespace or in a lab namespace."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence


class CommandError(RuntimeError):
    pass


def run(cmd: Sequence[str], check: bool = True, stdin: str | None = None, timeout: float = 60) -> str:
    """`cmd`'s output; a program that is not installed, cannot start or runs past `timeout` is a CommandError
    naming it, like one that fails."""
    try:
        proc = subprocess.run(list(cmd), input=stdin, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        raise CommandError(f"{cmd[0]}: not found; the lab needs iproute2, FRR and lldpd installed") from None
    except OSError as exc:
        raise CommandError(f"{cmd[0]}: cannot be run: {exc.strerror or exc}") from None
    except subprocess.TimeoutExpired:
        raise CommandError(f"{' '.join(cmd)}: no answer after {timeout:g} s") from None
    if check and proc.returncode != 0:
        raise CommandError(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout


def in_ns(ns: str, *cmd: str) -> list[str]:
    return ["ip", "netns", "exec", ns, *cmd]


def ip(ns: str | None, *args: str, check: bool = True) -> str:
    return run(["ip", *(["-n", ns] if ns else []), *args], check=check)


def ip_json(ns: str, *args: str) -> list[dict]:
    out = run(["ip", "-n", ns, "-j", *args])
    return json.loads(out) if out.strip() else []


def ip_batch(ns: str | None, lines: list[str]) -> None:
    if lines:
        run(["ip", *(["-n", ns] if ns else []), "-batch", "-"], stdin="\n".join(lines) + "\n")


def batch(tool: str, ns: str, lines: list[str]) -> None:
    """`ip` or `tc` commands, one per line, in one process inside namespace `ns`."""
    if lines:
        run([tool, "-n", ns, "-batch", "-"], stdin="\n".join(lines) + "\n")


def sysctl(ns: str, settings: dict[str, str | int]) -> None:
    args = [f"{k}={v}" for k, v in settings.items()]
    run(in_ns(ns, "sysctl", "-q", "-w", *args))


def namespaces() -> set[str]:
    out = run(["ip", "-j", "netns", "list"], check=False)
    return {n["name"] for n in json.loads(out)} if out.strip() else set()


def ns_pids(ns: str) -> list[int]:
    out = run(["ip", "netns", "pids", ns], check=False)
    return [int(x) for x in out.split()]
