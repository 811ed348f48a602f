"""Report-in: the small HTTP endpoint a freshly booted node POSTs its identity to, matched against the plan.

A node sends `{"host": ..., "mac": ..., "addresses": [...], "serial": ...}` (the stateless image's init does it
with busybox wget). The body goes through a strict reader (POST /register only, JSON content type, at most
`MAX_BODY` bytes, a validated model with no extra keys) and each source address may report `RATE` times per
minute. The MAC it booted from names the planned host; the report is `booted` when host name, serial (if one was
recorded) and address agree with the plan, `unexpected` otherwise, with findings named by rack and U (a swapped
server, a mis-cabled boot NIC). After every accepted report the state folder is rewritten atomically:
reports.jsonl (every report), booted-hosts.txt (an Ansible `--limit @booted-hosts.txt` list for site.yml) and
findings.csv. Hand-written on http.server: one route, no framework needed, and no dependency on the node side
beyond busybox.
"""

from __future__ import annotations

import csv
import io
import json
import os
import threading
import time
from collections import defaultdict, deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from ipaddress import ip_interface
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from railforge.baremetal.hostmacs import TEMPLATE
from railforge.baremetal.identity import BootIdentity
from railforge.provision.macs import normalise_mac

MAX_BODY = 4096
RATE = 10  # reports per source address per minute
PATH = "/register"
BOOTED, UNEXPECTED = "booted", "unexpected"


class Report(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, str_max_length=256)
    host: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9.\-]{0,62}$")
    mac: str
    addresses: list[str] = Field(default_factory=list, max_length=16)
    serial: str | None = Field(default=None, max_length=64)

    @field_validator("mac")
    @classmethod
    def _mac(cls, v: str) -> str:
        mac = normalise_mac(v)
        if mac is None:
            raise ValueError("not a unicast MAC address")
        return mac

    @field_validator("addresses")
    @classmethod
    def _addresses(cls, v: list[str]) -> list[str]:
        return [str(ip_interface(a)) for a in v]

    @field_validator("serial")
    @classmethod
    def _serial(cls, v: str | None) -> str | None:
        if v is not None and not (v.isascii() and v.isprintable()):
            raise ValueError("serial must be printable ASCII")
        return v.strip() or None if v is not None else None


class BadReport(ValueError):
    pass


def read_report(body: bytes, where: str) -> Report:
    """The strict reader: JSON object -> Report, or BadReport naming the field."""
    if len(body) > MAX_BODY:
        raise BadReport(f"{where}: body over {MAX_BODY} bytes")
    try:
        data = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadReport(f"{where}: not JSON ({exc.__class__.__name__})") from None
    if not isinstance(data, dict):
        raise BadReport(f"{where}: want a JSON object with host, mac, addresses, serial")
    try:
        return Report.model_validate(data)
    except ValidationError as exc:
        e = exc.errors()[0]
        loc = ".".join(str(p) for p in e["loc"]) or "body"
        raise BadReport(f"{where}: {loc}: {e['msg']}") from None


@dataclass(slots=True)
class Outcome:
    status: str
    host: str | None  # the planned host the MAC belongs to, if any
    findings: list[str]


def match(report: Report, ids: list[BootIdentity]) -> Outcome:
    by_mac = {i.boot_mac: i for i in ids if i.boot_mac}
    by_name = {i.host: i for i in ids}
    planned = by_mac.get(report.mac)
    findings: list[str] = []
    if planned is None:
        claimed = by_name.get(report.host)
        where = f" ({claimed.place}, whose recorded boot MAC is {claimed.boot_mac or 'empty'})" if claimed else ""
        findings.append(f"MAC {report.mac} is in no host's boot_mac of {TEMPLATE}; the node says it is "
                        f"{report.host}{where}: a swapped server or a mis-cabled boot NIC?")
        return Outcome(UNEXPECTED, None, findings)
    if report.host != planned.host:
        findings.append(f"{planned.host} ({planned.place}) booted from its recorded MAC {report.mac} but says it is "
                        f"{report.host}: the image or the command line is not the plan's")
    if planned.serial and report.serial != planned.serial:
        findings.append(f"{planned.host} ({planned.place}) reports serial {report.serial or 'none'}, recorded "
                        f"{planned.serial}: a swapped server?")
    if planned.boot_address and str(ip_interface(planned.boot_address)) not in report.addresses:
        findings.append(f"{planned.host} ({planned.place}) has {', '.join(report.addresses) or 'no address'}, "
                        f"planned {planned.boot_address}")
    return Outcome(UNEXPECTED if findings else BOOTED, planned.host, findings)


@dataclass
class Registry:
    """What has reported so far; writes the state folder after each report (atomically, under a lock)."""

    ids: list[BootIdentity]
    state: Path
    lock: threading.Lock = field(default_factory=threading.Lock)
    latest: dict[str, dict] = field(default_factory=dict)  # by MAC
    recent: dict[str, deque] = field(default_factory=lambda: defaultdict(deque))

    def allow(self, source: str, now: float) -> bool:
        with self.lock:
            q = self.recent[source]
            while q and now - q[0] > 60:
                q.popleft()
            if len(q) >= RATE:
                return False
            q.append(now)
            return True

    def record(self, report: Report, source: str) -> Outcome:
        outcome = match(report, self.ids)
        entry = {"at": round(time.time(), 3), "source": source, **report.model_dump(), "status": outcome.status,
                 "planned": outcome.host, "findings": outcome.findings}
        with self.lock:
            self.latest[report.mac] = entry
            self.state.mkdir(parents=True, exist_ok=True)
            with (self.state / "reports.jsonl").open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(entry, sort_keys=True) + "\n")
            booted = sorted({e["planned"] for e in self.latest.values() if e["status"] == BOOTED})
            _atomic(self.state / "booted-hosts.txt", "".join(f"{h}\n" for h in booted))
            buf = io.StringIO()
            w = csv.writer(buf, lineterminator="\n")
            w.writerow(["mac", "says", "planned", "finding"])
            for mac in sorted(self.latest):
                e = self.latest[mac]
                for f in e["findings"]:
                    w.writerow([mac, e["host"], e["planned"] or "", f])
            _atomic(self.state / "findings.csv", buf.getvalue())
        return outcome


def _atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def handler_for(registry: Registry) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "railforge-report-in"
        sys_version = ""
        timeout = 10

        def _answer(self, code: int, body: dict) -> None:
            data = (json.dumps(body, sort_keys=True) + "\n").encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802
            self._answer(405, {"error": f"POST a JSON report to {PATH}"})

        do_PUT = do_DELETE = do_PATCH = do_GET  # noqa: N815

        def do_POST(self) -> None:  # noqa: N802
            source = self.client_address[0]
            if self.path != PATH:
                return self._answer(404, {"error": f"POST to {PATH}"})
            if not registry.allow(source, time.monotonic()):
                return self._answer(429, {"error": f"more than {RATE} reports a minute from {source}"})
            ctype = self.headers.get("Content-Type", "").split(";")[0].strip()
            if ctype != "application/json":
                return self._answer(415, {"error": "want Content-Type: application/json"})
            try:
                length = int(self.headers.get("Content-Length", ""))
            except ValueError:
                return self._answer(411, {"error": "want Content-Length"})
            if length < 0 or length > MAX_BODY:
                return self._answer(413, {"error": f"body over {MAX_BODY} bytes"})
            try:
                report = read_report(self.rfile.read(length), f"report from {source}")
            except BadReport as exc:
                return self._answer(400, {"error": str(exc)})
            outcome = registry.record(report, source)
            self._answer(200, {"status": outcome.status, "planned": outcome.host, "findings": outcome.findings})

        def log_message(self, format: str, *args) -> None:  # noqa: A002
            return

    return Handler


def serve(ids: list[BootIdentity], state: Path, host: str, port: int) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer((host, port), handler_for(Registry(ids, state)))
    server.daemon_threads = True
    return server
