"""ECMP in the lab, cable by cable: two spines, so every leaf has two equal-cost uplinks and the switches
(Linux namespaces) hash each TCP flow onto one. `acceptance lab-run --pin-paths` chooses each iperf3 test's
ports (control connection and `--cport`) so both its connections take one path the switches report with
`ip route get` (hash policy 3 on the 5-tuple: policy 1 follows the socket's random txhash for host traffic
over veth, which `ip route get` cannot know), and records that path's cables; a leaf-spine cable slowed with
tbf is then named as that one cable, not as its leaf's uplink bundle. Proven: the recorded paths are the paths
the packets take (each test run alone: its two recorded cables' interface counters grow by ~1,000 packets,
the other uplinks' by the routing protocols' few dozen), and the analysis names the cable and nothing else.
Needs root, FRR, lldpd, iperf3, tc; off CI those skip, under CI=true they fail."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from railforge.acceptance import ecmppin, labrun
from railforge.acceptance.document import dumps
from railforge.plan.io import read_plan
from tests.acceptance.tinylab import tiny_roce_lab
from tests.conftest import require_tool, run_cli

PREFIX = "i32e-"
TOOLS = ("root", "/usr/lib/frr/zebra", "/usr/lib/frr/bgpd", "/usr/lib/frr/bfdd", "vtysh", "lldpd", "iperf3", "tc",
         "ss")
MIN_GBPS = "0.08"


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    require_tool(*TOOLS)
    with tiny_roce_lab(tmp_path_factory.mktemp("ecmp"), PREFIX, spines=2) as built:
        yield built


def run_pinned(lab, results: Path, pin: bool = True) -> tuple[dict, dict, str]:
    spec, out, acc = lab
    run = run_cli("acceptance", "lab-run", str(spec), str(results), "--out", str(out), "--lab", PREFIX,
                  "--acceptance", str(acc), "--seconds", "2", "--rate", "100M", *(["--pin-paths"] if pin else []))
    report = results.parent / f"{results.name}.json"
    proc = run_cli("acceptance", "analyze", str(spec), str(results), "--out", str(out), "--acceptance", str(acc),
                   "--min-gbps", MIN_GBPS, "--json", str(report), check=False)
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    doc = json.loads((acc / "plan.json").read_text())
    return json.loads(report.read_text()) | {"stdout": proc.stdout}, doc, run.stdout


def tx_packets(ns: str, dev: str) -> int:
    out = subprocess.run(["ip", "-n", ns, "-j", "-s", "link", "show", dev], capture_output=True, text=True,
                         check=True).stdout
    return json.loads(out)[0]["stats64"]["tx"]["packets"]


def check_recorded_paths_are_taken(doc: dict, plan, upper: set[str], results: Path) -> None:
    """Every test alone, pinned afresh (the last run's ports are in TIME-WAIT): the cables recorded for it carry
    its packets, the other uplinks only the routing protocols' few."""
    doc = json.loads(json.dumps(doc))
    ecmppin.pin(doc, ecmppin.topology(plan, PREFIX), labrun.server_port)
    uplinks = [lk for lk in plan.links if lk.id in upper]

    def count() -> dict[str, int]:
        return {lk.id: tx_packets(PREFIX + lk.a.device, lk.a.port) + tx_packets(PREFIX + lk.b.device, lk.b.port)
                for lk in uplinks}

    for test in [t for r in doc["rounds"] for t in r["tests"]]:
        c0 = count()
        labrun.run_round(doc | {"rounds": [{"round": 1, "tests": [test]}]}, 1, PREFIX, results / test["id"])
        delta = {k: v - c0[k] for k, v in count().items()}
        recorded = set(test["cables"][2:])
        assert len(recorded) == 2, test
        low = min(delta[c] for c in recorded)  # measured ~850-1,000 (2 s at 100 Mb/s, 9K MTU, both ends' tx)
        assert low > 400 and all(delta[c] * 5 < low for c in delta if c not in recorded), (test["id"], recorded,
                                                                                            delta)


@pytest.mark.root
@pytest.mark.slow
def test_pinned_paths_name_one_leaf_spine_cable(lab, tmp_path: Path) -> None:
    spec, out, acc = lab
    plan = read_plan(out / "plan.json")
    before = json.loads((acc / "plan.json").read_text())
    assert any(t["bundles"] for r in before["rounds"] for t in r["tests"])  # unpinned: uplink bundles
    upper = {c for b in before["bundles"].values() for c in b["cables"]}
    report, doc, ran = run_pinned(lab, tmp_path / "clean")
    assert report["ok"] == 12 and report["suspects"] == [] and report["bundles"] == [], report["stdout"]
    tests = [t for r in doc["rounds"] for t in r["tests"]]
    assert doc["routing"]["kind"] == "lab-pinned" and all(t["bundles"] == [] and t["ports"] for t in tests)
    assert len(upper) == 12 and {c for t in tests for c in t["cables"][2:]} == upper, ran
    t0 = time.monotonic()
    check_recorded_paths_are_taken(doc, plan, upper, tmp_path / "one")
    print(f"12 tests alone, counters read: {time.monotonic() - t0:.1f} s")
    # pinned afresh (the clean run's ports are in TIME-WAIT), then run as pinned: the target is chosen on these paths
    doc = json.loads((acc / "plan.json").read_text())
    ecmppin.pin(doc, ecmppin.topology(plan, PREFIX), labrun.server_port)
    (acc / "plan.json").write_bytes(dumps(doc))
    tests = [t for r in doc["rounds"] for t in r["tests"]]
    on = {c: {t["id"] for t in tests if c in t["cables"]} for c in upper | {t[s]["cable"] for t in tests for s in "ab"}}
    target = next(c for c in sorted(upper) if len(on[c]) >= 2
                  and sum(1 for ts in on.values() if ts == on[c]) == 1)
    link = plan.link_index()[target]
    ns_a, ns_b = PREFIX + link.a.device, PREFIX + link.b.device
    subprocess.run(["tc", "-n", ns_a, "qdisc", "replace", "dev", link.a.port, "root", "tbf", "rate", "10mbit",
                    "burst", "32kbit", "latency", "50ms"], check=True)
    subprocess.run(["tc", "-n", ns_b, "qdisc", "replace", "dev", link.b.port, "root", "tbf", "rate", "10mbit",
                    "burst", "32kbit", "latency", "50ms"], check=True)
    try:
        report, doc2, ran = run_pinned(lab, tmp_path / "faulty", pin=False)
    finally:
        for ns, port in ((ns_a, link.a.port), (ns_b, link.b.port)):
            subprocess.run(["tc", "-n", ns, "qdisc", "del", "dev", port, "root"], capture_output=True)
    assert doc2 == doc
    tests2 = {t["id"]: t for r in doc2["rounds"] for t in r["tests"]}
    through = {tid for tid, t in tests2.items() if target in t["cables"]}
    assert [s["cable"] for s in report["suspects"]] == [target], report["stdout"] + ran
    assert report["bundles"] == [] and report["unexplained"] == [], report["stdout"]
    assert report["slow"] + report["failed"] == len(through) >= 2, report["stdout"]
    s = report["suspects"][0]
    assert (s["tier"], s["a"]["device"], s["a"]["port"]) == ("leaf-spine", link.a.device, link.a.port)
