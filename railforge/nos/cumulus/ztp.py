"""Cumulus Linux zero-touch provisioning: DHCP option 239 (cumulus-provision-url) carries the URL of
`ztp/<switch>/cumulus-ztp.sh`, a script marked CUMULUS-AUTOPROVISIONING that fetches the generated startup.yaml and
applies it with NVUE."""

from __future__ import annotations

import shlex
from pathlib import Path

import jinja2
import yaml

from railforge.plan import outdir
from railforge.plan.model import Device
from railforge.provision.credentials import Credentials
from railforge.provision.served import SECRET_MODE, ServedFile, url
from railforge.spec import yamlsafe
from railforge.ztp.render import GROUP_NAME, ZtpError, read_generated, ztp_path

TEMPLATES = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
    undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
)
TEMPLATES.filters["q"] = shlex.quote


def peer_groups(startup: str, source: str = "startup.yaml") -> list[str]:
    groups: set[str] = set()
    try:
        for doc in yamlsafe.load(startup)[0] or []:
            vrfs = ((doc or {}).get("set") or {}).get("vrf") or {}
            for vrf in vrfs.values():
                groups |= set((((vrf or {}).get("router") or {}).get("bgp") or {}).get("peer-group") or {})
    except (yaml.YAMLError, AttributeError, TypeError, RecursionError):
        raise ZtpError(f"{source}: not the NVUE startup.yaml `railforge build` writes") from None
    bad = sorted(str(g) for g in groups if not isinstance(g, str) or not GROUP_NAME.fullmatch(g))
    if bad:
        raise ZtpError(f"{source}: peer-group name {bad[0]!r} is not a plain name (letters, digits, '.', '_', '-')")
    return sorted(groups)


def files(dev: Device, generated: Path, server: str, creds: Credentials) -> list[ServedFile]:
    startup_path = outdir.config_file(dev.name, "startup.yaml")
    startup = read_generated(generated, startup_path)
    script = TEMPLATES.get_template("cumulus-ztp.sh.j2").render(
        name=dev.name, creds=creds, startup_url=url(server, startup_path),
        peer_groups=peer_groups(startup))
    return [ServedFile(ztp_path(dev), script, SECRET_MODE)]
