"""The facts railforge needs about one switch operating system, in one frozen value per OS.

The planner names ports and management interfaces from it, the lab boots the file it names, ZTP
picks its provisioning variant and DHCP option from it, work orders say how to reload it, and the
spec's allowed NOS names are the registered profiles' names. Nothing outside `railforge/nos/` and
that OS's renderer branches on an OS name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Kind = Literal["ethernet", "infiniband"]
Fabric = Literal["compute", "storage", "oob"]


@dataclass(frozen=True, slots=True)
class ZtpVariant:
    """How a switch of this OS provisions itself at first boot.

    `files` names the ZTP renderer's function set for it (railforge/ztp/render.py); `entry` is the file
    under `ztp/<switch>/` that the DHCP option points at; `option_code` is None for a standard DHCPv4
    option Kea knows by name, else the code Kea must be told (`option-def`).
    """

    files: str
    entry: str
    option_name: str
    option_code: int | None = None


@dataclass(frozen=True, slots=True)
class NosProfile:
    """One switch OS.

    `default_for`: the spec fabrics that get this OS when the spec names none (per `kind` for compute).
    `port_name(cage, sub, split, lanes)` gives the OS's name for sub-port `sub` of catalog cage `cage` split `split`
    ways, the cage having `lanes` electrical lanes (EOS numbers a sub-port by its first lane), or is None when
    names come from the platform's own port map: `platform_ref(model, catalog switch)` names the (platform, hwsku) of a
    catalog model and `platform(platform, hwsku)` loads its port map.
    `lab_frr(boot file)` is the integrated frr.conf the lab runs for a switch of this OS, when its boot file is not
    one; `kernel_ifname(port)` the Linux name of a port whose OS name Linux cannot take (a `/` in it).
    """

    name: str
    title: str
    kind: Kind
    fabrics: tuple[Fabric, ...]
    default_for: tuple[Fabric, ...]
    mgmt_port: str
    config_files: tuple[str, ...]
    boot_config: str | None
    reload: str
    ztp: ZtpVariant | None
    port_name: Callable[[int, int, int, int], str] | None
    platform: Callable[[str, str], object] | None = None
    platform_ref: Callable[[str, object], tuple[str, str]] | None = None
    lab_frr: Callable[[Path], str] | None = None
    kernel_ifname: Callable[[str], str] | None = None


def front_label(cage: int, sub: int, split: int) -> str:
    """The front-panel label of a port: the cage number, `/sub` for a broken-out cage (counting from 1)."""
    return f"{cage + 1}" if split == 1 else f"{cage + 1}/{sub + 1}"
