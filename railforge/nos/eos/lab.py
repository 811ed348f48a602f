"""The routing part of a generated EOS `structured_config.yaml` as an integrated frr.conf, so the lab boots EOS
fabrics on the same FRR, through the same FRR model and template, as Cumulus fabrics (railforge/lab/frr_model.py).

Interface names become the Linux names the lab gives EOS ports (`kernel_ifname`: Ethernet3/5 is et3_5, as EOS
names its own kernel devices). Only the keys the compute fabric's BGP uses are translated (peer groups with BFD
and timers, numbered and interface neighbours, networks, route maps, prefix lists, maximum paths); any other
key of `router_bgp` and the keys below it is refused by name, so the lab never boots a configuration with a
part silently dropped. `next-hop address-family ipv6 originate` needs no line in FRR: an interface neighbour
carries IPv4 over IPv6 next hops there by default.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from railforge.lab.frr_model import Bfd, FrrConfig, Neighbor, PeerGroup, PrefixList, PrefixRule, RouteMap, frr_conf
from railforge.nos.profile import TranslationError

BGP_KEYS = {"as", "router_id", "maximum_paths", "peer_groups", "neighbors", "neighbor_interfaces",
            "address_family_ipv4"}
GROUP_KEYS = {"name", "bfd", "timers", "send_community"}
AF_KEYS = {"networks", "peer_groups"}
AF_GROUP_KEYS = {"name", "activate", "route_map_in", "route_map_out", "next_hop"}
NEIGHBOR_KEYS = {"ip_address", "name", "peer_group", "remote_as", "description"}
_PORT = re.compile(r"Ethernet(\d+)(?:/(\d+))?")
_PREFIX_ACTION = re.compile(r"(permit|deny) (\S+)(?: le (\d+))?")
_MATCH = re.compile(r"ip address prefix-list (\S+)")


class EosLabError(TranslationError):
    pass


def kernel_ifname(port: str) -> str:
    """The Linux device name of an EOS interface, as EOS names its own: Ethernet3/5 -> et3_5, Ethernet65 -> et65,
    Management1 -> ma1."""
    if m := _PORT.fullmatch(port):
        return f"et{m[1]}" + (f"_{m[2]}" if m[2] else "")
    if port.startswith("Management"):
        return "ma" + port.removeprefix("Management")
    return port


def _refuse(where: str, node: dict, known: set[str]) -> None:
    extra = sorted(set(node) - known)
    if extra:
        raise EosLabError(f"{where}: the lab cannot translate {', '.join(extra)} (it knows {', '.join(sorted(known))})")


def _prefix_lists(sc: dict, where: str) -> list[PrefixList]:
    out = []
    for pl in sc.get("prefix_lists", []):
        rules = []
        for s in pl.get("sequence_numbers", []):
            m = _PREFIX_ACTION.fullmatch(s["action"])
            if m is None:
                raise EosLabError(f"{where}: prefix list {pl['name']} seq {s['sequence']}: cannot read {s['action']!r}")
            rules.append(PrefixRule(int(s["sequence"]), m[1], m[2], int(m[3]) if m[3] else None))
        out.append(PrefixList(pl["name"], rules))
    return out


def _route_maps(sc: dict, where: str) -> list[RouteMap]:
    out = []
    for rm in sc.get("route_maps", []):
        for s in rm.get("sequence_numbers", []):
            matches = [m[1] for x in s.get("match", []) if (m := _MATCH.fullmatch(x))]
            if len(matches) != len(s.get("match", [])) or len(matches) > 1 or set(s) - {"sequence", "type", "match"}:
                raise EosLabError(f"{where}: route map {rm['name']} {s.get('sequence')}: the lab translates one "
                                  "`match ip address prefix-list` per entry")
            out.append(RouteMap(rm["name"], int(s["sequence"]), s["type"], matches[0] if matches else None))
    return out


def frr_config(sc: dict, where: str = "structured_config.yaml") -> FrrConfig:
    bgp = sc.get("router_bgp")
    if not bgp:
        raise EosLabError(f"{where}: no router_bgp")
    _refuse(f"{where}: router_bgp", bgp, BGP_KEYS)
    af = bgp.get("address_family_ipv4", {})
    _refuse(f"{where}: router_bgp.address_family_ipv4", af, AF_KEYS)
    paths = bgp.get("maximum_paths", {}).get("paths")
    c = FrrConfig(sc["hostname"], int(bgp["as"]), bgp["router_id"], False, paths, paths,
                  sorted(n["prefix"] for n in af.get("networks", [])), _prefix_lists(sc, where), _route_maps(sc, where))
    bfd = sc.get("router_bfd", {})
    policy = {g["name"]: g for g in af.get("peer_groups", [])}
    for g in bgp.get("peer_groups", []):
        _refuse(f"{where}: router_bgp.peer_groups {g['name']}", g, GROUP_KEYS)
        p = policy.get(g["name"], {})
        _refuse(f"{where}: router_bgp.address_family_ipv4.peer_groups {g['name']}", p, AF_GROUP_KEYS)
        timers = tuple(int(x) for x in g["timers"].split()) if "timers" in g else None
        c.peer_groups.append(PeerGroup(
            g["name"], None, Bfd(bfd["multiplier"], bfd["min_rx"], bfd["interval"]) if g.get("bfd") else None,
            timers, p.get("route_map_in"), p.get("route_map_out")))
    for n in bgp.get("neighbors", []) + bgp.get("neighbor_interfaces", []):
        _refuse(f"{where}: router_bgp neighbour {n.get('ip_address') or n.get('name')}", n, NEIGHBOR_KEYS)
        unnumbered = "name" in n
        c.neighbors.append(Neighbor(kernel_ifname(n["name"]) if unnumbered else n["ip_address"], unnumbered,
                                    n["peer_group"], str(n["remote_as"]), n.get("description")))
    return c


def frr_conf_text(structured_config: Path) -> str:
    try:
        sc = yaml.load(structured_config.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        return frr_conf(frr_config(sc, str(structured_config)))
    except (KeyError, TypeError, AttributeError, yaml.YAMLError) as exc:
        raise EosLabError(f"{structured_config}: not an EOS structured_config.yaml the lab can read "
                          f"({exc!r})") from None
