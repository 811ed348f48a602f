"""Cumulus Linux with NVUE: ports are `swp<cage>` (`swp<cage>s<sub>` broken out), management is eth0."""

from __future__ import annotations

from railforge.nos.profile import NosProfile, ZtpVariant


def port_name(cage: int, sub: int, split: int, _lanes: int) -> str:
    return f"swp{cage + 1}" if split == 1 else f"swp{cage + 1}s{sub}"


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
    ztp=ZtpVariant(files="cumulus", entry="cumulus-ztp.sh", option_name="cumulus-provision-url", option_code=239),
    port_name=port_name,
)
