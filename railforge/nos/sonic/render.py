"""SONiC: `configs/<switch>/config_db.json` and `configs/<switch>/frr.conf` for every SONiC switch.

config_db.json is meant to be merged onto the switch's factory configuration (`config load` or
`sonic-cfggen -j config_db.json --write-to-db`): platform, hwsku and base MAC stay the device's own.
PORT names, lanes, index and alias and the BREAKOUT_CFG mode names are the platform's own
(`platform.json` of the plan's `platform`, see railforge/nos/sonic/portmap.py); every port
of every cage is written, unused ones admin down.
Buffers follow what SONiC's own templates for the switch's SKU write at `config qos reload`
(railforge/nos/sonic/buffer_defaults.py: rendered once with sonic-cfggen): DEVICE_METADATA.type is one
whose buffers_defaults_<t>.j2 the SKU ships (a super-spine on a SKU without t2 runs the t1 defaults
as LeafRouter), buffer_model is the one the reload selects (dynamic on Mellanox SKUs, traditional on
the Tomahawk-5 SKU), and BUFFER_PG/BUFFER_QUEUE carry exactly the templates' keys and profiles for
every used port (`|0`, `|3-4`, `|0-2`, `|5-6`), so `config load` after a reload overwrites them
instead of adding overlapping per-priority keys. In the dynamic model the lossless PG's profile is
"NULL" (buffermgrd sizes headroom from speed and CABLE_LENGTH); in the traditional one buffermgrd
writes the lossless PG from `pfc_enable` and pg_profile_lookup.ini, so CABLE_LENGTH is rounded up to
a length that file lists and `pfc_enable` is the templates' own set (see `_pfc_enable`). Pool and
profile sizes are the platform's, which is why BUFFER_POOL and BUFFER_PROFILE are not written here;
the tests validate the file merged with the real defaults.

Routing is FRR in `docker_routing_config_mode: split-unified`: SONiC renders no routing config
and FRR reads the one frr.conf written here (plain `split` would expect bgpd.conf/zebra.conf).
frr.conf is an integrated configuration: FRR boots it through `vtysh -b` (as SONiC and FRR's own
init do), which hands every line to the daemon that owns it. It carries no interface addresses: on
SONiC they come from config_db.json (INTERFACE, LOOPBACK_INTERFACE, VLAN_INTERFACE), and anything
else that runs it (the lab) applies the same addresses from the plan.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import astuple
from pathlib import Path

import jinja2
import orjson

from railforge.formats.output import Output
from railforge.nos.sonic import PROFILE
from railforge.nos.sonic.buffer_defaults import (
    BufferDataError,
    BufferTemplateMissing,
    SkuBuffers,
    known_skus,
    load_buffers,
)
from railforge.nos.sonic.portmap import Platform
from railforge.plan import outdir
from railforge.plan.model import Plan, Qos
from railforge.plan.switch_model import PEERLINK_VLAN, SwitchConfig, build_models, rank

JSON_OPTIONS = orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS
QOS_MAP = "RAILFORGE"
WRED_LOSSLESS = "RAILFORGE_LOSSLESS"
SAG_MAC = "00:00:5e:00:01:01"
RS_FEC_MIN_MBPS = 100_000  # 100G and faster (25G/50G PAM4 lanes) run Reed-Solomon FEC
PEERLINK_PORTCHANNEL = f"PortChannel{PEERLINK_VLAN}"
DEVICE_TYPES = {
    ("compute", 1): "BackEndToRRouter", ("compute", 2): "BackEndLeafRouter", ("compute", 3): "SpineRouter",
    ("storage", 1): "ToRRouter", ("storage", 2): "LeafRouter", ("storage", 3): "SpineRouter",
    ("oob", 1): "MgmtToRRouter", ("oob", 2): "MgmtLeafRouter", ("oob", 3): "MgmtSpineRouter",
}
TEMPLATES = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
    undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
)


def device_type(sw: SwitchConfig) -> str:
    """The planned role's SONiC type (see `_buffers` and SkuBuffers.device_type for the one a SKU can run)."""
    return DEVICE_TYPES[(sw.fabric, sw.tier)]


class PlatformMismatch(ValueError):
    pass


class BufferMismatch(ValueError):
    """The plan asks for something the SKU's own buffer templates cannot give (a type, a lossless priority)."""


def _buffers(sw: SwitchConfig) -> SkuBuffers:
    _platform(sw)
    try:
        return load_buffers(sw.hwsku)
    except BufferDataError as exc:
        raise BufferMismatch(f"{sw.hostname}: {exc}") from None


def _sonic_type(planned: str, hwsku: str | None, hostname: str) -> str:
    """`planned`, or the type the SKU's buffer templates run for it (SkuBuffers.device_type)."""
    if hwsku is None or hwsku not in known_skus():
        return planned
    try:
        return load_buffers(hwsku).device_type(planned)
    except BufferTemplateMissing as exc:
        raise BufferMismatch(f"{hostname}: {exc}") from None


def _platform(sw: SwitchConfig) -> Platform:
    if not sw.platform or not sw.hwsku:
        raise PlatformMismatch(f"{sw.hostname}: the plan names no SONiC platform/hwsku for this {sw.model} "
                               "(a plan.json written before railforge read SONiC platform data: rebuild it)")
    return PROFILE.platform(sw.platform, sw.hwsku)


def _platform_port(platform: Platform, index: int, breakout: str, sub: int) -> tuple:
    """(SonicPort, its lanes as a list, its lanes as config_db writes them)."""
    sp = platform.lookup(index, breakout, sub)
    return sp, list(sp.lanes), ",".join(str(x) for x in sp.lanes)


PortEntries = tuple[list[dict], dict]  # PORT entries without descriptions, in interface order; BREAKOUT_CFG


def _sonic_ports(sw: SwitchConfig) -> list:
    return [i for i in sw.interfaces if i.role != "mgmt" and i.lanes]


def port_entries(sw: SwitchConfig) -> PortEntries:
    """PORT entries of `sw`'s front-panel ports, checked against the platform's port map, descriptions aside."""
    platform = _platform(sw)
    entries, breakout = [], {}
    for i in _sonic_ports(sw):
        sp, sp_lanes, lanes = _platform_port(platform, i.index, i.breakout, i.sub)
        if sp.name != i.name or sp_lanes != i.lanes:
            raise PlatformMismatch(f"{sw.hostname}: plan port {i.name} (lanes {i.lanes}) is {sp.name} (lanes "
                                   f"{sp_lanes}) on {platform.name}; rebuild the plan")
        entry = {"admin_status": "up" if i.enabled else "down", "alias": sp.alias, "index": sp.index,
                 "lanes": lanes, "mtu": str(i.mtu), "speed": str(i.speed_mbps)}
        if i.speed_mbps >= RS_FEC_MIN_MBPS:
            entry["fec"] = "rs"
        entries.append(entry)
        if i.sub == 0:
            breakout[sp.parent] = {"brkout_mode": sp.mode}
    return entries, breakout


class PortShapes:
    """port_entries, built once per (platform, port shape) and shared by every switch of that shape: a tier's
    switches differ in their descriptions only, which `_ports` adds per switch. The shape holds everything an
    entry or the platform check reads, so a switch that matches a checked shape passes the same check."""

    def __init__(self) -> None:
        self.cache: dict[tuple, PortEntries] = {}

    def __call__(self, sw: SwitchConfig) -> PortEntries:
        key = (sw.platform, sw.hwsku,
               tuple([(i.name, i.index, i.breakout, i.sub, tuple(i.lanes), i.role == "unused", i.mtu, i.speed_mbps)
                      for i in _sonic_ports(sw)]))
        hit = self.cache.get(key)
        if hit is None:
            hit = self.cache[key] = port_entries(sw)
        return hit


def _ports(sw: SwitchConfig, shapes: Callable[[SwitchConfig], PortEntries]) -> tuple[dict, dict]:
    entries, breakout = shapes(sw)
    port = {}
    for i, entry in zip(_sonic_ports(sw), entries, strict=True):
        description = i.description
        port[i.name] = {**entry, "description": description} if description else entry
    return port, breakout


def _bonds(sw: SwitchConfig) -> dict[str, str]:
    """Host-facing member port -> PortChannel for leaf pairs."""
    if sw.pair is None:
        return {}
    return {b.member: f"PortChannel{b.id}" for b in sw.pair.bonds}


def _l2(sw: SwitchConfig, db: dict) -> None:
    bonds = _bonds(sw)
    vlan, member, svi = {}, {}, {}
    for n, v in enumerate(sw.host_vlans):
        name = f"Vlan{v.vlan}"
        vlan[name] = {"vlanid": str(v.vlan), "mtu": str(sw.mtu)}
        for p in v.members:
            member[f"{name}|{bonds.get(p, p)}"] = {"tagging_mode": "untagged" if n == 0 else "tagged"}
        svi[name] = {"static_anycast_gateway": "true"} if sw.pair is not None else {}
        svi[f"{name}|{v.address or v.gateway + '/' + v.prefix.split('/')[1]}"] = {}
        if v.address:
            svi[f"{name}|{v.gateway}/{v.prefix.split('/')[1]}"] = {}
    if sw.pair is not None:
        pcs = {pc: {"admin_status": "up", "lacp_key": "auto", "min_links": "1", "mtu": str(sw.mtu)}
               for pc in bonds.values()}
        pc_members = {f"{pc}|{m}": {} for m, pc in bonds.items()}
        if sw.pair.mode == "mlag":
            pcs[PEERLINK_PORTCHANNEL] = {"admin_status": "up", "lacp_key": "auto", "min_links": "1",
                                         "mtu": str(sw.mtu)}
            pc_members.update({f"{PEERLINK_PORTCHANNEL}|{p}": {} for p in sw.pair.peerlinks})
            for name in vlan:
                member[f"{name}|{PEERLINK_PORTCHANNEL}"] = {"tagging_mode": "tagged"}
            peer_svi = f"Vlan{PEERLINK_VLAN}"
            vlan[peer_svi] = {"vlanid": str(PEERLINK_VLAN), "mtu": str(sw.mtu)}
            member[f"{peer_svi}|{PEERLINK_PORTCHANNEL}"] = {"tagging_mode": "tagged"}
            svi[peer_svi] = {"ipv6_use_link_local_only": "enable"}
            db["MCLAG_DOMAIN"] = {"1": {"source_ip": sw.router_id, "peer_ip": (sw.pair.peer_loopback or "")
                                        .split("/")[0], "peer_link": PEERLINK_PORTCHANNEL}}
            db["MCLAG_INTERFACE"] = {f"1|{pc}": {"if_type": "PortChannel"} for pc in sorted(set(bonds.values()))}
        else:
            db["VXLAN_TUNNEL"] = {"vtep": {"src_ip": sw.router_id}}
            db["VXLAN_EVPN_NVO"] = {"nvo": {"source_vtep": "vtep"}}
            db["VXLAN_TUNNEL_MAP"] = {f"vtep|map_{v.vni}_Vlan{v.vlan}": {"vlan": f"Vlan{v.vlan}", "vni": str(v.vni)}
                                      for v in sw.host_vlans}
        db["SAG"] = {"GLOBAL": {"gateway_mac": SAG_MAC}}
        db["PORTCHANNEL"] = pcs
        db["PORTCHANNEL_MEMBER"] = pc_members
    if vlan:
        db["VLAN"], db["VLAN_MEMBER"], db["VLAN_INTERFACE"] = vlan, member, svi


def _template_buffers(q: Qos, hwsku: str, sonic_type: str) -> tuple[dict[str, dict], dict[str, dict]]:
    """The BUFFER_PG and BUFFER_QUEUE entries (key suffix -> fields) the SKU's templates write for a used port,
    checked to keep the plan's lossless priority lossless."""
    sku = load_buffers(hwsku)
    ports = sku.buffer_tables(sonic_type).ports.get("active", {})
    pg, queue = ports.get("BUFFER_PG", {}), ports.get("BUFFER_QUEUE", {})
    lossless = sku.lossless_priorities(sonic_type)
    if q.lossless_priority not in lossless:
        raise BufferMismatch(
            f"qos.lossless_priority {q.lossless_priority}: SONiC's buffer templates of {hwsku} ({sonic_type}) keep "
            f"priorities {','.join(map(str, sorted(lossless)))} lossless (BUFFER_QUEUE "
            f"{', '.join(sorted(queue))}) and `config qos reload` writes them back; choose one of those")
    return {k: dict(v) for k, v in pg.items()}, {k: dict(v) for k, v in queue.items()}


def _pfc_enable(q: Qos, hwsku: str, sonic_type: str) -> str:
    """The plan's lossless priority; on a traditional-model SKU the templates' own set ("3,4"), which holds it:
    the traditional buffermgrd writes BUFFER_PG|<port>|<pfc_enable as ranges> for every pfc_enable a port has
    had and removes none, so any other value next to the reload's "3,4" leaves overlapping `|3-4` and `|3`."""
    sku = load_buffers(hwsku)
    if sku.buffer_model == "dynamic":
        return str(q.lossless_priority)
    pfc = sku.pfc_enable(sonic_type)
    if str(q.lossless_priority) not in pfc.split(","):
        raise BufferMismatch(f"qos.lossless_priority {q.lossless_priority}: SONiC's QoS template of {hwsku} "
                             f"({sonic_type}) enables PFC on {pfc} only")
    return pfc


def qos_tables(q: Qos, active: tuple[str, ...], hwsku: str, sonic_type: str) -> dict[str, dict]:
    """The QoS tables of a switch of SKU `hwsku` running as `sonic_type` whose enabled fabric and host ports are
    `active` (CABLE_LENGTH aside)."""
    lossless, cnp = str(q.lossless_priority), str(q.cnp_priority)
    dscp = {str(d): "0" for d in range(64)}
    dscp[str(q.roce_dscp)], dscp[str(q.cnp_dscp)] = lossless, cnp
    identity = {str(t): str(t) for t in range(8)}
    db: dict[str, dict] = {}
    db["DSCP_TO_TC_MAP"] = {QOS_MAP: dscp}
    db["TC_TO_PRIORITY_GROUP_MAP"] = {QOS_MAP: {str(t): (str(t) if str(t) == lossless else "0") for t in range(8)}}
    db["TC_TO_QUEUE_MAP"] = {QOS_MAP: identity}
    db["MAP_PFC_PRIORITY_TO_QUEUE"] = {QOS_MAP: dict(identity)}
    pfc = _pfc_enable(q, hwsku, sonic_type)
    port_maps = {"dscp_to_tc_map": QOS_MAP, "tc_to_queue_map": QOS_MAP, "tc_to_pg_map": QOS_MAP,
                 "pfc_to_queue_map": QOS_MAP, "pfc_enable": pfc, "pfcwd_sw_enable": pfc}
    qos_map = {"global": {"dscp_to_tc_map": QOS_MAP}}
    for name in active:
        qos_map[name] = port_maps
    db["PORT_QOS_MAP"] = qos_map
    th_min, th_max, prob = str(q.ecn_min_threshold_bytes), str(q.ecn_max_threshold_bytes), str(q.ecn_probability)
    db["WRED_PROFILE"] = {WRED_LOSSLESS: {
        "ecn": "ecn_all", "wred_green_enable": "true", "wred_yellow_enable": "true", "wred_red_enable": "true",
        **{f"{c}_min_threshold": th_min for c in ("green", "yellow", "red")},
        **{f"{c}_max_threshold": th_max for c in ("green", "yellow", "red")},
        **{f"{c}_drop_probability": prob for c in ("green", "yellow", "red")},
    }}
    db["SCHEDULER"] = {"scheduler.lossy": {"type": "DWRR", "weight": "50"},
                       "scheduler.lossless": {"type": "DWRR", "weight": "50"},
                       "scheduler.cnp": {"type": "STRICT"}}
    per_queue = [(str(t), {"scheduler": "scheduler.lossless", "wred_profile": WRED_LOSSLESS}
                  if str(t) == lossless else {"scheduler": "scheduler.cnp" if str(t) == cnp else "scheduler.lossy"})
                 for t in range(8)]
    pg_entries, queue_entries = _template_buffers(q, hwsku, sonic_type)
    queue, buffer_pg, buffer_queue = {}, {}, {}
    for name in active:
        for t, sched in per_queue:
            queue[f"{name}|{t}"] = sched
        for ids, entry in pg_entries.items():
            buffer_pg[f"{name}|{ids}"] = entry
        for ids, entry in queue_entries.items():
            buffer_queue[f"{name}|{ids}"] = entry
    db["QUEUE"] = queue
    if buffer_pg:
        db["BUFFER_PG"] = buffer_pg
    if buffer_queue:
        db["BUFFER_QUEUE"] = buffer_queue
    return db


class QosFragments:
    """qos_tables, serialised once per (QoS profile, active ports) and reused by every switch with the same
    ports: these tables are most of a lossless switch's config_db.json and identical across a tier. Each table
    is indented as orjson writes it one level down, so `orjson.Fragment` keeps the file byte-identical."""

    def __init__(self) -> None:
        self.cache: dict[tuple, dict[str, orjson.Fragment]] = {}
        self.last: tuple[Qos | None, tuple] = (None, ())  # every switch of a plan shares one Qos object

    def __call__(self, q: Qos, active: tuple[str, ...], hwsku: str, sonic_type: str) -> dict[str, orjson.Fragment]:
        if self.last[0] is not q:
            self.last = (q, astuple(q))
        key = (self.last[1], active, hwsku, sonic_type)
        hit = self.cache.get(key)
        if hit is None:
            hit = self.cache[key] = {
                name: orjson.Fragment(orjson.dumps(table, option=JSON_OPTIONS).replace(b"\n", b"\n  "))
                for name, table in qos_tables(q, active, hwsku, sonic_type).items()}
        return hit


QosTables = Callable[[Qos, tuple[str, ...], str, str], dict]


def _qos(sw: SwitchConfig, db: dict, tables: QosTables, sku: SkuBuffers, sonic_type: str) -> None:
    active = [i for i in sw.interfaces if i.role in ("uplink", "downlink", "host")]
    try:
        db.update(tables(sw.qos, tuple(i.name for i in active), sku.hwsku, sonic_type))
        db["CABLE_LENGTH"] = {"AZURE": {i.name: sku.cable_length(i.speed_mbps, i.length_m)
                                        for i in active if i.length_m is not None}}
    except (BufferMismatch, BufferTemplateMissing) as exc:
        raise BufferMismatch(f"{sw.hostname}: {exc}") from None


def config_db(sw: SwitchConfig, tables: QosTables = qos_tables,
              shapes: Callable[[SwitchConfig], PortEntries] = port_entries) -> dict:
    """config_db.json's tables for `sw`; `tables` builds the QoS tables (QosFragments: pre-serialised) and
    `shapes` the PORT entries (PortShapes: once per port shape)."""
    sku = _buffers(sw)
    sonic_type = _sonic_type(device_type(sw), sku.hwsku, sw.hostname)
    meta = {"hostname": sw.hostname, "type": sonic_type, "docker_routing_config_mode": "split-unified",
            "frr_mgmt_framework_config": "false", "buffer_model": sku.buffer_model}
    if sw.asn is not None:
        meta["bgp_asn"] = str(sw.asn)
    if sw.router_id:
        meta["bgp_router_id"] = sw.router_id
    db: dict = {"DEVICE_METADATA": {"localhost": meta}}
    db["PORT"], breakout = _ports(sw, shapes)
    if breakout:
        db["BREAKOUT_CFG"] = breakout
    if sw.loopback:
        db["LOOPBACK_INTERFACE"] = {"Loopback0": {}, f"Loopback0|{sw.loopback}": {}}
    intf: dict = {}
    for i in sw.interfaces:
        if i.role in ("uplink", "downlink"):
            if i.address:
                intf[i.name] = {}
                intf[f"{i.name}|{i.address}"] = {}
            else:
                intf[i.name] = {"ipv6_use_link_local_only": "enable"}
    if intf:
        db["INTERFACE"] = intf
    _l2(sw, db)
    if sw.qos is not None:
        _qos(sw, db, tables, sku, sonic_type)
    bgp = {n.address: {"admin_status": "up", "asn": str(n.remote_asn), "name": n.peer_name,
                       "local_addr": n.local_address, "holdtime": "9", "keepalive": "3"}
           for n in sw.neighbors if n.address}
    if bgp:
        db["BGP_NEIGHBOR"] = bgp
    db["DEVICE_NEIGHBOR"] = {i.name: {"name": i.peer_device, "port": i.peer_port}
                             for i in sw.interfaces if i.peer_device and i.role != "mgmt"}
    neigh_meta = {}
    for p in sw.peers:
        entry = {"hwsku": p.hwsku or p.model,
                 "type": _sonic_type(DEVICE_TYPES[(sw.fabric, rank(p.role))], p.hwsku, p.name)}
        if p.loopback:
            entry["lo_addr"] = p.loopback
        if p.mgmt_address:
            entry["mgmt_addr"] = p.mgmt_address
        neigh_meta[p.name] = entry
    if neigh_meta:
        db["DEVICE_NEIGHBOR_METADATA"] = neigh_meta
    mgmt = next((i for i in sw.interfaces if i.role == "mgmt"), None)
    if mgmt is not None and sw.mgmt_address:
        db["MGMT_PORT"] = {"eth0": {"admin_status": "up", "alias": mgmt.name, "description": mgmt.description}}
        db["MGMT_INTERFACE"] = {f"eth0|{sw.mgmt_address}": ({"gwaddr": sw.mgmt_gateway} if sw.mgmt_gateway
                                                              else {})}
    return db


def frr_conf(sw: SwitchConfig, template: jinja2.Template | None = None) -> str:
    """frr.conf of `sw`. The per-port and per-neighbour loops get plain tuples: a jinja2 attribute look-up
    costs a Python call, and these loops are most of the file."""
    evpn_mh = sw.pair is not None and sw.pair.mode == "evpn-mh"
    ports = [(i.name, i.description, evpn_mh and i.role == "uplink")
             for i in sw.interfaces if i.peer_device and i.role != "mgmt"]
    peerlink_svi = f"Vlan{PEERLINK_VLAN}"
    neighbors = [(peerlink_svi if n.peer_group == "PEER" else n.key, bool(n.address), n.peer_group, n.remote_asn,
                  f"{n.peer_name}:{n.peer_port}") for n in sw.neighbors]
    return (template or TEMPLATES.get_template("frr.conf.j2")).render(sw=sw, ports=ports, neighbors=neighbors)


def render(plan: Plan, out: Output) -> None:
    fragments, shapes = QosFragments(), PortShapes()
    frr_template = TEMPLATES.get_template("frr.conf.j2")
    for sw in build_models(plan, nos=PROFILE.name, select=out.selects):
        out.write_bytes(outdir.config_file(sw.hostname, "config_db.json"),
                        orjson.dumps(config_db(sw, fragments, shapes), option=JSON_OPTIONS | orjson.OPT_APPEND_NEWLINE))
        if sw.asn is not None:
            out.write_text(outdir.config_file(sw.hostname, "frr.conf"), frr_conf(sw, frr_template))
