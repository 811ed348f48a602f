"""Boot identity: the host MAC template from `railforge build`, its strict reader (FILE:LINE for every bad row,
fuzzed), host sets, and the BMC and boot-NIC reservations joined into `railforge ztp`'s Kea file, proven by Kea 2.2
itself: `kea-dhcp4 -t`, then serving in a namespace where busybox udhcpc, with a planned MAC, gets the planned
address, router and (for an iPXE client) the entry script URL; an unrecorded MAC gets nothing."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import time
from ipaddress import ip_interface
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from railforge.baremetal.hostmacs import COLUMNS, HostMacError, read_host_macs
from railforge.baremetal.identity import SelectionError, identities, select
from railforge.plan.io import read_plan
from tests.baremetal.conftest import bmc_mac, boot_mac
from tests.conftest import require_tool, run_cli

SRV, CLI = "i28-kea-srv", "i28-kea-cli"
SRV_IF, CLI_IF = "i28-ks", "i28-kc"  # the in-band (boot) segment
SRV_OOB, CLI_OOB = "i28-ko", "i28-kb"  # the OOB (BMC) segment


def _plan(out: Path):
    return read_plan(out / "plan.json")


def test_template_lists_every_host_with_a_bmc_and_its_boot_nic(bm_build) -> None:
    _, out = bm_build
    plan = _plan(out)
    rows = list(csv.DictReader((out / "host-macs.csv").open()))
    assert tuple(rows[0]) == COLUMNS
    want = {d.name: (d.bmc.address, d.bond.address if d.bond else "") for d in plan.devices
            if d.role in ("node", "ufm", "mgmt") and d.bmc}
    assert {r["host"]: (r["bmc_address"], r["boot_address"]) for r in rows} == want
    assert len(want) == 19 and all(r["bmc_mac"] == r["boot_mac"] == "" for r in rows)
    assert all(r["boot_nic"] == "stor0" for r in rows if r["boot_address"])


def test_filled_file_reads_back_normalised(bm_build, tmp_path: Path) -> None:
    base, out = bm_build
    ids = read_host_macs(base / "host-macs.csv", _plan(out))
    assert len(ids) == 19
    assert ids[0].host == "su001-gpu01" and ids[0].bmc_mac == bmc_mac(0) and ids[0].boot_mac == boot_mac(0)
    f = tmp_path / "m.csv"
    f.write_text("host,bmc_mac,boot_mac,target\r\nsu001-gpu02,0C-42-B0-00-00-09,5254.0012.0009,installer\r\n")
    (one,) = read_host_macs(f, _plan(out))
    assert (one.bmc_mac, one.boot_mac, one.target, one.line) == ("0c:42:b0:00:00:09", "52:54:00:12:00:09",
                                                                 "installer", 2)


@pytest.mark.parametrize("rows, message", [
    ("su001-gpu01,0c:42:b0:00:00:01,\nsu001-gpu02,,0C-42-B0-00-00-01\n",
     ":3: boot_mac 0c:42:b0:00:00:01 of su001-gpu02 is already given on line 2 (bmc_mac of su001-gpu01)"),
    ("su001-gpu01,0c:42:b0:00:00:01,0c:42:b0:00:00:01\n",
     ":2: boot_mac 0c:42:b0:00:00:01 of su001-gpu01 is already given on line 2 (bmc_mac of su001-gpu01)"),
    ("su001-gpu01,0c:42:b0:00:00:zz,\n", ":2: bmc_mac of su001-gpu01: '0c:42:b0:00:00:zz' is not a unicast MAC"),
    ("su001-gpu01,,01:00:5e:00:00:01\n", ":2: boot_mac of su001-gpu01: '01:00:5e:00:00:01' is not a unicast MAC"),
    ("su009-gpu01,0c:42:b0:00:00:01,\n", ":2: host 'su009-gpu01' is not a host of the plan"),
    ("spine01,0c:42:b0:00:00:01,\n", ":2: host 'spine01' has no BMC in the plan"),
    ("su001-gpu01,0c:42:b0:00:00:01,\nsu001-gpu01,0c:42:b0:00:00:02,\n",
     ":3: host su001-gpu01 is listed again (first on line 2)"),
    ("su001-gpu01,0c:42:b0:00:00:01,,,stateful\n", ":2: target of su001-gpu01: 'stateful' is not a boot target"),
    ("su001-gpu01,0c:42:b0:00:00:01,,SN\x07X\n", ":2: serial of su001-gpu01: 'SN\\x07X' is not a serial number"),
    ("su001-gpu01,0c:42:b0:00:00:01,,,,extra,cells,too,many,a,b,c,d\n", ":2: 13 cells, the header has 5"),
])
def test_bad_row_is_rejected_naming_file_and_line(bm_build, tmp_path: Path, rows: str, message: str) -> None:
    _, out = bm_build
    f = tmp_path / "m.csv"
    f.write_text("host,bmc_mac,boot_mac,serial,target\n" + rows)
    with pytest.raises(HostMacError) as exc:
        read_host_macs(f, _plan(out))
    assert [e for e in exc.value.errors if e.startswith(f"{f}{message}")], exc.value.errors
    assert len(exc.value.errors) == 1


def test_quoted_multiline_cell_counts_lines_from_where_the_row_starts(bm_build, tmp_path: Path) -> None:
    _, out = bm_build
    f = tmp_path / "m.csv"
    f.write_text('host,bmc_mac,serial\nsu001-gpu01,0c:42:b0:00:00:01,"two\nlines"\nsu001-gpu01,0c:42:b0:00:00:02,\n')
    with pytest.raises(HostMacError) as exc:
        read_host_macs(f, _plan(out))
    assert exc.value.errors == [f"{f}:2: serial of su001-gpu01: 'two\\nlines' is not a serial number (want up to "
                                "64 printable ASCII characters)", f"{f}:4: host su001-gpu01 is listed again "
                                "(first on line 2)"]


def test_not_a_regular_file_too_big_and_bad_header_are_refused(bm_build, tmp_path: Path) -> None:
    _, out = bm_build
    plan = _plan(out)
    with pytest.raises(HostMacError, match="not a regular file"):
        read_host_macs(Path("/dev/zero"), plan)
    with pytest.raises(HostMacError, match="not a regular file"):
        read_host_macs(tmp_path, plan)
    big = tmp_path / "big.csv"
    with big.open("wb") as fh:
        fh.truncate(16 * 1024 * 1024 + 1)
    with pytest.raises(HostMacError, match="16777217 bytes, more than the 16777216 a host MAC file may have"):
        read_host_macs(big, plan)
    bad = tmp_path / "h.csv"
    bad.write_text("host,mac\nsu001-gpu01,0c:42:b0:00:00:01\n")
    with pytest.raises(HostMacError, match=r"h.csv:1: unknown columns 'mac'"):
        read_host_macs(bad, plan)
    bad.write_bytes(b"host,bmc_mac\n\xff\xfe\n")
    with pytest.raises(HostMacError, match="cannot read .UnicodeDecodeError"):
        read_host_macs(bad, plan)


_CELL = st.one_of(st.sampled_from(["su001-gpu01", "su001-gpu02", "mgmt01", "spine01", "0c:42:b0:00:00:01",
                                   "52:54:00:12:00:01", "installer", "stateless", "", '"', ",", "\n", "\r"]),
                  st.text(max_size=20))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.lists(_CELL, max_size=7), max_size=8),
       header=st.sampled_from(["host,bmc_mac,boot_mac,serial,target", "host,boot_mac", "mac,host", ""]))
def test_fuzz_reader_returns_rows_or_names_file_and_line(bm_build, tmp_path: Path, rows, header) -> None:
    _, out = bm_build
    plan = _plan(out)
    f = tmp_path / "fuzz.csv"
    buf = [header] + [",".join(r) for r in rows]
    f.write_bytes("\n".join(buf).encode("utf-8", "replace"))
    try:
        got = read_host_macs(f, plan)
    except HostMacError as exc:
        assert exc.errors and all(e.startswith(f"{f}:") for e in exc.errors)
        return
    macs = [m for i in got for m in (i.bmc_mac, i.boot_mac) if m]
    assert len(macs) == len(set(macs)) and len({i.host for i in got}) == len(got)
    assert all(i.host in {d.name for d in plan.devices if d.bmc} for i in got)


def test_host_sets(bm_build) -> None:
    base, out = bm_build
    plan = _plan(out)
    ids = identities(plan, read_host_macs(base / "host-macs.csv", plan))
    assert [i.host for i in select(ids, "rack:R001-02")] == [d.name for d in plan.devices
                                                            if d.bmc and d.rack == "R001-02"]
    assert len(select(ids, "su:1")) == 16 and len(select(ids, "all")) == 19
    assert [i.host for i in select(ids, "su001-gpu03, su001-gpu01")] == ["su001-gpu01", "su001-gpu03"]
    for bad, msg in (("su:x", "want su:<number>"), ("su:7", "selects no host"), ("gpu99,su001-gpu01", "'gpu99'"),
                     ("su:2-x", "want su:<number>")):
        with pytest.raises(SelectionError, match=msg):
            select(ids, bad)


def _ztp(base: Path, out: Path, *extra: str, check: bool = True):
    return run_cli("ztp", str(base), "--out", str(out), *extra, check=check)


def test_cli_refuses_a_bad_host_file_as_a_whole_and_writes_nothing(bm_build, tmp_path: Path) -> None:
    base, out = bm_build
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*")}
    f = tmp_path / "h.csv"
    f.write_text("host,bmc_mac\nsu001-gpu01,0c:42:b0:00:00:01\nsu001-gpu01,0c:42:b0:00:00:02\nx[red]y,0c\n")
    proc = _ztp(base, out, "--server", "http://10.20.0.33:8080", "--host-macs", str(f), check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    text = " ".join(proc.stderr.split())
    assert f"{f}:3: host su001-gpu01 is listed again" in text and f"{f}:4: host 'x[red]y'" in text
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*")} == before


def _kea_conf(base: Path, out: Path, tmp: Path, server: str, *extra: str) -> dict:
    proc = _ztp(base, out, "--server", server, "--tftp-server", "10.20.0.33", "--lease-file", str(tmp / "leases.csv"),
                *extra)
    rows = list(csv.DictReader((base / "host-macs.csv").open()))
    assert (f"{sum(1 for r in rows if r['bmc_mac'])} BMC and {sum(1 for r in rows if r['boot_mac'])} boot-NIC "
            "reservations") in " ".join(proc.stderr.split())
    return json.loads((out / "ztp" / "kea-dhcp4.conf").read_text())


def test_kea_file_holds_bmc_and_boot_reservations_and_kea_loads_it(bm_build, tmp_path: Path) -> None:
    base, out = bm_build
    conf = _kea_conf(base, out, tmp_path, "http://10.20.0.33:8080")["Dhcp4"]
    plan = _plan(out)
    res = {(r["hw-address"], r["ip-address"], r["hostname"]) for s in conf["subnet4"] for r in s["reservations"]}
    rows = list(csv.DictReader((base / "host-macs.csv").open()))
    for r in rows:
        assert (r["bmc_mac"], r["bmc_address"].split("/")[0], f"{r['host']}-bmc") in res
        if r["boot_mac"]:
            assert (r["boot_mac"], r["boot_address"].split("/")[0], r["host"]) in res
    gw = {str(ip_interface(d.bond.address).network): d.bond.gateway for d in plan.devices if d.bond}
    for s in conf["subnet4"]:
        if s["subnet"] in gw:
            assert s["option-data"][0] == {"name": "routers", "data": gw[s["subnet"]]}
    classes = {c["name"]: c for c in conf["client-classes"]}
    assert classes["railforge-ipxe"]["boot-file-name"] == "http://10.20.0.33:8080/boot/boot.ipxe"
    assert classes["railforge-uefi-pxe"]["next-server"] == "10.20.0.33"
    require_tool("kea-dhcp4")
    check = subprocess.run(["kea-dhcp4", "-t", str(out / "ztp" / "kea-dhcp4.conf")], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr


def _ns(*cmd: str) -> None:
    subprocess.run(cmd, check=True, capture_output=True)


def _udhcpc(tmp: Path, mac: str, *extra: str, dev: str = CLI_IF, tries: int = 10) -> dict[str, str] | None:
    """A lease for `mac`, or None when no server answered `tries` DISCOVERs one second apart (a loaded CI machine
    can take more than three seconds to run Kea and the lease script)."""
    _ns("ip", "-n", CLI, "link", "set", dev, "down")
    _ns("ip", "-n", CLI, "link", "set", dev, "address", mac)
    _ns("ip", "-n", CLI, "link", "set", dev, "up")
    record = tmp / f"lease-{mac.replace(':', '')}.json"
    record.unlink(missing_ok=True)
    script = tmp / "udhcpc.sh"
    script.write_text(f'#!/bin/sh\n[ "$1" = bound ] && {sys.executable} -c '
                      f'"import json,os; json.dump(dict(os.environ), open(\'{record}\', \'w\'))"\nexit 0\n')
    script.chmod(0o755)
    proc = subprocess.run(["ip", "netns", "exec", CLI, "udhcpc", "-f", "-q", "-n", "-t", str(tries), "-T", "1",
                           "-i", dev, "-s", str(script), "-O", "bootfile", "-O", "router", *extra],
                          capture_output=True, text=True, timeout=60)
    return json.loads(record.read_text()) if proc.returncode == 0 else None


def _wait_running(ns: str, *links: str) -> None:
    deadline = time.monotonic() + 20
    for link in links:
        while "LOWER_UP" not in (state := subprocess.run(["ip", "-n", ns, "-o", "link", "show", "dev", link],
                                                         capture_output=True, text=True).stdout):
            assert time.monotonic() < deadline, f"{ns} {link} has no carrier after 20 s: {state}"
            time.sleep(0.1)


@pytest.mark.root
def test_kea_serves_boot_nic_and_bmc_their_planned_addresses(bm_build, tmp_path: Path) -> None:
    require_tool("root", "kea-dhcp4", "udhcpc", "ip")
    base, out = bm_build
    plan = _plan(out)
    host = next(d for d in plan.devices if d.name == "su001-gpu02")
    boot_gw = host.bond.gateway
    bmc_gw = next(hs.gateway for d in plan.devices if d.role == "oob-leaf" for hs in d.host_subnets
                  if ip_interface(hs.prefix).network == ip_interface(host.bmc.address).network)
    server = f"http://{boot_gw}:8080"
    _kea_conf(base, out, tmp_path, server, "--dhcp-interface", SRV_IF, "--dhcp-interface", SRV_OOB)
    for ns in (SRV, CLI):
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        _ns("ip", "netns", "add", ns)
    kea = None
    try:
        for srv, cli, gw, cidr in ((SRV_IF, CLI_IF, boot_gw, host.bond.address),
                                   (SRV_OOB, CLI_OOB, bmc_gw, host.bmc.address)):
            _ns("ip", "link", "add", srv, "netns", SRV, "type", "veth", "peer", "name", cli, "netns", CLI)
            _ns("ip", "-n", SRV, "addr", "add", f"{gw}/{cidr.split('/')[1]}", "dev", srv)
            _ns("ip", "-n", SRV, "link", "set", srv, "up")
            _ns("ip", "-n", CLI, "link", "set", cli, "up")
        _wait_running(SRV, SRV_IF, SRV_OOB)  # Kea opens no socket on a link without carrier yet (seen in CI)
        env = {**os.environ, "KEA_PIDFILE_DIR": str(tmp_path), "KEA_LOCKFILE_DIR": str(tmp_path)}
        log = tmp_path / "kea.log"
        kea = subprocess.Popen(["ip", "netns", "exec", SRV, "kea-dhcp4", "-c", str(out / "ztp" / "kea-dhcp4.conf")],
                               env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while "DHCP4_STARTED" not in log.read_text():
            assert kea.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        lease = _udhcpc(tmp_path, boot_mac(1), "-x", "0x4d:69505845")  # user class "iPXE"
        assert lease is not None, log.read_text()
        assert f"{lease['ip']}/{lease['mask']}" == host.bond.address and lease["router"] == boot_gw
        assert lease["bootfile"] == f"{server}/boot/boot.ipxe"
        lease = _udhcpc(tmp_path, bmc_mac(1), dev=CLI_OOB)
        assert lease is not None, log.read_text()
        assert f"{lease['ip']}/{lease['mask']}" == host.bmc.address and lease["router"] == bmc_gw
        assert _udhcpc(tmp_path, "52:54:00:99:99:99", tries=3) is None
        assert kea.poll() is None
    finally:
        if kea is not None:
            kea.terminate()
            try:
                kea.wait(timeout=5)
            except subprocess.TimeoutExpired:
                kea.kill()
                kea.wait()
        for ns in (SRV, CLI):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
