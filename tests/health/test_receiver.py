"""The receiver over real HTTP in dry-run mode (no Slurm needed): actions, idempotency, guard rails, orders.

The drains and resumes against a real slurmctld are in test_live_loop.py.
"""

from __future__ import annotations

import http.client
import json
import threading
from pathlib import Path

import openpyxl
import pytest

from railforge.health.receiver import Engine, ReceiverConfig, TokenBucket, serve
from railforge.health.slurm import Scontrol
from railforge.health.topology import HealthIndex
from tests.conftest import plan_of, run_cli
from tests.health.alerts import alert, body


@pytest.fixture(scope="module")
def idx() -> HealthIndex:
    return HealthIndex.of(plan_of("roce-a800-4nic"))


def _rail(idx: HealthIndex, node: str, rail: int):
    return next(r for r in idx.devices[node].rails if r.rail == rail)


class Running:
    def __init__(self, engine: Engine):
        self.engine, self.stop = engine, threading.Event()
        self.thread = threading.Thread(target=serve, args=(engine, "127.0.0.1", 0), kwargs={"stop": self.stop},
                                       daemon=True)
        self.lines: list[dict] = []

    def port(self) -> int:
        for _ in range(200):
            for line in self.actions():
                if line["action"] == "listening":
                    return line["port"]
            threading.Event().wait(0.02)
        raise AssertionError("receiver did not start")

    def actions(self) -> list[dict]:
        path = self.engine.cfg.state_dir / "actions.log"
        return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []

    def post(self, data: bytes, headers: dict | None = None) -> tuple[int, dict]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port(), timeout=10)
        conn.request("POST", "/alerts", body=data, headers={"Content-Type": "application/json", **(headers or {})})
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read() or b"{}")


@pytest.fixture
def receiver(idx: HealthIndex, tmp_path: Path):
    def make(**kw) -> Running:
        cfg = ReceiverConfig(state_dir=tmp_path / f"state{len(made) or ''}", dry_run=kw.pop("dry_run", True), **kw)
        r = Running(Engine(idx, cfg, Scontrol("/nonexistent/scontrol"), echo=lambda line: None))
        r.thread.start()
        made.append(r)
        return r
    made: list[Running] = []
    yield make
    for r in made:
        r.stop.set()
        r.thread.join(5)


def test_dry_run_changes_no_state(receiver, idx: HealthIndex, tmp_path: Path) -> None:
    """A dry run says what it would drain, order and resume, once per incident, and keeps none of it: no
    state.json, no work order, and a real receiver started on the same folder finds nothing drained."""
    r = receiver(node_check="test {node} = su001-gpu03")
    rail = _rail(idx, "su001-gpu03", 1)
    firing = alert("RailforgeNodeRailDown", cable=rail.cable, device="su001-gpu03", port="rail1")
    code, state = r.post(body(firing))
    assert code == 200 and state["drained"] == [] and state["would_drain"] == ["su001-gpu03"]
    assert r.post(body(firing))[0] == 200
    drains = [a for a in r.actions() if a["action"] == "would-drain"]
    assert len(drains) == 1 and rail.cable in drains[0]["reason"]
    orders = [a for a in r.actions() if a["action"] == "would-write-work-order"]
    assert [o["subject"] for o in orders] == [rail.cable]
    resolved = dict(firing, status="resolved", endsAt="2026-11-25T21:05:00Z")
    code, state = r.post(body(resolved))
    assert code == 200 and state["would_drain"] == []
    assert [a["node"] for a in r.actions() if a["action"] == "would-resume"] == ["su001-gpu03"]
    state_dir = r.engine.cfg.state_dir
    assert not (state_dir / "state.json").exists() and not (state_dir / "workorders").exists()
    r.post(body(firing))
    real = Engine(idx, ReceiverConfig(state_dir=state_dir), Scontrol("/nonexistent/scontrol"), echo=lambda _: None)
    assert real.drained == {} and real.active == {}


def test_failing_node_check_defers_the_resume(receiver, idx: HealthIndex) -> None:
    r = receiver(node_check="echo rail1 CMP-x down; exit 1")
    rail = _rail(idx, "su001-gpu04", 1)
    firing = alert("RailforgeNodeRailDown", cable=rail.cable)
    r.post(body(firing))
    _, state = r.post(body(dict(firing, status="resolved")))
    assert state["would_drain"] == ["su001-gpu04"]
    deferred = [a for a in r.actions() if a["action"] == "resume-deferred"]
    assert deferred and "rail1 CMP-x down" in deferred[0]["why"]


def test_drain_share_is_held_for_a_human(receiver, idx: HealthIndex) -> None:
    r = receiver(max_drain_share=0.25, max_auto_drain=64)  # 8 of 32 nodes
    _, state = r.post(body(alert("RailforgeSuIsolated", su="1")))
    assert state["would_drain"] == [] and state["held"] == sorted(idx.nodes_of_su[1])
    held = [a for a in r.actions() if a["action"] == "would-hold"]
    assert len(held) == 1 and "16 of 32" in held[0]["why"] and "human" in held[0]["why"]
    _, state = r.post(body(alert("RailforgeNodeRailDown", cable=_rail(idx, "su002-gpu01", 0).cable)))
    assert state["would_drain"] == []  # the held batch still includes the SU: nothing is drained piecemeal


def test_leaf_escalation_waits_for_a_human_unless_allowed(receiver, idx: HealthIndex) -> None:
    """Three rails down on one leaf make a leaf action: 16 nodes at once, over --max-auto-drain 8, so it is held
    (held.json names the batch) until `railforge health approve` lets exactly that batch through; with
    --max-auto-drain 16 the same alerts drain at once."""
    nodes = ("su002-gpu01", "su002-gpu07", "su002-gpu09")
    alerts = [alert("RailforgeNodeRailDown", cable=_rail(idx, n, 1).cable, device=n) for n in nodes]
    leaf = _rail(idx, nodes[0], 1).leaf
    r = receiver(dry_run=False, max_drain_share=1.0)
    _, state = r.post(body(*alerts))
    assert state["drained"] == [] and state["held"] == idx.nodes_of_leaf[leaf] and len(state["held"]) == 16
    held = [a for a in r.actions() if a["action"] == "held"]
    assert len(held) == 1 and "--max-auto-drain 8" in held[0]["why"]
    assert not [a for a in r.actions() if a["action"] in ("drain", "drain-failed")]
    state_dir = r.engine.cfg.state_dir
    wrong = run_cli("health", "approve", "0123456789ab", "--state-dir", str(state_dir), check=False)
    assert wrong.returncode == 2 and held[0]["batch"] in wrong.stderr
    ok = run_cli("health", "approve", held[0]["batch"], "--state-dir", str(state_dir))
    assert f"approved batch {held[0]['batch']}: drain 16 nodes" in ok.stdout
    r.engine.reconcile()  # the receiver's 5 s tick
    tried = [a["node"] for a in r.actions() if a["action"] == "drain-failed"]  # no scontrol here: the attempt shows
    assert sorted(tried) == idx.nodes_of_leaf[leaf]
    assert any(a["action"] == "approved" for a in r.actions())
    assert not (state_dir / "approved" / held[0]["batch"]).exists()  # one approval, one batch
    none = run_cli("health", "approve", "--state-dir", str(tmp_dir(r) / "elsewhere"), check=False)
    assert none.returncode == 2 and "nothing is held" in none.stderr

    allowed = receiver(max_drain_share=1.0, max_auto_drain=16)
    _, state = allowed.post(body(*alerts))
    assert state["would_drain"] == idx.nodes_of_leaf[leaf] and state["held"] == []


def tmp_dir(r: Running) -> Path:
    return r.engine.cfg.state_dir.parent


def test_a_second_failure_of_a_cable_is_a_new_work_order(receiver, idx: HealthIndex) -> None:
    """One order per incident: repeated alerts add nothing, the repair closes the incident, and the same cable
    failing again later gets a new order (not silence because one was written once)."""
    r = receiver(dry_run=False, max_drain_share=0.0)
    rail = _rail(idx, "su001-gpu02", 2)
    firing = alert("RailforgeNodeRailDown", cable=rail.cable)
    r.post(body(firing))
    r.post(body(firing))
    first = [a for a in r.actions() if a["action"] == "work-order"]
    assert len(first) == 1 and rail.cable in first[0]["path"]
    r.post(body(dict(firing, status="resolved")))
    assert [a["subject"] for a in r.actions() if a["action"] == "incident-closed"] == [rail.cable]
    r.post(body(firing))
    orders = [a for a in r.actions() if a["action"] == "work-order"]
    assert len(orders) == 2 and orders[0]["path"] != orders[1]["path"]
    assert all(Path(o["path"]).is_file() for o in orders)
    assert sorted(p.name for p in (r.engine.cfg.state_dir / "workorders").iterdir()) == sorted(
        Path(o["path"]).name for o in orders)


def test_bad_bodies_floods_and_unknown_names(receiver) -> None:
    r = receiver(rate_per_s=0.5, burst=3)
    code, reply = r.post(b'{"version": "4"}')
    assert code == 400 and "groupKey" in reply["error"]
    code, _ = r.post(body(alert("RailforgeNodeRailDown", cable="CMP-999999")))
    assert code == 200
    assert any(a["action"] == "ignored" and "CMP-999999" in a["why"] for a in r.actions())
    codes = [r.post(body(alert("RailforgeExporterDown", device="spine01")))[0] for _ in range(4)]
    assert 429 in codes
    assert any(a["action"] == "rate-limited" for a in r.actions())
    code, reply = r.post(b"x", headers={"Content-Length": str(2 << 20)})
    assert code in (413, 429)


def test_work_order_names_the_cable_and_its_rack(receiver, idx: HealthIndex) -> None:
    r = receiver(dry_run=False, max_drain_share=0.0)  # no drain allowed: the order is still written
    rail = _rail(idx, "su002-gpu11", 3)
    r.post(body(alert("RailforgeNodeRailDown", cable=rail.cable)))
    path = Path(next(a["path"] for a in r.actions() if a["action"] == "work-order"))
    assert path.name.startswith(f"repair-cable-{rail.cable}-")
    rows = list(openpyxl.load_workbook(path).active.iter_rows(values_only=True))
    head = rows[0]
    got = [dict(zip(head, row, strict=True)) for row in rows[1:]]
    assert [g["action"] for g in got] == ["inspect", "replace"]
    node = idx.devices["su002-gpu11"]
    assert all(g["cable"] == rail.cable and g["device"] == "su002-gpu11" and g["port"] == "rail3" for g in got)
    assert got[0]["rack"] == node.rack and got[0]["to_device"] == rail.leaf and got[0]["to_port"] == rail.leaf_port
    r.post(body(alert("RailforgeNodeRailDown", cable=rail.cable)))
    assert sum(a["action"] == "work-order" for a in r.actions()) == 1


def test_token_bucket_refills() -> None:
    now = [0.0]
    b = TokenBucket(rate=2, burst=2, clock=lambda: now[0])
    assert [b.take(), b.take(), b.take()] == [True, True, False]
    now[0] = 0.5
    assert b.take() and not b.take()
