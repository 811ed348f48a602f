"""`railforge boot files` (iPXE scripts keyed by MAC with each host's report-in token, preseed checked by debconf's
own parser) and report-in: its strict reader and limits over real HTTP on loopback; its authentication (per-host
token, planned source address) as functions and, end to end, with the real client script in network namespaces where
each node sits at its planned address; an installer host reporting `installed` is switched to its local disk and
stays there when `boot files --state` runs again. The real iPXE/QEMU boot is in tests/boot."""

from __future__ import annotations

import csv
import http.client
import json
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from railforge.baremetal.hostmacs import read_host_macs
from railforge.baremetal.identity import identities
from railforge.baremetal.register import RATE, BadReport, Rejected, authenticate, read_report, serve
from railforge.baremetal.reportkey import ReportKeyError, host_token, load_key
from railforge.plan.io import read_plan
from tests.conftest import ROOT, require_tool, run_cli

SERVER, REPORT = "http://10.20.0.33:8080", "http://10.20.0.33:8081/register"
HASH = "$6$rfzsalt1$Zq0Xh6v1wz9Kqk2sJ0l1c3yC8d3bWm7Xz4nA0eTQ1pR5sV9uU2yL7kH6gF3dS8aP0oI9uY7tR5eW3qQ1zX2c"
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIRfzSecretKeyMaterial0123456789abcd ops@rf"


def _files(base: Path, out: Path, *extra: str, check: bool = True):
    return run_cli("boot", "files", str(base), "--out", str(out), "--server", SERVER, "--report", REPORT,
                   "--report-key", str(base / "report.key"), *extra, check=check)


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
    (base / "report.key").unlink(missing_ok=True)
    proc = _files(base, out, "--host-macs", str(macs), "--credentials", str(creds), "--dns", "10.250.0.53")
    assert HASH not in proc.stderr + proc.stdout and "18 stateless, 1 installer" in proc.stderr
    assert f"created the report-in key {base / 'report.key'} (0600)" in " ".join(proc.stderr.split())
    assert "pass --state (report-in's folder)" in " ".join(proc.stderr.split())
    assert stat.S_IMODE((base / "report.key").stat().st_mode) == 0o600
    key = load_key(base / "report.key")
    first = {p: p.read_bytes() for p in sorted((out / "boot").rglob("*")) if p.is_file()}
    proc = _files(base, out, "--host-macs", str(macs), "--credentials", str(creds), "--dns", "10.250.0.53")
    assert "created the report-in key" not in proc.stderr
    assert {p: p.read_bytes() for p in sorted((out / "boot").rglob("*")) if p.is_file()} == first
    assert (images / "vmlinuz").read_bytes() == b"user's kernel"
    plan = read_plan(out / "plan.json")
    ids = {i.host: i for i in identities(plan, read_host_macs(macs, plan))}
    gpu1 = ids["su001-gpu01"]
    path = out / "boot" / "hosts" / f"{gpu1.boot_mac.replace(':', '-')}.ipxe"
    script = path.read_text()
    assert script.startswith("#!ipxe\n") and stat.S_IMODE(path.stat().st_mode) == 0o600
    kernel = next(ln for ln in script.splitlines() if ln.startswith("kernel "))
    token = host_token(key, gpu1.host, gpu1.boot_mac)
    assert kernel.split()[4:13] == ["initrd=initrd.img", f"BOOTIF=01-{gpu1.boot_mac.replace(':', '-')}",
                                   "railforge.host=su001-gpu01", f"railforge.rack={gpu1.rack}",
                                   f"railforge.u={gpu1.u}", f"railforge.report={REPORT}", f"railforge.token={token}",
                                   "boot=railforge", f"railforge.image={SERVER}/boot/images/stateless/"
                                   "filesystem.squashfs"]
    assert len(token) == 32 and token != host_token(key, "su001-gpu02", gpu1.boot_mac)
    assert f"{SERVER}/boot/images/stateless/vmlinuz" in kernel
    entry = (out / "boot" / "boot.ipxe").read_text()
    assert f"chain --autofree {SERVER}/boot/hosts/${{netX/mac:hexhyp}}.ipxe" in entry
    hosts = sorted(p.name for p in (out / "boot" / "hosts").iterdir())
    assert hosts == sorted(f"{i.boot_mac.replace(':', '-')}.ipxe" for i in ids.values() if i.boot_mac)
    client = out / "boot" / "report" / "railforge-report"
    assert client.read_text().startswith("#!/usr/bin/python3\n") and stat.S_IMODE(client.stat().st_mode) == 0o755
    assert subprocess.run([sys.executable, "-m", "py_compile", str(client)]).returncode == 0


def test_a_bad_report_key_is_refused_naming_the_file(installer, tmp_path: Path) -> None:
    base, out, macs, _ = installer
    key = tmp_path / "k"
    for text, mode, msg in (("abc\n", 0o600, "want 64 hexadecimal digits"),
                            ("0" * 64 + "\n", 0o644, "readable by others (mode 0644); chmod 0600 it")):
        key.write_text(text)
        key.chmod(mode)
        with pytest.raises(ReportKeyError, match=msg.replace("(", r"\(").replace(")", r"\)")):
            load_key(key)
        proc = run_cli("boot", "files", str(base), "--out", str(out), "--server", SERVER, "--report", REPORT,
                       "--host-macs", str(macs), "--report-key", str(key), check=False)
        assert proc.returncode == 2 and f"--report-key {key}: " in proc.stderr and "Traceback" not in proc.stderr


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
    token = host_token(load_key(base / "report.key"), "su001-gpu02", host_mac(macs, "su001-gpu02"))
    assert f'"token":"{token}"' in cmd and cmd.endswith("in-target /usr/local/sbin/railforge-report --phase installed")
    assert f"wget -q -O /target/usr/local/sbin/railforge-report {SERVER}/boot/report/railforge-report" in cmd
    script = (out / "boot" / "hosts").glob("*.ipxe")
    inst = [p.read_text() for p in script if "target installer" in p.read_text()]
    assert len(inst) == 1 and f"url={SERVER}/boot/preseed/su001-gpu02.cfg" in inst[0]
    require_tool("debconf-set-selections")
    check = subprocess.run(["debconf-set-selections", "--checkonly", str(preseed)], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    broken = preseed.with_name("broken.cfg")
    broken.write_text(text.replace("d-i netcfg/get_hostname string su001-gpu02", "d-i netcfg/get_hostname"))
    assert subprocess.run(["debconf-set-selections", "--checkonly", str(broken)], capture_output=True).returncode != 0


def host_mac(macs: Path, host: str) -> str:
    return next(r["boot_mac"] for r in csv.DictReader(macs.open()) if r["host"] == host)


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
    """report-in on 127.0.0.1: every report comes from an address no host has, so only the reader and the limits
    can be seen from here (authentication: below)."""
    base, out = bm_build
    plan = read_plan(out / "plan.json")
    ids = identities(plan, read_host_macs(base / "host-macs.csv", plan))
    server = serve(ids, tmp_path / "state", "127.0.0.1", 0, KEY_BYTES)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], {i.host: i for i in ids}, tmp_path / "state"
    finally:
        server.shutdown()
        server.server_close()


KEY_BYTES = bytes(range(32))


def _post(port: int, body: bytes, ctype: str = "application/json", path: str = "/register",
          token: str | None = None) -> tuple[int, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    headers = {"Content-Type": ctype, **({"Authorization": f"Bearer {token}"} if token else {})}
    conn.request("POST", path, body=body, headers=headers)
    resp = conn.getresponse()
    data = json.loads(resp.read())
    conn.close()
    return resp.status, data


def _report(i, **over) -> bytes:
    doc = {"host": i.host, "mac": i.boot_mac, "addresses": [i.boot_address], "serial": i.serial, **over}
    return json.dumps(doc).encode()


def _ids(bm_build) -> dict:
    base, out = bm_build
    plan = read_plan(out / "plan.json")
    return {i.host: i for i in identities(plan, read_host_macs(base / "host-macs.csv", plan))}


def test_only_the_planned_hosts_token_from_its_planned_address_is_accepted(bm_build) -> None:
    ids = _ids(bm_build)
    a, b = ids["su001-gpu01"], ids["su001-gpu02"]
    every = list(ids.values())
    ip = a.boot_address.split("/")[0]
    token = host_token(KEY_BYTES, a.host, a.boot_mac)
    report = read_report(_report(a), "test")
    assert authenticate(report, ip, token, every, KEY_BYTES) == a
    assert authenticate(report, f"::ffff:{ip}", token, every, KEY_BYTES) == a
    cases = [
        (report, ip, None, 401, f"report for {a.host} ({a.place}) carries no token"),
        (report, ip, "0" * 32, 403, f"report for {a.host} ({a.place}) carries a token that is not {a.host}'s"),
        (report, ip, host_token(KEY_BYTES, b.host, b.boot_mac), 403, "carries a token that is not"),
        (report, ip, host_token(bytes(32), a.host, a.boot_mac), 403, "carries a token that is not"),
        (report, b.boot_address.split("/")[0], token, 403,
         f"report for {a.host} ({a.place}) comes from {b.boot_address.split('/')[0]}, planned {ip}"),
        (read_report(_report(a, phase="installed"), "t"), ip, token, 403,
         f"{a.host} ({a.place}) reports installed, but its target is stateless"),
        (read_report(_report(b, mac="52:54:00:aa:bb:cc"), "t"), ip, token, 403,
         f"MAC 52:54:00:aa:bb:cc is in no host's boot_mac of host-macs.csv; the node says it is {b.host} ({b.place}, "
         f"whose recorded boot MAC is {b.boot_mac})"),
    ]
    for rep, source, tok, code, msg in cases:
        with pytest.raises(Rejected, match=msg.replace("(", r"\(").replace(")", r"\)")) as exc:
            authenticate(rep, source, tok, every, KEY_BYTES)
        assert exc.value.code == code


def test_report_in_limits_and_unauthenticated_reports_change_nothing(endpoint) -> None:
    port, ids, state = endpoint
    a = ids["su001-gpu01"]
    assert _post(port, b"x" * 5000)[0] == 413
    assert _post(port, _report(a), ctype="text/plain")[0] == 415
    assert _post(port, _report(a), path="/other")[0] == 404
    code, ans = _post(port, _report(a, mac="zz"))
    assert code == 400 and ans["error"] == "report from 127.0.0.1: mac: Value error, not a unicast MAC address"
    code, ans = _post(port, _report(a, extra=1))
    assert code == 400 and "extra: Extra inputs are not permitted" in ans["error"]
    code, ans = _post(port, _report(a))
    assert code == 401 and "carries no token" in ans["error"]
    token = host_token(KEY_BYTES, a.host, a.boot_mac)
    codes = [_post(port, _report(a), token=token) for _ in range(RATE - 5)]  # 5 of this minute's RATE went above
    assert codes == [(403, {"error": f"report for {a.host} ({a.place}) comes from 127.0.0.1, planned "
                                     f"{a.boot_address.split('/')[0]}"})] * (RATE - 5)
    assert [_post(port, _report(a), token=token)[0] for _ in range(3)] == [429] * 3  # RATE posts this minute
    assert not (state / "booted-hosts.txt").exists() and not (state / "reports.jsonl").exists()
    rejected = [json.loads(line) for line in (state / "rejected.jsonl").read_text().splitlines()]
    assert len(rejected) == RATE - 4 and {r["host"] for r in rejected} == {a.host}
    assert all(token not in json.dumps(r) for r in rejected)


NS_SRV, BRIDGE, PORT = "i38-ri-srv", "i38-ri-br", 18491


def _ns(*cmd: str) -> None:
    subprocess.run(cmd, check=True, capture_output=True)


def _client(ns: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", "netns", "exec", ns, sys.executable, str(CLIENT), "--wait", "20", *args],
                          capture_output=True, text=True, timeout=60)


CLIENT = ROOT / "railforge" / "baremetal" / "client" / "railforge-report"


@pytest.mark.root
def test_report_in_end_to_end_with_the_client_at_planned_addresses(installer, tmp_path: Path) -> None:
    """Three nodes in their own namespaces at their planned addresses and boot MACs, report-in (the CLI) in a
    fourth: the stateless node reports with its kernel command line and is booted; a neighbour that stole its token
    from its script is refused (wrong source) and so is one without a token; the installer node reports `installed`
    (its script switches to the local disk, it is not booted yet), then `booted` from its disk; `boot files --state`
    keeps it on its disk."""
    require_tool("root", "ip", "curl")
    base, out, _, _ = installer
    macs = tmp_path / "host-macs.csv"
    rows = list(csv.DictReader((base / "host-macs.csv").open()))
    for r in rows:
        r["serial"] = "" if r["host"] in ("su001-gpu01", "su001-gpu02", "su001-gpu03") else r["serial"]
        r["target"] = "installer" if r["host"] == "su001-gpu02" else r["target"]
    with macs.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    plan = read_plan(out / "plan.json")
    ids = {i.host: i for i in identities(plan, read_host_macs(macs, plan))}
    a, b, c = ids["su001-gpu01"], ids["su001-gpu02"], ids["su001-gpu03"]
    gateways = sorted({(i.boot_gateway, i.boot_address.split("/")[1]) for i in (a, b, c)})
    report = f"http://{a.boot_gateway}:{PORT}/register"
    state, key = tmp_path / "state", tmp_path / "report.key"
    run_cli("boot", "files", str(base), "--out", str(out), "--server", SERVER, "--report", report, "--report-key",
            str(key), "--host-macs", str(macs))
    scripts = {i.host: out / "boot" / "hosts" / f"{i.boot_mac.replace(':', '-')}.ipxe" for i in (a, b, c)}
    installer_script = scripts[b.host].read_text()
    assert "target installer" in installer_script
    nodes = {i.host: f"i38-ri-{n}" for n, i in enumerate((a, b, c))}
    for ns in (NS_SRV, *nodes.values()):
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        _ns("ip", "netns", "add", ns)
    server = None
    try:
        _ns("ip", "-n", NS_SRV, "link", "add", BRIDGE, "type", "bridge")
        for gw, plen in gateways:
            _ns("ip", "-n", NS_SRV, "addr", "add", f"{gw}/{plen}", "dev", BRIDGE)
        _ns("ip", "-n", NS_SRV, "link", "set", BRIDGE, "up")
        for n, i in enumerate((a, b, c)):
            ns, peer = nodes[i.host], f"i38-ri-p{n}"
            _ns("ip", "link", "add", "eth0", "netns", ns, "address", i.boot_mac, "type", "veth", "peer", "name", peer,
                "netns", NS_SRV)
            _ns("ip", "-n", NS_SRV, "link", "set", peer, "master", BRIDGE, "up")
            _ns("ip", "-n", ns, "addr", "add", i.boot_address, "dev", "eth0")
            _ns("ip", "-n", ns, "link", "set", "eth0", "up")
            _ns("ip", "-n", ns, "route", "add", "default", "via", i.boot_gateway)
        log = tmp_path / "report-in.log"
        server = subprocess.Popen(["ip", "netns", "exec", NS_SRV, sys.executable, "-c",
                                   "from railforge.cli.main import app; app()", "boot", "report-in", str(base),
                                   "--out", str(out), "--host-macs", str(macs), "--listen", f"0.0.0.0:{PORT}",
                                   "--state", str(state), "--report-key", str(key)], cwd=ROOT,
                                  stdout=log.open("w"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while "report-in on" not in log.read_text():
            assert server.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)

        def kernel_line(host: str) -> Path:
            line = next(ln for ln in scripts[host].read_text().splitlines() if ln.startswith("kernel "))
            f = tmp_path / f"cmdline-{host}"
            f.write_text(line.split(" ", 3)[3] + "\n")
            return f

        got = _client(nodes[a.host], "--cmdline", str(kernel_line(a.host)))
        assert got.returncode == 0 and '"status": "booted"' in got.stdout, got.stderr + log.read_text()
        stolen = _client(nodes[c.host], "--cmdline", str(kernel_line(a.host)))  # a's token, from c's address
        assert stolen.returncode == 1 and "refused, HTTP 403" in stolen.stderr
        assert f"comes from {c.boot_address.split('/')[0]}, planned {a.boot_address.split('/')[0]}" in stolen.stderr
        body = json.dumps({"host": c.host, "mac": c.boot_mac, "addresses": [c.boot_address]})
        bare = subprocess.run(["ip", "netns", "exec", nodes[c.host], "curl", "-s", "-o", "/dev/null", "-w",
                               "%{http_code}", "-H", "Content-Type: application/json", "-d", body, report],
                              capture_output=True, text=True)
        assert bare.stdout == "401"
        assert (state / "booted-hosts.txt").read_text() == f"{a.host}\n"

        settings = tmp_path / "report-in.json"  # what the installer's late command writes into the target
        settings.write_text(json.dumps({"report": report, "token": host_token(load_key(key), b.host, b.boot_mac),
                                        "host": b.host, "mac": b.boot_mac}))
        got = _client(nodes[b.host], "--config", str(settings), "--phase", "installed")
        assert got.returncode == 0, got.stderr + log.read_text()
        local = scripts[b.host].read_text()
        assert local.splitlines()[-1] == "exit" and "installed, boots from its local disk" in local
        assert (state / "installed-hosts.txt").read_text() == f"{b.host}\n"
        assert (state / "booted-hosts.txt").read_text() == f"{a.host}\n"
        got = _client(nodes[b.host], "--config", str(settings))
        assert got.returncode == 0 and '"status": "booted"' in got.stdout
        assert (state / "booted-hosts.txt").read_text() == f"{a.host}\n{b.host}\n"
        rejected = [json.loads(line) for line in (state / "rejected.jsonl").read_text().splitlines()]
        assert [(r["source"], r["host"]) for r in rejected] == [(c.boot_address.split("/")[0], a.host),
                                                               (c.boot_address.split("/")[0], c.host)]
        assert "rejected from" in log.read_text()
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=10)
        for ns in (NS_SRV, *nodes.values()):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    again = ("boot", "files", str(base), "--out", str(out), "--server", SERVER, "--report", report, "--report-key",
             str(key), "--host-macs", str(macs))
    proc = run_cli(*again, "--state", str(state))
    assert scripts[b.host].read_text() == local and "1 installed boot from their disks" in proc.stderr
    run_cli(*again)
    assert scripts[b.host].read_text() == installer_script
    (state / "installed-hosts.txt").write_text("su001-gpu01\n")
    proc = run_cli(*again, "--state", str(state), check=False)
    assert proc.returncode == 2 and "installed-hosts.txt:1: su001-gpu01 has target stateless, not installer" in \
        " ".join(proc.stderr.split())


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
