"""The EOS profile: ports are named as EOS names them, management is Management1.

EOS names an interface of a fixed switch by its front-panel port and, on a port with more than one
electrical lane (QSFP, QSFP-DD, OSFP), by the first lane it uses: an OSFP cage numbered 1 exposes
Ethernet1/1 .. Ethernet1/8, and an RJ45 or SFP port a single interface named after the port number
(Arista EOS manual, "Layer 1 Profiles" and "Octal Port Renumber to Four Interfaces": on an octal port
400G-8 runs on x/1, 200G-4 on x/1 and x/5, 100G-2 on x/1, x/3, x/5 and x/7). So sub-port k of a cage
split n ways over L lanes is `Ethernet<cage>/<k * L/n + 1>`.
"""

from __future__ import annotations

from pathlib import Path

from railforge.nos.profile import NosProfile, ZtpVariant

CONFIG = "startup-config"
STRUCTURED = "structured_config.yaml"


def port_name(cage: int, sub: int, split: int, lanes: int) -> str:
    if lanes <= 1:
        return f"Ethernet{cage + 1}"
    return f"Ethernet{cage + 1}/{sub * (lanes // split) + 1}"


def lab_frr(structured_config: Path) -> str:
    from railforge.nos.eos.lab import frr_conf_text  # noqa: PLC0415 - the spec models import the registry

    return frr_conf_text(structured_config)


def kernel_ifname(port: str) -> str:
    from railforge.nos.eos.lab import kernel_ifname as name  # noqa: PLC0415

    return name(port)


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
    ztp=ZtpVariant(files="eos", entry="eos-ztp.sh", option_name="boot-file-name"),
    port_name=port_name,
    lab_frr=lab_frr,
    kernel_ifname=kernel_ifname,
)
