"""Zero-touch provisioning, proven with the real consumers that run here.

Kea 2.2 (`kea-dhcp4`) loads the generated kea-dhcp4.conf (`-t`, then for real inside a network
namespace); busybox `udhcpc` in a second namespace, with a planned switch's MAC, gets the planned
management address, the OOB gateway, the DNS server and its ZTP URL (option 67 for SONiC, 239 for
Cumulus), and with that address fetches its ZTP file and every file the ZTP file names over HTTP
(python http.server serving the generated folder); the bytes must equal the build's. A MAC the
user did not list gets no offer. bash parses both scripts and runs them in the switch namespace (real curl,
stubbed NOS and account tools that record their arguments). Bad MAC files are rejected naming rows.
A secret given as input appears only in the 0600 files that must carry it (the whole output is
searched, workbook unzipped).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.conftest import ROOT, require_tool, run_cli

SPEC = ROOT / "tests" / "specs" / "ztp-mixed.yaml"
SRV, SW = "rfz-srv", "rfz-sw"
SERVER_IF, CLIENT_IF = "rfz-s", "rfz-c"
PORT = 18080
PASSWORD_HASH = "$6$rfzsalt1$Zq0Xh6v1wz9Kqk2sJ0l1c3yC8d3bWm7Xz4nA0eTQ1pR5sV9uU2yL7kH6gF3dS8aP0oI9uY7tR5eW3qQ1zX2c"
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIRfzSecretKeyMaterial0123456789abcd ops@rfz"
BGP_PASSWORD = "rfz-BgpS3cret"
SECRETS = (PASSWORD_HASH, SSH_KEY.split()[1], BGP_PASSWORD)
SONIC, CUMULUS = "spine01", "stor-spine01"
MACS = {SONIC: "0c:42:a1:00:00:01", CUMULUS: "0C42.A100.0002"}
UNKNOWN_MAC = "0c:42:a1:ff:ff:ff"


@pytest.fixture(scope="module")
def build(tmp_path_factory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("ztp")
    out = base / "generated"
    run_cli("build", str(SPEC), "--out", str(out))
    return base, out


def _plan_device(out: Path, name: str) -> dict:
    for line in (out / "plan.json").read_text().splitlines():
        if f'"name":"{name}"' in line and '"role"' in line:
            return json.loads(line.rstrip(","))
    raise AssertionError(f"{name} not in plan.json")


def _oob_gateway(out: Path, address: str) -> str:
    from ipaddress import ip_interface

    from railforge.plan.io import read_plan

    plan = read_plan(out / "plan.json")
    net = ip_interface(address).network
    return next(hs.gateway for d in plan.devices if d.role == "oob-leaf" for hs in d.host_subnets
                if ip_interface(hs.prefix).network == net)


def _ztp(base: Path, out: Path, *extra: str, env: dict | None = None, check: bool = True):
    return run_cli("ztp", str(base), "--out", str(out), *extra, env=env, check=check)


def test_template_lists_every_ztp_switch_with_its_address(build) -> None:
    _, out = build
    rows = (out / "switch-macs.csv").read_text().splitlines()
    assert rows[0].split(",")[:4] == ["switch", "mac", "client_id", "serial"]
    from railforge.plan.io import read_plan

    plan = read_plan(out / "plan.json")
    want = {d.name: d.mgmt_address for d in plan.switches() if d.mgmt_address and d.nos in ("sonic", "cumulus")}
    got = {r.split(",")[0]: r.split(",")[-1] for r in rows[1:]}
    assert got == want and len(want) >= 10
    assert all(r.split(",")[1] == "" for r in rows[1:])


@pytest.mark.parametrize("rows, message", [
    ("spine01,0c:42:a1:00:00:01\nspine02,0C-42-A1-00-00-01\n",
     ":3: mac 0c:42:a1:00:00:01 of spine02 is already given on line 2 for spine01"),
    ("spine01,0c:42:a1:00:00:zz\n", ":2: mac '0c:42:a1:00:00:zz' of spine01 is not a unicast MAC address"),
    ("spine01,01:00:5e:00:00:01\n", ":2: mac '01:00:5e:00:00:01' of spine01 is not a unicast MAC address"),
    ("spine99,0c:42:a1:00:00:01\n", ":2: switch 'spine99' is not a switch of the plan"),
    ("su001-gpu01,0c:42:a1:00:00:01\n", ":2: switch 'su001-gpu01' is not a switch that boots by ZTP"),
    ("spine01,0c:42:a1:00:00:01\nspine01,0c:42:a1:00:00:02\n", ":3: switch spine01 is listed again (first on line 2)"),
])
def test_bad_mac_file_is_rejected_naming_the_row(build, tmp_path: Path, rows: str, message: str) -> None:
    from railforge.plan.io import read_plan
    from railforge.ztp.macs import MacFileError, read_macs

    _, out = build
    macs = tmp_path / "macs.csv"
    macs.write_text("switch,mac\n" + rows)
    with pytest.raises(MacFileError) as exc:
        read_macs(macs, read_plan(out / "plan.json"))
    assert [e for e in exc.value.errors if e.startswith(f"{macs}{message}")], exc.value.errors
    assert len(exc.value.errors) == 1


def test_cli_rejects_a_bad_mac_file_as_a_whole_and_writes_nothing(build, tmp_path: Path) -> None:
    base, out = build
    before = sorted(p.name for p in out.iterdir())
    macs = tmp_path / "macs.csv"
    macs.write_text("switch,mac\nspine01,0c:42:a1:00:00:01\nspine99,0c:42:a1:00:00:02\nspine02,0c:42:a1:00:00:01\n")
    proc = _ztp(base, out, "--server", "http://10.250.0.1", "--macs", str(macs), check=False)
    assert proc.returncode == 2
    text = " ".join(proc.stderr.split())
    assert f"{macs}:3: switch 'spine99'" in text and f"{macs}:4: mac 0c:42:a1:00:00:01 of spine02" in text
    assert "Traceback" not in proc.stderr
    assert sorted(p.name for p in out.iterdir()) == before


def test_bad_options_and_credentials_are_refused(build, tmp_path: Path) -> None:
    base, out = build
    proc = _ztp(base, out, "--server", "ftp://x", check=False)
    assert proc.returncode == 2 and "want the HTTP(S) URL" in proc.stderr
    creds = tmp_path / "c.yml"
    creds.write_text("admin_password_hash: hunter2\n")
    proc = _ztp(base, out, "--server", "http://10.250.0.1", "--credentials", str(creds), check=False)
    assert proc.returncode == 2 and "crypt(3) hash" in proc.stderr and "hunter2" not in proc.stderr
    proc = _ztp(base, out, "--server", "http://10.250.0.1", env={"RAILFORGE_SSH_AUTHORIZED_KEYS": "not a key"},
                check=False)
    assert proc.returncode == 2 and "RAILFORGE_SSH_AUTHORIZED_KEYS" in proc.stderr


def _write_inputs(base: Path) -> tuple[Path, Path]:
    macs = base / "switch-macs.csv"
    macs.write_text("switch,mac,client_id,serial\n" + "".join(f"{s},{m},,SN-{s}\n" for s, m in MACS.items()))
    creds = base / "secrets" / "switch-credentials.yml"
    creds.parent.mkdir(exist_ok=True)
    creds.write_text(f"admin_password_hash: '{PASSWORD_HASH}'\nssh_authorized_keys: ['{SSH_KEY}']\n")
    return macs, creds


def test_secrets_land_only_in_the_files_that_carry_them(build) -> None:
    base, out = build
    _, creds = _write_inputs(base)
    proc = _ztp(base, out, "--server", "http://10.250.0.1:8080", "--credentials", str(creds),
                env={"RAILFORGE_BGP_PASSWORD": BGP_PASSWORD})
    assert not any(s in proc.stdout + proc.stderr for s in SECRETS)
    carriers: dict[str, set[str]] = {}
    for path in sorted(out.rglob("*")):
        if not path.is_file():
            continue
        blobs = [path.read_bytes()]
        if path.suffix == ".xlsx":
            with zipfile.ZipFile(path) as z:
                blobs += [z.read(n) for n in z.namelist()]
        for s in SECRETS:
            if any(s.encode() in b for b in blobs):
                carriers.setdefault(str(path.relative_to(out)), set()).add(s)
    ztp_switches = [r.split(",")[0] for r in (out / "switch-macs.csv").read_text().splitlines()[1:]]
    sonic = {r.split(",")[0] for r in (out / "switch-macs.csv").read_text().splitlines()[1:] if ",sonic," in r}
    expected = {f"ztp/{s}/{'sonic-finish.sh' if s in sonic else 'cumulus-ztp.sh'}" for s in ztp_switches}
    assert set(carriers) == expected
    assert all(v == set(SECRETS) for v in carriers.values())
    for rel in expected:
        assert stat.S_IMODE((out / rel).stat().st_mode) == 0o600, rel
    for rel in expected:
        proc = subprocess.run(["bash", "-n", str(out / rel)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
    before = {p: p.read_bytes() for p in sorted((out / "ztp").rglob("*")) if p.is_file()}
    again = subprocess.run([sys.executable, "-c", "from railforge.cli.main import app; app()", "ztp", str(base),
                            "--out", str(out), "--server", "http://10.250.0.1:8080", "--credentials", "-"],
                           input=creds.read_text(), capture_output=True, text=True, cwd=ROOT,
                           env={**os.environ, "RAILFORGE_BGP_PASSWORD": BGP_PASSWORD})
    assert again.returncode == 0, again.stderr
    assert {p: p.read_bytes() for p in sorted((out / "ztp").rglob("*")) if p.is_file()} == before  # stdin, same bytes
    finish = (out / f"ztp/{SONIC}/sonic-finish.sh").read_text()
    frr = (out / f"configs/{SONIC}/frr.conf").read_text()
    groups = [ln.split()[1] for ln in frr.splitlines() if ln.startswith(" neighbor ") and ln.endswith(" peer-group")]
    assert groups and all(f"'neighbor {g} password {BGP_PASSWORD}'" in finish for g in groups)


def _netns(*cmd: str) -> None:
    subprocess.run(cmd, check=True, capture_output=True)


@pytest.fixture
def segment(build):
    """Two namespaces on one veth: the server side holds the OOB gateway address of the switches' subnet."""
    require_tool("root", "kea-dhcp4", "udhcpc", "ip")
    base, out = build
    sonic = _plan_device(out, SONIC)
    gateway = _oob_gateway(out, sonic["mgmt_address"])
    prefixlen = sonic["mgmt_address"].split("/")[1]
    for ns in (SRV, SW):
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        _netns("ip", "netns", "add", ns)
    procs: list[subprocess.Popen] = []
    try:
        _netns("ip", "link", "add", SERVER_IF, "netns", SRV, "type", "veth", "peer", "name", CLIENT_IF, "netns", SW)
        _netns("ip", "-n", SRV, "addr", "add", f"{gateway}/{prefixlen}", "dev", SERVER_IF)
        for ns, dev in ((SRV, SERVER_IF), (SW, CLIENT_IF), (SRV, "lo"), (SW, "lo")):
            _netns("ip", "-n", ns, "link", "set", dev, "up")
        yield base, out, gateway, procs
    finally:
        for p in procs:
            p.terminate()
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for ns in (SRV, SW):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def _udhcpc(tmp: Path, mac: str) -> dict[str, str] | None:
    """Run one DHCP exchange from the switch namespace with `mac`; the environment the script saw on `bound`."""
    _netns("ip", "-n", SW, "link", "set", CLIENT_IF, "down")
    _netns("ip", "-n", SW, "link", "set", CLIENT_IF, "address", mac)
    _netns("ip", "-n", SW, "addr", "flush", "dev", CLIENT_IF)
    _netns("ip", "-n", SW, "link", "set", CLIENT_IF, "up")
    record = tmp / f"lease-{mac.replace(':', '')}.json"
    record.unlink(missing_ok=True)
    script = tmp / "udhcpc.sh"
    script.write_text(f'#!/bin/sh\n[ "$1" = bound ] && {sys.executable} -c '
                      f'"import json,os; json.dump(dict(os.environ), open(\'{record}\', \'w\'))"\nexit 0\n')
    script.chmod(0o755)
    proc = subprocess.run(["ip", "netns", "exec", SW, "udhcpc", "-f", "-q", "-n", "-t", "3", "-T", "1", "-i",
                           CLIENT_IF, "-s", str(script), "-O", "bootfile", "-O", "239", "-O", "dns", "-O", "router"],
                          capture_output=True, text=True, timeout=30)
    if proc.returncode != 0:
        return None
    return json.loads(record.read_text())


def _fetch(url: str) -> bytes:
    proc = subprocess.run(["ip", "netns", "exec", SW, "curl", "-fsS", "--max-time", "5", url], capture_output=True,
                          timeout=15)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


STUB = """#!/bin/sh
echo "$(basename "$0") $*" >> {log}
case "$(basename "$0") $1 $2" in
  "nv config replace") cp "$3" {rec}/startup.yaml ;;
  "install -d"*) mkdir -p "$(eval echo \\${{$#}})" ;;
esac
"""


def _run_script(script: Path, user: str, tools: tuple[str, ...], tmp: Path) -> tuple[list[str], Path]:
    """Run a fetched ZTP script in the switch namespace with a private tmpfs /home; curl is real (it fetches over
    HTTP), NOS and account tools are stubs recording their arguments. Returns the calls and the record folder."""
    stubs, rec = tmp / f"stubs-{user}", tmp / f"rec-{user}"
    stubs.mkdir()
    rec.mkdir()
    log = rec / "calls.log"
    for tool in tools:
        (stubs / tool).write_text(STUB.format(log=log, rec=rec))
        (stubs / tool).chmod(0o755)
    keys = f"/home/{user}/.ssh/authorized_keys"
    proc = subprocess.run(["ip", "netns", "exec", SW, "unshare", "-m", "sh", "-c",
                           f"mount -t tmpfs none /home && PATH={stubs}:$PATH bash {script} && cp {keys} {rec}/keys"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (rec / "keys").read_text() == SSH_KEY + "\n"
    return log.read_text().splitlines(), rec


def _run_cumulus_script(out: Path, tmp: Path) -> None:
    calls, rec = _run_script(out / f"ztp/{CUMULUS}/cumulus-ztp.sh", "cumulus",
                             ("nv", "usermod", "passwd", "install", "chown", "chmod"), tmp)
    assert (rec / "startup.yaml").read_bytes() == (out / f"configs/{CUMULUS}/startup.yaml").read_bytes()
    assert f"usermod -p {PASSWORD_HASH} cumulus" in calls
    groups = sorted({line.split("peer-group: ")[1] for line in (rec / "startup.yaml").read_text().splitlines()
                     if "peer-group: " in line})
    assert groups
    nv = [c for c in calls if c.startswith("nv ")]
    assert nv == (["nv config replace /tmp/railforge-startup.yaml"]
                  + [f"nv set vrf default router bgp peer-group {g} password {BGP_PASSWORD}" for g in groups]
                  + ["nv config apply -y", "nv config save"])


def _run_sonic_finish(out: Path, tmp: Path) -> None:
    calls, _ = _run_script(out / f"ztp/{SONIC}/sonic-finish.sh", "admin",
                           ("usermod", "install", "chown", "chmod", "systemctl", "vtysh", "config"), tmp)
    frr = (out / f"configs/{SONIC}/frr.conf").read_text()
    asn = next(ln.split()[2] for ln in frr.splitlines() if ln.startswith("router bgp "))
    groups = [ln.split()[1] for ln in frr.splitlines() if ln.startswith(" neighbor ") and ln.endswith(" peer-group")]
    assert groups
    assert calls[0] == f"usermod -p {PASSWORD_HASH} admin"
    assert calls[-4:] == ["systemctl restart bgp", "vtysh -c show bgp summary",
                          f"vtysh -c configure terminal -c router bgp {asn} "
                          + " ".join(f"-c neighbor {g} password {BGP_PASSWORD}" for g in groups)
                          + " -c end -c write memory", "config save -y"]


def _configure(lease: dict[str, str]) -> None:
    _netns("ip", "-n", SW, "addr", "add", f"{lease['ip']}/{lease['mask']}", "dev", CLIENT_IF)


@pytest.mark.root
def test_kea_serves_planned_address_gateway_and_ztp_url_then_files_come_over_http(segment, tmp_path: Path) -> None:
    base, out, gateway, procs = segment
    server = f"http://{gateway}:{PORT}"
    macs, creds = _write_inputs(base)
    _ztp(base, out, "--server", server, "--credentials", str(creds), "--dns", "10.250.0.53",
         "--dhcp-interface", SERVER_IF, "--lease-file", str(tmp_path / "leases.csv"),
         env={"RAILFORGE_BGP_PASSWORD": BGP_PASSWORD})
    conf = out / "ztp" / "kea-dhcp4.conf"
    check = subprocess.run(["ip", "netns", "exec", SRV, "kea-dhcp4", "-t", str(conf)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    env = {**os.environ, "KEA_PIDFILE_DIR": str(tmp_path), "KEA_LOCKFILE_DIR": str(tmp_path)}
    log = (tmp_path / "kea.log").open("w")
    procs.append(subprocess.Popen(["ip", "netns", "exec", SRV, "kea-dhcp4", "-c", str(conf)], env=env,
                                  stdout=log, stderr=subprocess.STDOUT))
    procs.append(subprocess.Popen(["ip", "netns", "exec", SRV, sys.executable, "-m", "http.server", str(PORT),
                                   "--bind", gateway, "--directory", str(out)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    deadline = time.monotonic() + 20
    while "DHCP4_STARTED" not in (tmp_path / "kea.log").read_text():
        assert procs[0].poll() is None, (tmp_path / "kea.log").read_text()
        assert time.monotonic() < deadline, (tmp_path / "kea.log").read_text()
        time.sleep(0.2)

    sonic = _plan_device(out, SONIC)
    lease = _udhcpc(tmp_path, MACS[SONIC])
    assert lease is not None, (tmp_path / "kea.log").read_text()
    assert f"{lease['ip']}/{sonic['mgmt_address'].split('/')[1]}" == sonic["mgmt_address"]
    assert lease["router"] == gateway and lease["dns"].split() == ["10.250.0.53"]
    assert lease["bootfile"] == f"{server}/ztp/{SONIC}/ztp.json"
    _configure(lease)
    ztp = json.loads(_fetch(lease["bootfile"]))["ztp"]
    assert sorted(ztp) == ["01-download", "02-configdb-json", "03-railforge-finish"]
    download = ztp["01-download"]["files"][0]["url"]
    assert download["destination"] == "/etc/sonic/frr/frr.conf"
    configdb = ztp["02-configdb-json"]
    assert configdb["clear-config"] is False and configdb["save-config"] is True
    for source, local in ((download["source"], f"configs/{SONIC}/frr.conf"),
                          (configdb["url"]["source"], f"configs/{SONIC}/config_db.json"),
                          (ztp["03-railforge-finish"]["plugin"]["url"], f"ztp/{SONIC}/sonic-finish.sh")):
        assert urlsplit(source).path == f"/{local}"
        assert _fetch(source) == (out / local).read_bytes()
    _run_sonic_finish(out, tmp_path)
    assert json.loads((out / f"configs/{SONIC}/config_db.json").read_text())["DEVICE_METADATA"]["localhost"][
        "hostname"] == SONIC

    cumulus = _plan_device(out, CUMULUS)
    lease = _udhcpc(tmp_path, "0c:42:a1:00:00:02")
    assert lease is not None, (tmp_path / "kea.log").read_text()
    assert f"{lease['ip']}/{cumulus['mgmt_address'].split('/')[1]}" == cumulus["mgmt_address"]
    assert lease["router"] == gateway
    script_url = bytes.fromhex(lease["opt239"]).decode()
    assert script_url == f"{server}/ztp/{CUMULUS}/cumulus-ztp.sh" and "bootfile" not in lease
    _configure(lease)
    script = _fetch(script_url)
    assert script == (out / f"ztp/{CUMULUS}/cumulus-ztp.sh").read_bytes()
    assert b"CUMULUS-AUTOPROVISIONING" in script
    startup_url = f"{server}/configs/{CUMULUS}/startup.yaml"
    assert startup_url.encode() in script
    assert _fetch(startup_url) == (out / f"configs/{CUMULUS}/startup.yaml").read_bytes()
    _run_cumulus_script(out, tmp_path)

    assert _udhcpc(tmp_path, UNKNOWN_MAC) is None
    assert procs[0].poll() is None


def test_kea_config_by_client_id_loads_and_is_stable_when_the_cluster_grows(tmp_path: Path) -> None:
    """A reservation by client-id (no MAC) passes `kea-dhcp4 -t`; adding an SU keeps every existing subnet id,
    address and option, and only appends."""
    from railforge.planner import build_plan
    from railforge.provision.dhcp import DhcpOptions
    from railforge.spec import load_spec
    from railforge.ztp.macs import SwitchId
    from railforge.ztp.render import kea_config

    grown = tmp_path / "grown.yaml"
    grown.write_text(SPEC.read_text().replace("  count: 1\n", "  count: 2\n"))
    plans = [build_plan(*load_spec(path), str(path)) for path in (SPEC, grown)]
    opts = DhcpOptions("http://10.250.0.1:8080", ("10.250.0.53",))
    ids = [SwitchId(SONIC, None, "01:0c:42:a1:00:00:01", "MT2231X01234"), SwitchId(CUMULUS, MACS[SONIC], None, None),
           SwitchId("su001-leaf-r0", "0c:42:a1:00:00:03", None, None)]
    small, big = (json.loads(kea_config(p, ids, opts))["Dhcp4"] for p in plans)
    extra = SwitchId("su002-leaf-r0", "0c:42:a1:00:00:04", None, None)
    big = json.loads(kea_config(plans[1], [*ids, extra], opts))["Dhcp4"]
    old = {s["id"]: s for s in small["subnet4"]}
    new = {s["id"]: s for s in big["subnet4"]}
    assert set(old) < set(new)
    assert all(new[i] == old[i] for i in old)
    res = next(r for s in small["subnet4"] for r in s["reservations"] if r["hostname"] == SONIC)
    assert res["client-id"] == "01:0c:42:a1:00:00:01" and "hw-address" not in res
    assert res["user-context"]["serial"] == "MT2231X01234"
    require_tool("kea-dhcp4")
    conf = tmp_path / "kea.conf"
    conf.write_text(kea_config(plans[1], [*ids, extra], opts))
    check = subprocess.run(["kea-dhcp4", "-t", str(conf)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
