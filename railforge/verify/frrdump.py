"""Read what switches running FRR print: `show bgp summary json` and `show ip route json`, one folder per switch.

Layout (what `playbooks/collect_fabric.yml` and `railforge lab dump` write):
`DIR/<switch>/bgp-summary.json`, `DIR/<switch>/ip-route.json`, optionally `DIR/<switch>/lldp.json`
(`lldpcli -f json show neighbors details`) or `lldp.txt` (SONiC `show lldp table`).
A folder whose name the plan does not know, or a file that is not the JSON FRR prints, is a finding
of its own; it never stops the other switches from being judged.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from railforge.verify.fabric import PeerState

BGP_FILE = "bgp-summary.json"
ROUTE_FILE = "ip-route.json"
LLDP_FILES = ("lldp.json", "lldp.txt")


class DumpError(ValueError):
    pass


@dataclass(slots=True)
class BgpSummary:
    local_as: int | None = None
    peers: dict[str, PeerState] = field(default_factory=dict)


def _load(path: Path) -> object:
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise DumpError(f"{path}: missing") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DumpError(f"{path}: unreadable ({exc})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DumpError(f"{path}:{exc.lineno}: not JSON ({exc.msg}); collect it with `vtysh -c '... json'`") from None


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def read_bgp_summary(path: Path) -> BgpSummary:
    raw = _load(path)
    if not isinstance(raw, dict):
        raise DumpError(f"{path}: expected the object `show bgp summary json` prints, got {type(raw).__name__}")
    out = BgpSummary()
    families = [v for v in raw.values() if isinstance(v, dict) and "peers" in v]
    if raw and not families:
        raise DumpError(f"{path}: no address family with `peers` (is this `show bgp summary json`?)")
    for af in families:
        out.local_as = out.local_as if out.local_as is not None else _int(af.get("as"))
        peers = af.get("peers")
        if not isinstance(peers, dict):
            raise DumpError(f"{path}: `peers` is not an object")
        for key, info in peers.items():
            if not isinstance(info, dict):
                raise DumpError(f"{path}: peer {key!r} is not an object")
            state = str(info.get("state", "?"))
            if key in out.peers and out.peers[key].state == "Established":
                continue
            out.peers[key] = PeerState(state, _int(info.get("remoteAs")))
    return out


def read_bgp_routes(path: Path) -> dict[str, set[str]]:
    """Selected BGP routes -> the interfaces of their next hops installed in the FIB."""
    raw = _load(path)
    if not isinstance(raw, dict):
        raise DumpError(f"{path}: expected the object `show ip route json` prints, got {type(raw).__name__}")
    out: dict[str, set[str]] = {}
    for prefix, routes in raw.items():
        if not isinstance(routes, list):
            raise DumpError(f"{path}: {prefix!r} is not a list of routes")
        for r in routes:
            if not isinstance(r, dict) or r.get("protocol") != "bgp" or not r.get("selected"):
                continue
            hops = r.get("nexthops", [])
            out[prefix] = {str(h["interfaceName"]) for h in hops if isinstance(h, dict) and h.get("interfaceName")
                           and h.get("fib", h.get("active", False))}
    return out


def lldp_file(folder: Path) -> Path | None:
    for name in LLDP_FILES:
        if (folder / name).is_file():
            return folder / name
    return None
