"""An unnumbered (IPv6 link-local) eBGP session from two generated frr.conf files, on real FRR 8.4 daemons.

Two network namespaces, one veth cable named as the plan's ports, zebra + bfdd + bgpd in each reading the
rendered frr.conf unchanged. The numbered case runs in the lab (`railforge lab`) on the RoCE examples.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from railforge.plan.switch_model import build_models
from railforge.planner import build_plan
from railforge.spec import load_spec
from tests.conftest import ROOT, require_tool, run_cli

pytestmark = pytest.mark.root
SPEC = ROOT / "tests" / "specs" / "configs-sonic.yaml"
LEAF, SPINE = "su001-stor-leaf1a", "stor-spine01"


def _sh(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), capture_output=True, text=True, check=check, timeout=60)


def _start(ns: str, run: Path, conf: Path) -> str:
    """Daemons on empty startup files, then `vtysh -b` boots the integrated frr.conf, as FRR's init and SONiC do.
    Returns vtysh's report of lines no daemon accepted."""
    run.mkdir(parents=True)
    shutil.copyfile(conf, run / "frr.conf")
    (run / "vtysh.conf").write_text("service integrated-vtysh-config\n")
    (run / "empty.conf").write_text("")
    for p in (run, *run.iterdir()):
        shutil.chown(p, "frr", "frr")
    for daemon in ("zebra", "bfdd", "bgpd"):
        extra = ["--bfdctl", str(run / "bfdd.sock")] if daemon == "bfdd" else []
        _sh("ip", "netns", "exec", ns, f"/usr/lib/frr/{daemon}", "-d", "-u", "frr", "-g", "frr",
            "--vty_socket", str(run), "-z", str(run / "zserv.api"), "-i", str(run / f"{daemon}.pid"), "-P", "0",
            "-f", str(run / "empty.conf"), "--log", f"file:{run / f'{daemon}.log'}", *extra)
        deadline = time.monotonic() + 10
        while not (run / f"{daemon}.vty").exists():
            assert time.monotonic() < deadline, f"{daemon} did not start in {ns}"
            time.sleep(0.05)
    boot = _sh("vtysh", "--vty_socket", str(run), "--config_dir", str(run), "-b", check=False)
    return boot.stdout + boot.stderr


def _stop(run: Path) -> None:
    for pid_file in run.glob("*.pid"):
        with contextlib.suppress(ValueError, ProcessLookupError):
            os.kill(int(pid_file.read_text().strip()), signal.SIGTERM)


def _vtysh_json(run: Path, command: str) -> dict:
    out = _sh("vtysh", "--vty_socket", str(run), "-c", command, check=False).stdout
    return json.loads(out) if out.strip().startswith("{") else {}


def test_unnumbered_session_comes_up_and_loopbacks_reach_each_other(tmp_path):
    require_tool("root", "vtysh", "ip", "/usr/lib/frr/bgpd")
    out = tmp_path / "out"
    run_cli("build", str(SPEC), "--out", str(out), "--only", "sonic")
    spec, lines = load_spec(SPEC)
    models = {m.hostname: m for m in build_models(build_plan(spec, lines, str(SPEC)))}
    leaf, spine = models[LEAF], models[SPINE]
    uplink = next(n for n in leaf.neighbors if n.peer_name == SPINE)
    assert uplink.address is None, "the storage fabric of this spec is unnumbered"
    tag = f"rfcfg{os.getpid()}"
    ns = {LEAF: f"{tag}-leaf", SPINE: f"{tag}-spine"}
    base = Path(tempfile.mkdtemp(prefix="rf-frr-"))  # pytest's tmp_path is private to root; FRR runs as frr
    base.chmod(0o755)
    runs = {name: base / name for name in ns}
    try:
        for name, n in ns.items():
            _sh("ip", "netns", "add", n)
            _sh("ip", "-n", n, "link", "set", "lo", "up")
            _sh("ip", "netns", "exec", n, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1",
                "net.ipv6.conf.all.forwarding=1")
            _sh("ip", "-n", n, "addr", "add", models[name].loopback, "dev", "lo")
        _sh("ip", "link", "add", uplink.interface, "netns", ns[LEAF], "type", "veth", "peer", "name",
            uplink.peer_port, "netns", ns[SPINE])
        _sh("ip", "-n", ns[LEAF], "link", "set", uplink.interface, "mtu", str(leaf.mtu), "up")
        _sh("ip", "-n", ns[SPINE], "link", "set", uplink.peer_port, "mtu", str(spine.mtu), "up")
        for name in ns:
            report = _start(ns[name], runs[name], out / "configs" / name / "frr.conf")
            assert "%" not in report and "line " not in report, f"{name}: vtysh -b rejected lines:\n{report}"
        deadline, state = time.monotonic() + 90, ""
        while time.monotonic() < deadline:
            state = _vtysh_json(runs[LEAF], f"show bgp neighbors {uplink.interface} json") \
                .get(uplink.interface, {}).get("bgpState", "")
            if state == "Established":
                break
            time.sleep(1)
        assert state == "Established", (runs[LEAF] / "bgpd.log").read_text()[-2000:]
        spine_lo = spine.loopback.split("/")[0]
        deadline, kernel = time.monotonic() + 30, ""
        while time.monotonic() < deadline and "proto bgp" not in kernel:
            kernel = _sh("ip", "-n", ns[LEAF], "route", "show", spine_lo).stdout
            time.sleep(0.5)
        # FRR 8.4 installs an IPv4 route over an IPv6 link-local next hop as 169.254.0.1 onlink (RFC 5549)
        assert f"dev {uplink.interface}" in kernel and ("via 169.254.0.1" in kernel or "via inet6 fe80::" in kernel), \
            kernel
        ping = _sh("ip", "netns", "exec", ns[LEAF], "ping", "-c", "2", "-W", "2", "-I", leaf.loopback.split("/")[0],
                   spine_lo, check=False)
        assert ping.returncode == 0, ping.stdout + ping.stderr
        received = set(_vtysh_json(runs[SPINE], "show ip route bgp json"))
        assert received == {leaf.loopback}, f"the spine learned {received}; the leaf has only its loopback up"
        deadline, bfd = time.monotonic() + 30, []
        while time.monotonic() < deadline and not any(p.get("status") == "up" for p in bfd):
            out = _sh("vtysh", "--vty_socket", str(runs[LEAF]), "-c", "show bfd peers json", check=False).stdout
            bfd = json.loads(out) if out.strip().startswith("[") else []
            time.sleep(0.5)
        up = [p for p in bfd if p.get("status") == "up" and p.get("interface") == uplink.interface]
        assert up and up[0]["detect-multiplier"] == 3 and up[0]["transmit-interval"] == 300, bfd
        peer = _vtysh_json(runs[LEAF], f"show bgp neighbors {uplink.interface} json")[uplink.interface]
        assert peer["remoteAs"] == spine.asn and peer["localAs"] == leaf.asn
    finally:
        for run in runs.values():
            _stop(run)
        time.sleep(0.5)
        for n in ns.values():
            _sh("ip", "netns", "delete", n, check=False)
        shutil.rmtree(base, ignore_errors=True)
