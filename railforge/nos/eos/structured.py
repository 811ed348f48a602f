"""One switch of the plan as AVD structured configuration: the input of Arista's `eos_cli_config_gen`.

The keys are AVD's `eos_cli_config_gen` schema (avd.arista.com, validated by `pyavd.validate_structured_config`),
filled from the plan's per-switch view (`SwitchConfig`) with the values the SONiC and Cumulus renderers take
from the same fields: the same neighbours, addresses, ASNs, prefix lists and route maps, BFD timers, MTU, and
the RoCE QoS profile (DSCP to traffic class, PFC on the lossless priority, ECN thresholds on its queue).

What EOS needs that the plan does not name is a constant here, identical on every switch: the management VRF,
the VARP MAC of a leaf pair's shared gateway, the peer-link port-channel and the link-local /31 on the MLAG
peer VLAN (the other OSes peer over IPv6 link-local there; an EOS MLAG peer address is an IPv4 address).
"""

from __future__ import annotations

from dataclasses import dataclass

from railforge.plan.model import Qos
from railforge.plan.switch_model import PEERLINK_VLAN, Interface, SwitchConfig

MGMT_VRF = "MGMT"
VARP_MAC = "00:00:5e:00:01:01"
PEERLINK_PO = 2000
PEER_GROUP_MLAG = "MLAG"
MLAG_NET = ("169.254.0.0", "169.254.0.1")  # (primary, secondary) on the peer VLAN, /31
VXLAN_PORT = 4789
BFD_MS, BFD_MULTIPLIER = 300, 3
KEEPALIVE, HOLD = 3, 9
MAX_PATHS = 64
DSCP_PER_LINE = 8
# EOS speeds that name their lane count (the `speed` values of AVD's eos_cli_config_gen schema)
LANE_SPEEDS = frozenset({"40g-4", "50g-1", "50g-2", "100g-1", "100g-2", "100g-4", "200g-1", "200g-2", "200g-4",
                         "400g-2", "400g-4", "400g-8", "800g-4", "800g-8"})


@dataclass(frozen=True, slots=True)
class Bond:
    port_channel: str
    id: int
    host: str
    host_port: str


def _ip(cidr: str | None) -> str | None:
    return cidr.split("/")[0] if cidr else None


def speed(i: Interface) -> str | None:
    """EOS's speed keyword: `<G>g-<lanes>` where EOS names the lane count (every PAM4 rate and 40G), `<G>g`
    where it does not (10G, 25G, also on a broken-out QSFP lane); None (auto-negotiate) for 1G copper."""
    gbps = i.speed_mbps // 1000
    laned = f"{gbps}g-{len(i.lanes)}"
    if laned in LANE_SPEEDS:
        return laned
    return f"{gbps}g" if gbps >= 10 else None


def _bonds(sw: SwitchConfig) -> dict[str, Bond]:
    if sw.pair is None:
        return {}
    return {b.member: Bond(f"Port-Channel{b.id}", b.id, b.host, b.host_port) for b in sw.pair.bonds}


def _cages_in_use(sw: SwitchConfig) -> set[int]:
    return {i.index for i in sw.interfaces if i.enabled and i.role != "mgmt"}


def _qos_port(q: Qos) -> dict:
    return {
        "qos": {"trust": "dscp"},
        "priority_flow_control": {"enabled": True, "priorities": [{"priority": q.lossless_priority, "no_drop": True}]},
        "tx_queues": [{"id": q.lossless_priority, "random_detect": {"ecn": {"threshold": {
            "units": "bytes", "min": q.ecn_min_threshold_bytes, "max": q.ecn_max_threshold_bytes,
            "max_probability": q.ecn_probability}}}}],
    }


def _access(sw: SwitchConfig) -> dict:
    """Switchport settings of a host-facing port or bond: the first host VLAN untagged, the others tagged."""
    vlans = [v.vlan for v in sw.host_vlans]
    if len(vlans) == 1:
        return {"enabled": True, "mode": "access", "access_vlan": vlans[0]}
    return {"enabled": True, "mode": "trunk",
            "trunk": {"native_vlan": vlans[0], "allowed_vlan": ",".join(str(v) for v in vlans)}}


def ethernet_interfaces(sw: SwitchConfig) -> list[dict]:
    """Every used port, plus the unused sub-ports of a broken-out cage in use (shut, at the cage's speed, so the
    cage's breakout is stated whole); other unused ports stay shut by `interface defaults`."""
    bonds = _bonds(sw)
    cages = _cages_in_use(sw)
    out = []
    for i in sw.interfaces:
        if i.role == "mgmt" or not i.lanes or (not i.enabled and i.index not in cages):
            continue
        e: dict = {"name": i.name}
        if i.description:
            e["description"] = i.description
        e["shutdown"] = not i.enabled
        if (s := speed(i)) is not None:
            e["speed"] = s
        if not i.enabled:
            out.append(e)
            continue
        e["mtu"] = i.mtu
        e["metadata"] = {"peer": i.peer_device, "peer_interface": i.peer_port, "peer_type": i.peer_role}
        if i.role in ("uplink", "downlink"):
            e["switchport"] = {"enabled": False}
            if i.address:
                e["ip_address"] = i.address
            else:
                e["ipv6_enable"] = True
        elif i.role == "peerlink":
            e["channel_group"] = {"id": PEERLINK_PO, "mode": "active"}
        elif i.name in bonds:
            e["channel_group"] = {"id": bonds[i.name].id, "mode": "active"}
        elif i.role == "host":
            e["switchport"] = _access(sw)
            e["spanning_tree_portfast"] = "edge"
        if sw.qos is not None and i.role in ("uplink", "downlink", "host"):
            e.update(_qos_port(sw.qos))
        out.append(e)
    return out


def _esi(sw: SwitchConfig, bond_id: int) -> tuple[str, str]:
    """(Ethernet Segment Identifier, ES-import route target) of one bond of an EVPN-MH pair: both leaves derive
    the same values from the pair's shared system MAC and the bond's id."""
    mac = sw.pair.sys_mac.split(":")
    esi = f"0000:{mac[0]}{mac[1]}:{mac[2]}{mac[3]}:{mac[4]}{mac[5]}:{bond_id:04x}"
    rt = ":".join(mac[2:] + [f"{bond_id >> 8:02x}", f"{bond_id & 255:02x}"])
    return esi, rt


def port_channel_interfaces(sw: SwitchConfig) -> list[dict]:
    if sw.pair is None:
        return []
    lacp_id = "{}{}.{}{}.{}{}".format(*sw.pair.sys_mac.split(":"))
    out = []
    for b in sw.pair.bonds:
        pc: dict = {"name": f"Port-Channel{b.id}", "description": f"{b.host}:{b.host_port}", "shutdown": False,
                    "switchport": _access(sw), "spanning_tree_portfast": "edge", "lacp_fallback_mode": "individual",
                    "lacp_fallback_timeout": 90}
        if sw.pair.mode == "mlag":
            pc["mlag"] = b.id
        else:
            esi, rt = _esi(sw, b.id)
            pc["evpn_ethernet_segment"] = {
                "identifier": esi, "redundancy": "all-active", "route_target": rt,
                "designated_forwarder_election": {"algorithm": "preference",
                                                  "preference_value": 50000 if sw.pair.primary else 40000}}
            pc["lacp_id"] = lacp_id
        out.append(pc)
    if sw.pair.mode == "mlag":
        vlans = [str(v.vlan) for v in sw.host_vlans] + [str(PEERLINK_VLAN)]
        out.append({"name": f"Port-Channel{PEERLINK_PO}", "description": f"MLAG peer link to {sw.pair.peer}",
                    "shutdown": False, "switchport": {"enabled": True, "mode": "trunk",
                                                      "trunk": {"allowed_vlan": ",".join(vlans),
                                                                "groups": [PEER_GROUP_MLAG]}}})
    return out


def _mlag_ips(sw: SwitchConfig) -> tuple[str, str]:
    """(own, peer) address on the MLAG peer VLAN."""
    first, second = MLAG_NET
    return (first, second) if sw.pair.primary else (second, first)


def vlans(sw: SwitchConfig) -> tuple[list[dict], list[dict]]:
    """`vlans` and `vlan_interfaces`: the host VLANs with their gateway (VARP on a leaf pair), and the MLAG peer
    VLAN."""
    vl, svis = [], []
    for v in sw.host_vlans:
        vl.append({"id": v.vlan, "name": f"HOSTS_{v.vlan}"})
        plen = v.prefix.split("/")[1]
        svi: dict = {"name": f"Vlan{v.vlan}", "shutdown": False, "mtu": sw.mtu}
        if v.address:
            svi["ip_address"] = v.address
            svi["ip_virtual_router_addresses"] = [v.gateway]
        else:
            svi["ip_address"] = f"{v.gateway}/{plen}"
        svis.append(svi)
    if sw.pair is not None and sw.pair.mode == "mlag":
        own, _ = _mlag_ips(sw)
        vl.append({"id": PEERLINK_VLAN, "name": "MLAG_PEER", "trunk_groups": [PEER_GROUP_MLAG]})
        svis.append({"name": f"Vlan{PEERLINK_VLAN}", "description": "MLAG peering", "shutdown": False,
                     "mtu": sw.mtu, "no_autostate": True, "ip_address": f"{own}/31"})
    return vl, svis


def _mgmt(sw: SwitchConfig) -> dict:
    mgmt = next((i for i in sw.interfaces if i.role == "mgmt"), None)
    if mgmt is None or not sw.mgmt_address:
        return {}
    intf: dict = {"name": mgmt.name, "shutdown": False, "vrf": MGMT_VRF, "ip_address": sw.mgmt_address, "type": "oob"}
    if mgmt.description:
        intf["description"] = mgmt.description
    out: dict = {"management_interfaces": [intf]}
    if sw.mgmt_gateway:
        intf["gateway"] = sw.mgmt_gateway
        out["static_routes"] = [{"vrf": MGMT_VRF, "prefix": "0.0.0.0/0", "next_hop": sw.mgmt_gateway}]
    return out


def policy(sw: SwitchConfig) -> dict:
    """The prefix lists and route maps the other OSes write: announce only loopbacks and host subnets (RF-LOCAL on
    a leaf, RF-FABRIC above it) and accept only the fabric's pools."""
    local = [{"sequence": (n + 1) * 10, "action": f"permit {p}"} for n, p in enumerate(sw.announce)]
    fabric = [{"sequence": (n + 1) * 10, "action": f"permit {p} le 32"} for n, p in enumerate(sw.fabric_prefixes)]
    out_list = "RF-LOCAL" if sw.tier == 1 else "RF-FABRIC"
    return {
        "prefix_lists": [{"name": "RF-FABRIC", "sequence_numbers": fabric},
                         {"name": "RF-LOCAL", "sequence_numbers": local}],
        "route_maps": [
            {"name": "RF-IN", "sequence_numbers": [{"sequence": 10, "type": "permit",
                                                   "match": ["ip address prefix-list RF-FABRIC"]}]},
            {"name": "RF-OUT", "sequence_numbers": [{"sequence": 10, "type": "permit",
                                                    "match": [f"ip address prefix-list {out_list}"]}]},
        ],
    }


def router_bgp(sw: SwitchConfig) -> dict:
    unnumbered_groups = {n.peer_group for n in sw.neighbors if n.address is None and n.peer_group != "PEER"}
    groups, af_groups = [], []
    for g in sw.peer_groups():
        pg: dict = {"name": g, "timers": f"{KEEPALIVE} {HOLD}"}
        if g == "PEER":
            pg["next_hop_self"] = True
        else:
            pg["bfd"] = True
        if sw.evpn:
            pg["send_community"] = "all"
        groups.append(pg)
        af: dict = {"name": g, "activate": True, "route_map_in": "RF-IN", "route_map_out": "RF-OUT"}
        if g in unnumbered_groups:
            af["next_hop"] = {"address_family_ipv6": {"enabled": True, "originate": True}}
        af_groups.append(af)
    neighbors, interfaces = [], []
    for n in sw.neighbors:
        description = f"{n.peer_name}:{n.peer_port}"
        if n.peer_group == "PEER":
            neighbors.append({"ip_address": _mlag_ips(sw)[1], "peer_group": "PEER", "remote_as": str(n.remote_asn),
                              "description": description})
        elif n.address:
            neighbors.append({"ip_address": n.address, "peer_group": n.peer_group, "remote_as": str(n.remote_asn),
                              "description": description})
        else:
            interfaces.append({"name": n.interface, "peer_group": n.peer_group, "remote_as": str(n.remote_asn),
                               "description": description})
    bgp: dict = {"as": str(sw.asn), "router_id": sw.router_id,
                 "maximum_paths": {"paths": MAX_PATHS, "ecmp": MAX_PATHS}, "peer_groups": groups}
    if neighbors:
        bgp["neighbors"] = neighbors
    if interfaces:
        bgp["neighbor_interfaces"] = interfaces
    bgp["address_family_ipv4"] = {"networks": [{"prefix": p} for p in sw.announce], "peer_groups": af_groups}
    if sw.evpn:
        evpn: dict = {"peer_groups": [{"name": g, "activate": True} for g in sw.peer_groups()]}
        if sw.tier > 1:
            evpn["next_hop_unchanged"] = True
        bgp["address_family_evpn"] = evpn
        if sw.host_vlans:
            bgp["vlans"] = [{"id": v.vlan, "rd": f"{sw.router_id}:{v.vni}",
                             "route_targets": {"both": [f"{v.vni}:{v.vni}"]}, "redistribute_routes": ["learned"]}
                            for v in sw.host_vlans]
    return bgp


def qos(q: Qos) -> dict:
    """DSCP to traffic class as the SONiC map says: RoCE to the lossless class, CNPs to theirs, every other DSCP to
    class 0 (EOS's default map would put DSCP 24-31 in class 3 with RoCE); PFC watchdog dropping on a stuck
    queue, SONiC's default action."""
    others = [d for d in range(64) if d not in (q.roce_dscp, q.cnp_dscp)]
    lines = [" ".join(map(str, others[k:k + DSCP_PER_LINE])) + " to traffic-class 0"
             for k in range(0, len(others), DSCP_PER_LINE)]
    lines += [f"{q.roce_dscp} to traffic-class {q.lossless_priority}",
              f"{q.cnp_dscp} to traffic-class {q.cnp_priority}"]
    return {"qos": {"map": {"dscp": lines}}, "priority_flow_control": {"watchdog": {"action": "drop"}}}


def structured_config(sw: SwitchConfig) -> dict:
    """The AVD structured configuration of `sw`, in AVD's key order for readability."""
    unnumbered = any(n.address is None and n.peer_group != "PEER" for n in sw.neighbors)
    sc: dict = {"hostname": sw.hostname, "service_routing_protocols_model": "multi-agent"}
    sc["metadata"] = {"platform": sw.model, "fabric_name": sw.fabric}
    sc["vrfs"] = [{"name": MGMT_VRF, "ip_routing": False}]
    sc.update(_mgmt(sw))
    sc["interface_defaults"] = {"ethernet": {"shutdown": True}}
    sc["ethernet_interfaces"] = ethernet_interfaces(sw)
    if (pcs := port_channel_interfaces(sw)):
        sc["port_channel_interfaces"] = pcs
    if sw.loopback:
        sc["loopback_interfaces"] = [{"name": "Loopback0", "description": "router id", "ip_address": sw.loopback}]
    vl, svis = vlans(sw)
    if vl:
        sc["vlans"] = vl
        sc["vlan_interfaces"] = svis
    if any(v.address for v in sw.host_vlans):
        sc["ip_virtual_router_mac_address"] = VARP_MAC
    if sw.pair is not None and sw.pair.mode == "mlag":
        own, peer = _mlag_ips(sw)
        sc["spanning_tree"] = {"mode": "mstp", "no_spanning_tree_vlan": str(PEERLINK_VLAN)}
        sc["mlag_configuration"] = {"domain_id": "-".join(sorted((sw.hostname, sw.pair.peer))),
                                    "local_interface": f"Vlan{PEERLINK_VLAN}", "peer_address": peer,
                                    "peer_link": f"Port-Channel{PEERLINK_PO}"}
    if sw.evpn and sw.host_vlans and sw.router_id:
        sc["vxlan_interface"] = {"vxlan1": {"description": f"{sw.hostname} VTEP", "vxlan": {
            "source_interface": "Loopback0", "udp_port": VXLAN_PORT,
            "vlans": [{"id": v.vlan, "vni": v.vni} for v in sw.host_vlans]}}}
    if sw.asn is not None:
        sc["ip_routing"] = True
        if unnumbered:
            sc["ip_routing_ipv6_interfaces"] = True
            sc["ipv6_unicast_routing"] = True
        sc.update(policy(sw))
        sc["router_bfd"] = {"interval": BFD_MS, "min_rx": BFD_MS, "multiplier": BFD_MULTIPLIER}
        sc["router_bgp"] = router_bgp(sw)
    if sw.qos is not None:
        sc.update(qos(sw.qos))
    return sc
