"""FRR (zebra, bfdd, bgpd) and lldpd per namespace, each with private paths under the lab's run folder."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from railforge.lab.shell import CommandError, in_ns, ns_pids, run
from railforge.lab.state import LabState

FRR_DIR = Path("/usr/lib/frr")
FRR_DAEMONS = ("zebra", "bfdd", "bgpd")
# FRR 8.4 with kernel nexthop groups loses ECMP members after a link flap; the lab's kernel needs
# plain multipath routes. Applied to zebra at run time: the generated frr.conf stays as rendered.
ZEBRA_LAB_COMMANDS = ("no zebra nexthop kernel enable",)
LLDP_TX_INTERVAL = 1


def device_dir(state: LabState, device: str) -> Path:
    return Path(state.run_dir) / device


def _wait_for(path: Path, timeout: float = 60) -> None:
    end = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > end:
            raise CommandError(f"{path} did not appear within {timeout:.0f} s")
        time.sleep(0.02)


def _pid(path: Path) -> int:
    _wait_for(path)
    end = time.monotonic() + 30
    while not (text := path.read_text().strip()):
        if time.monotonic() > end:
            raise CommandError(f"{path} stayed empty")
        time.sleep(0.02)
    return int(text)


def vtysh(state: LabState, device: str, *commands: str, daemon: str | None = None) -> str:
    args = ["vtysh", "--vty_socket", str(device_dir(state, device))]
    if daemon:
        args += ["-d", daemon]
    for c in commands:
        args += ["-c", c]
    return run(args, timeout=90)


def vtysh_json(state: LabState, device: str, command: str) -> dict:
    out = vtysh(state, device, command)
    return json.loads(out) if out.strip() else {}


def start_frr(state: LabState, ns: str, device: str, frr_conf: str) -> None:
    """zebra, bfdd and bgpd with empty startup files; `boot_frr` then loads the switch's frr.conf."""
    d = device_dir(state, device)
    d.mkdir(parents=True, exist_ok=True)
    conf = d / "frr.conf"
    conf.write_text(frr_conf)
    (d / "vtysh.conf").write_text("service integrated-vtysh-config\n")
    (d / "empty.conf").write_text("")
    for path in (d, conf, d / "vtysh.conf", d / "empty.conf"):
        shutil.chown(path, "frr", "frr")
    for daemon in FRR_DAEMONS:
        args = [str(FRR_DIR / daemon), "-d", "-u", "frr", "-g", "frr", "--vty_socket", str(d),
                "-z", str(d / "zserv.api"), "-i", str(d / f"{daemon}.pid"), "-P", "0", "-f", str(d / "empty.conf"),
                "--log", f"file:{d / f'{daemon}.log'}"]
        if daemon == "bfdd":
            args += ["--bfdctl", str(d / "bfdd.sock")]
        run(in_ns(ns, *args))
        state.add_process(_pid(d / f"{daemon}.pid"), ns, daemon)
        _wait_for(d / f"{daemon}.vty")
    vtysh(state, device, "configure terminal", *ZEBRA_LAB_COMMANDS, daemon="zebra")


def boot_frr(state: LabState, devices: list[str]) -> None:
    """`vtysh -b` on every switch at once: it boots the integrated frr.conf (a byte-identical copy of the
    generated file) as FRR's own init and SONiC do. Its output, with any rejected line, goes to boot.log."""
    procs = []
    for device in devices:
        d = device_dir(state, device)
        log = (d / "boot.log").open("w")
        procs.append((device, log, subprocess.Popen(["vtysh", "--vty_socket", str(d), "--config_dir", str(d), "-b"],
                                                    stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)))
    for _, log, proc in procs:
        try:
            if proc.wait(timeout=120) != 0:
                log.write(f"vtysh -b exit status {proc.returncode}\n")
        finally:
            log.close()


def rejected_lines(boot_output: str) -> list[str]:
    """`vtysh -b` is silent when every line is accepted; else it names them (`line 2: % Unknown command...`)."""
    return [x.strip() for x in boot_output.splitlines() if x.strip()]


def start_lldpd(state: LabState, ns: str, device: str, ports: list[str]) -> None:
    """lldpd announcing the planned system name, port ID = interface name, description = interface alias."""
    d = device_dir(state, device)
    d.mkdir(parents=True, exist_ok=True)
    pattern = ",".join(sorted(ports))
    (d / "lldpd.conf").write_text(
        f"configure system hostname {device}\n"
        f"configure system interface pattern {pattern}\n"
        "configure lldp portidsubtype ifname\n"
        f"configure lldp tx-interval {LLDP_TX_INTERVAL}\n")
    log = (d / "lldpd.log").open("wb")
    proc = subprocess.Popen(in_ns(ns, "lldpd", "-d", "-u", str(d / "lldpd.socket"), "-I", pattern,
                                  "-O", str(d / "lldpd.conf")),
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    log.close()
    state.add_process(proc.pid, ns, "lldpd")


def lldp_neighbors(state: LabState, device: str) -> str:
    return run(["lldpcli", "-u", str(device_dir(state, device) / "lldpd.socket"), "-f", "json", "show", "neighbors",
                "details"])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def stop_pids(pids: list[int], grace: float = 3) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    end = time.monotonic() + grace
    while time.monotonic() < end:
        for pid in pids:
            _reap(pid)
        if not any(_alive(p) for p in pids):
            return
        time.sleep(0.05)
    for pid in pids:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
            _reap(pid)


def stop_all(state: LabState) -> None:
    """Every process the lab started, then anything else still running inside its namespaces."""
    mine = {p.pid for p in state.processes if _same_ns(p.pid, p.ns)}
    stop_pids(sorted(mine))
    stragglers = [pid for ns in state.namespaces for pid in ns_pids(ns)]
    stop_pids(stragglers, grace=1)


def stop_by_path(run_dir: str, settle: float = 2.0) -> None:
    """Daemons still forking into the background when the lab was interrupted escape the pid and
    namespace sweeps; they all name the lab's run folder on their command line."""
    deadline = time.monotonic() + settle
    while True:
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as fh:
                    if run_dir.encode() in fh.read():
                        found.append(int(entry))
            except OSError:
                continue
        if found:
            stop_pids(sorted(found), grace=1)
        if time.monotonic() >= deadline:
            return
        time.sleep(0.2)


def _same_ns(pid: int, ns: str) -> bool:
    """The pid still names our process (pids are reused): it lives in the lab namespace we recorded."""
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino == os.stat(f"/run/netns/{ns}").st_ino
    except OSError:
        return False


def pss_kib(pid: int) -> int:
    """Proportional set size: shared library pages split among the processes that map them."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0
