"""The interface of a switch operating system: one frozen `NosProfile` per OS, in `railforge/nos/<os>/__init__.py`.

An OS is one folder, `railforge/nos/<os>/`: its profile (this dataclass, filled in), its renderer and templates,
its ZTP files, its lab translation, its parsers of observed state and its data. Everything outside the folder
asks the profile, through the registry (`railforge.nos`), and never imports the folder's modules:

- the spec takes the allowed OS names and per-fabric defaults from the registry (`name`, `fabrics`,
  `default_for`, `kind`);
- the planner names ports (`port_name`, or the platform's own port map: `platform_ref` + `platform`), the
  management port (`mgmt_port`), records the platform in the plan (`Device.platform`/`hwsku`) and runs the OS's
  planning checks (`plan_checks`);
- the build runs its renderer (`renderer`) over the OS-neutral per-switch view (`railforge/plan/switch_model.py`);
- `railforge ztp` writes its first-boot files (`ztp.files`) and points DHCP at them (`ztp.entry`, the option);
- the lab boots FRR from its generated file (`boot_config` through `lab_frr`);
- `railforge verify` reads its own LLDP table format (`lldp_table`);
- work orders say how to load a changed file (`reload`).

Hooks are plain functions. A profile module imports its heavy modules inside them, so importing the registry
(the spec does, at start-up) loads no renderer, and an OS module may use the plan, ZTP or verify types without
an import cycle.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

if TYPE_CHECKING:
    from railforge.formats.output import Output
    from railforge.plan.model import Device, Plan
    from railforge.provision.credentials import Credentials
    from railforge.provision.served import ServedFile
    from railforge.spec.models import ClusterSpec
    from railforge.verify.names import PlanNames
    from railforge.verify.observed import Observation

Kind = Literal["ethernet", "infiniband"]
Fabric = Literal["compute", "storage", "oob"]


class PlatformError(ValueError):
    """A platform's port map cannot give what the plan asks (no such platform, hwsku, cage or breakout)."""


class PlanRefused(ValueError):
    """A planning check of an OS refuses the spec: `field` is the spec path the error names."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


class TranslationError(ValueError):
    """The lab cannot turn an OS's generated file into the FRR configuration it boots."""


class PlatformPort(Protocol):
    name: str
    lanes: tuple[int, ...]
    mode: str


class PortMap(Protocol):
    """A platform's own port map: sub-port `sub` of catalog cage `cage` broken out `split` ways at `speed_mbps`."""

    def port(self, cage: int, split: int, speed_mbps: int, sub: int) -> PlatformPort: ...


@dataclass(frozen=True, slots=True)
class Renderer:
    """The build family that writes this OS's per-switch files (`railforge build --only <family>`). `render` must
    honour `--limit` (`Output.selects`) and render each switch on its own (parallel builds split by switch);
    `weight` is its share of a large build's CPU, which orders parallel work."""

    family: str
    description: str
    render: Callable[[Plan, Output], None]
    weight: int = 1


@dataclass(frozen=True, slots=True)
class ZtpVariant:
    """How a switch of this OS provisions itself at first boot.

    `files(device, generated folder, server URL, credentials)` gives the files under `ztp/<switch>/`; `entry` is the
    one the DHCP option points at; `option_code` is None for a standard DHCPv4 option Kea knows by name, else the
    code Kea must be told (`option-def`).
    """

    entry: str
    option_name: str
    files: Callable[[Device, Path, str, Credentials], list[ServedFile]]
    option_code: int | None = None


@dataclass(frozen=True, slots=True)
class LldpTable:
    """The OS's own text LLDP neighbour table (lldpd's JSON is read for every OS): `title` names it in help text,
    `parse(text, device, names, source)` reads one device's table."""

    title: str
    parse: Callable[[str, str, PlanNames, str], Observation]


@dataclass(frozen=True, slots=True)
class NosProfile:
    """One switch OS.

    `default_for`: the spec fabrics that get this OS when the spec names none (per `kind` for compute).
    `port_name(cage, sub, split, lanes)` gives the OS's name for sub-port `sub` of catalog cage `cage` broken out
    `split` ways, the cage having `lanes` electrical lanes (an OS may number sub-ports by their first lane), or is
    None when names come from the platform's own port map: `platform_ref(model, catalog switch)` names the
    (platform, hwsku) of a catalog model (the plan keeps them in `Device.platform`/`hwsku`) and
    `platform(platform, hwsku)` loads its port map.
    `plan_checks(spec, devices of this OS)` run once the devices are planned; each raises PlanRefused.
    `lab_frr(boot file)` is the FRR configuration the lab boots for the generated `boot_config` (TranslationError
    when it cannot).
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
    port_name: Callable[[int, int, int, int], str] | None
    platform: Callable[[str, str], PortMap] | None = None
    platform_ref: Callable[[str, object], tuple[str, str]] | None = None
    plan_checks: tuple[Callable[[ClusterSpec, list[Device]], None], ...] = ()
    renderer: Renderer | None = None
    ztp: ZtpVariant | None = None
    lab_frr: Callable[[Path], str] | None = None
    lldp_table: LldpTable | None = None


def front_label(cage: int, sub: int, split: int) -> str:
    """The front-panel label of a port: the cage number, `/sub` for a broken-out cage (counting from 1)."""
    return f"{cage + 1}" if split == 1 else f"{cage + 1}/{sub + 1}"
