"""The health rules under `promtool test rules`, with input series and expected alerts built from a real plan.

The expected series are the rendered expected.prom (what node-exporter would serve); the exporter series are
written here the way prometheus-frr-exporter and node-exporter label them (`frr_bgp_peer_state` with `peer`,
`node_network_carrier` whose interface label becomes `exported_device` under the target's `device` label).
Each expected alert's labels are composed here from the plan's own Link and Port objects, not copied from
the rules' output; a rule with a wrong label or join fails these tests (see the mutation test at the end).
"""

from __future__ import annotations

import subprocess
from ipaddress import ip_interface
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from railforge.plan.model import Link, Plan
from railforge.render.health import SESSION, Expected, _labels, alertmanager_text, rules_text
from tests.conftest import plan_of, require_tool

NAME = "roce-a800-4nic"
STEPS = 24  # 2 minutes of 5 s samples
SESSION_TIERS = ("leaf-spine", "storage-leaf-spine", "oob-leaf-spine")  # the switch-to-switch tiers of this plan
ALERTS = ("RailforgeFabricCableDown", "RailforgeNodeRailDown", "RailforgeLeafIsolated", "RailforgeSpineIsolated",
          "RailforgeSuIsolated", "RailforgeCableMiswired", "RailforgeNodeCheckFailed", "RailforgeExporterDown",
          "RailforgeCableErrors", "RailforgeFabricScanDown")


@pytest.fixture(scope="module")
def plan() -> Plan:
    return plan_of(NAME)


def _series(name: str, labels: dict[str, str]) -> str:
    return name + "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"


def _up(n: int = STEPS) -> str:
    return f"1x{n}"


def _failing(healthy_steps: int = 4) -> str:
    """Healthy for 20 s, then down (0) for the rest of the test."""
    return f"1x{healthy_steps} 0x{STEPS - healthy_steps}"


def _addr(plan: Plan, device: str, port: str) -> str | None:
    p = next(p for d in plan.devices if d.name == device for p in d.ports if p.name == port)
    return str(ip_interface(p.address).ip) if p.address else None


def _sessions(plan: Plan) -> list[tuple[Link, str, str, str, str]]:
    """(link, device, port, peer, peer device) of each BGP session end, from the plan: compute uplinks are
    numbered (FRR names the peer by address), storage and OOB ones unnumbered (FRR names it by the local port)."""
    out = []
    for link in plan.links:
        if link.tier not in SESSION_TIERS:
            continue
        for near, far in ((link.a, link.b), (link.b, link.a)):
            out.append((link, near.device, near.port, _addr(plan, far.device, far.port) or near.port, far.device))
    return out


def _healthy_inputs(plan: Plan, dead: set[str] = frozenset(), down_cables: set[str] = frozenset(),
                    dark_ports: set[tuple[str, str]] = frozenset()) -> dict[str, str]:
    """Series name -> values: every exporter reporting every planned session and host rail healthy, except
    devices in `dead` (no exporter series at all), sessions on `down_cables` and ports in `dark_ports`."""
    inputs: dict[str, str] = {}
    for line in Expected(plan).text().splitlines():
        if not line.startswith("#"):
            inputs[line.rsplit(" ", 1)[0].replace("}", ',instance="mon:9100",job="expected"}')] = _up()
    devices = plan.device_index()
    for link, device, _port, peer, far in _sessions(plan):
        if device in dead:
            continue
        labels = {"device": device, "instance": f"{device}:9342", "job": "frr", "afi": "ipv4", "safi": "unicast",
                  "vrf": "default", "peer": peer, "local_as": str(devices[device].asn),
                  "peer_as": str(devices[far].asn)}
        failed = link.id in down_cables or far in dead
        inputs[_series("frr_bgp_peer_state", labels)] = _failing() if failed else _up()
    for node in plan.devices_by_role("node"):
        if node.su != 1 or node.name in dead:
            continue
        base = {"device": node.name, "instance": f"{node.name}:9100", "job": "node"}
        inputs[_series("node_exporter_build_info", {**base, "version": "1.5.0"})] = _up()
        for rail in node.rails:
            bad = (node.name, rail.ifname) in dark_ports or rail.leaf in dead
            inputs[_series("node_network_carrier", {**base, "exported_device": rail.ifname})] = (
                _failing() if bad else _up())
    return inputs


def _without_annotations(rules: str) -> str:
    doc = yaml.safe_load(rules)
    for group in doc["groups"]:
        for rule in group["rules"]:
            rule.pop("annotations", None)
    return yaml.safe_dump(doc)


def _run(tmp_path: Path, plan: Plan, inputs: dict[str, str], alerts: dict[str, list[dict]],
         rules: str | None = None, annotations: dict[str, list[dict]] | None = None,
         names: tuple[str, ...] = ALERTS) -> subprocess.CompletedProcess:
    """promtool on these inputs, checking the alerts `names`; annotations only where the case gives them."""
    require_tool("promtool")
    text = rules if rules is not None else rules_text(plan)
    (tmp_path / "rules.yml").write_text(text if annotations else _without_annotations(text))
    notes = annotations or {}

    def expected(name: str) -> list[dict]:
        return [{"exp_labels": labels, **({"exp_annotations": notes[name][i]} if name in notes else {})}
                for i, labels in enumerate(alerts.get(name, []))]

    case = {"interval": "5s",
            "input_series": [{"series": k, "values": v} for k, v in inputs.items()],
            "alert_rule_test": [{"eval_time": "110s", "alertname": name, "exp_alerts": expected(name)}
                                for name in names]}
    (tmp_path / "test.yml").write_text(yaml.safe_dump({"rule_files": ["rules.yml"], "evaluation_interval": "5s",
                                                       "tests": [case]}, sort_keys=False))
    return subprocess.run(["promtool", "test", "rules", "test.yml"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)


def _ok(proc: subprocess.CompletedProcess) -> None:
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]


def _cable_alert(plan: Plan, link: Link, device: str) -> dict[str, str]:
    devices = plan.device_index()
    near, far = (link.a, link.b) if link.a.device == device else (link.b, link.a)
    leaf = next(e.device for e in (link.a, link.b) if devices[e.device].role == "leaf")
    return {"severity": "minor", "blast_radius": "cable", "cable": link.id, "device": near.device, "port": near.port,
            "role": devices[near.device].role, "peer": _addr(plan, far.device, far.port), "peer_device": far.device,
            "peer_port": far.port, "peer_role": devices[far.device].role, "fabric": "compute", "tier": link.tier,
            "su": str(link.su), "rail": str(link.rail), "leaf": leaf}


def test_rules_are_valid_and_fixed_in_number(plan: Plan, tmp_path: Path) -> None:
    """promtool accepts them; a 16K-GPU plan has exactly the same rules as the 2-SU one."""
    require_tool("promtool")
    (tmp_path / "rules.yml").write_text(rules_text(plan))
    proc = subprocess.run(["promtool", "check", "rules", "rules.yml"], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0 and "SUCCESS: 25 rules found" in proc.stdout, proc.stdout + proc.stderr
    big = plan_of("roce-16k-railplane")
    assert rules_text(big).replace(big.cluster.name, NAME) == rules_text(plan)
    assert sum(1 for _ in Expected(big).bgp_sessions()) > 10 * sum(1 for _ in Expected(plan).bgp_sessions())


def test_healthy_fabric_raises_nothing(plan: Plan, tmp_path: Path) -> None:
    _ok(_run(tmp_path, plan, _healthy_inputs(plan), {}))


def test_one_uplink_cable_down_names_the_cable_from_both_ends(plan: Plan, tmp_path: Path) -> None:
    link = next(lk for lk in plan.links if lk.tier == "leaf-spine" and lk.su == 2 and lk.rail == 3)
    alerts = {"RailforgeFabricCableDown": [_cable_alert(plan, link, link.a.device),
                                           _cable_alert(plan, link, link.b.device)]}
    impact = (f"one of the uplinks of {link.a.device} (SU 2): ECMP routes around it, bandwidth of that leaf drops "
              "by one cable")
    notes = {"RailforgeFabricCableDown": [
        {"summary": f"{x.device}:{x.port} to {y.device}:{y.port} (cable {link.id}) is down", "impact": impact}
        for x, y in ((link.a, link.b), (link.b, link.a))]}
    _ok(_run(tmp_path, plan, _healthy_inputs(plan, down_cables={link.id}), alerts, annotations=notes))


def test_node_rail_without_carrier_names_node_rail_and_cable(plan: Plan, tmp_path: Path) -> None:
    node = next(d for d in plan.devices_by_role("node") if d.su == 1 and d.slot == 3)
    rail = node.rails[2]
    link = plan.link_index()[rail.cable]
    expected = {"severity": "major", "blast_radius": "node-rail", "cable": rail.cable, "device": node.name,
                "port": rail.ifname, "role": "node", "peer_device": rail.leaf, "peer_port": rail.leaf_port,
                "node": node.name, "fabric": "compute", "tier": "node-leaf", "kind": "ethernet", "su": "1",
                "rail": str(rail.rail), "leaf": rail.leaf}
    assert link.b.device == rail.leaf and link.b.port == rail.leaf_port
    notes = {"RailforgeNodeRailDown": [{
        "summary": f"rail 2 of {node.name} is down: {node.name}:{rail.ifname} has no carrier (cable {rail.cable})",
        "impact": f"jobs on {node.name} lose rail 2: drain the node"}]}
    _ok(_run(tmp_path, plan, _healthy_inputs(plan, dark_ports={(node.name, rail.ifname)}),
             {"RailforgeNodeRailDown": [expected]}, annotations=notes))


def _both_ends(plan: Plan, cables: list[Link]) -> list[dict[str, str]]:
    return [_cable_alert(plan, lk, end) for lk in cables for end in (lk.a.device, lk.b.device)]


def _cables_of(plan: Plan, device: str) -> list[Link]:
    return [lk for lk in plan.links if lk.tier == "leaf-spine" and device in (lk.a.device, lk.b.device)]


def test_dead_leaf_is_one_leaf_alert_with_su_and_rail(plan: Plan, tmp_path: Path) -> None:
    leaf = next(d for d in plan.devices_by_role("leaf") if d.su == 1 and d.rail == 2)
    nodes = [n for n in plan.devices_by_role("node") if n.su == 1]
    alerts = {
        "RailforgeLeafIsolated": [{"severity": "critical", "blast_radius": "leaf", "device": leaf.name,
                                   "leaf": leaf.name, "role": "leaf",
                                   "su": "1", "rail": "2", "group": leaf.group}],
        "RailforgeFabricCableDown": _both_ends(plan, _cables_of(plan, leaf.name)),
        "RailforgeNodeRailDown": [
            {"severity": "major", "blast_radius": "node-rail", "cable": r.cable, "device": n.name, "port": r.ifname,
             "role": "node", "peer_device": leaf.name, "peer_port": r.leaf_port, "node": n.name, "fabric": "compute",
             "tier": "node-leaf", "kind": "ethernet", "su": "1", "rail": "2", "leaf": leaf.name}
            for n in nodes for r in n.rails if r.leaf == leaf.name],
    }
    assert len(alerts["RailforgeNodeRailDown"]) == plan.cluster.nodes_per_su
    _ok(_run(tmp_path, plan, _healthy_inputs(plan, dead={leaf.name}), alerts))


def test_dead_spine_reports_its_share_of_the_bisection(plan: Plan, tmp_path: Path) -> None:
    spine = plan.devices_by_role("spine")[1]
    cables = _cables_of(plan, spine.name)
    share = len(cables) / sum(1 for lk in plan.links if lk.tier == "leaf-spine")
    assert share == 1 / len(plan.devices_by_role("spine"))
    alerts = {
        "RailforgeSpineIsolated": [{"severity": "major", "blast_radius": "spine", "device": spine.name,
                                    "role": "spine",
                                    "group": spine.group, "bisection_share": f"{share:.4f}"}],
        "RailforgeFabricCableDown": _both_ends(plan, cables),
    }
    _ok(_run(tmp_path, plan, _healthy_inputs(plan, dead={spine.name}), alerts))


def test_whole_su_down_is_one_su_alert(plan: Plan, tmp_path: Path) -> None:
    leaves = [d for d in plan.devices_by_role("leaf") if d.su == 2]
    cables = [lk for leaf in leaves for lk in _cables_of(plan, leaf.name)]
    alerts = {
        "RailforgeSuIsolated": [{"severity": "disaster", "blast_radius": "su", "su": "2"}],
        "RailforgeLeafIsolated": [{"severity": "critical", "blast_radius": "leaf", "device": d.name, "leaf": d.name,
                                   "role": "leaf", "su": "2",
                                   "rail": str(d.rail), "group": d.group} for d in leaves],
        "RailforgeFabricCableDown": _both_ends(plan, cables),
    }
    _ok(_run(tmp_path, plan, _healthy_inputs(plan, dead={d.name for d in leaves}), alerts))


def test_swapped_cable_seen_by_lldp_and_node_check_finding(plan: Plan, tmp_path: Path) -> None:
    node = next(d for d in plan.devices_by_role("node") if d.su == 1 and d.slot == 1)
    r0, r1 = node.rails[0], node.rails[1]
    inputs = _healthy_inputs(plan)
    base = {"device": node.name, "instance": f"{node.name}:9100", "job": "node"}
    inputs[_series("railforge_lldp_neighbor", {**base, "port": r0.ifname, "peer_device": r1.leaf,
                                               "peer_port": r1.leaf_port})] = _up()
    inputs[_series("railforge_lldp_neighbor", {**base, "port": r1.ifname, "peer_device": r1.leaf,
                                               "peer_port": r1.leaf_port})] = _up()
    inputs[_series("railforge_nodecheck_finding", {**base, "component": "gpu", "cable": ""})] = f"0x4 1x{STEPS - 4}"
    alerts = {
        "RailforgeCableMiswired": [{"severity": "major", "blast_radius": "cable", "cable": r0.cable,
                                    "device": node.name, "port": r0.ifname, "role": "node", "peer_device": r0.leaf,
                                    "peer_port": r0.leaf_port, "node": node.name, "fabric": "compute",
                                    "tier": "node-leaf", "kind": "ethernet", "su": "1", "rail": "0", "leaf": r0.leaf}],
        "RailforgeNodeCheckFailed": [{"severity": "major", "blast_radius": "node", "device": node.name,
                                      "component": "gpu"}],
    }
    _ok(_run(tmp_path, plan, inputs, alerts))


def test_silent_exporter_is_its_own_alert(plan: Plan, tmp_path: Path) -> None:
    inputs = _healthy_inputs(plan)
    inputs[_series("up", {"device": "spine03", "instance": "spine03:9342", "job": "frr"})] = _failing()
    inputs[_series("up", {"device": "spine01", "instance": "spine01:9342", "job": "frr"})] = _up()
    alerts = {"RailforgeExporterDown": [{"severity": "major", "blast_radius": "monitoring", "device": "spine03",
                                         "instance": "spine03:9342", "job": "frr"}]}
    _ok(_run(tmp_path, plan, inputs, alerts))


@pytest.mark.parametrize("wrong, right", [
    ('on(device, peer) (frr_bgp_peer_state == 1)', 'on(device, port) (frr_bgp_peer_state == 1)'),
    ('"port", "$1", "exported_device"', '"port", "$1", "device"'),
    ('group_left(role, su, rail, group, bisection_share)', 'group_left(role, su, group, bisection_share)'),
    ('blast_radius: leaf', 'blast_radius: rail'),
])
def test_a_wrong_join_or_label_fails_the_unit_tests(plan: Plan, tmp_path: Path, wrong: str, right: str) -> None:
    """Mutations of the rules: the same promtool cases must now fail."""
    rules = rules_text(plan)
    assert wrong in rules
    leaf = next(d for d in plan.devices_by_role("leaf") if d.su == 1 and d.rail == 2)
    node = next(d for d in plan.devices_by_role("node") if d.su == 1)
    link = _cables_of(plan, "spine02")[5]
    cases = [
        ({"dead": {leaf.name}}, {"RailforgeLeafIsolated": [{
            "severity": "critical", "blast_radius": "leaf", "device": leaf.name, "leaf": leaf.name, "role": "leaf",
            "su": "1", "rail": "2", "group": leaf.group}]}),
        ({"down_cables": {link.id}}, {"RailforgeFabricCableDown": [_cable_alert(plan, link, link.a.device),
                                                                   _cable_alert(plan, link, link.b.device)]}),
        ({"dark_ports": {(node.name, "rail1")}}, {"RailforgeNodeRailDown": [{
            "severity": "major", "blast_radius": "node-rail", "cable": node.rails[1].cable, "device": node.name,
            "port": "rail1", "role": "node", "peer_device": node.rails[1].leaf, "peer_port": node.rails[1].leaf_port,
            "node": node.name, "fabric": "compute", "tier": "node-leaf", "kind": "ethernet", "su": "1", "rail": "1",
            "leaf": node.rails[1].leaf}]}),
    ]
    results = []
    for kwargs, alerts in cases:
        _ok(_run(tmp_path, plan, _healthy_inputs(plan, **kwargs), alerts, names=tuple(alerts)))
        results.append(_run(tmp_path, plan, _healthy_inputs(plan, **kwargs), alerts,
                            rules=rules.replace(wrong, right), names=tuple(alerts)).returncode)
    assert any(rc != 0 for rc in results), f"mutation {right!r} passed every case"


def test_alertmanager_routing_is_accepted_by_amtool(plan: Plan, tmp_path: Path) -> None:
    require_tool("amtool")
    (tmp_path / "am.yml").write_text(alertmanager_text(plan, "http://127.0.0.1:1/x"))
    proc = subprocess.run(["amtool", "check-config", "am.yml"], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0 and "2 inhibit rules" in proc.stdout, proc.stdout + proc.stderr


@given(st.lists(st.sampled_from(["", "a", '"', "\\", "\n", "su001-leaf1", "Ethernet1/2", "{}", "{0}"]),
                min_size=len(SESSION.keys), max_size=len(SESSION.keys)))
def test_label_set_renders_as_the_plain_form(values: list[str]) -> None:
    """The one-call form gives the same text as label by label: empty values left out, quote, backslash and
    newline escaped, braces kept."""
    assert SESSION(*values) == _labels(zip(SESSION.keys, values, strict=True))


def test_streamed_expected_state_is_the_text(plan: Plan) -> None:
    """`write` (how the build writes expected.prom) gives the bytes of `text()` wherever its batches end."""
    import io

    for batch in (1, 7, 10**6):
        buf = io.StringIO()
        Expected(plan).write(buf, batch=batch)
        assert buf.getvalue() == Expected(plan).text()


def test_same_plan_same_bytes(plan: Plan) -> None:
    assert Expected(plan).text() == Expected(plan_of(NAME)).text()
    text = Expected(plan).text()
    assert text.count("railforge_expected_bgp_session{") == 2 * sum(1 for lk in plan.links if lk.tier in SESSION_TIERS)
    nodes = plan.devices_by_role("node")
    assert text.count("railforge_expected_link{") == 2 * sum(len(n.rails) for n in nodes) + 2 * sum(
        1 for lk in plan.links if lk.tier == "leaf-spine")
