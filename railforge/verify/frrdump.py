"""Read what switches running FRR print: `show bgp summary json` and `show ip route json`, one folder per switch.

Layout (what `playbooks/collect_fabric.yml` and `railforge lab dump` write):
`DIR/<switch>/bgp-summary.json`, `DIR/<switch>/ip-route.json`, optionally `DIR/<switch>/lldp.json`
(`lldpcli -f json show neighbors details`) or `lldp.txt` (SONiC `show lldp table`).
A folder whose name the plan does not know, or a file that is not the JSON FRR prints, is a finding
of its own; it never stops the other switches from being judged. Each file goes through the strict reader
(`railforge.inputs`) and the pydantic models below.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from railforge.inputs import InputError, MiB, Name, parse_json, read_bytes, shown, validate
from railforge.verify.fabric import PeerState

BGP_FILE = "bgp-summary.json"
ROUTE_FILE = "ip-route.json"
LLDP_FILES = ("lldp.json", "lldp.txt")
MAX_BYTES = 256 * MiB


class DumpError(ValueError):
    pass


@dataclass(slots=True)
class BgpSummary:
    local_as: int | None = None
    peers: dict[str, PeerState] = field(default_factory=dict)


class _Loose(BaseModel):
    """FRR prints more than is judged; what is judged is typed, the rest allowed and ignored."""

    model_config = ConfigDict(extra="allow")


class Peer(_Loose):
    state: Name = "?"
    remoteAs: Any = None  # noqa: N815 - FRR's key; a number, or a word (`external`) on some versions


class Family(_Loose):
    as_: int | None = Field(None, alias="as")
    peers: dict[Name, Peer]


class NextHop(_Loose):
    interfaceName: Name | None = None  # noqa: N815 - FRR's key
    fib: bool | None = None
    active: bool | None = None


class Route(_Loose):
    protocol: str | None = None
    selected: bool | None = None
    nexthops: list[NextHop] = Field(default_factory=list)


FAMILIES = TypeAdapter(dict[Name, Family])
ROUTES = TypeAdapter(dict[Name, list[dict[str, Any]]])
ROUTE = TypeAdapter(Route)


def _load(path: Path) -> object:
    """A dump through the strict reader: regular file, at most MAX_BYTES, UTF-8, bounded JSON."""
    if not path.exists() and not path.is_symlink():
        raise DumpError(f"{path}: missing")
    try:
        return parse_json(read_bytes(path, MAX_BYTES), path)
    except InputError as exc:
        hint = "; collect it with `vtysh -c '... json'`" if "JSON" in exc.message else ""
        raise DumpError(f"{exc}{hint}") from None


def _check(adapter: TypeAdapter, data: object, path: Path, what: str) -> Any:
    try:
        return validate(adapter, data, path, what)
    except InputError as exc:
        raise DumpError(str(exc)) from None


def read_bgp_summary(path: Path) -> BgpSummary:
    raw = _load(path)
    if not isinstance(raw, dict):
        raise DumpError(f"{path}: expected the object `show bgp summary json` prints, got {type(raw).__name__}")
    out = BgpSummary()
    families = {k: v for k, v in raw.items() if isinstance(v, dict) and "peers" in v}
    if raw and not families:
        raise DumpError(f"{path}: no address family with `peers` (is this `show bgp summary json`?)")
    for af in _check(FAMILIES, families, path, "`show bgp summary json` output").values():
        if out.local_as is None:
            out.local_as = af.as_
        for key, info in af.peers.items():
            if key in out.peers and out.peers[key].state == "Established":
                continue
            out.peers[key] = PeerState(info.state, info.remoteAs if type(info.remoteAs) is int else None)
    return out


def read_bgp_routes(path: Path) -> dict[str, set[str]]:
    """Selected BGP routes -> the interfaces of their next hops installed in the FIB."""
    raw = _load(path)
    if not isinstance(raw, dict):
        raise DumpError(f"{path}: expected the object `show ip route json` prints, got {type(raw).__name__}")
    what = "`show ip route json` output"
    table = _check(ROUTES, raw, path, what + " (prefix -> list of routes)")
    out: dict[str, set[str]] = {}
    for prefix, routes in table.items():
        for r in routes:
            if r.get("protocol") != "bgp" or not r.get("selected"):
                continue
            route = _check(ROUTE, r, path, f"{what}: a route of {shown(prefix)}")
            out[prefix] = {h.interfaceName for h in route.nexthops if h.interfaceName
                           and (h.fib if h.fib is not None else bool(h.active))}
    return out


def lldp_file(folder: Path) -> Path | None:
    for name in LLDP_FILES:
        if (folder / name).is_file():
            return folder / name
    return None
