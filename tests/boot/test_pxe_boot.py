"""A real PXE boot from the plan: QEMU (TCG; KVM hangs on these machines) with a planned boot-NIC MAC on a tap in a
network namespace, bridged to where Kea 2.2 serves `railforge ztp`'s configuration, python's http.server serves the
generated folder (boot.ipxe, the host scripts, the image), dnsmasq serves TFTP only (the TFTP root holds Debian's
ipxe `snponly.efi` as ipxe.efi) and `railforge boot report-in` listens. Two machines boot side by side:

- the planned host, in UEFI mode: OVMF's own PXE client on a virtio NIC without option ROM asks with client
  architecture 7, Kea's railforge-uefi-pxe class sends it to TFTP for ipxe.efi, iPXE asks again as "iPXE" and gets
  boot.ipxe over HTTP, which chains the host's script by MAC; the kernel boots through its EFI stub;
- a second machine in legacy BIOS mode (SeaBIOS and QEMU's iPXE ROM, Debian ipxe-qemu, straight to boot.ipxe) that
  boots from its planned MAC with a serial that is not the recorded one (a swapped server).

Both load the Debian netboot kernel and the busybox initramfs built in tests/boot/image.py over HTTP; its /init DHCPs
on the NIC named by BOOTIF and POSTs host, MAC, addresses and DMI serial. The first is recorded as booted, the second
is reported by rack and U, not booted. Each QEMU has a hard timeout and is killed by PID.
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
BOOT_TIMEOUT = 420  # seconds per machine: ~40-50 s idle on this machine, far slower when it is shared
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

    _need_files(KERNEL, DI_INITRD, BUSYBOX, Path("/usr/lib/ipxe/qemu/pxe-e1000.rom"), SNPONLY, *OVMF)
    base = tmp_path_factory.mktemp("pxe")
    out = base / "generated"
    run_cli("build", str(SPEC), "--out", str(out))
    rows = fill_host_macs(out / "host-macs.csv", base / "host-macs.csv")
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
            "--kernel-arg", "panic=5")
    images = out / "boot" / "images" / "stateless"
    images.mkdir(parents=True)
    for src in build_image():
        shutil.copy(src, images / src.name)

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
                                       "--state", str(base / "state")], cwd=ROOT,
                                      stdout=(base / "report-in.log").open("w"), stderr=subprocess.STDOUT))
        deadline = time.monotonic() + 30
        while "DHCP4_STARTED" not in kea_log.read_text() or "report-in on" not in (base / "report-in.log").read_text():
            assert all(p.poll() is None for p in procs), kea_log.read_text() + (base / "report-in.log").read_text()
            assert time.monotonic() < deadline, kea_log.read_text()
            time.sleep(0.2)
        yield base, out, rows
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
        firmware = ["-machine", "q35", "-m", "1024",
                    "-drive", f"if=pflash,format=raw,readonly=on,file={OVMF[0]}",
                    "-drive", f"if=pflash,format=raw,file={vars_fd}",
                    "-device", f"virtio-net-pci,netdev=n0,mac={mac},romfile="]
    else:
        firmware = ["-machine", "pc", "-m", "512", "-device", f"e1000,netdev=n0,mac={mac}"]
    proc = subprocess.Popen(
        ["ip", "netns", "exec", NS, "qemu-system-x86_64", "-accel", "tcg", *firmware,
         "-nographic", "-monitor", "none", "-serial", f"file:{console}", "-no-reboot", "-boot", "n",
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


@pytest.mark.root
def test_planned_host_pxe_boots_from_the_plan_and_reports_in_and_a_swapped_one_is_named(lab) -> None:
    base, out, rows = lab
    good, swapped = rows[0], rows[1]
    machines = {"i28-tap0": (good["boot_mac"], good["serial"], True),
                "i28-tap1": (swapped["boot_mac"], "SN-SWAPPED", False)}
    started = time.monotonic()
    running = {tap: _qemu(base, tap, mac, serial, uefi) for tap, (mac, serial, uefi) in machines.items()}
    took: dict[str, float] = {}
    try:
        while len(took) < len(running):
            for tap, (proc, console) in running.items():
                if tap in took:
                    continue
                text = console.read_text(errors="replace") if console.exists() else ""
                assert "No bootable device" not in text and "Kernel panic" not in text, text[-3000:]
                if proc.poll() is not None:
                    took[tap] = time.monotonic() - started
            assert time.monotonic() - started < BOOT_TIMEOUT, {t: c.read_text(errors="replace")[-2000:]
                                                               for t, (_, c) in running.items()}
            time.sleep(1)
    finally:
        for tap, (proc, _) in running.items():
            _kill(base, tap, proc)
    print(f"PXE boot to report-in: UEFI {took['i28-tap0']:.0f} s, legacy BIOS {took['i28-tap1']:.0f} s")
    console = running["i28-tap0"][1].read_text(errors="replace")
    assert f'railforge-init: answer {{"findings": [], "planned": "{good["host"]}", "status": "booted"}}' in console
    reports = [json.loads(line) for line in (base / "state" / "reports.jsonl").read_text().splitlines()]
    by_mac = {r["mac"]: r for r in reports}
    assert set(by_mac) == {good["boot_mac"], swapped["boot_mac"]}
    ok = by_mac[good["boot_mac"]]
    assert (ok["status"], ok["planned"], ok["host"], ok["serial"]) == ("booted", good["host"], good["host"],
                                                                       good["serial"])
    assert ok["addresses"] == [good["boot_address"]] and ok["source"] == good["boot_address"].split("/")[0]
    bad = by_mac[swapped["boot_mac"]]
    assert bad["status"] == "unexpected" and bad["planned"] == swapped["host"]
    assert bad["findings"] == [f"{swapped['host']} (rack {swapped['rack']} U{swapped['u']}) reports serial SN-SWAPPED, "
                               f"recorded {swapped['serial']}: a swapped server?"]
    assert (base / "state" / "booted-hosts.txt").read_text() == f"{good['host']}\n"
    findings = list(csv.DictReader((base / "state" / "findings.csv").open()))
    assert [(f["mac"], f["planned"]) for f in findings] == [(swapped["boot_mac"], swapped["host"])]
    http = (base / "http.log").read_text()
    for mac in (good["boot_mac"], swapped["boot_mac"]):
        assert f"GET /boot/hosts/{mac.replace(':', '-')}.ipxe HTTP/1.1\" 200" in http
    tftp = (base / "tftp.log").read_text()
    assert f"sent {base / 'tftp' / 'ipxe.efi'} to {good['boot_address'].split('/')[0]}" in tftp, tftp
    uefi_console = running["i28-tap0"][1].read_text(errors="replace")
    assert "efi: EFI v2" in uefi_console and "EFI stub: Loaded initrd from command line option" in uefi_console
