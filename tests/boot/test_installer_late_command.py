"""The installer's late command, run as the Debian installer runs it, short of a whole installation (no disk image or
package mirror for a full install in a test; see docs/bare-metal.md, "not proven").

The installer runs `preseed/late_command` with its busybox `sh -c`, its busybox `wget`, and `in-target` (a chroot
into /target, the installed system). Here: a chroot holding busybox-static with those three names stands in for the
installer's environment, and /target inside it is a Debian 12 system, the stateless image's root file system
(tests/boot/stateless.py: it has python3 and iproute2 as an installed node has) under a writable overlay whose upper
folder is kept for the checks. It runs in a network namespace at the host's planned address and boot MAC, where
python's http.server serves the generated folder and `railforge boot report-in` listens in another namespace.
The command must install the SSH key, write the report-in settings (0600, the host's token), fetch and enable the
client's unit and report `installed`: report-in records it and switches the host's script to the local disk.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from railforge.baremetal.reportkey import host_token, load_key
from railforge.plan.io import read_plan
from tests.baremetal.conftest import SPEC, fill_host_macs
from tests.conftest import ROOT, require_tool, run_cli

SRV, NODE, PORTS = "i38-lc-srv", "i38-lc-node", (18495, 18496)
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIRfzLateCommandKey0123456789abcdef ops@rf"
BUSYBOX = Path("/bin/busybox")


def _sh(*cmd: str) -> None:
    subprocess.run(cmd, check=True, capture_output=True)


@pytest.mark.root
def test_installer_late_command_reports_installed_and_switches_the_host_to_its_disk(tmp_path: Path) -> None:
    require_tool("root", "ip", "unshare", "chroot")
    from tests.boot.stateless import stateless_image

    image = stateless_image()
    base, out = tmp_path, tmp_path / "generated"
    run_cli("build", str(SPEC), "--out", str(out), "--only", "plan,hosts")
    rows = fill_host_macs(out / "host-macs.csv", base / "host-macs.csv")
    host = rows[2]
    macs = base / "host-macs.csv"
    macs.write_text(macs.read_text().replace(f",SN-{host['host']},,", ",,installer,"))
    plan = read_plan(out / "plan.json")
    dev = next(d for d in plan.devices if d.name == host["host"])
    gateway, address = dev.bond.gateway, dev.bond.address
    server, report = f"http://{gateway}:{PORTS[0]}", f"http://{gateway}:{PORTS[1]}/register"
    creds = base / "creds.yml"
    creds.write_text(f"ssh_authorized_keys: ['{KEY}']\n")
    state, key = base / "state", base / "report.key"
    run_cli("boot", "files", str(base), "--out", str(out), "--server", server, "--report", report, "--report-key",
            str(key), "--credentials", str(creds))
    preseed = (out / "boot" / "preseed" / f"{host['host']}.cfg").read_text()
    late = next(ln for ln in preseed.splitlines() if ln.startswith("d-i preseed/late_command string "))
    late = late.removeprefix("d-i preseed/late_command string ")
    script = out / "boot" / "hosts" / f"{host['boot_mac'].replace(':', '-')}.ipxe"
    assert "target installer" in script.read_text()

    di = base / "d-i"  # the installer's environment: busybox sh, wget, chroot; in-target
    (di / "bin").mkdir(parents=True)
    shutil.copy(BUSYBOX, di / "bin" / "busybox")
    for applet in ("sh", "wget", "chroot", "mkdir", "cat"):
        (di / "bin" / applet).symlink_to("busybox")
    (di / "bin" / "in-target").write_text('#!/bin/sh\nexec chroot /target "$@"\n')
    (di / "bin" / "in-target").chmod(0o755)
    (di / "target").mkdir()
    (di / "late.sh").write_text(late + "\n")
    upper, work = base / "upper", base / "work"
    upper.mkdir()
    work.mkdir()
    mounts = (f"mount -t squashfs -o ro,loop {image / 'filesystem.squashfs'} {base / 'lower'} && "
              f"mount -t overlay -o lowerdir={base / 'lower'},upperdir={upper},workdir={work} overlay {di / 'target'}"
              f" && mount -t proc proc {di / 'target' / 'proc'} && mount -t sysfs sys {di / 'target' / 'sys'}")
    # The image carries the client, its unit enabled and /etc/railforge; a freshly installed system has none of them,
    # so they are removed from /target (whiteouts in the upper folder) and the late command must put each back.
    fresh = " ".join(str(di / "target" / p) for p in (
        "usr/local/sbin/railforge-report", "etc/systemd/system/railforge-report-in.service",
        "etc/systemd/system/multi-user.target.wants/railforge-report-in.service", "etc/railforge"))
    mounts += f" && rm -rf {fresh} && ! ls -d {fresh} 2>/dev/null"
    (base / "lower").mkdir()

    for ns in (SRV, NODE):
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        _sh("ip", "netns", "add", ns)
    procs: list[subprocess.Popen] = []
    try:
        _sh("ip", "link", "add", "eth0", "netns", NODE, "address", host["boot_mac"], "type", "veth", "peer", "name",
            "i38-lc-s", "netns", SRV)
        _sh("ip", "-n", SRV, "addr", "add", f"{gateway}/{address.split('/')[1]}", "dev", "i38-lc-s")
        _sh("ip", "-n", NODE, "addr", "add", address, "dev", "eth0")
        for ns, link in ((SRV, "i38-lc-s"), (NODE, "eth0"), (SRV, "lo"), (NODE, "lo")):
            _sh("ip", "-n", ns, "link", "set", link, "up")
        procs.append(subprocess.Popen(["ip", "netns", "exec", SRV, sys.executable, "-m", "http.server",
                                       str(PORTS[0]), "--bind", gateway, "--directory", str(out)],
                                      stdout=(base / "http.log").open("w"), stderr=subprocess.STDOUT))
        log = base / "report-in.log"
        procs.append(subprocess.Popen(["ip", "netns", "exec", SRV, sys.executable, "-c",
                                       "from railforge.cli.main import app; app()", "boot", "report-in", str(base),
                                       "--out", str(out), "--listen", f"{gateway}:{PORTS[1]}", "--state", str(state),
                                       "--report-key", str(key)], cwd=ROOT,
                                      stdout=log.open("w"), stderr=subprocess.STDOUT))
        deadline = time.monotonic() + 30
        while "report-in on" not in log.read_text() or "Serving HTTP" not in (base / "http.log").read_text():
            assert all(p.poll() is None for p in procs) and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        run = subprocess.run(["ip", "netns", "exec", NODE, "unshare", "--mount", "--propagation", "private", "sh",
                              "-c", f"{mounts} && chroot {di} /bin/sh -c '. /late.sh'"],
                             capture_output=True, text=True, timeout=300,
                             env={"PATH": "/bin:/usr/bin:/sbin:/usr/sbin"})
        assert run.returncode == 0, run.stdout + run.stderr + log.read_text()
    finally:
        for p in procs:
            p.terminate()
            p.wait(timeout=10)
        for ns in (SRV, NODE):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)

    token = host_token(load_key(key), host["host"], host["boot_mac"])
    settings = upper / "etc" / "railforge" / "report-in.json"
    assert stat.S_IMODE(settings.stat().st_mode) == 0o600
    assert json.loads(settings.read_text()) == {"host": host["host"], "mac": host["boot_mac"], "report": report,
                                                "token": token}
    assert (upper / "root" / ".ssh" / "authorized_keys").read_text() == KEY + "\n"
    client = upper / "usr" / "local" / "sbin" / "railforge-report"
    assert client.read_bytes() == (ROOT / "railforge" / "baremetal" / "client" / "railforge-report").read_bytes()
    assert os.access(client, os.X_OK)
    wants = upper / "etc" / "systemd" / "system" / "multi-user.target.wants" / "railforge-report-in.service"
    assert os.readlink(wants) == "/etc/systemd/system/railforge-report-in.service"
    assert "railforge-report: installed: " in run.stdout
    reports = [json.loads(line) for line in (state / "reports.jsonl").read_text().splitlines()]
    assert [(r["host"], r["phase"], r["status"], r["source"], r["addresses"]) for r in reports] == [
        (host["host"], "installed", "booted", address.split("/")[0], [address])]
    assert (state / "installed-hosts.txt").read_text() == f"{host['host']}\n"
    assert not (state / "booted-hosts.txt").read_text()
    assert script.read_text().splitlines()[-1] == "exit"
