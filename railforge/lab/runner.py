"""Bring a lab up and down: namespaces, cables, daemons, with cleanup after failure or Ctrl-C."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from railforge import nos
from railforge.lab import daemons, fabric
from railforge.lab.memory import memory_problems
from railforge.lab.scope import LabTopology
from railforge.lab.shell import ip, namespaces
from railforge.lab.state import LabState, load_state, run_dir
from railforge.nos.profile import TranslationError
from railforge.plan.model import Device

Log = Callable[[str], None]


class LabError(RuntimeError):
    pass


@dataclass(slots=True)
class UpTimings:
    setup_s: float
    daemons_s: float


def preflight(topo: LabTopology, configs: Path) -> dict[str, str]:
    """Root, the daemons, a generated frr.conf for every switch, and no lab of this cluster already up."""
    problems = []
    if os.geteuid() != 0:
        problems.append("the lab needs root (network namespaces)")
    for binary in [str(daemons.FRR_DIR / d) for d in daemons.FRR_DAEMONS] + ["vtysh", "lldpd", "lldpcli"]:
        if shutil.which(binary) is None:
            problems.append(f"{binary} not found: apt-get install frr lldpd")
    confs = {sw.name: config_file(configs, sw) for sw in topo.switches}
    problems += [f"{p} missing: run `railforge build` first" for p in confs.values() if not p.is_file()]
    problems += memory_problems(topo)
    if load_state(topo.cluster, topo.prefix) is not None:
        problems.append(f"a lab of {topo.cluster} is already up: `railforge lab down` it first")
    clash = sorted(set(topo.namespaces()) & namespaces())
    if clash:
        problems.append(f"namespaces already exist: {', '.join(clash[:5])}")
    if problems:
        raise LabError("; ".join(problems))
    try:
        return {sw.name: frr_text(configs, sw) for sw in topo.switches}
    except TranslationError as exc:
        raise LabError(str(exc)) from None


class _Interrupted(KeyboardInterrupt):
    pass


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """SIGTERM and SIGHUP behave like Ctrl-C inside the block, so `finally`/`except` clean-ups run."""
    def raise_interrupt(signum: int, _frame: object) -> None:
        raise _Interrupted(f"signal {signum}")

    old = {s: signal.signal(s, raise_interrupt) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def config_file(configs: Path, switch: Device) -> Path:
    """The generated file a lab switch boots from (its OS profile's `boot_config`: frr.conf, or NVUE's startup.yaml)."""
    boot = nos.profile(switch.nos).boot_config
    if boot is None:
        raise ValueError(f"{switch.name} runs {switch.nos}, which the lab does not boot")
    return configs / switch.name / boot


def frr_text(configs: Path, switch: Device) -> str:
    """The FRR configuration a lab switch boots: its OS profile's translation (`lab_frr`) of its generated file."""
    boot = nos.profile(switch.nos).lab_frr
    if boot is None:
        raise ValueError(f"{switch.name} runs {switch.nos}, which the lab does not boot")
    return boot(config_file(configs, switch))


def up(topo: LabTopology, configs: Path, options: dict, log: Log) -> tuple[LabState, UpTimings]:
    confs = preflight(topo, configs)
    rd = run_dir(topo.cluster, topo.prefix)
    rd.mkdir(parents=True, exist_ok=True)
    state = LabState(topo.cluster, str(rd), topo.prefix, options=options)
    state.save()
    with interruptible():
        try:
            t0 = time.monotonic()
            fabric.raise_neigh_limits()
            fabric.create_namespaces(topo, state)
            fabric.cable(topo, topo.links)
            fabric.configure(topo)
            t1 = time.monotonic()
            log(f"{len(topo.namespaces())} namespaces, {len(topo.links)} cables in {t1 - t0:.1f} s")
            for sw in topo.switches:
                daemons.start_frr(state, topo.ns(sw.name), sw.name, confs[sw.name])
            daemons.boot_frr(state, [sw.name for sw in topo.switches])
            for dev in topo.devices():
                daemons.start_lldpd(state, topo.ns(dev.name), dev.name, topo.ports_of(dev.name))
            t2 = time.monotonic()
            log(f"{len(state.processes)} daemons started in {t2 - t1:.1f} s")
        except BaseException:
            log("bring-up failed: removing everything made so far")
            down(state, topo, log)
            raise
    return state, UpTimings(t1 - t0, t2 - t1)


def down(state: LabState | None, topo: LabTopology | None, log: Log) -> int:
    """Stop every process and delete every namespace of the lab; safe to repeat. Returns namespaces removed."""
    ours = set(state.namespaces if state else [])
    if topo is not None:
        ours |= set(topo.namespaces())
    present = sorted(ours & namespaces())
    if state is not None:
        daemons.stop_all(LabState(state.cluster, state.run_dir, state.prefix, present, state.processes))
    elif present:
        daemons.stop_all(LabState("", "", "", present, []))
    for ns in present:
        ip(None, "netns", "delete", ns, check=False)
    if state is not None and state.run_dir:
        daemons.stop_by_path(str(state.run_dir))
        shutil.rmtree(state.run_dir, ignore_errors=True)
    left = sorted(ours & namespaces())
    if left:
        raise LabError(f"namespaces could not be deleted: {', '.join(left)}")
    log(f"removed {len(present)} namespaces")
    return len(present)
