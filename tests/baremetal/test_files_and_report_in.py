"""`railforge boot files` (iPXE scripts keyed by MAC, preseed checked by debconf's own parser) and the report-in
endpoint's strict reader, matching and limits, over real HTTP on loopback. The real iPXE/QEMU boot is in tests/boot."""

from __future__ import annotations

import http.client
import json
import stat
import subprocess
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from railforge.baremetal.hostmacs import read_host_macs
from railforge.baremetal.identity import identities
from railforge.baremetal.register import RATE, BadReport, read_report, serve
from railforge.plan.io import read_plan
from tests.conftest import require_tool, run_cli

SERVER, REPORT = "http://10.20.0.33:8080", "http://10.20.0.33:8081/register"
HASH = "$6$rfzsalt1$Zq0Xh6v1wz9Kqk2sJ0l1c3yC8d3bWm7Xz4nA0eTQ1pR5sV9uU2yL7kH6gF3dS8aP0oI9uY7tR5eW3qQ1zX2c"
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIRfzSecretKeyMaterial0123456789abcd ops@rf"


def _files(base: Path, out: Path, *extra: str, check: bool = True):
    return run_cli("boot", "files", str(base), "--out", str(out), "--server", SERVER, "--report", REPORT, *extra,
                   check=check)


@pytest.fixture(scope="module")
def installer(bm_build, tmp_path_factory):
    """The shared build with su001-gpu02 switched to the installer target and credentials given."""
    base, out = bm_build
    mine = tmp_path_factory.mktemp("files")
    macs = mine / "host-macs.csv"
    lines = (base / "host-macs.csv").read_text().splitlines()
    lines = [ln.replace(",SN-su001-gpu02,,", ",SN-su001-gpu02,installer,") for ln in lines]
    macs.write_text("\n".join(lines) + "\n")
    creds = mine / "creds.yml"
    creds.write_text(f"admin_password_hash: '{HASH}'\nssh_authorized_keys: ['{KEY}']\n")
    return base, out, macs, creds


def test_scripts_carry_the_planned_identity_and_are_deterministic(installer) -> None:
    base, out, macs, creds = installer
    images = out / "boot" / "images" / "stateless"
    images.mkdir(parents=True, exist_ok=True)
    (images / "vmlinuz").write_bytes(b"user's kernel")
    proc = _files(base, out, "--host-macs", str(macs), "--credentials", str(creds), "--dns", "10.250.0.53")
    assert HASH not in proc.stderr + proc.stdout and "18 stateless, 1 installer" in proc.stderr
    first = {p: p.read_bytes() for p in sorted((out / "boot").rglob("*")) if p.is_file()}
    _files(base, out, "--host-macs", str(macs), "--credentials", str(creds), "--dns", "10.250.0.53")
    assert {p: p.read_bytes() for p in sorted((out / "boot").rglob("*")) if p.is_file()} == first
    assert (images / "vmlinuz").read_bytes() == b"user's kernel"
    plan = read_plan(out / "plan.json")
    ids = {i.host: i for i in identities(plan, read_host_macs(macs, plan))}
    gpu1 = ids["su001-gpu01"]
    script = (out / "boot" / "hosts" / f"{gpu1.boot_mac.replace(':', '-')}.ipxe").read_text()
    assert script.startswith("#!ipxe\n")
    kernel = next(ln for ln in script.splitlines() if ln.startswith("kernel "))
    assert kernel.split()[4:10] == ["initrd=initrd.img", f"BOOTIF=01-{gpu1.boot_mac.replace(':', '-')}",
                                   "railforge.host=su001-gpu01", f"railforge.rack={gpu1.rack}",
                                   f"railforge.u={gpu1.u}", f"railforge.report={REPORT}"]
    assert f"{SERVER}/boot/images/stateless/vmlinuz" in kernel
    entry = (out / "boot" / "boot.ipxe").read_text()
    assert f"chain --autofree {SERVER}/boot/hosts/${{netX/mac:hexhyp}}.ipxe" in entry
    hosts = sorted(p.name for p in (out / "boot" / "hosts").iterdir())
    assert hosts == sorted(f"{i.boot_mac.replace(':', '-')}.ipxe" for i in ids.values() if i.boot_mac)


def test_installer_preseed_is_accepted_by_debconf_and_holds_the_plan(installer) -> None:
    base, out, macs, creds = installer
    _files(base, out, "--host-macs", str(macs), "--credentials", str(creds), "--disk", "/dev/sda")
    plan = read_plan(out / "plan.json")
    host = next(d for d in plan.devices if d.name == "su001-gpu02")
    preseed = out / "boot" / "preseed" / "su001-gpu02.cfg"
    assert sorted(p.name for p in preseed.parent.iterdir()) == ["su001-gpu02.cfg"]
    assert stat.S_IMODE(preseed.stat().st_mode) == 0o600
    text = preseed.read_text()
    from ipaddress import ip_interface

    iface = ip_interface(host.bond.address)
    for line in (f"d-i netcfg/get_ipaddress string {iface.ip}", f"d-i netcfg/get_netmask string {iface.netmask}",
                 f"d-i netcfg/get_gateway string {host.bond.gateway}", "d-i netcfg/get_hostname string su001-gpu02",
                 "d-i partman-auto/disk string /dev/sda", f"d-i passwd/root-password-crypted password {HASH}"):
        assert line in text.splitlines(), line
    late = next(ln for ln in text.splitlines() if ln.startswith("d-i preseed/late_command string "))
    cmd = late.removeprefix("d-i preseed/late_command string ")
    assert KEY in cmd and subprocess.run(["sh", "-n", "-c", cmd]).returncode == 0
    script = (out / "boot" / "hosts").glob("*.ipxe")
    inst = [p.read_text() for p in script if "target installer" in p.read_text()]
    assert len(inst) == 1 and f"url={SERVER}/boot/preseed/su001-gpu02.cfg" in inst[0]
    require_tool("debconf-set-selections")
    check = subprocess.run(["debconf-set-selections", "--checkonly", str(preseed)], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    broken = preseed.with_name("broken.cfg")
    broken.write_text(text.replace("d-i netcfg/get_hostname string su001-gpu02", "d-i netcfg/get_hostname"))
    assert subprocess.run(["debconf-set-selections", "--checkonly", str(broken)], capture_output=True).returncode != 0


def test_bad_options_are_refused_and_nothing_is_written(installer) -> None:
    base, out, macs, _ = installer
    _files(base, out, "--host-macs", str(macs))
    before = {p: p.read_bytes() for p in sorted((out / "boot").rglob("*")) if p.is_file()}
    for args, msg in ((("--server", "ftp://x"), "--server 'ftp://x': want an HTTP(S) URL"),
                      (("--disk", "/dev/sda; reboot"), "--disk '/dev/sda; reboot': want one word"),
                      (("--kernel-arg", "a b"), "--kernel-arg 'a b': want one word"),
                      (("--dns", "dns1"), "--dns 'dns1': want an IP address")):
        proc = _files(base, out, "--host-macs", str(macs), *args, check=False)
        assert proc.returncode == 2 and msg in " ".join(proc.stderr.split()) and "Traceback" not in proc.stderr
    assert {p: p.read_bytes() for p in sorted((out / "boot").rglob("*")) if p.is_file()} == before


@pytest.fixture
def endpoint(bm_build, tmp_path: Path):
    base, out = bm_build
    plan = read_plan(out / "plan.json")
    ids = identities(plan, read_host_macs(base / "host-macs.csv", plan))
    server = serve(ids, tmp_path / "state", "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], {i.host: i for i in ids}, tmp_path / "state"
    finally:
        server.shutdown()
        server.server_close()


def _post(port: int, body: bytes, ctype: str = "application/json", path: str = "/register") -> tuple[int, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("POST", path, body=body, headers={"Content-Type": ctype})
    resp = conn.getresponse()
    data = json.loads(resp.read())
    conn.close()
    return resp.status, data


def _report(i, **over) -> bytes:
    doc = {"host": i.host, "mac": i.boot_mac, "addresses": [i.boot_address], "serial": i.serial, **over}
    return json.dumps(doc).encode()


def test_report_in_matches_the_plan_and_names_the_unexpected_by_rack_and_u(endpoint) -> None:
    port, ids, state = endpoint
    a, b, c = ids["su001-gpu01"], ids["su001-gpu02"], ids["su001-gpu03"]
    assert _post(port, _report(a)) == (200, {"status": "booted", "planned": a.host, "findings": []})
    code, ans = _post(port, _report(b, host=c.host))
    assert code == 200 and ans["status"] == "unexpected" and ans["findings"] == [
        f"{b.host} ({b.place}) booted from its recorded MAC {b.boot_mac} but says it is {c.host}: the image or the "
        "command line is not the plan's"]
    code, ans = _post(port, _report(c, mac="52:54:00:aa:bb:cc"))
    assert ans["status"] == "unexpected" and ans["planned"] is None
    assert ans["findings"] == [f"MAC 52:54:00:aa:bb:cc is in no host's boot_mac of host-macs.csv; the node says it is "
                               f"{c.host} ({c.place}, whose recorded boot MAC is {c.boot_mac}): a swapped server or "
                               "a mis-cabled boot NIC?"]
    code, ans = _post(port, _report(c, addresses=["10.20.0.99/27"]))
    assert ans["findings"] == [f"{c.host} ({c.place}) has 10.20.0.99/27, planned {c.boot_address}"]
    assert (state / "booted-hosts.txt").read_text() == f"{a.host}\n"
    assert len((state / "reports.jsonl").read_text().splitlines()) == 4
    assert _post(port, _report(c)) == (200, {"status": "booted", "planned": c.host, "findings": []})
    assert (state / "booted-hosts.txt").read_text() == f"{a.host}\n{c.host}\n"


def test_report_in_limits(endpoint) -> None:
    port, ids, state = endpoint
    a = ids["su001-gpu01"]
    assert _post(port, b"x" * 5000)[0] == 413
    assert _post(port, _report(a), ctype="text/plain")[0] == 415
    assert _post(port, _report(a), path="/other")[0] == 404
    code, ans = _post(port, _report(a, mac="zz"))
    assert code == 400 and ans["error"] == "report from 127.0.0.1: mac: Value error, not a unicast MAC address"
    code, ans = _post(port, _report(a, extra=1))
    assert code == 400 and "extra: Extra inputs are not permitted" in ans["error"]
    codes = [_post(port, _report(a))[0] for _ in range(RATE)]  # 4 of this minute's RATE went to the bad posts
    assert codes == [200] * (RATE - 4) + [429] * 4
    assert (state / "booted-hosts.txt").read_text() == f"{a.host}\n"


@settings(max_examples=300, deadline=None)
@given(body=st.one_of(st.binary(max_size=300), st.dictionaries(
    st.sampled_from(["host", "mac", "addresses", "serial", "x"]),
    st.one_of(st.text(max_size=40), st.lists(st.text(max_size=20), max_size=3), st.integers(), st.none()),
    max_size=5).map(lambda d: json.dumps(d).encode())))
def test_fuzz_report_reader(body: bytes) -> None:
    try:
        r = read_report(body, "report from 10.0.0.1")
    except BadReport as exc:
        assert str(exc).startswith("report from 10.0.0.1: ")
        return
    assert r.mac.count(":") == 5 and len(r.addresses) <= 16
