"""EOS zero-touch provisioning, run for real: `railforge ztp` writes ztp/<switch>/eos-ztp.sh (0600) and the Kea
reservation whose option 67 points at it; the script runs under bash in a private mount namespace whose /mnt is
a fresh tmpfs (EOS's /mnt/flash), fetches the build's startup-config with real curl from an HTTP server serving
the generated folder, and leaves /mnt/flash/startup-config: the build's bytes plus the credentials pyavd
rendered (the BGP password type-7 encrypted, read back with pyavd's own decrypt)."""

from __future__ import annotations

import json
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from pyavd.j2filters import decrypt

from tests.conftest import ROOT, require_tool, run_cli

SPEC = ROOT / "tests" / "specs" / "configs-eos.yaml"
SWITCH, MAC = "spine01", "28:99:3a:00:00:01"
HASH = "$6$rfzsalt1$Zq0Xh6v1wz9Kqk2sJ0l1c3yC8d3bWm7Xz4nA0eTQ1pR5sV9uU2yL7kH6gF3dS8aP0oI9uY7tR5eW3qQ1zX2c"
KEYS = ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIRfzEosKeyMaterial0123456789abcd ops@rfz",
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIRfzEosKeyMaterial9876543210dcba backup@rfz"]
BGP = "rfz-EosS3cret"


@pytest.fixture(scope="module")
def provisioned(tmp_path_factory) -> tuple[Path, Path, int]:
    base = tmp_path_factory.mktemp("eosztp")
    out = base / "generated"
    run_cli("build", str(SPEC), "--out", str(out), "--only", "plan,eos,ztp")
    (base / "macs.csv").write_text(f"switch,mac\n{SWITCH},{MAC}\n")
    (base / "creds.yml").write_text(json.dumps({"admin_password_hash": HASH, "ssh_authorized_keys": KEYS}))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    run_cli("ztp", str(base), "--out", str(out), "--server", f"http://127.0.0.1:{port}", "--macs",
            str(base / "macs.csv"), "--credentials", str(base / "creds.yml"), env={"RAILFORGE_BGP_PASSWORD": BGP})
    return base, out, port


def test_script_and_dhcp_reservation(provisioned):
    _, out, port = provisioned
    script = out / "ztp" / SWITCH / "eos-ztp.sh"
    assert stat.S_IMODE(script.stat().st_mode) == 0o600
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0
    kea = json.loads((out / "ztp" / "kea-dhcp4.conf").read_text())
    res = [r for s in kea["Dhcp4"]["subnet4"] for r in s["reservations"] if r["hostname"] == SWITCH]
    assert res[0]["hw-address"] == MAC
    assert {"name": "boot-file-name", "data": f"http://127.0.0.1:{port}/ztp/{SWITCH}/eos-ztp.sh"} \
        in res[0]["option-data"]
    every = sorted(p.relative_to(out).parts[1] for p in (out / "ztp").glob("*/eos-ztp.sh"))
    plan = json.loads((out / "plan.json").read_text())
    assert every == sorted(d["name"] for d in plan["devices"] if d.get("nos") == "eos" and d.get("mgmt_address"))


def test_secrets_only_in_the_scripts(provisioned):
    _, out, _ = provisioned
    for path in out.rglob("*"):
        if path.is_file() and path.name != "eos-ztp.sh":
            data = path.read_bytes()
            assert not any(s.encode() in data for s in (HASH, BGP, KEYS[0].split()[1])), path


def test_the_script_leaves_the_startup_config_in_flash(provisioned, tmp_path):
    require_tool("root", "unshare", "curl")
    _, out, port = provisioned
    server = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1",
                               "--directory", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(50):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            subprocess.run(["sleep", "0.1"])
        run = subprocess.run(
            ["unshare", "-m", "bash", "-c", "mount -t tmpfs rf-eosztp /mnt && mkdir /mnt/flash && bash \"$1\" && "
             "ls /mnt/flash && cat /mnt/flash/startup-config", "-", str(out / "ztp" / SWITCH / "eos-ztp.sh")],
            capture_output=True, text=True, timeout=60)
    finally:
        server.terminate()
        server.wait()
    assert run.returncode == 0, run.stderr
    listing, _, flash = run.stdout.partition("\n")
    assert listing == "startup-config"
    built = (out / "configs" / SWITCH / "startup-config").read_text()
    assert flash.startswith(built)
    added = [line.strip() for line in flash[len(built):].splitlines() if line.strip() not in ("", "!")]
    assert added[:3] == [f"username admin privilege 15 role network-admin secret sha512 {HASH}",
                         f"username admin ssh-key {KEYS[0]}", f"username admin ssh-key secondary {KEYS[1]}"]
    asn = next(line for line in built.splitlines() if line.startswith("router bgp "))
    assert added[3] == asn
    groups = [line.split()[1] for line in built.splitlines() if line.endswith(" peer group")]
    passwords = {line.split()[1]: line.split()[-1] for line in added[4:] if " password 7 " in line}
    assert groups and set(passwords) == set(groups)
    assert all(decrypt(p, passwd_type="bgp", key=g) == BGP for g, p in passwords.items())


def test_a_hash_eos_cannot_take_is_refused(provisioned, tmp_path):
    base, out, port = provisioned
    creds = tmp_path / "c.yml"
    creds.write_text("admin_password_hash: '$5$rfzsalt1$Zq0Xh6v1wz9Kqk2sJ0l1c3yC8d3bWm7Xz4nA0eTQ1pR'\n")
    proc = run_cli("ztp", str(base), "--out", str(out), "--server", f"http://127.0.0.1:{port}", "--credentials",
                   str(creds), check=False)
    assert proc.returncode == 2 and "SHA-512 crypt hash" in proc.stderr and "Traceback" not in proc.stderr
    keys = tmp_path / "k.yml"
    keys.write_text(json.dumps({"ssh_authorized_keys": KEYS + [KEYS[0].replace("ops@", "third@")]}))
    proc = run_cli("ztp", str(base), "--out", str(out), "--server", f"http://127.0.0.1:{port}", "--credentials",
                   str(keys), check=False)
    assert proc.returncode == 2 and "at most 2 keys" in proc.stderr
