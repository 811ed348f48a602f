"""The remediation receiver: Alertmanager's webhook in, Slurm drains, work orders and resumes out.

Stdlib `http.server` (one POST path, no framework needed) around an `Engine` that keeps the firing alerts,
asks `decide` what they call for and converges Slurm on it: drain what is wanted and not drained, resume
what railforge drained and no alert wants any more once the node check passes. Every action is one JSON
line in `actions.log` and on stderr; state (firing alerts, nodes railforge drained, open repair incidents)
survives a restart in `state.json`. Idempotent: a repeated webhook changes nothing.

A repair work order is written once per incident: when an alert first wants a subject (a cable, a device, an SU)
repaired, one order named after the subject and the incident's start; while the incident is open, repeated
alerts write nothing more; once no alert wants it the incident closes, and the next failure of the same subject is
a new incident with its own order.

Guard rails: a body size cap and a token bucket (HTTP 413 / 429), unknown devices and cables ignored, and a batch
of drains that is larger than `max_auto_drain` nodes (a leaf or SU action) or would take the drained share of the
cluster over `max_drain_share` is held for a human: `railforge health approve` (a file in the state folder, so
only who may write there approves) lets exactly that batch through. `dry_run` acts on nothing and keeps nothing:
what it would have drained and ordered lives in memory only and no state.json is written.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from railforge.health.decide import Policy, WorkItem, decide
from railforge.health.repair import order_path, write_repair_order
from railforge.health.slurm import Scontrol, SlurmError
from railforge.health.topology import HealthIndex
from railforge.health.webhook import MAX_BODY, Alert, Webhook, WebhookError, parse_webhook
from railforge.inputs import MiB, load_json

STATE_MAX_BYTES = 64 * MiB


class StateFile(BaseModel):
    """state.json as `Engine._save` writes it; a hand-edited or foreign one is refused by name and place."""

    model_config = ConfigDict(extra="forbid")
    active: dict[str, Alert] = Field(default_factory=dict)
    drained: dict[str, str] = Field(default_factory=dict)
    orders: dict[str, str] = Field(default_factory=dict)  # subject -> the open incident's work order file


class HeldBatch(BaseModel):
    """held.json: the drains waiting for a human, and the id `railforge health approve` names."""

    model_config = ConfigDict(extra="forbid")
    id: str
    nodes: dict[str, str]
    why: str


_STATE = TypeAdapter(StateFile)
_HELD = TypeAdapter(HeldBatch)
HELD_FILE = "held.json"
APPROVED_DIR = "approved"

OURS = ("railforge:", "railforge-node-health:")  # drains this loop may undo: its own and the node check's


@dataclass(slots=True)
class ReceiverConfig:
    state_dir: Path
    dry_run: bool = False
    max_drain_share: float = 0.25
    max_auto_drain: int = 8  # a batch of more new drains than this (a leaf or SU action) waits for approval
    node_check: str | None = None  # shell command template, {node} replaced by the node's name; exit 0 = healthy
    node_check_timeout: float = 60
    rate_per_s: float = 5.0
    burst: int = 20
    policy: Policy = field(default_factory=Policy)
    client_timeout: float = 10  # seconds a client may take per read: a slow or lying one does not hold a thread


class TokenBucket:
    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic):
        self.rate, self.burst, self.clock = rate, burst, clock
        self.tokens, self.at = float(burst), clock()
        self.lock = threading.Lock()

    def take(self) -> bool:
        with self.lock:
            now = self.clock()
            self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
            self.at = now
            if self.tokens < 1:
                return False
            self.tokens -= 1
            return True


class Engine:
    def __init__(self, idx: HealthIndex, cfg: ReceiverConfig, slurm: Scontrol,
                 echo: Callable[[str], None] | None = None):
        self.idx, self.cfg, self.slurm = idx, cfg, slurm
        self.echo = echo or (lambda line: print(line, file=sys.stderr, flush=True))
        self.lock = threading.RLock()
        self.active: dict[str, Alert] = {}
        self.drained: dict[str, str] = {}
        self.orders: dict[str, str] = {}
        self.held: list[str] = []
        self.would_drain: dict[str, str] = {}  # dry run: what it would have drained, in memory only
        cfg.state_dir.mkdir(parents=True, exist_ok=True)
        self._load()

    # ---- state ----------------------------------------------------------------------------------------------
    @property
    def state_file(self) -> Path:
        return self.cfg.state_dir / "state.json"

    def _load(self) -> None:
        if not self.state_file.is_file():
            return
        state = load_json(self.state_file, _STATE, "a health state file", STATE_MAX_BYTES)
        self.active = dict(state.active)
        self.drained = dict(state.drained)
        self.orders = dict(state.orders)

    def _write(self, path: Path, text: str) -> None:
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        tmp.write_text(text)
        os.replace(tmp, path)

    def _save(self) -> None:
        if self.cfg.dry_run:
            return
        self._write(self.state_file, json.dumps({
            "active": {fp: a.model_dump(mode="json") for fp, a in sorted(self.active.items())},
            "drained": dict(sorted(self.drained.items())), "orders": dict(sorted(self.orders.items()))},
            indent=1, sort_keys=True))

    def log(self, action: str, **fields: object) -> None:
        line = json.dumps({"t": round(time.time(), 3), "action": action, "dry_run": self.cfg.dry_run, **fields},
                          sort_keys=True)
        with (self.cfg.state_dir / "actions.log").open("a") as fh:
            fh.write(line + "\n")
        self.echo(line)

    # ---- input ----------------------------------------------------------------------------------------------
    def receive(self, hook: Webhook) -> dict:
        with self.lock:
            for alert in hook.alerts:
                if alert.status == "firing":
                    self.active[alert.fingerprint] = alert
                else:
                    self.active.pop(alert.fingerprint, None)
            self.log("received", status=hook.status, alerts=len(hook.alerts),
                     names=sorted({a.name for a in hook.alerts}))
            return self.reconcile()

    # ---- convergence ----------------------------------------------------------------------------------------
    def reconcile(self) -> dict:
        with self.lock:
            d = decide(list(self.active.values()), self.idx, self.cfg.policy)
            for why in d.ignored:
                self.log("ignored", why=why)
            for why in d.escalations:
                self.log("escalated", why=why)
            for note in d.notes:
                self.log("note", why=note)
            self._orders(d.work)
            self._drain(d.drains)
            self._resume(set(d.drains))
            self._save()
            return self.summary()

    def summary(self) -> dict:
        out = {"drained": sorted(self.drained), "held": list(self.held), "active": len(self.active),
               "incidents": len(self.orders)}
        if self.cfg.dry_run:
            out["would_drain"] = sorted(self.would_drain)
        return out

    def _orders(self, wanted: dict[str, WorkItem]) -> None:
        """One work order per incident: opened when a subject is first wanted, closed when no alert wants it."""
        for subject in sorted(set(self.orders) - set(wanted)):
            self.log("incident-closed", subject=subject, order=self.orders.pop(subject))
        for subject, item in wanted.items():
            if subject in self.orders:
                continue
            folder = self.cfg.state_dir / "workorders"
            path = order_path(folder, item, time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()))
            n = 1
            while path.exists():
                n += 1
                path = order_path(folder, item, f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{n}")
            if self.cfg.dry_run:
                self.log("would-write-work-order", kind=item.kind, subject=item.subject, why=item.why)
            else:
                write_repair_order(path, self.idx, item)
                self.log("work-order", kind=item.kind, subject=item.subject, why=item.why, path=str(path))
            self.orders[subject] = path.name

    def _guard(self, new: dict[str, str], drained: int) -> str | None:
        """Why this batch of new drains needs a human, or None."""
        limit = int(self.cfg.max_drain_share * self.idx.node_count)
        if drained + len(new) > limit:
            return (f"would drain {len(new)} more nodes ({drained + len(new)} of {self.idx.node_count}, "
                    f"over the {self.cfg.max_drain_share:.0%} share): a human must decide")
        if len(new) > self.cfg.max_auto_drain:
            return (f"would drain {len(new)} nodes at once, more than --max-auto-drain {self.cfg.max_auto_drain}: "
                    "a human must decide")
        return None

    def _approved(self, batch: str) -> bool:
        mark = self.cfg.state_dir / APPROVED_DIR / batch
        if not mark.is_file():
            return False
        if not self.cfg.dry_run:
            mark.unlink()
        return True

    def _drain(self, wanted: dict[str, str]) -> None:
        done = self.would_drain if self.cfg.dry_run else self.drained
        new = {n: r for n, r in sorted(wanted.items()) if n not in done}
        held_file = self.cfg.state_dir / HELD_FILE
        if not new:
            self.held = []
            if not self.cfg.dry_run and held_file.exists():
                held_file.unlink()
            return
        why = self._guard(new, len(done))
        if why is not None:
            batch = hashlib.sha256(json.dumps(new, sort_keys=True).encode()).hexdigest()[:12]
            if self._approved(batch):
                self.log("approved", batch=batch, nodes=sorted(new))
            else:
                if self.held != sorted(new):
                    self.log("would-hold" if self.cfg.dry_run else "held", why=why, nodes=sorted(new), batch=batch,
                             approve=f"railforge health approve --state-dir {shlex.quote(str(self.cfg.state_dir))} "
                                     f"{batch}")
                    if not self.cfg.dry_run:
                        self._write(held_file, HeldBatch(id=batch, nodes=new, why=why).model_dump_json(indent=1))
                self.held = sorted(new)
                return
        self.held = []
        if not self.cfg.dry_run and held_file.exists():
            held_file.unlink()
        for node, reason in new.items():
            if self.cfg.dry_run:
                self.log("would-drain", node=node, reason=reason)
                self.would_drain[node] = reason
                continue
            try:
                now = self.slurm.node(node)
                if not (now.drained and now.reason == reason):
                    self.slurm.drain(node, reason)
            except SlurmError as exc:
                self.log("drain-failed", node=node, reason=reason, error=str(exc))
                continue
            self.drained[node] = reason
            self.log("drain", node=node, reason=reason)

    def _resume(self, wanted: set[str]) -> None:
        done = self.would_drain if self.cfg.dry_run else self.drained
        for node in sorted(set(done) - wanted):
            if not self.cfg.dry_run:
                try:
                    now = self.slurm.node(node)
                except SlurmError as exc:
                    self.log("resume-failed", node=node, error=str(exc))
                    continue
                if now.drained and not now.reason.startswith(OURS):
                    self.log("left-to-human", node=node, reason=now.reason)
                    del done[node]
                    continue
            ok, detail = self._node_check(node)
            if not ok:
                self.log("resume-deferred", node=node, why=f"node check failed: {detail}")
                continue
            if self.cfg.dry_run:
                self.log("would-resume", node=node, check=detail)
            else:
                try:
                    self.slurm.resume(node)
                except SlurmError as exc:
                    self.log("resume-failed", node=node, error=str(exc))
                    continue
                self.log("resume", node=node, check=detail)
            del done[node]

    def _node_check(self, node: str) -> tuple[bool, str]:
        if not self.cfg.node_check:
            return True, "no node check configured"
        cmd = self.cfg.node_check.replace("{node}", shlex.quote(node))
        try:
            proc = subprocess.run(cmd, shell=True, capture_output=True, text=True,  # noqa: S602 (operator's template)
                                  timeout=self.cfg.node_check_timeout)
        except subprocess.TimeoutExpired:
            return False, f"timed out after {self.cfg.node_check_timeout:.0f} s"
        out = (proc.stdout.strip().splitlines() or [""])[0][:200]
        return proc.returncode == 0, out or f"exit {proc.returncode}"


def handler(engine: Engine, bucket: TokenBucket) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "railforge-health"
        timeout = engine.cfg.client_timeout

        def handle(self) -> None:
            """A client that hangs up, resets or stalls ends its own connection: one log line, no traceback."""
            try:
                super().handle()
            except (ConnectionError, TimeoutError) as exc:
                engine.log("connection-dropped", peer=self.client_address[0], error=type(exc).__name__)

        def _reply(self, code: int, body: dict) -> None:
            data = (json.dumps(body, sort_keys=True) + "\n").encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802
            if self.path == "/healthz":
                self._reply(200, {"ok": True})
            elif self.path == "/state":
                with engine.lock:
                    self._reply(200, engine.summary())
            else:
                self._reply(404, {"error": f"no such path {self.path[:100]!r}"})

        def do_POST(self) -> None:  # noqa: N802
            if self.path != "/alerts":
                self._reply(404, {"error": f"POST to /alerts, not {self.path[:100]!r}"})
                return
            if not bucket.take():
                engine.log("rate-limited", peer=self.client_address[0])
                self._reply(429, {"error": "too many webhooks: rate limited"})
                return
            try:
                length = int(self.headers.get("Content-Length", ""))
            except ValueError:
                self._reply(411, {"error": "Content-Length required"})
                return
            if not 0 <= length <= MAX_BODY:
                self._reply(413, {"error": f"body of {length} bytes; at most {MAX_BODY} are accepted"})
                return
            body = self.rfile.read(length)
            try:
                hook = parse_webhook(body, f"webhook from {self.client_address[0]}")
            except WebhookError as exc:
                engine.log("rejected", error=str(exc))
                self._reply(400, {"error": str(exc)})
                return
            self._reply(200, engine.receive(hook))

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

    return Handler


def serve(engine: Engine, host: str, port: int, reconcile_every: float = 5.0,
          stop: threading.Event | None = None) -> None:
    """Serve until `stop` is set (or forever); reconcile every few seconds so deferred resumes are retried."""
    bucket = TokenBucket(engine.cfg.rate_per_s, engine.cfg.burst)
    server = ThreadingHTTPServer((host, port), handler(engine, bucket))
    stop = stop or threading.Event()

    def tick() -> None:
        while not stop.wait(reconcile_every):
            if engine.drained or engine.would_drain or engine.held:
                engine.reconcile()

    threading.Thread(target=tick, daemon=True).start()
    threading.Thread(target=lambda: (stop.wait(), server.shutdown()), daemon=True).start()
    engine.log("listening", host=host, port=server.server_address[1], nodes=engine.idx.node_count)
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()


def approve(state_dir: Path, batch: str | None) -> HeldBatch:
    """Approve the batch the receiver holds (`batch`: its id, as the `held` log line names it; None: whatever is
    held now). Raises InputError when nothing is held or the id is another batch's."""
    from railforge.inputs import InputError

    path = state_dir / HELD_FILE
    if not path.is_file():
        raise InputError(path, "nothing is held for approval")
    held = load_json(path, _HELD, "a held drain batch", STATE_MAX_BYTES)
    if batch is not None and batch != held.id:
        raise InputError(path, f"the held batch is {held.id}, not {batch!r} (it changed since: check it again)")
    folder = state_dir / APPROVED_DIR
    folder.mkdir(exist_ok=True)
    tmp = folder / f".{held.id}.tmp-{os.getpid()}"
    tmp.write_text(held.model_dump_json(indent=1))
    os.replace(tmp, folder / held.id)
    return held
