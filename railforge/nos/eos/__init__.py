"""Arista EOS: ports are named as EOS names them, management is Management1; per switch an AVD structured
configuration and the startup-config Arista's `pyavd` renders from it (`structured.py`, `render.py`), ZTP by a
script on DHCP option 67 (`ztp.py`), the planning check of EOS's MTU range (`checks.py`), the lab's translation
of the structured configuration into frr.conf with EOS's own Linux port names (`lab.py`), and EOS's LLDP table
`show lldp neighbors | json` (`lldp.py`).

Port names: EOS names an interface of a fixed switch by its front-panel port and, on a port with more than one
electrical lane (QSFP, QSFP-DD, OSFP), by the first lane it uses: an OSFP cage numbered 1 exposes Ethernet1/1 ..
Ethernet1/8, and an RJ45 or SFP port a single interface named after the port number (Arista EOS manual, "Layer 1
Profiles" and "Octal Port Renumber to Four Interfaces": on an octal port 400G-8 runs on x/1, 200G-4 on x/1 and
x/5, 100G-2 on x/1, x/3, x/5 and x/7). So sub-port k of a cage split n ways over L lanes is
`Ethernet<cage>/<k * L/n + 1>`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from railforge.nos.profile import LldpTable, NosProfile, Renderer, ZtpVariant

if TYPE_CHECKING:
    from railforge.formats.output import Output
    from railforge.plan.model import Device, Plan
    from railforge.provision.credentials import Credentials
    from railforge.provision.served import ServedFile
    from railforge.spec.models import ClusterSpec
    from railforge.verify.names import PlanNames
    from railforge.verify.observed import Observation

CONFIG = "startup-config"
STRUCTURED = "structured_config.yaml"


def port_name(cage: int, sub: int, split: int, lanes: int) -> str:
    if lanes <= 1:
        return f"Ethernet{cage + 1}"
    return f"Ethernet{cage + 1}/{sub * (lanes // split) + 1}"


def check_mtu(spec: ClusterSpec, devices: list[Device]) -> None:
    from railforge.nos.eos import checks

    checks.check_mtu(spec, devices)


def parse_lldp_json(text: str, device: str, names: PlanNames, source: str = "") -> Observation:
    from railforge.nos.eos import lldp

    return lldp.parse_neighbors(text, device, names, source)


def write_configs(plan: Plan, out: Output) -> None:
    from railforge.nos.eos import render as renderer

    renderer.render(plan, out)


def ztp_files(dev: Device, generated: Path, server: str, creds: Credentials) -> list[ServedFile]:
    from railforge.nos.eos import ztp

    return ztp.files(dev, generated, server, creds)


def lab_frr(structured_config: Path) -> str:
    from railforge.nos.eos import lab

    return lab.frr_conf_text(structured_config)


def kernel_ifname(port: str) -> str:
    from railforge.nos.eos import lab

    return lab.kernel_ifname(port)


PROFILE = NosProfile(
    name="eos",
    title="Arista EOS",
    kind="ethernet",
    fabrics=("compute", "storage", "oob"),
    default_for=(),
    mgmt_port="Management1",
    config_files=(STRUCTURED, CONFIG),
    boot_config=STRUCTURED,
    reload="copy startup-config flash:startup-config, then `configure replace flash:startup-config`",
    port_name=port_name,
    plan_checks=(check_mtu,),
    renderer=Renderer("eos", "Arista EOS AVD structured_config.yaml and the startup-config pyavd renders, per EOS "
                      "switch", write_configs),
    ztp=ZtpVariant(entry="eos-ztp.sh", option_name="boot-file-name", files=ztp_files),
    lab_frr=lab_frr,
    kernel_ifname=kernel_ifname,
    lldp_table=LldpTable("EOS 'show lldp neighbors | json'", parse_lldp_json, json=True),
)
