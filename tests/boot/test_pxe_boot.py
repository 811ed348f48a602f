"""A real PXE boot from the plan: QEMU (TCG; KVM hangs on these machines) with a planned boot-NIC MAC on a tap in a
network namespace, bridged to where Kea 2.2 serves `railforge ztp`'s configuration, python's http.server serves the
generated folder (boot.ipxe, the host scripts, the images), dnsmasq serves TFTP only (the TFTP root holds Debian's
ipxe `snponly.efi` as ipxe.efi) and `railforge boot report-in` listens with its key. Two machines boot side by side:

- a stateless host in UEFI mode boots the image `railforge boot image` built (tests/boot/stateless.py: Debian 12,
  the roles' packages, squashfs under a tmpfs overlay): OVMF's own PXE client on a virtio NIC without option ROM
  asks with client architecture 7, Kea's railforge-uefi-pxe class sends it to TFTP for ipxe.efi, iPXE asks again
  as "iPXE" and gets boot.ipxe over HTTP, which chains the host's script by MAC; the kernel boots through its EFI
  stub, the initramfs fetches filesystem.squashfs over HTTP and mounts it, systemd starts, and the image's report
  unit reports in with the host's token: recorded as booted;
- an installer host in legacy BIOS mode (SeaBIOS and QEMU's iPXE ROM, Debian ipxe-qemu, straight to boot.ipxe) with
  a serial that is not the recorded one (a swapped server). Its "installer" is the busybox stand-in of
  tests/boot/image.py (the Debian netboot kernel and a busybox initramfs, in boot/images/debian-installer), which
  reports `installed` as the installer's late command does and reboots: report-in switches its script to the local
  disk, and the machine's second PXE boot gets that script (leave iPXE) and fetches no installer; its serial is
  reported by rack and U.

Each QEMU has a hard timeout and is killed by PID.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from railforge.plan.io import read_plan
from tests.baremetal.conftest import SPEC, fill_host_macs
from tests.conftest import ROOT, require_tool, run_cli

NS, BRIDGE, KEEP = "i28-pxe", "i28-br0", ("i28-keep0", "i28-keep1")
HTTP_PORT, REPORT_PORT = 18480, 18481
BOOT_TIMEOUT = 900  # seconds for both machines: the stateless image ~2-4 min idle, far slower when shared
SNPONLY = Path("/usr/lib/ipxe/snponly.efi")
OVMF = (Path("/usr/share/OVMF/OVMF_CODE_4M.fd"), Path("/usr/share/OVMF/OVMF_VARS_4M.fd"))


def _need_files(*paths: Path) -> None:
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        msg = f"needs {', '.join(missing)}"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{msg}, and CI=true forbids skipping")
        pytest.skip(msg)


def _sh(*cmd: str) -> None:
    subprocess.run(cmd, check=True, capture_output=True)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    require_tool("root", "qemu-system-x86_64", "kea-dhcp4", "dnsmasq", "cpio", "ip")
    from tests.boot.image import BUSYBOX, DI_INITRD, KERNEL, build_image
    from tests.boot.stateless import link_into, stateless_image

    _need_files(KERNEL, DI_INITRD, BUSYBOX, Path("/usr/lib/ipxe/qemu/pxe-e1000.rom"), SNPONLY, *OVMF)
    base = tmp_path_factory.mktemp("pxe")
    out = base / "generated"
    run_cli("build", str(SPEC), "--out", str(out))
    rows = fill_host_macs(out / "host-macs.csv", base / "host-macs.csv")
    macs = base / "host-macs.csv"
    installer = rows[1]["host"]
    macs.write_text(macs.read_text().replace(f",SN-{installer},,", f",SN-{installer},installer,"))
    plan = read_plan(out / "plan.json")
    first = next(d for d in plan.devices if d.name == rows[0]["host"])
    gateway, prefixlen = first.bond.gateway, first.bond.address.split("/")[1]
    server, report = f"http://{gateway}:{HTTP_PORT}", f"http://{gateway}:{REPORT_PORT}/register"
    run_cli("ztp", str(base), "--out", str(out), "--server", server, "--dhcp-interface", BRIDGE,
            "--tftp-server", gateway, "--lease-file", str(base / "leases.csv"))
    tftp = base / "tftp"
    tftp.mkdir()
    shutil.copy(SNPONLY, tftp / "ipxe.efi")
    run_cli("boot", "files", str(base), "--out", str(out), "--server", server, "--report", report,
            "--report-key", str(base / "report.key"), "--kernel-arg", "panic=5")
    image = stateless_image()
    link_into(image, out / "boot" / "images" / "stateless", {n: n for n in ("vmlinuz", "initrd.img",
                                                                            "filesystem.squashfs")})
    kernel, initrd = build_image()
    link_into(kernel.parent, out / "boot" / "images" / "debian-installer", {kernel.name: "linux",
                                                                            initrd.name: "initrd.gz"})

    subprocess.run(["ip", "netns", "del", NS], capture_output=True)
    _sh("ip", "netns", "add", NS)
    procs: list[subprocess.Popen] = []
    try:
        _sh("ip", "-n", NS, "link", "add", BRIDGE, "type", "bridge")
        _sh("ip", "-n", NS, "link", "add", KEEP[0], "type", "veth", "peer", "name", KEEP[1])  # keeps the bridge up
        _sh("ip", "-n", NS, "link", "set", KEEP[0], "master", BRIDGE)
        _sh("ip", "-n", NS, "addr", "add", f"{gateway}/{prefixlen}", "dev", BRIDGE)
        for dev in ("lo", *KEEP, BRIDGE):
            _sh("ip", "-n", NS, "link", "set", dev, "up")
        deadline = time.monotonic() + 20
        while "state UP" not in subprocess.run(["ip", "-n", NS, "link", "show", BRIDGE], capture_output=True,
                                               text=True).stdout:
            assert time.monotonic() < deadline, f"{BRIDGE} did not come up"
            time.sleep(0.2)
        env = {**os.environ, "KEA_PIDFILE_DIR": str(base), "KEA_LOCKFILE_DIR": str(base)}
        kea_log = base / "kea.log"
        procs.append(subprocess.Popen(["ip", "netns", "exec", NS, "kea-dhcp4", "-c", str(out / "ztp/kea-dhcp4.conf")],
                                      env=env, stdout=kea_log.open("w"), stderr=subprocess.STDOUT))
        procs.append(subprocess.Popen(["ip", "netns", "exec", NS, "dnsmasq", "--no-daemon", "--conf-file=/dev/null",
                                       "--port=0", "--enable-tftp", f"--tftp-root={tftp}", f"--interface={BRIDGE}",
                                       "--bind-interfaces", "--user=root", f"--pid-file={base / 'dnsmasq.pid'}",
                                       "--log-facility=-"],
                                      stdout=(base / "tftp.log").open("w"), stderr=subprocess.STDOUT))
        procs.append(subprocess.Popen(["ip", "netns", "exec", NS, sys.executable, "-m", "http.server", str(HTTP_PORT),
                                       "--bind", gateway, "--directory", str(out)],
                                      stdout=(base / "http.log").open("w"), stderr=subprocess.STDOUT))
        procs.append(subprocess.Popen(["ip", "netns", "exec", NS, sys.executable, "-c",
                                       "from railforge.cli.main import app; app()", "boot", "report-in", str(base),
                                       "--out", str(out), "--listen", f"{gateway}:{REPORT_PORT}",
                                       "--state", str(base / "state"), "--report-key", str(base / "report.key")],
                                      cwd=ROOT,
                                      stdout=(base / "report-in.log").open("w"), stderr=subprocess.STDOUT))
        deadline = time.monotonic() + 30
        while "DHCP4_STARTED" not in kea_log.read_text() or "report-in on" not in (base / "report-in.log").read_text():
            assert all(p.poll() is None for p in procs), kea_log.read_text() + (base / "report-in.log").read_text()
            assert time.monotonic() < deadline, kea_log.read_text()
            time.sleep(0.2)
        yield base, out, rows, image, server
    finally:
        for p in procs:
            _stop(p)
        subprocess.run(["ip", "netns", "del", NS], capture_output=True)


def _qemu(base: Path, tap: str, mac: str, serial: str, uefi: bool) -> tuple[subprocess.Popen, Path]:
    _sh("ip", "-n", NS, "tuntap", "add", "dev", tap, "mode", "tap")
    _sh("ip", "-n", NS, "link", "set", tap, "master", BRIDGE)
    _sh("ip", "-n", NS, "link", "set", tap, "up")
    console = base / f"console-{tap}.log"
    if uefi:
        vars_fd = base / f"{tap}-vars.fd"
        shutil.copy(OVMF[1], vars_fd)
        firmware = ["-machine", "q35", "-m", "2048", "-no-reboot",
                    "-drive", f"if=pflash,format=raw,readonly=on,file={OVMF[0]}",
                    "-drive", f"if=pflash,format=raw,file={vars_fd}",
                    "-device", f"virtio-net-pci,netdev=n0,mac={mac},romfile="]
    else:
        firmware = ["-machine", "pc", "-m", "512", "-device", f"e1000,netdev=n0,mac={mac}"]  # reboots once
    proc = subprocess.Popen(
        ["ip", "netns", "exec", NS, "qemu-system-x86_64", "-accel", "tcg", *firmware,
         "-nographic", "-monitor", "none", "-serial", f"file:{console}", "-boot", "n",
         "-netdev", f"tap,id=n0,ifname={tap},script=no,downscript=no",
         "-smbios", f"type=1,serial={serial}", "-pidfile", str(base / f"{tap}.pid")],
        stdout=(base / f"qemu-{tap}.log").open("w"), stderr=subprocess.STDOUT, start_new_session=True)
    return proc, console


def _kill(base: Path, tap: str, proc: subprocess.Popen) -> None:
    pidfile = base / f"{tap}.pid"
    if proc.poll() is None and pidfile.is_file():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pidfile.read_text().strip()), signal.SIGKILL)
    _stop(proc)


def _reports(base: Path) -> list[dict]:
    path = base / "state" / "reports.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _script_gets(base: Path, mac: str) -> int:
    return (base / "http.log").read_text().count(f"GET /boot/hosts/{mac.replace(':', '-')}.ipxe HTTP/1.1\" 200")


@pytest.mark.root
def test_stateless_image_and_installer_hosts_pxe_boot_from_the_plan_and_report_in(lab) -> None:
    base, out, rows, image, server = lab
    good, swapped = rows[0], rows[1]
    machines = {"i28-tap0": (good["boot_mac"], good["serial"], True),
                "i28-tap1": (swapped["boot_mac"], "SN-SWAPPED", False)}
    started = time.monotonic()
    running = {tap: _qemu(base, tap, mac, serial, uefi) for tap, (mac, serial, uefi) in machines.items()}
    took: dict[str, float] = {}
    installed_at = None
    try:
        while len(took) < len(running):
            for tap, (proc, console) in running.items():
                text = console.read_text(errors="replace") if console.exists() else ""
                assert "Kernel panic" not in text, text[-3000:]
                assert proc.poll() is None or tap in took, f"{tap} stopped: {text[-3000:]}"
            phases = {(r["mac"], r["phase"]) for r in _reports(base)}
            now = time.monotonic() - started
            if "i28-tap0" not in took and (good["boot_mac"], "booted") in phases:
                took["i28-tap0"] = now
                _kill(base, "i28-tap0", running["i28-tap0"][0])
            if installed_at is None and (swapped["boot_mac"], "installed") in phases:
                installed_at = now
            if "i28-tap1" not in took and installed_at is not None and _script_gets(base, swapped["boot_mac"]) >= 2:
                time.sleep(10)  # long enough for an installer kernel fetch, if the script still named one
                took["i28-tap1"] = now
                _kill(base, "i28-tap1", running["i28-tap1"][0])
            assert now < BOOT_TIMEOUT, {t: c.read_text(errors="replace")[-2000:] for t, (_, c) in running.items()}
            time.sleep(1)
    finally:
        for tap, (proc, _) in running.items():
            _kill(base, tap, proc)
    manifest = json.loads((image / "manifest.json").read_text())
    sizes = {n: f"{f['bytes'] / 2 ** 20:.0f} MiB" for n, f in manifest["files"].items()}
    print(f"stateless image {sizes}, built in {manifest['build_seconds']:.0f} s; PXE boot to report-in: UEFI "
          f"stateless {took['i28-tap0']:.0f} s, legacy BIOS installer stand-in reported installed at "
          f"{installed_at:.0f} s, back at its script {took['i28-tap1']:.0f} s")
    console = running["i28-tap0"][1].read_text(errors="replace")
    assert "efi: EFI v2" in console and "EFI stub: Loaded initrd from command line option" in console
    assert f"railforge: root is {server}/boot/images/stateless/filesystem.squashfs" in console
    assert f'"planned": "{good["host"]}", "status": "booted"' in console  # the image's report unit, on the console
    by_mac = {(r["mac"], r["phase"]): r for r in _reports(base)}
    ok = by_mac[(good["boot_mac"], "booted")]
    assert (ok["status"], ok["planned"], ok["host"], ok["serial"]) == ("booted", good["host"], good["host"],
                                                                       good["serial"])
    assert ok["addresses"] == [good["boot_address"]] and ok["source"] == good["boot_address"].split("/")[0]
    bad = by_mac[(swapped["boot_mac"], "installed")]
    assert bad["status"] == "unexpected" and bad["planned"] == swapped["host"]
    assert bad["findings"] == [f"{swapped['host']} (rack {swapped['rack']} U{swapped['u']}) reports serial SN-SWAPPED, "
                               f"recorded {swapped['serial']}: a swapped server?"]
    assert (base / "state" / "booted-hosts.txt").read_text() == f"{good['host']}\n"
    assert (base / "state" / "installed-hosts.txt").read_text() == f"{swapped['host']}\n"
    findings = list(csv.DictReader((base / "state" / "findings.csv").open()))
    assert [(f["mac"], f["planned"]) for f in findings] == [(swapped["boot_mac"], swapped["host"])]
    assert not (base / "state" / "rejected.jsonl").exists()
    http = (base / "http.log").read_text()
    assert _script_gets(base, good["boot_mac"]) == 1 and _script_gets(base, swapped["boot_mac"]) == 2
    assert http.count('GET /boot/images/stateless/filesystem.squashfs HTTP/1.1" 200') == 1
    assert http.count('GET /boot/images/debian-installer/linux HTTP/1.1" 200') == 1  # the second boot left iPXE
    local = (out / "boot" / "hosts" / f"{swapped['boot_mac'].replace(':', '-')}.ipxe").read_text()
    assert local.splitlines()[-1] == "exit"
    tftp = (base / "tftp.log").read_text()
    assert f"sent {base / 'tftp' / 'ipxe.efi'} to {good['boot_address'].split('/')[0]}" in tftp, tftp
