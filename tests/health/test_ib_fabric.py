"""InfiniBand health on a simulated fabric: the real fabric scan, the generated rules, a real Prometheus.

The configs-ib plan (2 SUs, InfiniBand compute, Cumulus storage and OOB) is built; real ibsim 0.10 simulates its
compute fabric and real OpenSM brings the subnet up with the generated opensm.conf (railforge/lab/ibsim.py, as
tests/lab/test_ibsim.py does). The fabric scan (`python -m railforge.health.ibfabric`, real iblinkinfo and perfquery
under umad2sim, attached at the HCA of the node the plan names in `ib_fabric_scan`) writes its textfile; a real
Prometheus scrapes it as that node's node-exporter page, next to every other target of the generated
`health/targets/*.json` (tests/health/exporters.py: their healthy pages) and the expected state, with the generated
rules. Then faults are made in ibsim itself:

- healthy: no alert, firing or pending;
- `Unlink` of a leaf-spine cable's leaf port: RailforgeFabricCableDown for exactly that cable, from both ends;
- `PerformanceSet ... SymbolErrorCounter=50` on a node cable's leaf port: RailforgeCableErrors naming that cable.

Not proven here: the HCA side (node-exporter's infiniband collector reads the host's sysfs, which umad2sim does not
simulate; its series are the healthy ones of tests/health/exporters.py).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from railforge.lab import ibsim
from railforge.plan.io import read_plan
from railforge.plan.model import Link, Plan
from railforge.render.health import scan_host
from tests.conftest import ROOT, require_tool, run_cli
from tests.health import exporters
from tests.helpers import prom_stack

SPEC = ROOT / "tests" / "specs" / "configs-ib.yaml"
FAMILIES = "plan,health,inventory,nvue,opensm"


def _require_sim() -> None:
    missing = ibsim.missing_tools()
    if missing:
        msg = f"needs {', '.join(missing)} (apt-get install ibsim-utils libumad2sim0 opensm infiniband-diags)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{msg}, and CI=true forbids skipping")
        pytest.skip(msg)


def _ib_port(plan: Plan, device: str, port: str) -> int:
    return next(p.ib_number() for d in plan.devices if d.name == device for p in d.ports if p.name == port)


class Fabric:
    def __init__(self, out: Path, plan: Plan, sim: ibsim.IbSim):
        self.out, self.plan, self.sim = out, plan, sim
        node = scan_host(plan)
        assert node is not None, "an InfiniBand plan names a node to run the fabric scan"
        self.scanner = node.name
        self.attach = f"{node.name} {node.rails[0].hca}"  # the simulated HCA the scan runs through
        self.n = 0

    def scan(self) -> str:
        """One run of the fabric scan's command line, as the node's timer runs it; its textfile."""
        self.n += 1
        path = self.sim.workdir / f"scan-{self.n}.prom"
        proc = self.sim.run(sys.executable, "-m", "railforge.health.ibfabric", "--textfile", str(path),
                            host=self.attach, timeout=60)
        assert proc.stdout.startswith("OK: "), proc.stdout + proc.stderr
        return path.read_text()


@pytest.fixture(scope="module")
def fabric(tmp_path_factory):
    _require_sim()
    require_tool("prometheus", "promtool")
    tmp = tmp_path_factory.mktemp("ibhealth")
    out = tmp / "out"
    run_cli("build", str(SPEC), "--out", str(out), "--only", FAMILIES)
    plan = read_plan(out / "plan.json")
    work = tmp / "sim"
    work.mkdir()
    (work / "net").write_text(ibsim.net_file(plan))
    sim = ibsim.IbSim(work, f"railforge-i38h-{os.getpid()}", ibsim.sm_host(plan))
    sim.start(work / "net")
    try:
        ibsim.day_one(sim, out / "configs" / "opensm")
        yield Fabric(out, plan, sim)
    finally:
        sim.stop()


def _wait(what: str, check: Callable[[], list[dict]], timeout: float = 120) -> list[dict]:
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {timeout:.0f} s")
        time.sleep(2)


def _firing(stack: prom_stack.Stack, name: str) -> Callable[[], list[dict]]:
    return lambda: [a["labels"] for a in stack.prom_alerts("firing") if a["labels"]["alertname"] == name]


def _ends(link: Link) -> set[tuple[str, str, str]]:
    return {(link.a.device, link.a.port, link.id), (link.b.device, link.b.port, link.id)}


@pytest.mark.slow
def test_ibsim_faults_fire_alerts_naming_the_cable(fabric: Fabric, tmp_path: Path) -> None:
    plan = fabric.plan
    base = exporters.healthy(fabric.out, scan="")
    first = fabric.scan()
    pages = exporters.healthy(fabric.out, scan=first).pages
    stack = prom_stack.scrape_pages(tmp_path, fabric.out / "health", pages, base.expected,
                                    (fabric.out / "health" / "rules.yml").read_text(), scrape_s=5)

    def publish(scan: str) -> None:
        stack.pages[f"/node/{fabric.scanner}"] = (base.pages["node"][fabric.scanner] + scan).encode()

    try:
        assert stack.query('count(railforge:expected_link{kind="infiniband", role!="node"})'), "no switch end expected"
        alerts = stack.prom_alerts("firing") + stack.prom_alerts("pending")
        assert not alerts, f"healthy ibsim fabric: {[a['labels'] for a in alerts][:5]}"

        uplink = next(lk for lk in plan.links if lk.fabric == "compute" and lk.tier == "leaf-spine" and lk.su == 2)
        leaf_end = next(e for e in (uplink.a, uplink.b) if plan.device_index()[e.device].role == "leaf")
        fabric.sim.command(f'Unlink "{leaf_end.device}"[{_ib_port(plan, leaf_end.device, leaf_end.port)}]')
        publish(fabric.scan())
        down = _wait("RailforgeFabricCableDown", _firing(stack, "RailforgeFabricCableDown"))
        time.sleep(11)  # two more evaluations: nothing else may join
        down = _firing(stack, "RailforgeFabricCableDown")()
        assert {(a["device"], a["port"], a["cable"]) for a in down} == _ends(uplink)
        others = {a["labels"]["alertname"] for a in stack.prom_alerts("firing")} - {"RailforgeFabricCableDown"}
        assert not others, f"one cable down fired {others} too"

        fabric.sim.command(f'ReLink "{leaf_end.device}"[{_ib_port(plan, leaf_end.device, leaf_end.port)}]')
        node_link = next(lk for lk in plan.links if lk.fabric == "compute" and lk.tier == "node-leaf" and lk.su == 1)
        leaf = next(e for e in (node_link.a, node_link.b) if plan.device_index()[e.device].role == "leaf")
        fabric.sim.command(f'PerformanceSet "{leaf.device}"[{_ib_port(plan, leaf.device, leaf.port)}] '
                           "PortCounters.SymbolErrorCounter=50")
        publish(fabric.scan())
        errors = _wait("RailforgeCableErrors", _firing(stack, "RailforgeCableErrors"))
        assert [(a["device"], a["port"], a["cable"], a["peer_device"]) for a in errors] == [
            (leaf.device, leaf.port, node_link.id, next(e.device for e in (node_link.a, node_link.b) if e != leaf))]

        def cleared() -> list[int]:  # the relinked port is Active again once OpenSM has swept it: scan until then
            publish(fabric.scan())
            return [] if _firing(stack, "RailforgeFabricCableDown")() else [1]

        _wait("the relinked cable to clear", cleared, timeout=90)
    finally:
        stack.stop()
