"""SONiC zero-touch provisioning: DHCP option 67 (bootfile-name) carries the URL of `ztp/<switch>/ztp.json`, whose
sections run in name order: 01-download puts the generated frr.conf at /etc/sonic/frr/frr.conf, 02-configdb-json
merges the generated config_db.json onto the factory configuration (`config load`, not `reload`) and saves it,
03-railforge-finish runs `sonic-finish.sh` (credentials, BGP restart on the new frr.conf, `config save`)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import jinja2

from railforge.plan import outdir
from railforge.plan.model import Device
from railforge.provision.credentials import Credentials
from railforge.provision.served import SECRET_MODE, ServedFile, url
from railforge.ztp.render import read_generated, ztp_path

TEMPLATES = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
    undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
)
TEMPLATES.filters["q"] = shlex.quote
FRR_ASN = re.compile(r"^router bgp (\d{1,10})$", re.MULTILINE)
FRR_GROUP = re.compile(r"^ neighbor ([A-Za-z0-9_.-]{1,64}) peer-group$", re.MULTILINE)


def files(dev: Device, generated: Path, server: str, creds: Credentials) -> list[ServedFile]:
    frr_path, db_path = outdir.config_file(dev.name, "frr.conf"), outdir.config_file(dev.name, "config_db.json")
    frr = read_generated(generated, frr_path)
    read_generated(generated, db_path)
    asn = FRR_ASN.search(frr)
    ztp = {"ztp": {
        "01-download": {"files": [{"url": {"source": url(server, frr_path),
                                           "destination": "/etc/sonic/frr/frr.conf"}}]},
        "02-configdb-json": {"url": {"source": url(server, db_path)},
                             "clear-config": False, "save-config": True},
        "03-railforge-finish": {"plugin": {"url": url(server, outdir.ztp_file(dev.name, "sonic-finish.sh")),
                                           "ignore-section-data": True}},
    }}
    finish = TEMPLATES.get_template("sonic-finish.sh.j2").render(
        name=dev.name, creds=creds, asn=asn.group(1) if asn else dev.asn, peer_groups=FRR_GROUP.findall(frr))
    return [ServedFile(ztp_path(dev), json.dumps(ztp, indent=2) + "\n"),
            ServedFile(outdir.ztp_file(dev.name, "sonic-finish.sh"), finish, SECRET_MODE)]
