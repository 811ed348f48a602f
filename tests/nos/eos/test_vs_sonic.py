"""EOS says what SONiC says about the same plan.

One fabric (tests/specs/configs-sonic.yaml: numbered compute uplinks, EVPN-MH storage pairs, OOB) is built
twice: once on SONiC, once on EOS. The switches are lab twins of the SN4700 and SN2201 that the test's catalog
lets run both OSes, so both builds plan the same cages, cables, addresses and ASNs and differ only in port
names. Per switch, the SONiC files (config_db.json, frr.conf) and the EOS startup-config pyavd renders are read
back and compared by cable label and peer: BGP sessions (peer, remote ASN, neighbour address), interface and
gateway addresses, the MTU of every configured port, PFC priorities per cable, the DSCP to traffic-class map,
ECN thresholds, announced networks and prefix lists.
"""

from __future__ import annotations

import copy
import re
from collections import Counter
from ipaddress import ip_address

import pyavd
import pytest
import yaml

from railforge.nos.eos.structured import structured_config
from railforge.nos.sonic import render as sonic
from railforge.plan.switch_model import build_models
from railforge.planner import build_plan
from railforge.spec.models import ClusterSpec
from tests.conftest import ROOT
from tests.nos.eos.cli import blocks, nested, section

TWINS = {"SN4700": "X4700", "SN2201": "X2201"}
MTU = 9214


def _spec(nos: str) -> ClusterSpec:
    base = yaml.safe_load((ROOT / "tests" / "specs" / "configs-sonic.yaml").read_text())
    catalog = yaml.safe_load((ROOT / "railforge" / "hardware" / "catalog.yaml").read_text())["switches"]
    d = copy.deepcopy(base)
    d["name"] = "eos-vs-sonic"
    d["catalog"] = {"switches": {twin: {**catalog[model], "vendor": "lab", "nos": ["sonic", "eos"]}
                                 for model, twin in TWINS.items()}}
    for fabric in ("compute", "storage", "oob"):
        d[fabric]["nos"] = nos
        for role in ("leaf", "spine"):
            d[fabric][role]["model"] = TWINS[d[fabric][role]["model"]]
    d["qos"] = {"switch_mtu": MTU}
    return ClusterSpec.model_validate(d)


@pytest.fixture(scope="module")
def both() -> dict[str, tuple[dict, str, str]]:
    """switch -> (SONiC config_db, SONiC frr.conf, EOS startup-config)."""
    p_sonic, p_eos = build_plan(_spec("sonic"), {}, None), build_plan(_spec("eos"), {}, None)
    assert [(lk.id, lk.a.device, lk.b.device) for lk in p_sonic.links] == \
        [(lk.id, lk.a.device, lk.b.device) for lk in p_eos.links]
    out: dict[str, list] = {}
    for sw in build_models(p_sonic, nos="sonic"):
        out[sw.hostname] = [sonic.config_db(sw), sonic.frr_conf(sw) if sw.asn is not None else ""]
    for sw in build_models(p_eos, nos="eos"):
        result = pyavd.validate_structured_config(structured_config(sw))
        assert not result.validation_result.violations
        out[sw.hostname].append(pyavd.get_device_config(result.validated_data))
    assert out and all(len(v) == 3 for v in out.values())
    return {k: tuple(v) for k, v in out.items()}


def _cable(description: str) -> str:
    return description.rsplit(" ", 1)[-1]


def _frr_sessions(frr: str, db: dict) -> Counter:
    lines = section(frr, "router bgp")
    remote = {m[1]: int(m[2]) for line in lines if (m := re.fullmatch(r"neighbor (\S+) remote-as (\d+)", line))}
    peer = {m[1]: m[2] for line in lines if (m := re.fullmatch(r"neighbor (\S+) description ([^:]+):\S+", line))}
    out = Counter()
    for key, asn in remote.items():
        numbered = re.fullmatch(r"[\d.]+", key) is not None
        out[(peer[key], asn, key if numbered else None)] += 1
    return out


def _eos_sessions(cli: str) -> Counter:
    b = blocks(cli)
    lines = section(cli, "router bgp")
    remote = {m[1]: int(m[2]) for line in lines if (m := re.fullmatch(r"neighbor ([\d.]+) remote-as (\d+)", line))}
    peer = {m[1]: m[2] for line in lines if (m := re.fullmatch(r"neighbor ([\d.]+) description ([^:]+):\S+", line))}
    out = Counter((peer[ip], asn, ip) for ip, asn in remote.items())
    for line in lines:
        if m := re.fullmatch(r"neighbor interface (\S+) peer-group \S+ remote-as (\d+)", line):
            desc = next(x for x in b[f"interface {m[1]}"] if x.startswith("description "))
            out[(desc.split()[1].split(":")[0], int(m[2]), None)] += 1
    return out


def _sonic_ips(db: dict) -> set[str]:
    keys = [k for t in ("INTERFACE", "LOOPBACK_INTERFACE", "VLAN_INTERFACE", "MGMT_INTERFACE")
            for k in db.get(t, {}) if "|" in k]
    return {k.split("|")[1].split("/")[0] for k in keys}


def _eos_ips(cli: str) -> set[str]:
    out = set()
    for top, lines in blocks(cli).items():
        if top.startswith("interface "):
            for line in lines:
                if line.startswith(("ip address ", "ip virtual-router address ")):
                    out.add(line.split()[-1].split("/")[0])
    return out


def _sonic_ports(db: dict) -> dict[str, dict]:
    """cable -> the PORT entry of every port that is up."""
    return {_cable(p["description"]): p for p in db["PORT"].values() if p["admin_status"] == "up"}


def _eos_ports(cli: str) -> dict[str, list[str]]:
    out = {}
    for top, lines in blocks(cli).items():
        if top.startswith("interface Ethernet") and "no shutdown" in lines:
            out[_cable(next(x for x in lines if x.startswith("description ")))] = lines
    return out


def test_the_same_switches(both):
    assert len(both) >= 10


def test_asn_router_id_and_sessions(both):
    for name, (db, frr, cli) in both.items():
        meta = db["DEVICE_METADATA"]["localhost"]
        if "bgp_asn" not in meta:
            assert "router bgp" not in cli
            continue
        assert f"router bgp {meta['bgp_asn']}" in cli, name
        assert f"router-id {meta['bgp_router_id']}" in section(cli, "router bgp"), name
        sessions = _frr_sessions(frr, db)
        assert sessions and sessions == _eos_sessions(cli), name


def test_addresses(both):
    for name, (db, _frr, cli) in both.items():
        ips = _sonic_ips(db)
        assert ips and ips == _eos_ips(cli), (name, ips ^ _eos_ips(cli))
        for ip in ips:
            ip_address(ip)


def test_ports_mtu_and_pfc(both):
    for name, (db, _frr, cli) in both.items():
        sonic_ports, eos_ports = _sonic_ports(db), _eos_ports(cli)
        assert set(sonic_ports) == set(eos_ports), name
        qos = db.get("PORT_QOS_MAP", {})
        by_cable = {_cable(p["description"]): port for port, p in db["PORT"].items() if p["admin_status"] == "up"}
        for cable, entry in sonic_ports.items():
            lines = eos_ports[cable]
            assert int(entry["mtu"]) == MTU and f"mtu {MTU}" in lines, (name, cable)
            sonic_pfc = set(qos.get(by_cable[cable], {}).get("pfc_enable", "").split(",")) - {""}
            eos_pfc = {m[1] for x in lines if (m := re.fullmatch(r"priority-flow-control priority (\d) no-drop", x))}
            assert eos_pfc <= sonic_pfc and bool(eos_pfc) == bool(sonic_pfc), (name, cable, sonic_pfc, eos_pfc)


def test_qos_maps_and_ecn(both):
    seen = 0
    for name, (db, _frr, cli) in both.items():
        if "DSCP_TO_TC_MAP" not in db:
            assert "qos map dscp" not in cli, name
            continue
        seen += 1
        sonic_map = {int(d): int(t) for d, t in db["DSCP_TO_TC_MAP"]["RAILFORGE"].items()}
        eos_map = {}
        for line in cli.splitlines():
            if line.startswith("qos map dscp "):
                values, tc = line.removeprefix("qos map dscp ").split(" to traffic-class ")
                eos_map |= {int(v): int(tc) for v in values.split()}
        assert sonic_map == eos_map, name
        wred = db["WRED_PROFILE"]["RAILFORGE_LOSSLESS"]
        ecn = (f"random-detect ecn minimum-threshold {wred['green_min_threshold']} bytes maximum-threshold "
               f"{wred['green_max_threshold']} bytes max-mark-probability {wred['green_drop_probability']}")
        assert all(ecn in lines for lines in _eos_ports(cli).values()), name
    assert seen >= 4


def test_announcements_and_prefix_lists(both):
    for name, (_db, frr, cli) in both.items():
        if not frr:
            continue
        frr_networks = {x for x in nested(frr, "router bgp", "address-family ipv4 unicast") if x.startswith("network ")}
        eos_networks = {x for x in section(cli, "router bgp") if x.startswith("network ")}
        eos_networks |= {x for x in nested(cli, "router bgp", "address-family ipv4") if x.startswith("network ")}
        assert frr_networks and frr_networks == eos_networks, name
        frr_lists = {(m[1], m[2]) for line in frr.splitlines()
                     if (m := re.fullmatch(r"ip prefix-list (\S+) (seq \d+ permit \S+(?: le \d+)?)", line))}
        eos_lists = {(top.split()[2], line) for top, lines in blocks(cli).items() if top.startswith("ip prefix-list ")
                     for line in lines}
        assert frr_lists == eos_lists, name
