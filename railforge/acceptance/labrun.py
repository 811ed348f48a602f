"""Run the burn-in's pair tests on the lab's hosts (network namespaces), with iperf3 standing in for
ib_write_bw (no RDMA device here): one iperf3 server per test in the B host's namespace, bound to its rail
address, and a client in the A host's namespace bound to A's, every test of a round at once. Each result file
carries the same header the real jobs write, then iperf3's JSON, so `acceptance analyze` reads both alike."""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from pathlib import Path

from railforge.lab.shell import in_ns, run

BASE_PORT = 15201
CONNECT_TRIES = 25
GRACE_S = 20


def _header(cluster: str, test: dict, round_no: int, rc: int) -> str:
    a, b = test["a"], test["b"]
    return (f"# railforge-acceptance cluster={cluster} test={test['id']} round={round_no} tool=iperf3 "
            f"a={a['node']}:{a['hca']} b={b['node']}:{b['hca']} rc={rc}\n")


def _finish(proc: subprocess.Popen, seconds: float) -> str:
    """The client's JSON; a client still running GRACE_S after its test time (its end-of-test exchange lost on a
    lossy path) is killed and recorded as a failed test, as the tool reporting no result."""
    try:
        text, _ = proc.communicate(timeout=seconds + GRACE_S)
        return text
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return json.dumps({"error": f"no result {seconds + GRACE_S:g} s after the start: killed by the runner"})


def run_round(doc: dict, round_no: int, prefix: str, results: Path, seconds: float = 2.0,
              rate: str = "100M") -> float:
    """Run one round; return its wall time in seconds."""
    rnd = doc["rounds"][round_no - 1]
    out = results / f"round-{round_no:02d}"
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    servers = []
    ranges: dict[str, str] = {}
    try:
        _pin_control_ports(rnd, prefix, ranges)
        for t in rnd["tests"]:
            b = t["b"]
            servers.append(subprocess.Popen(
                in_ns(f"{prefix}{b['node']}", "iperf3", "-s", "-1", "-B", b["address"], "-p",
                      str(BASE_PORT + b["rail"])), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        clients = []
        for t in rnd["tests"]:
            a, b = t["a"], t["b"]
            cmd = in_ns(f"{prefix}{a['node']}", "iperf3", "-c", b["address"], "-B", a["address"], "-p",
                        str(BASE_PORT + b["rail"]), "-t", f"{seconds:g}", "-b", rate, "-J")
            if t.get("ports"):
                cmd += ["--cport", str(t["ports"]["data"])]
            clients.append((t, cmd, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                                     text=True)))
        for t, cmd, proc in clients:
            text = _finish(proc, seconds)
            tries = 1
            while "Connection refused" in text and tries < CONNECT_TRIES:
                time.sleep(0.2)  # the server had not bound yet
                text = _finish(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True),
                               seconds)
                tries += 1
            (out / f"{t['id']}.txt").write_text(_header(doc["cluster"], t, round_no, 0) + text)
    finally:
        for s in servers:
            with contextlib.suppress(subprocess.TimeoutExpired):
                s.wait(timeout=5)
            if s.poll() is None:
                s.kill()
                s.wait()
        for ns, old in ranges.items():
            subprocess.run(in_ns(ns, "sysctl", "-q", "-w", f"net.ipv4.ip_local_port_range={old}"), capture_output=True)
    return time.monotonic() - t0


def server_port(test: dict) -> int:
    return BASE_PORT + test["b"]["rail"]


def _pin_control_ports(rnd: dict, prefix: str, old: dict[str, str]) -> None:
    """Pinned tests (`ecmppin`): the client namespace's ephemeral range narrowed to the round's control port, so
    iperf3's control connection takes the path recorded for it; each namespace's previous range goes in `old`."""
    for t in rnd["tests"]:
        if not t.get("ports"):
            continue
        ns = f"{prefix}{t['a']['node']}"
        if ns not in old:
            old[ns] = " ".join(run(in_ns(ns, "sysctl", "-n", "net.ipv4.ip_local_port_range")).split())
        p = t["ports"]["control"]
        run(in_ns(ns, "sysctl", "-q", "-w", f"net.ipv4.ip_local_port_range={p} {p}"))
