"""The routing part of a generated Cumulus NVUE `startup.yaml` as the integrated frr.conf that NVUE
writes on the switch, so the lab boots Cumulus fabrics on the same FRR as SONiC ones.

Only the keys the compute fabric's BGP uses are translated (BGP, BFD, prefix lists, route maps in the
default VRF); any other key under `router` or the default VRF's `router bgp` is refused by name, so the
lab never boots a configuration with a part silently dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import jinja2
import yaml

from railforge.nos.profile import TranslationError

TEMPLATES = jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
                               trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined,
                               keep_trailing_newline=True)
ROUTER_KEYS = {"bfd", "bgp", "policy"}
VRF_BGP_KEYS = {"enable", "state", "path-selection", "address-family", "peer-group", "neighbor"}


class NvueError(TranslationError):
    pass


def _flag(value: object) -> bool:
    return value in (True, "on", "enabled")


def _on(node: object) -> bool:
    """NVUE's switches before 5.15 (`enable: on`) and from 5.15 (`state: enabled`)."""
    return isinstance(node, dict) and (_flag(node.get("enable")) or _flag(node.get("state")))


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


def _unknown(where: str, node: dict, known: set[str]) -> None:
    extra = sorted(set(node) - known)
    if extra:
        raise NvueError(f"{where}: the lab cannot translate {', '.join(extra)} (it knows {', '.join(sorted(known))})")


def _prefix_lists(policy: dict) -> list[PrefixList]:
    out = []
    for name, pl in sorted(policy.get("prefix-list", {}).items()):
        rules = []
        for seq, rule in sorted(pl.get("rule", {}).items(), key=lambda kv: int(kv[0])):
            for prefix, opts in rule.get("match", {}).items():
                rules.append(PrefixRule(int(seq), rule["action"], prefix, (opts or {}).get("max-prefix-len")))
        out.append(PrefixList(name, rules))
    return out


def _route_maps(policy: dict) -> list[RouteMap]:
    out = []
    for name, rm in sorted(policy.get("route-map", {}).items()):
        for seq, rule in sorted(rm.get("rule", {}).items(), key=lambda kv: int(kv[0])):
            action = next(iter(rule.get("action", {"permit": {}})))
            out.append(RouteMap(name, int(seq), action, rule.get("match", {}).get("ip-prefix-list")))
    return out


def _bfd(node: object, profiles: dict) -> Bfd | None:
    """A peer group's BFD: its own timers before 5.15 (`enable: on`), a `router bfd` profile from 5.15."""
    if isinstance(node, dict) and "profile" in node:
        node = {**profiles[node["profile"]], "enable": "on"}
    if not _on(node):
        return None
    return Bfd(node.get("detect-multiplier", 3), node.get("min-rx-interval", 300), node.get("min-tx-interval", 300))


def _peer_group(name: str, g: dict, bfd_profiles: dict) -> PeerGroup:
    timers = g.get("timers")
    policy = g.get("address-family", {}).get("ipv4-unicast", {}).get("policy", {})
    remote = g.get("remote-as")
    return PeerGroup(name, None if remote is None else str(remote), _bfd(g.get("bfd"), bfd_profiles),
                     (timers["keepalive"], timers["hold"]) if timers else None,
                     policy.get("inbound", {}).get("route-map"), policy.get("outbound", {}).get("route-map"))


def frr_config(startup: list | dict, where: str = "startup.yaml") -> FrrConfig:
    """The BGP configuration of one switch's NVUE `set` document."""
    docs = startup if isinstance(startup, list) else [startup]
    conf = next((d["set"] for d in docs if isinstance(d, dict) and "set" in d), None)
    if conf is None:
        raise NvueError(f"{where}: no `set` document")
    router = conf.get("router", {})
    _unknown(f"{where}: router", router, ROUTER_KEYS)
    bgp = router.get("bgp", {})
    vrf_bgp = conf.get("vrf", {}).get("default", {}).get("router", {}).get("bgp", {})
    if not (_on(bgp) and _on(vrf_bgp)):
        raise NvueError(f"{where}: BGP is not enabled (router.bgp and vrf.default.router.bgp)")
    _unknown(f"{where}: vrf.default.router.bgp", vrf_bgp, VRF_BGP_KEYS)
    v4 = vrf_bgp.get("address-family", {}).get("ipv4-unicast", {})
    _unknown(f"{where}: vrf.default.router.bgp.address-family", vrf_bgp.get("address-family", {}), {"ipv4-unicast"})
    paths = v4.get("multipaths", {})
    policy = router.get("policy", {})
    c = FrrConfig(conf.get("system", {}).get("hostname", "switch"), bgp["autonomous-system"], bgp["router-id"],
                  _flag(vrf_bgp.get("path-selection", {}).get("multipath", {}).get("aspath-ignore")),
                  paths.get("ebgp"), paths.get("ibgp"), sorted(v4.get("network", {})),
                  _prefix_lists(policy), _route_maps(policy))
    profiles = router.get("bfd", {}).get("profile", {})
    c.peer_groups = [_peer_group(n, g, profiles) for n, g in sorted(vrf_bgp.get("peer-group", {}).items())]
    groups = {g.name: g for g in c.peer_groups}
    for key, n in vrf_bgp.get("neighbor", {}).items():
        remote = n.get("remote-as")
        group = groups.get(n["peer-group"])
        if group is None:
            raise NvueError(f"{where}: neighbor {key} names peer-group {n['peer-group']}, which is not defined")
        if remote is not None and group.remote_as in ("external", "internal"):
            if (group.remote_as == "external") == (str(remote) == str(c.asn)):
                raise NvueError(f"{where}: neighbor {key} remote-as {remote} contradicts peer-group "
                                f"{group.name} remote-as {group.remote_as}")
            remote = None  # FRR refuses a member's remote-as under a group's; the group's already admits it
        c.neighbors.append(Neighbor(key, n.get("type") == "unnumbered", n["peer-group"],
                                    None if remote is None else str(remote), n.get("description")))
    return c


def frr_conf_text(startup_yaml: Path) -> str:
    try:
        doc = yaml.load(startup_yaml.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        return TEMPLATES.get_template("frr-from-nvue.conf.j2").render(c=frr_config(doc, str(startup_yaml)))
    except (KeyError, TypeError, AttributeError, yaml.YAMLError) as exc:
        raise NvueError(f"{startup_yaml}: not an NVUE startup.yaml the lab can read ({exc})") from None
