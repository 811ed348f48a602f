"""Every EOS switch of every spec that uses EOS, through Arista's own tooling: pyavd validates the structured
configuration against AVD's `eos_cli_config_gen` schema (no violation, no deprecation) and renders the EOS CLI,
and the CLI says what the plan says. The expectations are read from the plan's devices and links here, not from
the per-switch view the renderer reads."""

from __future__ import annotations

import copy
from ipaddress import ip_interface
from pathlib import Path

import pyavd
import pytest

from railforge.nos.eos.render import AvdRejected, validated
from railforge.nos.eos.structured import structured_config
from railforge.plan.model import Device, Plan
from railforge.plan.switch_model import build_models
from railforge.planner import build_plan
from railforge.spec import load_spec
from tests.conftest import ROOT
from tests.nos.eos.cli import blocks, nested, section

SPECS = sorted((ROOT / "tests" / "specs").glob("*.yaml")) + sorted((ROOT / "inventory").glob("*/cluster.yaml"))
GROUP = {"leaf": "LEAF", "spine": "SPINE", "superspine": "SUPERSPINE"}
ROUTED_TIERS = ("leaf-spine", "spine-superspine")


def _uses_eos(path: Path) -> bool:
    spec, _ = load_spec(path)
    return "eos" in (spec.compute.nos, spec.storage.nos, spec.oob.nos)


EOS_SPECS = [p for p in SPECS if _uses_eos(p)]


@pytest.fixture(scope="module")
def rendered() -> dict[str, tuple[Plan, dict[str, str]]]:
    """spec name -> (plan, switch -> startup-config as pyavd renders it)."""
    out = {}
    for path in EOS_SPECS:
        spec, lines = load_spec(path)
        plan = build_plan(spec, lines, str(path))
        configs = {}
        for sw in build_models(plan, nos="eos"):
            result = pyavd.validate_structured_config(structured_config(sw))
            assert not result.validation_result.violations, (sw.hostname, result.validation_result.violations)
            assert not result.validation_result.deprecations, (sw.hostname, result.validation_result.deprecations)
            configs[sw.hostname] = pyavd.get_device_config(result.validated_data)
        out[path.stem if path.parent.name == "specs" else path.parent.name] = (plan, configs)
    return out


def test_some_specs_use_eos_and_each_has_eos_switches(rendered):
    assert {"configs-eos", "configs-eos-mlag"} <= set(rendered)
    for name, (plan, configs) in rendered.items():
        eos = {d.name for d in plan.devices if d.nos == "eos"}
        assert eos and set(configs) == eos, name


def _far(plan: Plan, dev: Device) -> list[tuple[str, Device, str, str, bool]]:
    """(own port, far device, far port, cable, routed between tiers) of every cable of `dev`."""
    devices = {d.name: d for d in plan.devices}
    out = []
    for link in plan.links:
        routed = link.tier.endswith(ROUTED_TIERS)
        if link.a.device == dev.name:
            out.append((link.a.port, devices[link.b.device], link.b.port, link.id, routed))
        elif link.b.device == dev.name:
            out.append((link.b.port, devices[link.a.device], link.a.port, link.id, routed))
    return out


def _cases(rendered):
    for name, (plan, configs) in rendered.items():
        for dev in plan.devices:
            if dev.name in configs:
                yield name, plan, dev, configs[dev.name]


def test_interfaces_say_what_the_plan_says(rendered):
    for name, plan, dev, cli in _cases(rendered):
        ports = {p.name: p for p in dev.ports}
        b = blocks(cli)
        assert f"hostname {dev.name}" in cli, name
        assert b["interface defaults"] == ["ethernet", "shutdown"]
        for own, peer, peer_port, cable, routed in _far(plan, dev):
            lines = b[f"interface {own}"]
            assert f"description {peer.name}:{peer_port} {cable}" in lines, (dev.name, own)
            assert "no shutdown" in lines
            if own == "Management1":
                assert f"ip address {dev.mgmt_address}" in lines and "vrf MGMT" in lines
                continue
            port = ports[own]
            assert f"mtu {plan.qos.switch_mtu}" in lines
            gbps = port.speed_mbps // 1000
            if gbps >= 40:
                assert f"speed {gbps}g-{len(port.lanes)}" in lines, (dev.name, own, lines)
            if port.address:
                assert f"ip address {port.address}" in lines
            if routed:
                assert ("ipv6 enable" in lines) == (port.address is None), (dev.name, own)
                assert "no switchport" in lines
        used_cages = {ports[own].index for own, *_ in _far(plan, dev) if own != "Management1"}
        for p in dev.ports:
            if p.link is None and p.name != "Management1":
                assert (f"interface {p.name}" in b) == (p.index in used_cages), (dev.name, p.name)
                if p.index in used_cages:
                    assert "shutdown" in b[f"interface {p.name}"]


def test_bgp_says_what_the_plan_says(rendered):
    for _name, plan, dev, cli in _cases(rendered):
        if dev.asn is None:
            assert "router bgp" not in cli
            continue
        bgp = section(cli, f"router bgp {dev.asn}")
        assert bgp, dev.name
        if dev.loopback:
            assert f"router-id {ip_interface(dev.loopback).ip}" in bgp
        expected = set()
        for own, peer, peer_port, _cable, routed in _far(plan, dev):
            if not routed or peer.asn is None:
                continue
            far = next(p for p in peer.ports if p.name == peer_port)
            group = GROUP[peer.role.rsplit("-", 1)[-1]]
            if far.address:
                ip = ip_interface(far.address).ip
                expected |= {f"neighbor {ip} peer group {group}", f"neighbor {ip} remote-as {peer.asn}",
                             f"neighbor {ip} description {peer.name}:{peer_port}"}
            else:
                expected.add(f"neighbor interface {own} peer-group {group} remote-as {peer.asn}")
        if dev.mlag_peer and any(lk.tier.endswith("peer") for lk in plan.links if dev.name in (lk.a.device,
                                                                                                  lk.b.device)):
            peer_ip = "169.254.0.1" if dev.name < dev.mlag_peer else "169.254.0.0"
            expected.add(f"neighbor {peer_ip} remote-as {dev.asn}")
        neighbor_lines = {line for line in bgp if line.startswith("neighbor ") and not line.startswith(
            ("neighbor SPINE", "neighbor LEAF", "neighbor SUPERSPINE", "neighbor PEER"))}
        assert expected <= neighbor_lines, (dev.name, sorted(expected - neighbor_lines))
        sessions = {line.split()[1] for line in neighbor_lines if "remote-as" in line and "interface" not in line}
        sessions |= {line.split()[2] for line in neighbor_lines if line.startswith("neighbor interface")}
        assert len(sessions) == len({line for line in expected if "remote-as" in line}), dev.name
        ipv4 = nested(cli, f"router bgp {dev.asn}", "address-family ipv4")
        announced = {f"network {dev.loopback}"} if dev.loopback else set()
        announced |= {f"network {hs.prefix}" for hs in dev.host_subnets}
        assert announced == {line for line in ipv4 if line.startswith("network ")}, dev.name


def test_host_subnets_and_pairs(rendered):
    for _name, plan, dev, cli in _cases(rendered):
        b = blocks(cli)
        pair_mode = None
        if dev.mlag_peer:
            peerlinked = any(lk.tier.endswith("peer") and dev.name in (lk.a.device, lk.b.device) for lk in plan.links)
            pair_mode = "mlag" if peerlinked else "evpn-mh"
            assert ("mlag configuration" in b) == (pair_mode == "mlag"), dev.name
            if pair_mode == "mlag":
                assert f"domain-id {'-'.join(sorted((dev.name, dev.mlag_peer)))}" in b["mlag configuration"]
        for n, hs in enumerate(dev.host_subnets):
            svi = b[f"interface Vlan{hs.vlan}"]
            plen = ip_interface(hs.prefix).network.prefixlen
            if hs.address:
                assert f"ip address {hs.address}" in svi and f"ip virtual-router address {hs.gateway}" in svi
            else:
                assert f"ip address {hs.gateway}/{plen}" in svi
            cabled = {p.name for p in dev.ports if p.link}
            for port in (p for p in hs.ports if p in cabled):
                lines = b[f"interface {port}"]
                if pair_mode is None:
                    assert f"switchport access vlan {hs.vlan}" in lines, (dev.name, port)
                    continue
                group = next(line.split()[1] for line in lines if line.startswith("channel-group "))
                pc = b[f"interface Port-Channel{group}"]
                if len(dev.host_subnets) == 1:
                    assert f"switchport access vlan {hs.vlan}" in pc
                else:
                    assert any(line.startswith("switchport trunk allowed vlan") and str(hs.vlan) in line for line in pc)
                    if n == 0:
                        assert f"switchport trunk native vlan {hs.vlan}" in pc
                assert (f"mlag {group}" in pc) == (pair_mode == "mlag")
                assert any(line == "evpn ethernet-segment" for line in pc) == (pair_mode == "evpn-mh")
            if pair_mode == "evpn-mh":
                assert any(line.startswith(f"vxlan vlan {hs.vlan} vni ") for line in b["interface Vxlan1"])


def test_roce_qos_on_the_compute_fabric_only(rendered):
    for _name, plan, dev, cli in _cases(rendered):
        q = plan.qos
        b = blocks(cli)
        lossless = dev.fabric == "compute" and plan.cluster.fabric == "roce"
        fabric_ports = [own for own, *_ in _far(plan, dev) if own != "Management1"]
        for own in fabric_ports:
            lines = b[f"interface {own}"]
            has = {f"priority-flow-control priority {q.lossless_priority} no-drop", "qos trust dscp",
                   f"random-detect ecn minimum-threshold {q.ecn_min_threshold_bytes} bytes maximum-threshold "
                   f"{q.ecn_max_threshold_bytes} bytes max-mark-probability {q.ecn_probability}"}
            assert (has <= set(lines)) == lossless, (dev.name, own)
        maps = [line for line in cli.splitlines() if line.startswith("qos map dscp ")]
        if not lossless:
            assert not maps
            continue
        tc = {}
        for line in maps:
            values, target = line.removeprefix("qos map dscp ").split(" to traffic-class ")
            for v in values.split():
                assert int(v) not in tc, f"DSCP {v} mapped twice"
                tc[int(v)] = int(target)
        assert set(tc) == set(range(64))
        assert tc[q.roce_dscp] == q.lossless_priority and tc[q.cnp_dscp] == q.cnp_priority
        assert {d for d, t in tc.items() if t != 0} == {q.roce_dscp, q.cnp_dscp}


def test_pyavd_refuses_what_eos_cannot_take(rendered):
    """The check has teeth: a speed EOS does not have, a key AVD does not know or a deprecated one is refused by
    name."""
    plan, _ = rendered["configs-eos"]
    sw = next(build_models(plan, nos="eos"))
    sc = structured_config(sw)
    bad = copy.deepcopy(sc)
    bad["ethernet_interfaces"][0]["speed"] = "400g-3"
    with pytest.raises(AvdRejected, match=r"ethernet_interfaces.*speed"):
        validated(bad, pyavd)
    bad = copy.deepcopy(sc)
    bad["router_bgp"]["neighbours"] = []
    with pytest.raises(AvdRejected, match="router_bgp.neighbours: Invalid key"):
        validated(bad, pyavd)
    bad = copy.deepcopy(sc)
    bad["ethernet_interfaces"][0]["ipv6_address"] = "fd00::1/64"
    with pytest.raises(AvdRejected, match="deprecated: .*ipv6_address"):
        validated(bad, pyavd)
