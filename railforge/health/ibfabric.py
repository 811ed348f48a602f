"""The InfiniBand fabric scan: every switch port's state and error counters, for node-exporter's textfile collector.

InfiniBand switches run no Prometheus exporter; a host on the fabric reads them over it, as the fabric's own
diagnostics do: `iblinkinfo --switches-only -l` (one directed-route sweep: every switch port's LinkState and
PhysLinkState, down ports included) and `perfquery -l <lid> <ports>` per switch (its PortCounters, one block per
port). One GPU node runs this on a timer (`python -m railforge.health.ibfabric --textfile
/var/lib/prometheus/node-exporter/railforge_ibfabric.prom`); `railforge build` names it in
`health/expected.prom` (`railforge_expected_fabric_scan`) and the health rules join what it writes with the plan's
cables:

    railforge_ib_port_state_id{switch="su001-leaf-r0",ib_port="5",guid="0x..."} 4   (1 Down .. 4 Active)
    railforge_ib_port_physical_state_id{switch=...,ib_port=...,guid=...} 5           (2 Polling, 5 LinkUp ...)
    railforge_ib_port_errors_total{switch=...,ib_port=...,counter="SymbolErrorCounter"} 0
    railforge_ibfabric_scan_success 1, railforge_ibfabric_scan_timestamp_seconds, ..._duration_seconds

A switch is named by its NodeDescription (`MF0;<hostname>:<model>/U1` on NVIDIA switches: the hostname; else the
whole description), the rule `railforge/render/ibnetdiscover.py` follows too. Standard library only and
independent of the plan, because it runs alone on a node (the node_health role copies it there); parsing the
diagnostics' text is hand-written because no library reads it. A failed scan writes `scan_success 0` and no
port series, so stale ports never look healthy; exit status 1 then, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

LINK_STATES = {"Down": 1, "Init": 2, "Armed": 3, "Active": 4}
PHYS_STATES = {"Sleep": 1, "Polling": 2, "Disabled": 3, "PortConfigurationTraining": 4, "LinkUp": 5,
               "LinkErrorRecovery": 6, "PhyTest": 7}
ERROR_COUNTERS = ("SymbolErrorCounter", "LinkErrorRecoveryCounter", "LinkDownedCounter", "PortRcvErrors",
                  "PortRcvRemotePhysicalErrors", "PortRcvSwitchRelayErrors", "PortXmitDiscards",
                  "PortXmitConstraintErrors", "PortRcvConstraintErrors", "LocalLinkIntegrityErrors",
                  "ExcessiveBufferOverrunErrors", "VL15Dropped")
_LINE = re.compile(r'^(0x[0-9a-fA-F]+)\s+"([^"]*)"\s+(\d+)\s+(\d+)\[[^\]]*\]\s+==\(\s*([^)]*?)\s*\)==>')
_STATE = re.compile(r"(\w+)/\s*(\w+)$")
_BLOCK = re.compile(r"^# Port counters: Lid (\d+) port (\d+)")
_FIELD = re.compile(r"^(\w+):\.*(\d+)$")
MAX_OUTPUT = 256 * 1024 * 1024

Runner = Callable[[Sequence[str], float], tuple[int, str, str]]


class ScanError(RuntimeError):
    pass


@dataclass(slots=True)
class SwitchPort:
    guid: str
    switch: str
    lid: int
    port: int
    state: int
    phys: int
    errors: dict[str, int] = field(default_factory=dict)


def switch_name(description: str) -> str:
    m = re.match(r"^[^;\s]*;([^:]+):", description.strip())
    return m.group(1) if m else description.strip()


def parse_linkinfo(text: str) -> list[SwitchPort]:
    """`iblinkinfo --switches-only -l`: one line per switch port; other lines (warnings) are skipped."""
    out = []
    for line in text.splitlines():
        m = _LINE.match(line.strip())
        if m is None:
            continue
        guid, desc, lid, port, link = m.groups()
        s = _STATE.search(link)
        if s is None or s.group(1) not in LINK_STATES or s.group(2) not in PHYS_STATES:
            continue
        out.append(SwitchPort(guid.lower(), switch_name(desc), int(lid), int(port), LINK_STATES[s.group(1)],
                              PHYS_STATES[s.group(2)]))
    return out


def parse_perfquery(text: str) -> dict[int, dict[str, int]]:
    """`perfquery -l <lid> <ports>`: port -> the error counters of its block."""
    out: dict[int, dict[str, int]] = {}
    current: dict[str, int] | None = None
    for line in text.splitlines():
        line = line.strip()
        m = _BLOCK.match(line)
        if m:
            current = out.setdefault(int(m.group(2)), {})
            continue
        f = _FIELD.match(line)
        if f and current is not None and f.group(1) in ERROR_COUNTERS:
            current[f.group(1)] = int(f.group(2))
    return out


def _run(cmd: Sequence[str], timeout: float) -> tuple[int, str, str]:
    try:
        proc = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        return 127, "", f"{cmd[0]} not found (apt-get install infiniband-diags)"
    except subprocess.TimeoutExpired:
        return 124, "", f"timed out after {timeout:.0f} s"
    return proc.returncode, proc.stdout[:MAX_OUTPUT], proc.stderr[-2000:]


@dataclass(slots=True)
class Scanner:
    """Where the diagnostics run: `via` are the HCA options (`-C mlx5_0 -P 1`) every command gets."""

    via: tuple[str, ...] = ()
    timeout: float = 60
    run: Runner = _run

    def scan(self) -> list[SwitchPort]:
        code, out, err = self.run(["iblinkinfo", *self.via, "--switches-only", "-l"], self.timeout)
        ports = parse_linkinfo(out)
        if code != 0 or not ports:
            why = err.strip().splitlines()[-1] if err.strip() else f"exit {code}, no switch port in its output"
            raise ScanError(f"iblinkinfo: {why}")
        by_lid: dict[int, list[SwitchPort]] = {}
        for p in ports:
            by_lid.setdefault(p.lid, []).append(p)
        for lid, sw in sorted(by_lid.items()):
            if lid == 0:
                continue  # no LID yet (no subnet manager): its counters cannot be read
            numbers = ",".join(str(p.port) for p in sorted(sw, key=lambda p: p.port))
            code, out, err = self.run(["perfquery", *self.via, "-l", str(lid), numbers], self.timeout)
            counters = parse_perfquery(out) if code == 0 else {}
            for p in sw:
                p.errors = counters.get(p.port, {})
        return ports


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def textfile(ports: list[SwitchPort] | None, at: float, took: float) -> str:
    """The textfile: port series when the scan worked (`ports` not None), and the scan's own series always."""
    lines = []
    if ports is not None:
        keyed = sorted(ports, key=lambda p: (p.switch, p.port))
        lines += ["# HELP railforge_ib_port_state_id InfiniBand switch port LinkState (1 Down, 2 Init, 3 Armed, "
                  "4 Active), from iblinkinfo.", "# TYPE railforge_ib_port_state_id gauge"]
        lines += [f'railforge_ib_port_state_id{{switch="{_label(p.switch)}",ib_port="{p.port}",guid="{p.guid}"}} '
                  f"{p.state}" for p in keyed]
        lines += ["# HELP railforge_ib_port_physical_state_id InfiniBand switch port PhysLinkState (2 Polling, "
                  "3 Disabled, 5 LinkUp, 6 LinkErrorRecovery ...), from iblinkinfo.",
                  "# TYPE railforge_ib_port_physical_state_id gauge"]
        lines += [f'railforge_ib_port_physical_state_id{{switch="{_label(p.switch)}",ib_port="{p.port}",'
                  f'guid="{p.guid}"}} {p.phys}' for p in keyed]
        lines += ["# HELP railforge_ib_port_errors_total InfiniBand switch port error counter (PortCounters, as "
                  "perfquery names it).", "# TYPE railforge_ib_port_errors_total counter"]
        lines += [f'railforge_ib_port_errors_total{{switch="{_label(p.switch)}",ib_port="{p.port}",'
                  f'counter="{name}"}} {p.errors[name]}' for p in keyed for name in ERROR_COUNTERS
                  if name in p.errors]
        lines += ["# HELP railforge_ibfabric_switches Switches the last scan found.",
                  "# TYPE railforge_ibfabric_switches gauge",
                  f"railforge_ibfabric_switches {len({p.guid for p in ports})}"]
    lines += ["# HELP railforge_ibfabric_scan_success 1 when the last fabric scan worked.",
              "# TYPE railforge_ibfabric_scan_success gauge",
              f"railforge_ibfabric_scan_success {int(ports is not None)}",
              "# HELP railforge_ibfabric_scan_timestamp_seconds When the last fabric scan ended.",
              "# TYPE railforge_ibfabric_scan_timestamp_seconds gauge",
              f"railforge_ibfabric_scan_timestamp_seconds {at:.3f}",
              "# HELP railforge_ibfabric_scan_duration_seconds How long the last fabric scan took.",
              "# TYPE railforge_ibfabric_scan_duration_seconds gauge",
              f"railforge_ibfabric_scan_duration_seconds {took:.3f}"]
    return "\n".join(lines) + "\n"


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="railforge-ib-fabric-scan", description=__doc__.split("\n\n")[0])
    p.add_argument("--textfile", type=Path, required=True, help="write the series here (.prom, atomically)")
    p.add_argument("--ca", default=None, help="HCA to scan through (iblinkinfo/perfquery -C), e.g. mlx5_0")
    p.add_argument("--port", type=int, default=None, help="its port (-P)")
    p.add_argument("--timeout", type=float, default=60, help="seconds each diagnostic may take")
    args = p.parse_args(argv)
    if not args.textfile.parent.is_dir():
        print(f"--textfile {shlex.quote(str(args.textfile))}: its folder does not exist", file=sys.stderr)
        return 2
    via = (*(("-C", args.ca) if args.ca else ()), *(("-P", str(args.port)) if args.port else ()))
    t0 = time.monotonic()
    try:
        ports: list[SwitchPort] | None = Scanner(via, args.timeout).scan()
        failure = None
    except ScanError as exc:
        ports, failure = None, str(exc)
    write_atomic(args.textfile, textfile(ports, time.time(), time.monotonic() - t0))
    if failure:
        print(f"error: {failure}".encode("unicode_escape").decode("ascii"), file=sys.stderr)
        return 1
    print(f"OK: {len({p.guid for p in ports or []})} switches, {len(ports or [])} ports")
    return 0


if __name__ == "__main__":
    sys.exit(main())
