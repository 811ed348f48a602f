"""The files a switch fetches at first boot, and the Kea DHCPv4 configuration that points it at them.

SONiC: DHCP option 67 (bootfile-name) carries the URL of `ztp/<switch>/ztp.json`, whose sections run in
name order: 01-download puts the generated frr.conf at /etc/sonic/frr/frr.conf, 02-configdb-json merges
the generated config_db.json onto the factory configuration (`config load`, not `reload`) and saves it,
03-railforge-finish runs `sonic-finish.sh` (credentials, BGP restart on the new frr.conf, `config save`).
Cumulus Linux: DHCP option 239 (cumulus-provision-url) carries the URL of `ztp/<switch>/cumulus-ztp.sh`,
a script marked CUMULUS-AUTOPROVISIONING that fetches the generated startup.yaml and applies it with NVUE.
Arista EOS: DHCP option 67 carries the URL of `ztp/<switch>/eos-ztp.sh` (railforge/nos/eos/ztp.py).
The HTTP server's document root is the generated folder, so every URL is `<server>/<path in generated/>`.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from ipaddress import ip_interface
from pathlib import Path

import jinja2
import yaml

from railforge import nos, outdir
from railforge.inputs import InputError, MiB, read_text
from railforge.nos.eos import ztp as eos_ztp
from railforge.nos.profile import ZtpVariant
from railforge.plan import Device, Plan
from railforge.spec import yamlsafe
from railforge.ztp.credentials import Credentials
from railforge.ztp.macs import SwitchId, provisioned

TEMPLATES = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
    undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
)
TEMPLATES.filters["q"] = shlex.quote
SECRET_MODE = 0o600
_FRR_ASN = re.compile(r"^router bgp (\d{1,10})$", re.MULTILINE)
# names that go into a shell script: only what FRR and NVUE write for railforge's peer groups
_FRR_GROUP = re.compile(r"^ neighbor ([A-Za-z0-9_.-]{1,64}) peer-group$", re.MULTILINE)
_GROUP_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
MAX_CONFIG_BYTES = 64 * MiB


class ZtpError(ValueError):
    pass


@dataclass(slots=True, frozen=True)
class ZtpFile:
    path: str
    text: str
    mode: int = 0o644


@dataclass(slots=True, frozen=True)
class DhcpOptions:
    server: str
    dns: tuple[str, ...] = ()
    domain: str | None = None
    interfaces: tuple[str, ...] = ("*",)
    lease_file: str = "/var/lib/kea/kea-leases4.csv"


def url(server: str, rel: str) -> str:
    return f"{server.rstrip('/')}/{rel}"


def _variant(dev: Device) -> ZtpVariant:
    variant = nos.profile(dev.nos).ztp
    if variant is None:
        raise ZtpError(f"{dev.name} runs {dev.nos}, which has no zero-touch provisioning")
    return variant


def ztp_path(dev: Device) -> str:
    return outdir.ztp_file(dev.name, _variant(dev).entry)


def _read(generated: Path, rel: str) -> str:
    if not (generated / rel).exists():
        raise ZtpError(f"{generated / rel} not found: ZTP serves the switch configs of a full `railforge build` "
                       "(run it, with the switch-config families)")
    try:
        return read_text(generated / rel, MAX_CONFIG_BYTES)
    except InputError as exc:
        raise ZtpError(str(exc)) from None


def sonic_files(dev: Device, generated: Path, server: str, creds: Credentials) -> list[ZtpFile]:
    frr_path, db_path = outdir.config_file(dev.name, "frr.conf"), outdir.config_file(dev.name, "config_db.json")
    frr = _read(generated, frr_path)
    _read(generated, db_path)
    asn = _FRR_ASN.search(frr)
    ztp = {"ztp": {
        "01-download": {"files": [{"url": {"source": url(server, frr_path),
                                           "destination": "/etc/sonic/frr/frr.conf"}}]},
        "02-configdb-json": {"url": {"source": url(server, db_path)},
                             "clear-config": False, "save-config": True},
        "03-railforge-finish": {"plugin": {"url": url(server, outdir.ztp_file(dev.name, "sonic-finish.sh")),
                                           "ignore-section-data": True}},
    }}
    finish = TEMPLATES.get_template("sonic-finish.sh.j2").render(
        name=dev.name, creds=creds, asn=asn.group(1) if asn else dev.asn, peer_groups=_FRR_GROUP.findall(frr))
    return [ZtpFile(ztp_path(dev), json.dumps(ztp, indent=2) + "\n"),
            ZtpFile(outdir.ztp_file(dev.name, "sonic-finish.sh"), finish, SECRET_MODE)]


def _nvue_peer_groups(startup: str, source: str = "startup.yaml") -> list[str]:
    groups: set[str] = set()
    try:
        for doc in yamlsafe.load(startup)[0] or []:
            vrfs = ((doc or {}).get("set") or {}).get("vrf") or {}
            for vrf in vrfs.values():
                groups |= set((((vrf or {}).get("router") or {}).get("bgp") or {}).get("peer-group") or {})
    except (yaml.YAMLError, AttributeError, TypeError, RecursionError):
        raise ZtpError(f"{source}: not the NVUE startup.yaml `railforge build` writes") from None
    bad = sorted(str(g) for g in groups if not isinstance(g, str) or not _GROUP_NAME.fullmatch(g))
    if bad:
        raise ZtpError(f"{source}: peer-group name {bad[0]!r} is not a plain name (letters, digits, '.', '_', '-')")
    return sorted(groups)


def cumulus_files(dev: Device, generated: Path, server: str, creds: Credentials) -> list[ZtpFile]:
    startup_path = outdir.config_file(dev.name, "startup.yaml")
    startup = _read(generated, startup_path)
    script = TEMPLATES.get_template("cumulus-ztp.sh.j2").render(
        name=dev.name, creds=creds, startup_url=url(server, startup_path),
        peer_groups=_nvue_peer_groups(startup))
    return [ZtpFile(ztp_path(dev), script, SECRET_MODE)]


def eos_files(dev: Device, generated: Path, server: str, creds: Credentials) -> list[ZtpFile]:
    config = outdir.config_file(dev.name, eos_ztp.CONFIG)
    try:
        text = eos_ztp.script(dev.name, url(server, config), creds, _read(generated, config))
    except eos_ztp.EosZtpError as exc:
        raise ZtpError(f"{dev.name}: {exc}") from None
    return [ZtpFile(ztp_path(dev), text, SECRET_MODE)]


FILES = {"sonic": sonic_files, "cumulus": cumulus_files, "eos": eos_files}


def switch_files(plan: Plan, generated: Path, server: str, creds: Credentials) -> list[ZtpFile]:
    out: list[ZtpFile] = []
    for dev in provisioned(plan):
        render = FILES[_variant(dev).files]
        out += render(dev, generated, server, creds)
    return out


def oob_gateways(plan: Plan) -> dict[str, str]:
    """OOB subnet -> its gateway (the OOB leaf's address on it)."""
    return {str(ip_interface(hs.prefix).network): hs.gateway
            for d in plan.devices if d.role == "oob-leaf" for hs in d.host_subnets}


def subnet_id(network: str) -> int:
    """Stable under growth: the subnet's position in the IPv4 space at its own prefix length."""
    net = ip_interface(network).network
    return int(net.network_address) >> (32 - net.prefixlen)


def _variants() -> list[ZtpVariant]:
    return [v for n in nos.names() if (v := nos.profile(n).ztp) is not None]


def _dhcp_option(variant: ZtpVariant, data: str) -> dict:
    if variant.option_code is None:
        return {"name": variant.option_name, "data": data}
    return {"name": variant.option_name, "code": variant.option_code, "space": "dhcp4", "data": data}


def kea_config(plan: Plan, ids: list[SwitchId], opts: DhcpOptions) -> str:
    devices = {d.name: d for d in provisioned(plan)}
    gateways = oob_gateways(plan)
    subnets: dict[str, list[dict]] = {}
    for sid in sorted(ids, key=lambda s: s.switch):
        dev = devices[sid.switch]
        network = str(ip_interface(dev.mgmt_address).network)
        if network not in gateways:
            raise ZtpError(f"{dev.name}: management address {dev.mgmt_address} is on no OOB leaf subnet of the plan")
        option = _dhcp_option(_variant(dev), url(opts.server, ztp_path(dev)))
        res: dict = {"hostname": dev.name, "ip-address": str(ip_interface(dev.mgmt_address).ip),
                     "option-data": [option]}
        if sid.mac:
            res["hw-address"] = sid.mac
        else:
            res["client-id"] = sid.client_id
        if sid.serial:
            res["user-context"] = {"serial": sid.serial, "rack": dev.rack, "u": dev.u}
        subnets.setdefault(network, []).append(res)
    subnet4 = []
    for network in sorted(subnets, key=subnet_id):
        options = [{"name": "routers", "data": gateways[network]}]
        if opts.dns:
            options.append({"name": "domain-name-servers", "data": ", ".join(opts.dns)})
        if opts.domain:
            options.append({"name": "domain-name", "data": opts.domain})
        subnet4.append({"id": subnet_id(network), "subnet": network, "option-data": options,
                        "reservations": subnets[network]})
    config = {"Dhcp4": {
        "interfaces-config": {"interfaces": list(opts.interfaces)},
        "lease-database": {"type": "memfile", "persist": True, "name": opts.lease_file},
        "valid-lifetime": 86400,
        "host-reservation-identifiers": ["hw-address", "client-id"],
        "option-def": [{"name": v.option_name, "code": v.option_code, "type": "string", "space": "dhcp4"}
                       for v in _variants() if v.option_code is not None],
        "subnet4": subnet4,
        "loggers": [{"name": "kea-dhcp4", "severity": "INFO", "output_options": [{"output": "stdout"}]}],
    }}
    return json.dumps(config, indent=2) + "\n"
