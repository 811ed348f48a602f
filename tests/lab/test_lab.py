"""The lab on real daemons: the 2-SU RoCE example in network namespaces, FRR on the generated frr.conf.

Needs root, FRR, lldpd, ping and tc; off CI those skip, under CI=true their absence fails.
The expectations come from the plan (uplinks per leaf, host addresses), and the kernel is read
directly here (`ip -j route`, `ping`), not only through `railforge lab check`.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from ipaddress import ip_interface
from pathlib import Path

import pytest

from railforge.lab.checks import expected_fib
from railforge.lab.daemons import rejected_lines
from railforge.lab.scope import ScopeError, lab_topology
from tests.conftest import ROOT, plan_of, require_tool, run_cli

CLUSTER = "inventory/roce-a800-4nic"
NAME = "roce-a800-4nic"
PREFIX = "rft-"
TOOLS = ("root", "/usr/lib/frr/zebra", "/usr/lib/frr/bgpd", "/usr/lib/frr/bfdd", "vtysh", "lldpd", "lldpcli",
         "ping", "tc")


def test_scope_and_expected_paths_follow_the_plan() -> None:
    """Without root: which devices the lab keeps, and which next hops each FIB must hold."""
    plan = plan_of(NAME)
    topo = lab_topology(plan, sus=2, spines="all", hosts_per_su=2, prefix=PREFIX)
    assert len(topo.leaves()) == 8 and len(topo.spines()) == 4 and len(topo.hosts) == 4
    assert len(topo.links) == 8 * 16 + 4 * 4
    assert topo.ns("su001-leaf-r0") == "rft-su001-leaf-r0"
    full = expected_fib(topo, set())
    assert {len(p) for p in full["su001-leaf-r0"].values()} == {16}
    assert len(full["su001-leaf-r0"]) == 7 and len(full["spine01"]) == 8
    spine01 = {lk.id for lk in topo.links if "spine01" in (lk.a.device, lk.b.device)}
    assert {len(p) for p in expected_fib(topo, spine01)["su002-leaf-r3"].values()} == {12}
    one = next(lk for lk in topo.links if lk.a.device == "su001-leaf-r0" and lk.a.port == "Ethernet64")
    after = expected_fib(topo, {one.id})
    assert {len(p) for p in after["su001-leaf-r0"].values()} == {15}
    assert len(after["su002-leaf-r0"]["100.64.0.0/24"]) == 16  # spine01 still reaches r0 over 3 cables
    assert len(after["spine01"]["100.64.0.0/24"]) == 3
    small = lab_topology(plan, sus=1, spines="2", hosts_per_su=1, prefix=PREFIX)
    assert [s.name for s in small.spines()] == ["spine01", "spine02"] and len(small.links) == 4 * 8 + 4
    with pytest.raises(ScopeError, match="--spines"):
        lab_topology(plan, spines="9")
    with pytest.raises(ScopeError, match="--sus"):
        lab_topology(plan, sus=3)
    with pytest.raises(ScopeError, match="infiniband"):
        lab_topology(plan_of("dgx-h100-4su"))


def lab(*args: str, out: Path, prefix: str = PREFIX, check: bool = True) -> subprocess.CompletedProcess:
    return run_cli("lab", *args[:1], CLUSTER, *args[1:], "--out", str(out), "--prefix", prefix, check=check)


def namespaces(prefix: str) -> list[str]:
    out = subprocess.run(["ip", "-j", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return [n["name"] for n in json.loads(out or "[]") if n["name"].startswith(prefix)]


def lab_processes(prefix: str) -> list[str]:
    """Processes whose command line names this lab's run folder (FRR and lldpd are started with it)."""
    marker = f"/run/railforge-lab/{prefix}{NAME}"
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if marker in cmd:
                found.append(f"{pid}: {cmd}")
    return found


def lldp_neighbour(folder: Path, device: str, port: str) -> tuple[str, str] | None:
    """(system name, port id) that lldpd of `device` reports on `port`, read from its raw JSON."""
    interfaces = json.loads((folder / f"{device}.json").read_text())["lldp"].get("interface", [])
    entries = [e[port] for e in (interfaces if isinstance(interfaces, list) else [interfaces]) if port in e]
    if len(entries) != 1:
        return None
    return next(iter(entries[0]["chassis"])), entries[0]["port"]["id"]["value"]


@pytest.fixture(scope="module")
def generated(built) -> Path:
    require_tool(*TOOLS)
    return built(NAME)


@pytest.fixture(scope="module")
def running(generated: Path):
    if namespaces(PREFIX):
        pytest.fail(f"namespaces {PREFIX}* exist before the test: {namespaces(PREFIX)}")
    t0 = time.monotonic()
    proc = lab("up", out=generated, check=False)
    elapsed = time.monotonic() - t0
    try:
        assert proc.returncode == 0, proc.stdout + proc.stderr
        summary = json.loads(proc.stdout.strip().splitlines()[-1])
        print(f"lab up: {elapsed:.1f} s, {summary}")
        yield generated
    finally:
        lab("down", out=generated, check=False)


@pytest.mark.root
@pytest.mark.slow
def test_interrupted_bring_up_leaves_nothing(generated: Path) -> None:
    prefix = "rfi-"
    if namespaces(prefix) or lab_processes(prefix):
        pytest.fail(f"a lab with prefix {prefix} is left from an earlier run: `railforge lab down {CLUSTER} "
                    f"--prefix {prefix}` first ({namespaces(prefix)[:3]})")
    cmd = [sys.executable, "-c", "from railforge.cli.main import app; app()", "lab", "up", CLUSTER, "--out",
           str(generated), "--prefix", prefix]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    output = ""
    t0 = time.monotonic()
    while "cables in" not in output and time.monotonic() < t0 + 120:  # printed as the daemons start
        with contextlib.suppress(queue.Empty):
            line = lines.get(timeout=1)
            if line is None:
                break
            output += line
    if "cables in" not in output:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
        pytest.fail(f"bring-up made no cables in {time.monotonic() - t0:.0f} s (exit {proc.returncode}):\n{output}")
    # The signal goes once a daemon runs, or at most 2 s after the cables: inside the bring-up either way (daemons
    # take seconds, convergence ten more). Waiting on a /proc scan alone let one CI run signal a finished bring-up.
    cabled = time.monotonic()
    started: list[str] = []
    while not started and time.monotonic() < cabled + 2 and proc.poll() is None:
        time.sleep(0.05)
        started = lab_processes(prefix)
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=60)
    reader.join(timeout=10)
    while not lines.empty() and (line := lines.get_nowait()) is not None:
        output += line
    assert proc.returncode != 0, output
    assert namespaces(prefix) == [], output
    assert lab_processes(prefix) == [], output
    assert not Path(f"/run/railforge-lab/{prefix}{NAME}").exists()


@pytest.mark.root
@pytest.mark.slow
def test_fabric_converges_as_planned(running: Path, tmp_path: Path) -> None:
    plan = plan_of(NAME)
    spines = [d.name for d in plan.devices if d.role == "spine"]
    leaves = [d for d in plan.devices if d.role == "leaf"]
    report = tmp_path / "check.json"
    proc = lab("check", "--json", str(report), out=running, check=False)
    rows = json.loads(report.read_text())["rows"]
    assert proc.returncode == 0, proc.stdout
    assert all(r["ok"] for r in rows)
    by_check: dict[str, list[dict]] = {}
    for r in rows:
        by_check.setdefault(r["check"], []).append(r)
    assert len(by_check["bgp"]) == len(leaves) + len(spines)
    assert len(by_check["frr.conf"]) == len(leaves) + len(spines)
    assert len(by_check["ping"]) == 2 * 2 * 4  # 2 hosts in SU1 x 2 in SU2 x 4 rails
    assert by_check["lldp"][0]["observed"] == f"{len(leaves) * 2 + len(leaves) * 16} match"

    # from the kernel directly: every leaf reaches every other leaf's host subnet over all its spine uplinks
    for leaf in leaves:
        uplinks = {lk.a.port for lk in plan.links if lk.a.device == leaf.name and lk.b.device in spines}
        assert len(uplinks) == 16  # 4 spines x 4 parallel links
        routes = json.loads(subprocess.run(["ip", "-n", f"{PREFIX}{leaf.name}", "-j", "route", "show", "proto", "bgp"],
                                           capture_output=True, text=True, check=True).stdout)
        by_dst = {r["dst"]: {h["dev"] for h in r.get("nexthops", [r])} for r in routes}
        for other in leaves:
            if other is not leaf:
                prefix = str(ip_interface(other.host_subnets[0].prefix).network)
                assert by_dst.get(prefix) == uplinks, f"{leaf.name} -> {prefix}: {by_dst.get(prefix)}"

    # BGP sessions from FRR itself
    d = Path(f"/run/railforge-lab/{PREFIX}{NAME}/spine01")
    summary = json.loads(subprocess.run(["vtysh", "--vty_socket", str(d), "-c", "show bgp summary json"],
                                        capture_output=True, text=True, check=True).stdout)
    states = [p["state"] for p in summary["ipv4Unicast"]["peers"].values()]
    assert states.count("Established") == len(leaves) * 4

    # the daemons run the generated file unchanged
    for sw in ("spine01", "su002-leaf-r3"):
        copy = Path(f"/run/railforge-lab/{PREFIX}{NAME}/{sw}/frr.conf").read_bytes()
        assert copy == (running / "configs" / sw / "frr.conf").read_bytes()

    # vtysh -b names a line no daemon accepts (what the frr.conf row reports), here against spine01's daemons
    bogus = tmp_path / "bogus"
    bogus.mkdir()
    (bogus / "vtysh.conf").write_text("service integrated-vtysh-config\n")
    (bogus / "frr.conf").write_text("frr defaults datacenter\nbogus command here\n")
    out = subprocess.run(["vtysh", "--vty_socket", str(d), "--config_dir", str(bogus), "-b"], capture_output=True,
                         text=True)
    assert out.returncode != 0
    assert any("line 2" in x and "bogus command here" in x for x in rejected_lines(out.stdout + out.stderr))

    # a host in SU1 reaches a host in SU2 on rail 2, sourced from its rail-2 address
    a = next(d for d in plan.devices if d.name == "su001-gpu02").rails[2]
    b = next(d for d in plan.devices if d.name == "su002-gpu01").rails[2]
    subprocess.run(["ip", "netns", "exec", f"{PREFIX}su001-gpu02", "ping", "-c", "2", "-W", "2", "-I",
                    a.address.split("/")[0], b.address.split("/")[0]], check=True, capture_output=True)


@pytest.mark.root
@pytest.mark.slow
def test_spine_failure_with_bfd_reconverges_fast(running: Path, tmp_path: Path) -> None:
    report = tmp_path / "fail.json"
    proc = lab("check", "--fail", "spine=spine01", "--bfd", "both", "--json", str(report), out=running, check=False)
    result = json.loads(report.read_text())
    print(proc.stdout)
    assert proc.returncode == 0, proc.stdout
    with_bfd = next(m for m in result["failures"] if m["bfd"])
    without = next(m for m in result["failures"] if not m["bfd"])
    assert with_bfd["converge_s"] is not None and with_bfd["converge_s"] < 2.0, with_bfd
    # without BFD only the BGP hold timer (9 s in the generated config) notices a silent spine
    assert without["converge_s"] is not None and without["converge_s"] > 3.0, without
    assert with_bfd["restore_s"] is not None and without["restore_s"] is not None
    print(f"spine01 silent failure: {with_bfd['converge_s']:.2f} s with BFD, {without['converge_s']:.2f} s without")


@pytest.mark.root
@pytest.mark.slow
def test_swapped_cables_are_named_from_real_lldp(running: Path, tmp_path: Path) -> None:
    plan = plan_of(NAME)
    first = next(lk for lk in plan.links if lk.a.device == "su001-leaf-r0" and lk.a.port == "Ethernet64")
    second = next(lk for lk in plan.links if lk.a.device == "su001-leaf-r1" and lk.a.port == "Ethernet64")
    before = tmp_path / "before"
    lab("lldp", str(before), out=running)
    proc = run_cli("verify", "cabling", CLUSTER, "--out", str(running), "--lldp", str(before), "--partial",
                   "--no-speed", check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr

    lab("swap", first.id, second.id, out=running)
    deadline = time.monotonic() + 30
    while True:  # until both leaves' lldpd have heard their new neighbours (and dropped the old ones)
        after = tmp_path / f"after-{int(time.monotonic() * 1000)}"
        lab("lldp", str(after), out=running)
        views = [lldp_neighbour(after, lk.a.device, lk.a.port) for lk in (first, second)]
        if views == [(second.b.device, second.b.port), (first.b.device, first.b.port)]:
            break
        assert time.monotonic() < deadline, f"LLDP still shows {views} after the swap"
        time.sleep(1)
    proc = run_cli("verify", "cabling", CLUSTER, "--out", str(running), "--lldp", str(after), "--partial",
                   "--no-speed", check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "swapped" in proc.stdout and first.id in proc.stdout and second.id in proc.stdout, proc.stdout
    assert "1 finding" in proc.stdout, proc.stdout

    # `lab check` fails too: the swapped /31s cannot peer, and LLDP names the swap
    report = tmp_path / "swapped.json"
    proc = lab("check", "--json", str(report), out=running, check=False)
    assert proc.returncode == 1, proc.stdout
    bad = [r for r in json.loads(report.read_text())["rows"] if not r["ok"]]
    assert {r["subject"] for r in bad if r["check"] == "bgp"} >= {"su001-leaf-r0", "su001-leaf-r1", "spine01"}
    assert any(r["check"] == "lldp" and r["expected"] == "swapped" and first.id in r["subject"] for r in bad), bad


@pytest.mark.root
@pytest.mark.slow
def test_down_removes_every_namespace_and_process(running: Path) -> None:
    assert namespaces(PREFIX)
    lab("down", out=running)
    assert namespaces(PREFIX) == []
    assert lab_processes(PREFIX) == []
    assert not Path(f"/run/railforge-lab/{PREFIX}{NAME}").exists()
    again = lab("down", out=running, check=False)
    assert again.returncode == 0, again.stderr


@pytest.mark.root
@pytest.mark.slow
def test_unnumbered_uplinks_on_ipv6_link_local(generated: Path, tmp_path: Path) -> None:
    """The same fabric with `uplinks: unnumbered`: BGP on interfaces (IPv6 link-local, RFC 5549 next hops)."""
    spec = tmp_path / "unnumbered" / "cluster.yaml"
    spec.parent.mkdir()
    text = (ROOT / CLUSTER / "cluster.yaml").read_text()
    assert "uplinks: numbered" in text
    spec.write_text(text.replace("uplinks: numbered", "uplinks: unnumbered"))
    out = tmp_path / "unnumbered" / "generated"
    run_cli("build", str(spec), "--out", str(out))
    plan_ports = json.loads((out / "plan.json").read_text())["devices"]
    leaf = next(d for d in plan_ports if d["name"] == "su001-leaf-r0")
    assert all(p["address"] is None for p in leaf["ports"] if p["name"] == "Ethernet64")
    prefix = "rfu-"
    args = (str(spec.parent), "--out", str(out), "--prefix", prefix)
    try:
        run_cli("lab", "up", *args, "--spines", "2", "--hosts-per-su", "1")
        proc = run_cli("lab", "check", *args, "--json", str(tmp_path / "u.json"), check=False)
        rows = json.loads((tmp_path / "u.json").read_text())["rows"]
        assert proc.returncode == 0, proc.stdout
        assert [r for r in rows if r["check"] == "ecmp" and "x 8 next-hops" in r["expected"]]  # 2 spines x 4 links
        summary = json.loads(subprocess.run(
            ["vtysh", "--vty_socket", f"/run/railforge-lab/{prefix}{NAME}/su001-leaf-r0", "-c",
             "show bgp summary json"], capture_output=True, text=True, check=True).stdout)
        peers = summary["ipv4Unicast"]["peers"]
        established = sorted(k for k, v in peers.items() if v["state"] == "Established")
        assert established == sorted(f"Ethernet{n}" for n in (64, 68, 80, 84, 96, 100, 112, 116))
    finally:
        run_cli("lab", "down", *args, check=False)
    assert namespaces(prefix) == [] and lab_processes(prefix) == []
