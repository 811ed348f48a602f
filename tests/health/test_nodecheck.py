"""The node check for real in network namespaces (links, addresses, MTU, speed, LLDP via lldpd) and against
recorded nvidia-smi outputs (tests/reference/nvidia-smi, see PROVENANCE.md) for the GPU checks.

A node namespace gets su001-gpu01's four rails from the health-roce plan's host_vars; each rail is a veth to
its planned leaf's namespace, where lldpd announces the leaf's name and port. Faults are made in the kernel.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from railforge.health.hostvars import BondMemberVars, BondVars, HostVars, HostVarsError, read_host_vars
from railforge.health.nodecheck import Sources, check_bond, check_gpus_xml, check_nvlink, check_xid, textfile
from tests.conftest import ROOT, require_tool, run_cli

SPEC = ROOT / "tests" / "specs" / "health-roce.yaml"
REF = ROOT / "tests" / "reference" / "nvidia-smi"
NODE = "su001-gpu01"
PREFIX = "rfn-"


def ns(name: str) -> str:
    return f"{PREFIX}{name}"


def sh(*cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, check=check, timeout=30)


@pytest.fixture(scope="module")
def host_vars(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("hr") / "out"
    run_cli("build", str(SPEC), "--out", str(out))
    return out / "ansible" / "host_vars" / f"{NODE}.json"


@pytest.fixture(scope="module")
def node(host_vars: Path, tmp_path_factory):
    require_tool("root", "ip", "lldpd", "lldpcli")
    hv = read_host_vars(host_vars)
    leaves = sorted({r.leaf for r in hv.railforge_rails})
    names = [NODE, *leaves]
    run = Path(tempfile.mkdtemp(prefix="rfn-lldp-", dir="/run"))  # lldpcli is setuid _lldpd: not under /tmp/pytest-*
    run.chmod(0o755)
    procs = []
    for n in names:
        sh("ip", "netns", "del", ns(n), check=False)
        sh("ip", "netns", "add", ns(n))
        sh("ip", "-n", ns(n), "link", "set", "lo", "up")
    try:
        for r in hv.railforge_rails:
            sh("ip", "link", "add", r.ifname, "netns", ns(NODE), "type", "veth", "peer", "name", r.leaf_port,
               "netns", ns(r.leaf))
            sh("ip", "-n", ns(NODE), "link", "set", r.ifname, "mtu", "9000", "up")
            sh("ip", "-n", ns(NODE), "addr", "add", r.address, "dev", r.ifname)
            sh("ip", "-n", ns(r.leaf), "link", "set", r.leaf_port, "mtu", "9216", "up")
        for n in names:
            ports = [r.ifname for r in hv.railforge_rails] if n == NODE else \
                [r.leaf_port for r in hv.railforge_rails if r.leaf == n]
            conf = run / f"{n}.conf"
            conf.write_text(f"configure system hostname {n}\nconfigure lldp portidsubtype ifname\n"
                            "configure lldp tx-interval 1\n")
            procs.append(subprocess.Popen(["ip", "netns", "exec", ns(n), "lldpd", "-d", "-u", str(run / f"{n}.sock"),
                                           "-I", ",".join(ports), "-O", str(conf)],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        yield hv, host_vars, run / f"{NODE}.sock"
    finally:
        for p in procs:
            p.terminate()
            p.wait(10)
        for n in names:
            sh("ip", "netns", "del", ns(n), check=False)
        shutil.rmtree(run, ignore_errors=True)


def nodecheck(host_vars: Path, sock: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", "netns", "exec", ns(NODE), sys.executable, "-m", "railforge.health.nodecheck",
                           "--host-vars", str(host_vars), "--gpus", "0", "--mtu", "9000",
                           "--skip", "bond,peermem,xid,pcie", "--lldp-socket", str(sock), *extra],
                          capture_output=True, text=True, cwd=ROOT, timeout=60,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})


def wait_ok(host_vars: Path, sock: Path, *extra: str) -> subprocess.CompletedProcess:
    end = time.monotonic() + 30
    while True:
        proc = nodecheck(host_vars, sock, *extra)
        if proc.returncode == 0 or time.monotonic() > end:
            return proc
        time.sleep(1)


@pytest.mark.root
def test_planned_node_passes_and_faults_name_the_cable(node, tmp_path: Path) -> None:
    hv, host_vars, sock = node
    ok = wait_ok(host_vars, sock, "--skip", "bond,peermem,xid,pcie,speed")
    assert ok.returncode == 0 and ok.stdout.startswith("OK:"), ok.stdout + ok.stderr
    r0, r1, r2, r3 = hv.railforge_rails

    speed = nodecheck(host_vars, sock)  # veth reports 10000 Mb/s, the plan says 200000
    assert speed.returncode == 1
    assert f"rail0 {r0.cable}: speed 10000 Mb/s, planned 200000" in speed.stdout.splitlines()

    sh("ip", "-n", ns(r1.leaf), "link", "set", r1.leaf_port, "down")  # the far end goes: no carrier here
    sh("ip", "-n", ns(NODE), "link", "set", r2.ifname, "mtu", "1500")
    sh("ip", "-n", ns(NODE), "addr", "del", r3.address, "dev", r3.ifname)
    prom = tmp_path / "nodecheck.prom"
    bad = nodecheck(host_vars, sock, "--skip", "bond,peermem,xid,pcie,speed,lldp", "--textfile", str(prom))
    assert bad.returncode == 1
    assert bad.stdout.splitlines() == [
        f"rail1 {r1.cable}: no carrier (cable to {r1.leaf}:{r1.leaf_port})",
        f"rail2 {r2.cable}: MTU 1500, planned 9000",
        f"rail3 {r3.cable}: address {r3.address} missing (has none)",
    ]
    text = prom.read_text()
    assert f'railforge_nodecheck_finding{{component="rail1",cable="{r1.cable}"}} 1' in text
    assert "railforge_nodecheck_findings 3" in text
    sh("ip", "-n", ns(r1.leaf), "link", "set", r1.leaf_port, "up")
    sh("ip", "-n", ns(NODE), "link", "set", r2.ifname, "mtu", "9000")
    sh("ip", "-n", ns(NODE), "addr", "add", r3.address, "dev", r3.ifname)
    assert wait_ok(host_vars, sock, "--skip", "bond,peermem,xid,pcie,speed").returncode == 0


@pytest.mark.root
def test_swapped_cable_is_an_lldp_finding(node) -> None:
    hv, host_vars, sock = node
    r2, r3 = hv.railforge_rails[2], hv.railforge_rails[3]
    # re-cable: the node's rail2 now lands on rail 3's leaf port, and rail3 on rail 2's
    sh("ip", "-n", ns(NODE), "link", "del", r2.ifname)
    sh("ip", "-n", ns(NODE), "link", "del", r3.ifname)
    for mine, far in ((r2, r3), (r3, r2)):
        sh("ip", "link", "add", mine.ifname, "netns", ns(NODE), "type", "veth", "peer", "name", far.leaf_port,
           "netns", ns(far.leaf))
        sh("ip", "-n", ns(NODE), "link", "set", mine.ifname, "mtu", "9000", "up")
        sh("ip", "-n", ns(NODE), "addr", "add", mine.address, "dev", mine.ifname)
        sh("ip", "-n", ns(far.leaf), "link", "set", far.leaf_port, "mtu", "9216", "up")
    end = time.monotonic() + 40
    want = {f"rail2 {r2.cable}: LLDP neighbour {r3.leaf}:{r3.leaf_port}, planned {r2.leaf}:{r2.leaf_port}",
            f"rail3 {r3.cable}: LLDP neighbour {r2.leaf}:{r2.leaf_port}, planned {r3.leaf}:{r3.leaf_port}"}
    while True:
        proc = nodecheck(host_vars, sock, "--skip", "bond,peermem,xid,pcie,speed")
        if set(proc.stdout.splitlines()) == want or time.monotonic() > end:
            break
        time.sleep(1)
    assert set(proc.stdout.splitlines()) == want, proc.stdout + proc.stderr
    assert proc.returncode == 1


BONDING = """Ethernet Channel Bonding Driver: v6.1.0

Bonding Mode: IEEE 802.3ad Dynamic link aggregation
Transmit Hash Policy: layer3+4 (1)
MII Status: up
MII Polling Interval (ms): 100
Up Delay (ms): 0
Down Delay (ms): 0

802.3ad info
LACP active: on
LACP rate: fast
Min links: 0
Aggregator selection policy (ad_select): stable

Slave Interface: stor0
MII Status: up
Speed: 100000 Mbps
Duplex: full
Link Failure Count: 0
Aggregator ID: 1

Slave Interface: stor1
MII Status: down
Speed: Unknown
Duplex: Unknown
Link Failure Count: 1
Aggregator ID: 2
"""


def test_bond_members_from_proc_net_bonding(tmp_path: Path) -> None:
    """No bonding driver in this kernel: the file is the kernel's /proc/net/bonding format (bond_procfs.c)."""
    (tmp_path / "proc/net/bonding").mkdir(parents=True)
    (tmp_path / "proc/net/bonding/bond0").write_text(BONDING)
    members = [BondMemberVars(ifname=i, speed_mbps=100000, switch=f"stor-leaf{i[-1]}", switch_port="Ethernet0",
                              cable=f"STO-00000{i[-1]}") for i in ("stor0", "stor1", "stor2")]
    hv = HostVars(railforge_rails=[], railforge_bond=BondVars(name="bond0", mtu=9000, members=members))
    got = [f.line() for f in check_bond(hv, Sources(sys_root=tmp_path))]
    assert got == ["bond bond0 stor1 STO-000001: MII status down",
                   "bond bond0 stor2 STO-000002: not a member (cable to stor-leaf2:Ethernet0)"]
    missing = HostVars(railforge_rails=[], railforge_bond=BondVars(name="bond1", mtu=9000, members=[]))
    assert [f.line() for f in check_bond(missing, Sources(sys_root=tmp_path))] == [
        "bond bond1: missing (/proc/net/bonding has no such bond)"]


def test_gpu_checks_on_recorded_nvidia_smi_xml() -> None:
    xml = (REF / "a100-sxm4-gpu0.xml").read_text()
    assert check_gpus_xml(xml, 1, "A100-SXM4", nvswitch=True) == []
    assert [f.line() for f in check_gpus_xml(xml, 8, "H100", nvswitch=True)] == [
        "gpu: 1 GPUs, planned 8", "gpu 00000000:01:00.0: model 'NVIDIA A100-SXM4-80GB', planned 'H100'"]
    bad = (xml.replace("<dram_uncorrectable>0</dram_uncorrectable>", "<dram_uncorrectable>3</dram_uncorrectable>", 1)
           .replace("<current_link_width>16x</current_link_width>", "<current_link_width>8x</current_link_width>")
           .replace("<state>N/A</state>", "<state>In Progress</state>")
           .replace("<reset_required>No</reset_required>", "<reset_required>Yes</reset_required>"))
    assert [f.line() for f in check_gpus_xml(bad, 1, "A100", nvswitch=True)] == [
        "gpu 00000000:01:00.0: 3 uncorrectable ECC errors since the driver loaded",
        "gpu 00000000:01:00.0: reset required",
        "gpu 00000000:01:00.0: PCIe link 8x of 16x",
        "gpu 00000000:01:00.0: fabric manager state In Progress (N/A)"]
    assert [f.line() for f in check_gpus_xml("<nvidia_smi_log", 8, "", True)][0].startswith("gpu: nvidia-smi -q -x")


def test_nvlink_and_xid_on_recorded_formats() -> None:
    got = [f.line() for f in check_nvlink((REF / "nvlink-status-h100-pcie.txt").read_text())]
    assert got == ["nvlink gpu0 link4: <inactive>", "nvlink gpu0 link5: <inactive>"]
    log = ("[12345.678901] NVRM: Xid (PCI:0000:18:00): 79, pid=1234, GPU has fallen off the bus.\n"
           "[12345.678902] NVRM: GPU at PCI:0000:18:00.0 has fallen off the bus.\n"
           "[12399.000001] NVRM: Xid (PCI:0000:18:00): 79, pid=0, GPU has fallen off the bus.\n"
           "[12400.1] NVRM: Xid (PCI:0000:b9:00): 74, pid=<unknown>, name=<unknown>, NVLink: fatal error\n")
    assert [f.line() for f in check_xid(log)] == ["gpu 0000:18:00: Xid 79 in the kernel log (2x)",
                                                  "gpu 0000:b9:00: Xid 74 in the kernel log (1x)"]


def test_main_with_a_recorded_nvidia_smi_and_bad_host_vars(host_vars: Path, tmp_path: Path) -> None:
    fake = tmp_path / "nvidia-smi"
    fake.write_text(f"#!/bin/sh\n[ \"$1\" = nvlink ] && exec cat {REF / 'nvlink-status-h100-pcie.txt'}\n"
                    f"exec cat {REF / 'a100-sxm4-gpu0.xml'}\n")
    fake.chmod(0o755)
    proc = subprocess.run([sys.executable, "-m", "railforge.health.nodecheck", "--host-vars", str(host_vars),
                           "--gpus", "1", "--gpu-model", "A100", "--nvidia-smi", str(fake),
                           "--skip", "link,speed,mtu,address,lldp,bond,pcie,xid,peermem"],
                          capture_output=True, text=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT)}, timeout=60)
    assert proc.returncode == 1 and proc.stdout.splitlines() == ["nvlink gpu0 link4: <inactive>",
                                                                 "nvlink gpu0 link5: <inactive>"]
    broken = tmp_path / "hv.json"
    broken.write_text(json.dumps({"railforge_rails": [{"rail": 0, "ifname": "rail0", "speed_mbps": 0}]}))
    with pytest.raises(HostVarsError, match=r"hv.json: railforge_rails.0.speed_mbps: Input should be greater"):
        read_host_vars(broken)
    assert f"{tmp_path}: not a regular file" == str(_raises(lambda: read_host_vars(tmp_path)))
    bad = subprocess.run([sys.executable, "-m", "railforge.health.nodecheck", "--host-vars", str(broken)],
                         capture_output=True, text=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT)}, timeout=60)
    assert bad.returncode == 2 and "speed_mbps" in bad.stderr and "Traceback" not in bad.stderr


def _raises(fn) -> Exception:
    try:
        fn()
    except Exception as exc:  # noqa: BLE001
        return exc
    raise AssertionError("no error")


def test_textfile_escapes_and_lists_lldp(host_vars: Path) -> None:
    from railforge.health.nodecheck import Finding
    hv = read_host_vars(host_vars)
    text = textfile(hv, [Finding('rail0 "x"\n', "CMP-1", "m")], {"rail0": ("leaf", "Ethernet0"), "lo": ("a", "b")})
    assert 'component="rail0 \\"x\\"\\n"' in text
    assert 'railforge_lldp_neighbor{port="rail0",peer_device="leaf",peer_port="Ethernet0"} 1' in text
    assert 'port="lo"' not in text


def test_drain_without_scontrol_is_reported_and_keeps_the_exit_status(tmp_path):
    """A HealthCheckProgram on a node whose PATH lacks scontrol says so on stderr; no traceback, still exit 1."""
    hv = tmp_path / "hv.json"
    hv.write_text(json.dumps({"railforge_rails": [{
        "rail": 0, "ifname": "rail0", "speed_mbps": 200000, "address": "100.64.0.2/26",
        "leaf": "su001-leaf-r0", "leaf_port": "Ethernet0", "cable": "CMP-000001"}]}))
    empty = tmp_path / "bin"
    empty.mkdir()
    proc = subprocess.run(
        [sys.executable, "-m", "railforge.health.nodecheck", "--host-vars", str(hv), "--gpus", "0",
         "--skip", "lldp,bond,xid,peermem", "--drain", "--node-name", "su001-gpu01"],
        capture_output=True, text=True, timeout=60, cwd=ROOT, env={"PATH": str(empty), "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.splitlines() == ["network: ip -j addr show failed: ip not found"]
    assert proc.stderr == "error: drain su001-gpu01: scontrol not found on PATH\n"
