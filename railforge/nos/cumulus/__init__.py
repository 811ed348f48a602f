"""Cumulus Linux with NVUE: ports are `swp<cage>` (`swp<cage>s<sub>` broken out), management is eth0; one NVUE
startup.yaml per switch (`render.py`), ZTP by a provisioning script (`ztp.py`), and the lab's translation of the
startup.yaml's routing into the frr.conf NVUE writes (`lab.py`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from railforge.nos.profile import NosProfile, Renderer, ZtpVariant

if TYPE_CHECKING:
    from railforge.formats.output import Output
    from railforge.plan.model import Device, Plan
    from railforge.provision.credentials import Credentials
    from railforge.provision.served import ServedFile


def port_name(cage: int, sub: int, split: int, lanes: int) -> str:
    return f"swp{cage + 1}" if split == 1 else f"swp{cage + 1}s{sub}"


def write_configs(plan: Plan, out: Output) -> None:
    from railforge.nos.cumulus import render as renderer

    renderer.render(plan, out)


def ztp_files(dev: Device, generated: Path, server: str, creds: Credentials) -> list[ServedFile]:
    from railforge.nos.cumulus import ztp

    return ztp.files(dev, generated, server, creds)


def lab_frr(startup_yaml: Path) -> str:
    from railforge.nos.cumulus import lab

    return lab.frr_conf_text(startup_yaml)


PROFILE = NosProfile(
    name="cumulus",
    title="Cumulus Linux (NVUE)",
    kind="ethernet",
    fabrics=("compute", "storage", "oob"),
    default_for=("storage", "oob"),
    mgmt_port="eth0",
    config_files=("startup.yaml",),
    boot_config="startup.yaml",
    reload="nv config replace startup.yaml && nv config apply",
    port_name=port_name,
    renderer=Renderer("nvue", "Cumulus Linux NVUE startup.yaml per Cumulus switch", write_configs),
    ztp=ZtpVariant(entry="cumulus-ztp.sh", option_name="cumulus-provision-url", files=ztp_files, option_code=239),
    lab_frr=lab_frr,
)
