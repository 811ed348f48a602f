"""The burn-in in the lab: FRR switches and hosts in network namespaces run the plan's rounds with iperf3
standing in for ib_write_bw; one cable is slowed with a tc tbf qdisc and one made lossy with an nftables
`numgen random` drop rule, and the analysis names exactly those two cables, nothing else: a node's cable and a
leaf-spine link, each way round.

The lab is tiny-roce grown to 3 SUs (a leaf's uplink must share tests with two other leaves to be told apart
from them), one spine and one cable per leaf-spine pair (so every path is certain: ECMP path tracing is not
emulated), 2 hosts per SU: 13 namespaces, 12 pair tests in 2 rounds. iperf3 runs capped at 100 Mb/s for 2 s;
pass is 80 Mb/s (healthy runs measured 98-100), the tbf cable carries 10 Mb/s and the lossy one drops 85 % each
way (at 30 % and 40 % TCP sometimes still reached 80 Mb/s on these sub-millisecond paths: a node cable is on
only two tests, and both must fail).
Needs root, FRR, lldpd, iperf3, nft and tc; off CI those skip, under CI=true their absence fails.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from railforge.plan.io import read_plan
from tests.acceptance.tinylab import tiny_roce_lab
from tests.conftest import require_tool, run_cli

PREFIX = "i32b-"
TOOLS = ("root", "/usr/lib/frr/zebra", "/usr/lib/frr/bgpd", "/usr/lib/frr/bfdd", "vtysh", "lldpd", "iperf3", "nft",
         "tc")
MIN_GBPS = "0.08"


def sh(*cmd: str, stdin: str | None = None) -> None:
    subprocess.run(list(cmd), check=True, input=stdin, text=True, capture_output=True)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    require_tool(*TOOLS)
    with tiny_roce_lab(tmp_path_factory.mktemp("burnin"), PREFIX, spines=1) as built:
        yield built


def run_and_analyse(lab, results: Path) -> tuple[dict, float]:
    spec, out, acc = lab
    t0 = time.monotonic()
    run_cli("acceptance", "lab-run", str(spec), str(results), "--out", str(out), "--lab", PREFIX,
            "--acceptance", str(acc), "--seconds", "2", "--rate", "100M")
    report = results.parent / f"{results.name}.json"
    proc = run_cli("acceptance", "analyze", str(spec), str(results), "--out", str(out), "--acceptance", str(acc),
                   "--min-gbps", MIN_GBPS, "--json", str(report), check=False)
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    return json.loads(report.read_text()) | {"stdout": proc.stdout}, time.monotonic() - t0


def burn_in(lab, tmp_path: Path, seeded: set[str]) -> tuple[dict, float]:
    """The burn-in, run once more when its only fault is noise: a test that measured slow on a loaded machine and
    that the analysis left unexplained (it blames no cable for it). A wrong suspect is never run again."""
    report, took = run_and_analyse(lab, tmp_path / "run1")
    if {s["cable"] for s in report["suspects"]} == seeded and report["unexplained"]:
        print(f"unexplained on the first run, run again: {report['unexplained']}")
        report, took = run_and_analyse(lab, tmp_path / "run2")
    return report, took


def slow(link, ns) -> list[tuple]:
    """tbf on both ends' egress: 10 Mb/s each way."""
    for end in (link.a, link.b):
        sh("tc", "-n", ns(end.device), "qdisc", "replace", "dev", end.port, "root", "tbf", "rate", "10mbit",
           "burst", "32kbit", "latency", "50ms")
    return [("tc", ns(end.device), end.port) for end in (link.a, link.b)]


def lossy(link, ns, host: bool) -> list[tuple]:
    """nftables on the A end: 85 % of the packets in and out of that port dropped (a host's input/output hooks;
    a switch forwards, so its forward hook)."""
    hooks = ("input", "output") if host else ("forward", "forward")
    rules = (f"table inet i32loss {{\n chain lossy_in {{ type filter hook {hooks[0]} priority 0; policy accept;\n"
             f"  iifname \"{link.a.port}\" numgen random mod 100 < 85 drop\n }}\n"
             f" chain lossy_out {{ type filter hook {hooks[1]} priority 0; policy accept;\n"
             f"  oifname \"{link.a.port}\" numgen random mod 100 < 85 drop\n }}\n}}\n")
    sh("ip", "netns", "exec", ns(link.a.device), "nft", "-f", "-", stdin=rules)
    return [("nft", ns(link.a.device), "")]


def undo(faults: list[tuple]) -> None:
    for kind, ns, port in faults:
        if kind == "tc":
            subprocess.run(["tc", "-n", ns, "qdisc", "del", "dev", port, "root"], capture_output=True)
        else:
            subprocess.run(["ip", "netns", "exec", ns, "nft", "delete", "table", "inet", "i32loss"],
                           capture_output=True)


@pytest.mark.root
@pytest.mark.slow
def test_healthy_lab_names_nothing(lab, tmp_path: Path) -> None:
    report, took = burn_in(lab, tmp_path, set())
    print(f"clean burn-in (2 rounds + analysis): {took:.1f} s")
    assert report["ok"] == 12 and report["slow"] == report["failed"] == report["missing"] == 0, report["stdout"]
    assert report["suspects"] == [] and report["skipped"] == {}


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.parametrize("tbf_on", ["node-leaf", "leaf-spine"])
def test_slowed_and_lossy_cables_are_named_and_nothing_else(lab, tmp_path: Path, tbf_on: str) -> None:
    spec, out, acc = lab
    plan = read_plan(out / "plan.json")
    links = plan.link_index()
    node_cable = links[next(r.cable for d in plan.devices if d.name == "su002-gpu01" for r in d.rails if r.rail == 1)]
    uplink = next(lk for lk in plan.links if lk.tier == "leaf-spine" and lk.a.device == "su001-leaf-r0"
                  and lk.b.device == "spine01")
    if tbf_on == "leaf-spine":
        node_cable = links[next(r.cable for d in plan.devices if d.name == "su003-gpu02" for r in d.rails
                                if r.rail == 0)]
        uplink = next(lk for lk in plan.links if lk.tier == "leaf-spine" and lk.a.device == "su002-leaf-r1"
                      and lk.b.device == "spine01")
    ns = lambda device: f"{PREFIX}{device}"  # noqa: E731
    faults: list[tuple] = []
    try:
        if tbf_on == "node-leaf":
            faults += slow(node_cable, ns)
            faults += lossy(uplink, ns, host=False)
        else:
            faults += slow(uplink, ns)
            faults += lossy(node_cable, ns, host=True)
        report, took = burn_in(lab, tmp_path, {node_cable.id, uplink.id})
    finally:
        undo(faults)
    print(f"burn-in with a {tbf_on} cable slowed: {took:.1f} s")
    named = {s["cable"] for s in report["suspects"]}
    assert named == {node_cable.id, uplink.id}, report["stdout"]
    assert report["unexplained"] == [] and report["bundles"] == [], report["stdout"]
    by_cable = {s["cable"]: s for s in report["suspects"]}
    assert by_cable[uplink.id]["tier"] == "leaf-spine" and by_cable[node_cable.id]["tier"] == "node-leaf"
    assert by_cable[uplink.id]["a"]["device"] == uplink.a.device and by_cable[uplink.id]["a"]["port"] == uplink.a.port
    assert by_cable[node_cable.id]["a"]["device"] == node_cable.a.device
