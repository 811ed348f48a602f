"""The files a switch fetches at first boot, and the Kea DHCPv4 configuration that points it at them.

Each switch OS writes its own files (`ztp.files` of its profile, in `railforge/nos/<os>/ztp.py`) and names the
DHCP option that carries the URL of its entry file (`ztp.entry`); this module collects them for every switch of
the plan and writes the Kea configuration. The HTTP server's document root is the generated folder, so every URL
is `<server>/<path in generated/>`.
"""

from __future__ import annotations

import json
import re
from ipaddress import ip_interface
from pathlib import Path

from railforge import nos
from railforge.inputs import InputError, MiB, read_text
from railforge.nos.profile import ZtpVariant
from railforge.plan import outdir
from railforge.plan.model import Device, Plan
from railforge.provision.credentials import Credentials
from railforge.provision.dhcp import DhcpOptions, subnet_id
from railforge.provision.served import ServedFile, url
from railforge.ztp.macs import SwitchId, provisioned

# a peer-group name that goes into a shell script: letters, digits, '.', '_', '-' (what railforge's configs use)
GROUP_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
MAX_CONFIG_BYTES = 64 * MiB


class ZtpError(ValueError):
    pass


def _variant(dev: Device) -> ZtpVariant:
    variant = nos.profile(dev.nos).ztp
    if variant is None:
        raise ZtpError(f"{dev.name} runs {dev.nos}, which has no zero-touch provisioning")
    return variant


def ztp_path(dev: Device) -> str:
    return outdir.ztp_file(dev.name, _variant(dev).entry)


def read_generated(generated: Path, rel: str) -> str:
    """A generated switch file a ZTP file carries or names, through the strict reader."""
    if not (generated / rel).exists():
        families = [p.renderer.family for p in nos.profiles() if p.ztp is not None and p.renderer is not None]
        raise ZtpError(f"{generated / rel} not found: ZTP serves the switch configs of a full `railforge build` "
                       f"(run it, with the {' and '.join(families)} families)")
    try:
        return read_text(generated / rel, MAX_CONFIG_BYTES)
    except InputError as exc:
        raise ZtpError(str(exc)) from None


def switch_files(plan: Plan, generated: Path, server: str, creds: Credentials) -> list[ServedFile]:
    out: list[ServedFile] = []
    for dev in provisioned(plan):
        out += _variant(dev).files(dev, generated, server, creds)
    return out


def oob_gateways(plan: Plan) -> dict[str, str]:
    """OOB subnet -> its gateway (the OOB leaf's address on it)."""
    return {str(ip_interface(hs.prefix).network): hs.gateway
            for d in plan.devices if d.role == "oob-leaf" for hs in d.host_subnets}


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
