"""EOS zero-touch provisioning: the script `ztp/<switch>/eos-ztp.sh` that DHCP option 67 points a switch at.

EOS ZTP fetches the bootfile-name URL and runs it when it is a script; when the script exits 0, EOS reboots
from /mnt/flash/startup-config. The script downloads the build's startup-config, appends the credentials
(`username admin` with the SHA-512 hash and up to two SSH keys, each peer group's BGP password) and moves it
in place. The credentials block is EOS CLI that pyavd renders from AVD's `local_users` and the peer groups'
passwords, type-7 encrypted by pyavd's own `encrypt` filter (keyed by the peer group, as EOS does).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import jinja2

from railforge.nos.eos import CONFIG
from railforge.plan import outdir
from railforge.plan.model import Device
from railforge.provision.credentials import Credentials
from railforge.provision.served import SECRET_MODE, ServedFile, url
from railforge.ztp.render import ZtpError, read_generated, ztp_path

TEMPLATES = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
    undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
)
TEMPLATES.filters["q"] = shlex.quote
MAX_KEYS = 2  # EOS: `username ... ssh-key` and `ssh-key secondary`
_ASN = re.compile(r"^router bgp (\d{1,10})$", re.MULTILINE)
_GROUP = re.compile(r"^   neighbor ([A-Za-z0-9_.-]{1,64}) peer group$", re.MULTILINE)



class EosZtpError(ZtpError):
    pass


def _users(creds: Credentials) -> list[dict]:
    if not (creds.admin_password_hash or creds.ssh_authorized_keys):
        return []
    if creds.admin_password_hash and not creds.admin_password_hash.startswith("$6$"):
        raise EosZtpError("admin_password_hash: EOS takes a SHA-512 crypt hash ($6$..., `mkpasswd -m sha-512`) for "
                          f"`username admin secret sha512`; this one is {creds.admin_password_hash[:3]}...")
    if len(creds.ssh_authorized_keys) > MAX_KEYS:
        raise EosZtpError(f"ssh_authorized_keys: EOS takes at most {MAX_KEYS} keys per user (ssh-key and ssh-key "
                          f"secondary), {len(creds.ssh_authorized_keys)} are given")
    user: dict = {"name": "admin", "privilege": 15, "role": "network-admin"}
    if creds.admin_password_hash:
        user["sha512_password"] = creds.admin_password_hash
    for key, field in zip(creds.ssh_authorized_keys, ("ssh_key", "secondary_ssh_key"), strict=False):
        user[field] = key
    return [user]


def credentials_cli(creds: Credentials, startup: str, pyavd: Any = None) -> str:
    """The EOS CLI that adds `creds` to the build's `startup`; empty when there are none."""
    sc: dict = {}
    if users := _users(creds):
        sc["local_users"] = users
    asn, groups = _ASN.search(startup), _GROUP.findall(startup)
    if creds.bgp_password and asn and groups:
        if pyavd is None:
            import pyavd  # noqa: PLC0415 - only where EOS switches are provisioned
        from pyavd.j2filters import encrypt  # noqa: PLC0415

        sc["router_bgp"] = {"as": asn.group(1), "peer_groups": [
            {"name": g, "password": encrypt(creds.bgp_password, passwd_type="bgp", key=g)} for g in groups]}
    if not sc:
        return ""
    if pyavd is None:
        import pyavd  # noqa: PLC0415
    result = pyavd.validate_structured_config(sc)
    if result.validation_result.violations or result.validated_data is None:
        raise EosZtpError("pyavd refused the credentials: "
                          + "; ".join(v.message for v in result.validation_result.violations))
    return pyavd.get_device_config(result.validated_data)


def script(name: str, config_url: str, creds: Credentials, startup: str, pyavd: Any = None) -> str:
    return TEMPLATES.get_template("eos-ztp.sh.j2").render(
        name=name, config_url=config_url, credentials=credentials_cli(creds, startup, pyavd))


def files(dev: Device, generated: Path, server: str, creds: Credentials) -> list[ServedFile]:
    config = outdir.config_file(dev.name, CONFIG)
    try:
        text = script(dev.name, url(server, config), creds, read_generated(generated, config))
    except EosZtpError as exc:
        raise EosZtpError(f"{dev.name}: {exc}") from None
    return [ServedFile(ztp_path(dev), text, SECRET_MODE)]
