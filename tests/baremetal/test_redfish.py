"""`railforge bmc` against OpenStack's Redfish emulator (sushy-tools 2.2, fake driver, basic auth) serving 1,024 hosts
of the 16K-GPU example, each at its planned BMC address (all on the loopback of a private network namespace; see
redfish_emulator.py). `bmc bringup` reads each system's serial and NICs, compares them with host-macs.csv, sets a
one-time UEFI PXE override (read back from the emulator) and power-cycles. Three hosts are broken on purpose: one
answers another serial, one has no BMC on its address (unreachable), one answers truncated JSON; each is reported
by name and nothing else is affected. The password never appears in the output. The strict answer reader is fuzzed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from railforge.baremetal.redfish import BmcError, Collection, EthernetInterface, System, parse_json, validate
from tests.baremetal.conftest import fill_host_macs
from tests.conftest import ROOT, example_spec, require_tool, run_cli

NS = "i28-redfish"
PORT = 18600
USER, PASSWORD = "railforge", "rf-Bmc-S3cret-pw"
HOSTS = "su:1-16"


def _sh(*cmd: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def _bmc_cli(base: Path, out: Path, *args: str, password: str = PASSWORD) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", "netns", "exec", NS, sys.executable, "-c", "from railforge.cli.main import app; app()",
                           "bmc", *args, str(base), "--out", str(out), "--url", f"http://{{bmc}}:{PORT}"],
                          capture_output=True, text=True, cwd=ROOT, timeout=900,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "COLUMNS": "200",
                               "RAILFORGE_BMC_USERNAME": USER, "RAILFORGE_BMC_PASSWORD": password})


@pytest.fixture(scope="module")
def emulator(tmp_path_factory):
    require_tool("root", "ip", "curl")
    pytest.importorskip("sushy_tools")
    import bcrypt

    base = tmp_path_factory.mktemp("redfish")
    out = base / "generated"
    run_cli("build", str(example_spec("roce-16k-railplane")), "--out", str(out), "--only", "plan,hosts")
    rows = [r for r in fill_host_macs(out / "host-macs.csv", base / "host-macs.csv") if r["su"] and
            1 <= int(r["su"]) <= 16]
    assert len(rows) == 1024
    wrong, unreachable, malformed = rows[5]["host"], rows[300]["host"], rows[700]["host"]
    systems = []
    for r in rows:
        if r["host"] == unreachable:
            continue
        systems.append({"ip": r["bmc_address"].split("/")[0], "name": r["host"],
                        "uuid": str(uuid.uuid5(uuid.NAMESPACE_DNS, r["host"])),
                        "serial": "SN-SOMEONE-ELSE" if r["host"] == wrong else r["serial"],
                        "macs": [r["boot_mac"], r["boot_mac"][:-2] + "fe"],
                        "answer": "malformed" if r["host"] == malformed else "ok"})
    (base / "systems.json").write_text(json.dumps(systems))
    (base / "htpasswd").write_text(f"{USER}:{bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(4)).decode()}\n")
    (base / "addrs").write_text("".join(f"address add {s['ip']}/32 dev lo\n" for s in systems))
    subprocess.run(["ip", "netns", "del", NS], capture_output=True)
    _sh("ip", "netns", "add", NS)
    state = Path(tempfile.mkdtemp(prefix="i28-sushy-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None))
    proc = None
    try:
        _sh("ip", "-n", NS, "link", "set", "lo", "up")
        _sh("ip", "-n", NS, "-batch", str(base / "addrs"))
        log = base / "emulator.log"
        proc = subprocess.Popen(["ip", "netns", "exec", NS, sys.executable, str(Path(__file__).parent /
                                 "redfish_emulator.py"), str(base / "systems.json"), str(PORT), str(base / "htpasswd"),
                                 str(state)],
                                stdout=log.open("w"), stderr=subprocess.STDOUT)
        probe = f"http://{systems[0]['ip']}:{PORT}/redfish/v1/"
        deadline = time.monotonic() + 60
        while subprocess.run(["ip", "netns", "exec", NS, "curl", "-fs", "-o", "/dev/null", "-u",
                              f"{USER}:{PASSWORD}", probe], capture_output=True).returncode != 0:
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.5)
        yield base, out, rows, {"wrong": wrong, "unreachable": unreachable, "malformed": malformed}, systems
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        subprocess.run(["ip", "netns", "del", NS], capture_output=True)
        shutil.rmtree(state, ignore_errors=True)


def _curl(ip: str, path: str) -> dict:
    got = _sh("ip", "netns", "exec", NS, "curl", "-fsS", "-u", f"{USER}:{PASSWORD}", f"http://{ip}:{PORT}{path}")
    return json.loads(got.stdout)


@pytest.mark.root
def test_bringup_of_1024_hosts_reports_each_broken_bmc_by_name(emulator) -> None:
    base, out, rows, broken, systems = emulator
    results = base / "results.jsonl"
    started = time.monotonic()
    proc = _bmc_cli(base, out, "bringup", "--hosts", HOSTS, "--concurrency", "64", "--retries", "2",
                    "--results", str(results))
    took = time.monotonic() - started
    print(f"bmc bringup of {len(rows)} hosts at concurrency 64: {took:.1f} s")
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and PASSWORD not in proc.stdout + proc.stderr
    got = {r["host"]: r for r in map(json.loads, results.read_text().splitlines())}
    assert list(got) == [r["host"] for r in rows]
    place = {r["host"]: f"rack {r['rack']} U{r['u']}" for r in rows}
    w, u, m = broken["wrong"], broken["unreachable"], broken["malformed"]
    assert got[w]["status"] == "mismatch" and got[w]["place"] == place[w]
    recorded = next(r["serial"] for r in rows if r["host"] == w)
    assert got[w]["detail"] == f"serial 'SN-SOMEONE-ELSE', recorded '{recorded}': a swapped server?"
    assert got[u]["status"] == "error" and "unreachable" in got[u]["detail"] and got[u]["attempts"] == 3
    assert got[m]["status"] == "error" and "malformed answer, not JSON" in got[m]["detail"]
    fine = [h for h in got if h not in broken.values()]
    assert len(fine) == 1021
    assert all(got[h]["status"] == "ok" and got[h]["attempts"] == 1 for h in fine), \
        [got[h] for h in fine if got[h]["status"] != "ok"][:3]
    assert all(got[h]["detail"] == "next boot: Pxe (Continuous, UEFI); ForceRestart sent" for h in fine)
    for host in (w, u, m):
        assert host in proc.stdout
    assert "bringup on 1024 hosts in " in " ".join(proc.stderr.split())
    assert "1021 ok, 1 mismatch, 2 error" in " ".join(proc.stderr.split())
    sample = next(s for s in systems if s["name"] == fine[10])
    system = _curl(sample["ip"], f"/redfish/v1/Systems/{sample['uuid']}")
    assert system["Boot"]["BootSourceOverrideTarget"] == "Pxe" and system["Boot"]["BootSourceOverrideMode"] == "UEFI"
    untouched = next(s for s in systems if s["name"] == w)
    assert _curl(untouched["ip"], f"/redfish/v1/Systems/{untouched['uuid']}")["Boot"].get(
        "BootSourceOverrideTarget") != "Pxe"


@pytest.mark.root
def test_wrong_password_and_bad_options_are_refused_without_echoing_secrets(emulator) -> None:
    base, out, rows, _, _ = emulator
    host = rows[0]["host"]
    proc = _bmc_cli(base, out, "inventory", "--hosts", host, password="not-the-password")
    assert proc.returncode == 1 and "refused the credentials" in proc.stdout and "not-the-password" not in (
        proc.stdout + proc.stderr)
    proc = _bmc_cli(base, out, "inventory", "--hosts", "su:99")
    assert proc.returncode == 2 and "selects no host" in proc.stderr
    creds = base / "creds.yml"
    creds.write_text(f"username: {USER}\npassword: {PASSWORD}\nextra: 1\n")
    proc = _bmc_cli(base, out, "inventory", "--hosts", host, "--bmc-credentials", str(creds))
    assert proc.returncode == 2 and "exactly `username` and `password`" in proc.stderr
    assert PASSWORD not in proc.stdout + proc.stderr


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=30),
                     lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=12), c, max_size=4),
                     max_leaves=20)


@settings(max_examples=400, deadline=None)
@given(raw=st.one_of(st.binary(max_size=200), _JSON.map(lambda d: json.dumps(d).encode()),
                     st.dictionaries(st.sampled_from(["Id", "SerialNumber", "PowerState", "Members", "MACAddress",
                                                      "EthernetInterfaces", "Boot", "Actions", "@odata.id"]),
                                     _JSON, max_size=6).map(lambda d: json.dumps(d).encode())),
       model=st.sampled_from([System, Collection, EthernetInterface]))
def test_fuzz_bmc_answers_parse_or_fail_naming_the_request(raw: bytes, model) -> None:
    try:
        validate(parse_json(raw, "GET /redfish/v1/x"), model, "GET /redfish/v1/x")
    except BmcError as exc:
        assert str(exc).startswith("GET /redfish/v1/x: ") and not exc.retry


def test_deeply_nested_and_oversized_answers_are_refused() -> None:
    with pytest.raises(BmcError, match="malformed answer, not JSON"):
        parse_json(b"[" * 100000 + b"]" * 100000, "GET /x")
    with pytest.raises(BmcError, match="answer over"):
        parse_json(b" " * (1024 * 1024 + 1), "GET /x")
