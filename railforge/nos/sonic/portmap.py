"""SONiC port facts from a platform's own `platform.json` and hwsku `hwsku.json` (railforge/nos/sonic).

A catalog switch names its SONiC platform and hwsku; cage k of the catalog is the platform's k-th
front-panel port (ordered by the platform's `index`). A breakout sub-port takes its name, lanes,
index and alias the way SONiC's port configuration does (sonic-config-engine `BreakoutCfg`): the
mode `NxSPEED[alt,...](assigned lanes)` gives each of N ports assigned/N of the cage's lanes, port k
starting at lane offset k*(assigned/N), named `Ethernet<parent number + offset>`, with the index of
its first lane and the k-th alias the mode lists. Nothing here is computed from lane arithmetic of
the catalog.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

from railforge.nos.profile import PlatformError
from railforge.units import format_speed

_MODE = re.compile(r"^(\d+)x(\d+G?)(?:\((?P<a>\d+)\))?(?:\[(?P<alt>[\dG,]*)\])?(?:\((?P<b>\d+)\))?$")


@dataclass(frozen=True, slots=True)
class SonicPort:
    name: str
    lanes: tuple[int, ...]
    index: str
    alias: str
    mode: str  # the platform's breakout mode name, as BREAKOUT_CFG must say it
    parent: str  # the cage's port (BREAKOUT_CFG key)


@dataclass(frozen=True, slots=True)
class _Mode:
    name: str
    ports: int
    speed: int
    speeds: frozenset[int]
    lanes: int | None


@dataclass(frozen=True, slots=True)
class _Cage:
    name: str
    lanes: tuple[int, ...]
    indexes: tuple[str, ...]
    modes: dict[str, tuple[str, ...]]


def _mbps(text: str) -> int:
    return int(text[:-1]) * 1000 if text.endswith("G") else int(text)


@cache
def _mode(name: str) -> _Mode:
    m = _MODE.match(name)
    if m is None:
        raise PlatformError(f"breakout mode {name!r} is not in SONiC's NxSPEED[...] form")
    alts = frozenset(_mbps(s) for s in (m["alt"] or "").split(",") if s)
    speed = _mbps(m[2])
    lanes = m["a"] or m["b"]
    return _Mode(name, int(m[1]), speed, alts | {speed}, int(lanes) if lanes else None)


@dataclass(frozen=True)
class Platform:
    name: str
    hwsku: str
    cages: tuple[_Cage, ...]

    def port(self, cage: int, split: int, speed_mbps: int, sub: int) -> SonicPort:
        """Sub-port `sub` of catalog cage `cage` broken out `split` ways at `speed_mbps`."""
        if cage >= len(self.cages):
            raise PlatformError(f"{self.name} has {len(self.cages)} front-panel ports; cage {cage + 1} does not "
                                "exist")
        c = self.cages[cage]
        modes = [_mode(n) for n in c.modes]
        fits = [m for m in modes if m.ports == split and speed_mbps in m.speeds
                and (m.lanes or len(c.lanes)) <= len(c.lanes)]
        fits.sort(key=lambda m: (m.speed != speed_mbps, m.lanes is not None))
        if not fits:
            raise PlatformError(f"{self.name} offers no {split}x{format_speed(speed_mbps)} breakout on {c.name} "
                                f"(its modes: {', '.join(c.modes)})")
        return self.lookup(cage, fits[0].name, sub)

    def lookup(self, cage: int, mode_name: str, sub: int) -> SonicPort:
        """Sub-port `sub` of catalog cage `cage` in the platform's breakout mode `mode_name`."""
        c = self.cages[cage]
        if mode_name not in c.modes:
            raise PlatformError(f"{self.name} has no breakout mode {mode_name!r} on {c.name} "
                                f"(its modes: {', '.join(c.modes)})")
        mode = _mode(mode_name)
        per_port = (mode.lanes or len(c.lanes)) // mode.ports
        offset = sub * per_port
        base = int(c.name.removeprefix("Ethernet"))
        return SonicPort(f"Ethernet{base + offset}", c.lanes[offset:offset + per_port], c.indexes[offset],
                         c.modes[mode_name][sub], mode_name, c.name)


def _read(platform: str, *parts: str) -> dict:
    root = resources.files("railforge.nos.sonic").joinpath("platforms", platform, *parts)
    return json.loads(root.read_text(encoding="utf-8"))


def known_platforms() -> list[str]:
    root = resources.files("railforge.nos.sonic").joinpath("platforms")
    return sorted(p.name for p in root.iterdir() if p.joinpath("platform.json").is_file())


@cache
def load_platform(platform: str, hwsku: str) -> Platform:
    if platform not in known_platforms():
        raise PlatformError(f"no SONiC platform data for {platform!r} in railforge/nos/sonic/platforms "
                            f"(known: {', '.join(known_platforms())})")
    try:
        _read(platform, hwsku, "hwsku.json")
    except FileNotFoundError:
        raise PlatformError(f"SONiC platform {platform} has no hwsku {hwsku!r} with a hwsku.json") from None
    cages = []
    for name, entry in _read(platform, "platform.json")["interfaces"].items():
        lanes = tuple(int(x) for x in entry["lanes"].split(","))
        indexes = tuple(entry["index"].split(","))
        cages.append(_Cage(name, lanes, indexes, {k: tuple(v) for k, v in entry["breakout_modes"].items()}))
    cages.sort(key=lambda c: int(c.indexes[0]))
    return Platform(platform, hwsku, tuple(cages))
