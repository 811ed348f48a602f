"""The FRR configuration the lab boots for a switch whose OS does not run FRR itself: a small typed model of the
compute fabric's BGP (peer groups with BFD and timers, numbered and interface neighbours, networks, prefix
lists, route maps, maximum paths) and the one template that writes it as an integrated frr.conf.

Each OS's lab translation (`lab_frr` of its profile, in `railforge/nos/<os>/lab.py`) reads its own generated file
into this model, so every translated OS boots through the same FRR text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import jinja2

TEMPLATES = jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
                               trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined,
                               keep_trailing_newline=True)


@dataclass(slots=True)
class PrefixRule:
    seq: int
    action: str
    prefix: str
    le: int | None


@dataclass(slots=True)
class PrefixList:
    name: str
    rules: list[PrefixRule]


@dataclass(slots=True)
class RouteMap:
    name: str
    seq: int
    action: str
    prefix_list: str | None


@dataclass(slots=True)
class Bfd:
    multiplier: int
    rx: int
    tx: int


@dataclass(slots=True)
class PeerGroup:
    name: str
    remote_as: str | None
    bfd: Bfd | None
    timers: tuple[int, int] | None
    route_map_in: str | None
    route_map_out: str | None

    @property
    def bfd_profile(self) -> str:
        return f"RF-{self.name}"


@dataclass(slots=True)
class Neighbor:
    key: str
    unnumbered: bool
    peer_group: str
    remote_as: str | None
    description: str | None


@dataclass(slots=True)
class FrrConfig:
    hostname: str
    asn: int
    router_id: str
    multipath_relax: bool
    maximum_paths_ebgp: int | None
    maximum_paths_ibgp: int | None
    networks: list[str] = field(default_factory=list)
    prefix_lists: list[PrefixList] = field(default_factory=list)
    route_maps: list[RouteMap] = field(default_factory=list)
    peer_groups: list[PeerGroup] = field(default_factory=list)
    neighbors: list[Neighbor] = field(default_factory=list)


def frr_conf(c: FrrConfig) -> str:
    return TEMPLATES.get_template("frr.conf.j2").render(c=c)
