"""A healthy cluster monitored exactly as built raises nothing: one case per bundled example (inventory/*).

Each example is built (plan, health, switch configs, OpenSM files, Ansible inventory); what every target of
`health/targets/*.json` would serve for a healthy cluster is written from the generated configs, host_vars and
OpenSM topology (tests/health/exporters.py, not from the expected state). A real Prometheus 2.42 reads the
generated file_sd target lists, scrapes those pages and the expected state, evaluates the generated rules
(`promtool test rules` cannot: it refuses queries over 10,000 samples, less than the 16K-GPU example's expected
state), and must hold:

- every expected series produced by some target (each join of the rules has its right-hand side, whatever its
  value: a series no target produces makes its alert fire forever on a healthy fabric or, behind an exporter
  guard, never fire at all);
- no alert of any name, firing or pending, after two rule evaluations over every target's data.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import ROOT, require_tool, run_cli
from tests.health import exporters
from tests.helpers import prom_stack

EXAMPLES = sorted(p.parent.name for p in (ROOT / "inventory").glob("*/cluster.yaml"))
FAMILIES = "plan,health,inventory,sonic,nvue,opensm"

# expected series that no target produces: each must come back empty
UNPRODUCED = {
    "BGP session ends without an FRR exporter reporting them":
        "railforge:expected_bgp_session unless on(device, peer) frr_bgp_peer_state",
    "Ethernet cable ends without a node-exporter interface":
        'railforge:expected_link{kind="ethernet"} unless on(device, port) '
        'label_replace(node_network_carrier, "port", "$1", "exported_device", "(.+)")',
    "cable ends on a device node-exporter does not run on":
        '(railforge:expected_link{role="node"} or railforge:expected_link{kind="ethernet"}) '
        "unless on(device) node_exporter_build_info",
    "HCA ports node-exporter's infiniband collector does not report":
        'railforge:expected_link{kind="infiniband", role="node"} unless on(device, hca, ib_port) '
        'label_replace(label_replace(node_infiniband_state_id, "hca", "$1", "exported_device", "(.+)"), '
        '"ib_port", "$1", "port", "(.+)")',
    "InfiniBand switch ports the fabric scan does not report":
        'railforge:expected_link{kind="infiniband", role!="node"} unless on(device, ib_port) '
        'label_replace(railforge_ib_port_state_id, "device", "$1", "switch", "(.+)")',
    "a fabric scan no node runs":
        "railforge:expected_fabric_scan unless on(device) railforge_ibfabric_scan_success",
    "devices without a target":
        'railforge:expected_device{role="node"} unless on(device) up',
}


@pytest.fixture(scope="module", params=EXAMPLES)
def built(request, tmp_path_factory) -> tuple[str, Path]:
    out = tmp_path_factory.mktemp(request.param) / "out"
    run_cli("build", str(ROOT / "inventory" / request.param / "cluster.yaml"), "--out", str(out), "--only", FAMILIES)
    return request.param, out


def unproduced(stack: prom_stack.Stack) -> dict[str, int]:
    return {what: len(stack.query(expr)) for what, expr in UNPRODUCED.items()}


@pytest.mark.slow
def test_a_healthy_cluster_raises_nothing(built, tmp_path: Path) -> None:
    require_tool("prometheus", "promtool")
    name, out = built
    t0 = time.monotonic()
    healthy = exporters.healthy(out)
    stack = prom_stack.scrape_pages(tmp_path, out / "health", healthy.pages, healthy.expected,
                                    (out / "health" / "rules.yml").read_text())
    try:
        took = time.monotonic() - t0
        missing = {what: n for what, n in unproduced(stack).items() if n}
        alerts = stack.prom_alerts("firing") + stack.prom_alerts("pending")
        by_name = Counter(a["labels"]["alertname"] for a in alerts)
        assert not missing and not alerts, (f"healthy {name}: expected series no target produces {missing}; "
                                            f"alerts (firing or pending) {dict(by_name)}, e.g. "
                                            f"{alerts[0]['labels'] if alerts else None}")
        assert not stack.query("ALERTS")
        ends = stack.query("count by (fabric) (railforge:expected_bgp_session)")
        links = stack.query("count(railforge:expected_link)")
        assert stack.query("count(railforge:expected_device)")  # the expected state was scraped at all
        rules = stack._get(stack.prom_port, "/api/v1/rules")["data"]["groups"]
        assert sum(1 for g in rules for r in g["rules"] if r["type"] == "alerting") >= 10
        assert all(r["health"] == "ok" for g in rules for r in g["rules"]), [
            (r["name"], r.get("lastError")) for g in rules for r in g["rules"] if r["health"] != "ok"]
        print(f"{name}: {healthy.series()} exporter series from "
              f"{ {job: len(g) for job, g in healthy.targets.items()} } targets; session ends "
              f"{ {e['metric'].get('fabric'): int(e['value'][1]) for e in ends} }, "
              f"{int(links[0]['value'][1]) if links else 0} cable ends expected; no alert ({took:.0f} s)")
    finally:
        stack.stop()
