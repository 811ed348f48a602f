"""The Grafana dashboards against Grafana's own schemas, and every panel query against real Prometheus.

Schemas: the JSON Schemas that grafana-foundation-sdk generates from Grafana's dashboard and panel-plugin
schemas for Grafana 11.6 (`tests/reference/grafana-foundation-sdk-11.6.0`, provenance in the README there):
the dashboard, each panel's `options` and `fieldConfig.defaults.custom` against its plugin's schema, each query
against the Prometheus datasource's. Queries: each panel's expression, with the template variables set as
Grafana would set them, becomes a recording rule for `promtool check rules`, then is evaluated by
`promtool test rules` beside health/rules.yml over exporter series written the way the exporters label them,
in a degraded fabric where every panel must show something: a query naming a metric or label that neither the
rules nor the exporters produce returns nothing and fails. Counts are checked against numbers taken from the
plan's own objects.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
from pathlib import Path

import jsonschema
import pytest
import yaml
from grafana_foundation_sdk.cog.plugins import register_default_plugins
from grafana_foundation_sdk.models.dashboard import Dashboard as DashboardModel

from railforge.health.nodecheck import Finding, check_gpus_xml, check_nvlink
from railforge.plan.model import Link, Plan
from railforge.render.grafana import ALL, RATE, dashboards, encode, uid
from railforge.render.health import rules_text
from tests.conftest import ROOT, plan_of, require_tool
from tests.render.test_health_rules import STEPS, _healthy_inputs, _series, _sessions

SCHEMAS = ROOT / "tests" / "reference" / "grafana-foundation-sdk-11.6.0"
NVIDIA_SMI = ROOT / "tests" / "reference" / "nvidia-smi"
NAME = "roce-a800-4nic"
PANEL_TYPES = ("stat", "timeseries", "table")


@pytest.fixture(scope="module")
def plan() -> Plan:
    return plan_of(NAME)


@pytest.fixture(scope="module")
def boards(plan: Plan) -> dict[str, dict]:
    return {name: json.loads(encode(board)) for name, board in dashboards(plan).items()}


def _schema(name: str, ref: str | None = None) -> jsonschema.Draft7Validator:
    path = SCHEMAS / f"{name}.jsonschema.json"
    assert path.is_file(), f"no pinned Grafana schema {path}"
    schema = json.loads(path.read_text())
    if ref is not None:
        assert ref in schema["definitions"], f"{path} has no definition {ref}"
        schema = {**schema, "$ref": f"#/definitions/{ref}"}
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema)


def schema_errors(board: dict) -> list[str]:
    """Every place where `board` breaks Grafana 11.6's dashboard, panel-plugin or Prometheus query schema."""
    found = []
    for error in _schema("dashboard").iter_errors(board):
        # a panel is one of Panel or RowPanel: report why each alternative refused it
        for e in error.context or [error]:
            found.append(f"{'/'.join(map(str, e.absolute_path))}: {e.message}")
    query = _schema("prometheus")
    for i, panel in enumerate(board.get("panels", [])):
        kind = panel.get("type")
        if kind == "row":
            continue
        if kind not in PANEL_TYPES:
            found.append(f"panels/{i}: no pinned schema for panel type {kind!r}")
            continue
        for e in _schema(kind, "Options").iter_errors(panel.get("options")):
            found.append(f"panels/{i}/options/{'/'.join(map(str, e.absolute_path))}: {e.message}")
        custom = panel.get("fieldConfig", {}).get("defaults", {}).get("custom")
        if custom is not None:
            for e in _schema(kind, "FieldConfig").iter_errors(custom):
                found.append(f"panels/{i}/fieldConfig/defaults/custom: {e.message}")
        for j, target in enumerate(panel.get("targets", [])):
            for e in query.iter_errors(target):
                found.append(f"panels/{i}/targets/{j}: {e.message}")
    return found


def targets(board: dict) -> list[tuple[str, str, str]]:
    """(panel title, refId, expr) of every query of `board`."""
    return [(p["title"], t["refId"], t["expr"]) for p in board["panels"] for t in p.get("targets", [])]


def test_dashboards_follow_grafanas_schemas(boards: dict[str, dict]) -> None:
    """Valid under the pinned schemas, and read back by Grafana's generated models (the SDK's decoder, with the
    panel and query plugins registered) into the same bytes: no field is lost or renamed."""
    register_default_plugins()
    assert set(boards) == {"fabric-overview", "su-rail"}
    for name, board in boards.items():
        assert schema_errors(board) == [], name
        assert encode(DashboardModel.from_json(board)) == json.dumps(board, indent=1, sort_keys=True) + "\n"
        kinds = {p["type"] for p in board["panels"]}
        assert kinds == {"row", "stat", "timeseries", "table"}, (name, kinds)
        assert all("options" in p for p in board["panels"] if p["type"] != "row"), name


@pytest.mark.parametrize(("where", "change", "message"), [
    ("graphTooltip", lambda b: b.update(graphTooltip=3), "3 is not one of"),
    ("panel without type", lambda b: b["panels"][1].pop("type"), "'type' is a required property"),
    ("unknown dashboard field", lambda b: b.update(rows=[]), "Additional properties are not allowed ('rows'"),
    ("query field misspelt", lambda b: b["panels"][1]["targets"][0].update(expression="up"),
     "Additional properties are not allowed ('expression'"),
    ("stat option", lambda b: b["panels"][1]["options"].update(textMode="big"), "'big' is not one of"),
    ("variable type", lambda b: b["templating"]["list"][-1].update(type="dropdown"), "'dropdown' is not one of"),
    ("grid position", lambda b: b["panels"][1]["gridPos"].update(w="wide"), "'wide' is not of type 'integer'"),
])
def test_the_schema_check_finds_a_broken_dashboard(boards: dict[str, dict], where: str, change, message: str) -> None:
    board = copy.deepcopy(boards["su-rail"])
    assert board["panels"][1]["type"] == "stat"
    change(board)
    errors = schema_errors(board)
    assert any(message in e for e in errors), (where, errors)


def test_same_plan_same_bytes_and_ids_from_the_cluster_name(plan: Plan) -> None:
    first = {k: encode(v) for k, v in dashboards(plan).items()}
    assert first == {k: encode(v) for k, v in dashboards(plan_of(NAME)).items()}
    other = plan_of("roce-16k-railplane")
    for name, text in first.items():
        board = json.loads(text)
        assert board["uid"] == uid(NAME, name) and len(board["uid"]) <= 40
        assert re.fullmatch(r"[A-Za-z0-9_-]+", board["uid"])
        assert uid(other.cluster.name, name) != board["uid"]
        ids = [p["id"] for p in board["panels"]]
        assert ids == list(range(1, len(ids) + 1)), name


def test_variables_come_from_the_plan(plan: Plan, boards: dict[str, dict]) -> None:
    """The su and rail choices are the plan's SUs and its nodes' rails; every query honours them."""
    variables = {v["name"]: v for v in boards["su-rail"]["templating"]["list"]}
    nodes = plan.devices_by_role("node")
    sus = sorted({n.su for n in nodes if n.fabric == "compute"})
    rails = sorted({r.rail for n in nodes for r in n.rails})
    for name, values in (("su", sus), ("rail", rails)):
        var = variables[name]
        assert var["type"] == "custom" and var["multi"] and var["includeAll"] and var["allValue"] == ALL
        assert var["query"] == ",".join(map(str, values))
        assert [o["value"] for o in var["options"]] == ["$__all", *map(str, values)]
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    for title, _ref, expr in targets(boards["su-rail"]):
        assert 'su=~"$su"' in expr, title
    assert not any("$su" in expr for _t, _r, expr in targets(boards["fabric-overview"]))


def test_the_json_does_not_grow_with_the_cluster(plan: Plan, boards: dict[str, dict]) -> None:
    big = plan_of("roce-16k-railplane")
    assert len(big.devices) > 10 * len(plan.devices)
    for name, board in dashboards(big).items():
        small = boards[name]
        large = json.loads(encode(board).replace(big.cluster.name, NAME).replace(uid(big.cluster.name, name),
                                                                                   uid(NAME, name)))
        assert large["panels"] == small["panels"], name
        assert schema_errors(large) == [], name
        assert len(large["templating"]["list"]) == len(small["templating"]["list"])


def _substitute(expr: str, su: str = ALL, rail: str = ALL) -> str:
    """The expression as Grafana sends it: variables replaced (multi-value choices become a regex)."""
    return expr.replace("$su", su).replace("$rail", rail).replace(RATE, "1m")


def _promtool(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    require_tool("promtool")
    return subprocess.run(["promtool", *args], cwd=tmp_path, capture_output=True, text=True, timeout=300)


def _record_rules(exprs: list[str]) -> str:
    rules = [{"record": f"railforge_panel:q{i}", "expr": e} for i, e in enumerate(exprs)]
    return yaml.safe_dump({"groups": [{"name": "railforge-dashboards", "rules": rules}]}, sort_keys=False)


def test_every_panel_query_is_promql_that_prometheus_accepts(boards: dict[str, dict], tmp_path: Path) -> None:
    exprs = [_substitute(e) for b in boards.values() for _t, _r, e in targets(b)]
    exprs += [_substitute(e, "(1|2)", "3") for _t, _r, e in targets(boards["su-rail"])]
    (tmp_path / "panels.yml").write_text(_record_rules(exprs))
    proc = _promtool(tmp_path, "check", "rules", "panels.yml")
    assert proc.returncode == 0 and f"SUCCESS: {len(exprs)} rules found" in proc.stdout, proc.stdout + proc.stderr
    (tmp_path / "broken.yml").write_text(_record_rules([*exprs, exprs[0].replace(")", "", 1)]))
    proc = _promtool(tmp_path, "check", "rules", "broken.yml")
    assert proc.returncode != 0 and "railforge_panel" in proc.stdout + proc.stderr


# what the node check itself finds on recorded nvidia-smi outputs: the wrong model per GPU, inactive NVLinks
GPU_FINDINGS = [*check_gpus_xml((NVIDIA_SMI / "a100-sxm4-gpu0.xml").read_text(), 1, "H100", nvswitch=True),
                *check_nvlink((NVIDIA_SMI / "nvlink-status-h100-pcie.txt").read_text())]


def _degraded_inputs(plan: Plan) -> tuple[dict[str, str], Link]:
    """The health tests' exporter series with one uplink cable down and one node rail dark, plus netdev error,
    ethtool PFC and node-check textfile series on SU 1's nodes as node-exporter names them."""
    uplink = next(link for link, *_ in _sessions(plan) if link.tier == "leaf-spine" and link.su == 1)
    nodes = [n for n in plan.devices_by_role("node") if n.su == 1]
    dark, sick = nodes[0], nodes[1]
    inputs = _healthy_inputs(plan, down_cables={uplink.id}, dark_ports={(dark.name, dark.rails[0].ifname)})
    prio = plan.qos.lossless_priority
    for node in nodes:
        base = {"device": node.name, "instance": f"{node.name}:9100", "job": "node"}
        for rail in node.rails:
            port = {**base, "exported_device": rail.ifname}
            for counter in ("node_network_receive_errs_total", "node_network_transmit_errs_total",
                            f"node_ethtool_received_prio{prio}_pause", f"node_ethtool_transmitted_prio{prio}_pause"):
                inputs[_series(counter, port)] = f"0+1x{STEPS}"
        inputs[_series("railforge_nodecheck_findings", base)] = f"{int(node is sick)}x{STEPS}"
    base = {"device": sick.name, "instance": f"{sick.name}:9100", "job": "node"}
    for finding in [*GPU_FINDINGS, Finding("rail0", uplink.id, "no carrier")]:
        inputs[_series("railforge_nodecheck_finding", {**base, "component": finding.component,
                                                       "cable": finding.cable})] = f"1x{STEPS}"
    return inputs, uplink


def _expr_test(tmp_path: Path, inputs: dict[str, str], checks: list[dict]) -> subprocess.CompletedProcess:
    (tmp_path / "rules.yml").write_text(rules_text(plan_of(NAME)))
    case = {"interval": "5s", "input_series": [{"series": k, "values": v} for k, v in inputs.items()],
            "promql_expr_test": checks}
    (tmp_path / "test.yml").write_text(yaml.safe_dump({"rule_files": ["rules.yml"], "evaluation_interval": "5s",
                                                       "tests": [case]}, sort_keys=False))
    return _promtool(tmp_path, "test", "rules", "test.yml")


def _shows_data(boards: dict[str, dict], su: str = ALL) -> list[dict]:
    """One check per query: absent(query) must be empty, i.e. the query returns series."""
    return [{"expr": f"absent({_substitute(expr, su)})", "eval_time": "110s", "exp_samples": []}
            for board in boards.values() for _t, _r, expr in targets(board)]


def _exact(expr: str, samples: dict[str, int]) -> dict:
    return {"expr": expr, "eval_time": "110s",
            "exp_samples": [{"labels": labels, "value": value} for labels, value in samples.items()]}


def test_every_panel_shows_data_from_the_rules_and_exporters(plan: Plan, boards: dict[str, dict],
                                                             tmp_path: Path) -> None:
    """Every query returns series (for all SUs and for SU 1); the counts are the plan's: BGP session ends per tier
    from its links between devices with an ASN, two of them down on the downed uplink, one sick node."""
    inputs, uplink = _degraded_inputs(plan)
    devices = plan.device_index()
    ends = {tier: 2 * sum(1 for link in plan.links if link.tier == tier
                          and devices[link.a.device].asn is not None and devices[link.b.device].asn is not None)
            for tier in ("leaf-spine", "storage-leaf-spine")}
    query = {(t, r): _substitute(e) for t, r, e in targets(boards["fabric-overview"])}
    sick = _substitute(next(e for t, _r, e in targets(boards["su-rail"]) if t == "Nodes failing the node check"))
    gpu = _substitute(next(e for t, _r, e in targets(boards["su-rail"]) if t == "GPU findings"))
    assert {f.component.split()[0] for f in GPU_FINDINGS} == {"gpu", "nvlink"}
    checks = [*_shows_data(boards), *_shows_data({"su-rail": boards["su-rail"]}, "1"),
              _exact(query[("Sessions established / planned, by tier", "B")],
                     {f'{{tier="{t}"}}': n for t, n in ends.items()}),
              _exact(query[("Sessions established / planned, by tier", "A")],
                     {'{tier="leaf-spine"}': ends["leaf-spine"] - 2,
                      '{tier="storage-leaf-spine"}': ends["storage-leaf-spine"]}),
              _exact(query[("Sessions down, by tier", "A")], {'{tier="leaf-spine"}': 2}),
              _exact(query[("BGP sessions down, by SU", "A")], {f'{{su="{uplink.su}"}}': 2}),
              _exact(query[("Cable ends without carrier, by tier", "A")], {'{tier="node-leaf"}': 1}),
              _exact(sick, {"{}": 1}),
              _exact(f"count({gpu})", {"{}": len({(f.component, f.cable) for f in GPU_FINDINGS})}),
              _exact(sick.replace('su=~".*"', 'su=~"2"'), {})]
    proc = _expr_test(tmp_path, inputs, checks)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]


@pytest.mark.parametrize(("metric", "typo"), [("frr_bgp_peer_state", "frr_bgp_peer_status"),
                                              ("railforge:link_down", "railforge:links_down"),
                                              ("node_ethtool_received_prio", "node_ethtool_rx_prio")])
def test_a_panel_naming_a_metric_nobody_produces_fails(plan: Plan, boards: dict[str, dict], tmp_path: Path,
                                                       metric: str, typo: str) -> None:
    broken = {k: json.loads(json.dumps(b).replace(metric, typo)) for k, b in boards.items()}
    assert broken != boards
    inputs, _ = _degraded_inputs(plan)
    proc = _expr_test(tmp_path, inputs, _shows_data(broken))
    assert proc.returncode != 0 and typo in proc.stdout + proc.stderr, (proc.stdout + proc.stderr)[-3000:]
