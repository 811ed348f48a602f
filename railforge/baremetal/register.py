"""Report-in: the small HTTP endpoint a freshly booted node POSTs its identity to, matched against the plan.

A node sends `{"host": ..., "mac": ..., "addresses": [...], "serial": ..., "phase": ...}` with its token in
`Authorization: Bearer <token>` (the stateless image's unit and the installer's late command send it; see
`client/railforge-report`). The body goes through a strict reader (POST /register only, JSON content type, at most
`MAX_BODY` bytes, a validated model with no extra keys) and each source address may report `RATE` times per minute.

Nothing unauthenticated changes state. The MAC it booted from names the planned host; the report is accepted only
with that host's token (`reportkey.host_token`) and only from that host's planned address. Anything else (a MAC no
host has, no token, another host's token, another source address, `installed` from a stateless host) is answered
401/403, changes nothing, and is logged: one line on stderr and one in rejected.jsonl (up to `REJECTED_MAX` bytes).

An accepted report is `booted` when host name, serial (if one was recorded) and address agree with the plan,
`unexpected` otherwise, with findings named by rack and U (a swapped server, a mis-cabled boot NIC). Phase
`installed` (an installer host's late command, before it reboots) switches that host's iPXE script to its local
disk (boot/hosts/<mac>.ipxe, written atomically) and lists it in installed-hosts.txt, which `boot files --state`
reads so that a later run keeps it on its disk; the host is not booted until it reports `booted` from its disk.
After every accepted report the state folder is rewritten atomically: reports.jsonl (every report),
booted-hosts.txt (an Ansible `--limit @booted-hosts.txt` list for site.yml), installed-hosts.txt and findings.csv.
Hand-written on http.server: one route, no framework needed, and no dependency on the node side beyond busybox.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import sys
import threading
import time
from collections import defaultdict, deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from ipaddress import ip_address, ip_interface
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from railforge.baremetal.files import local_script
from railforge.baremetal.hostmacs import TEMPLATE
from railforge.baremetal.identity import BootIdentity
from railforge.baremetal.installed import INSTALLED, read_installed
from railforge.baremetal.reportkey import host_token, same
from railforge.provision.macs import normalise_mac

MAX_BODY = 4096
RATE = 10  # reports per source address per minute
REJECTED_MAX = 16 * 1024 * 1024
PATH = "/register"
BOOTED, UNEXPECTED = "booted", "unexpected"


class Report(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, str_max_length=256)
    host: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9.\-]{0,62}$")
    mac: str
    addresses: list[str] = Field(default_factory=list, max_length=16)
    serial: str | None = Field(default=None, max_length=64)
    phase: Literal["booted", "installed"] = "booted"

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


class Rejected(Exception):
    """A report that changes nothing: its HTTP status and why, naming the planned host where there is one."""

    def __init__(self, code: int, reason: str):
        super().__init__(reason)
        self.code = code


def _source(source: str) -> str:
    addr = ip_address(source)
    mapped = getattr(addr, "ipv4_mapped", None)
    return str(mapped or addr)


def authenticate(report: Report, source: str, token: str | None, ids: list[BootIdentity], key: bytes) -> BootIdentity:
    """The planned host whose recorded boot MAC sent this report, when the token is that host's and the report comes
    from its planned address; otherwise Rejected."""
    planned = next((i for i in ids if i.boot_mac == report.mac), None)
    if planned is None:
        claimed = next((i for i in ids if i.host == report.host), None)
        where = f" ({claimed.place}, whose recorded boot MAC is {claimed.boot_mac or 'empty'})" if claimed else ""
        raise Rejected(403, f"MAC {report.mac} is in no host's boot_mac of {TEMPLATE}; the node says it is "
                            f"{report.host}{where}: a swapped server, a mis-cabled boot NIC or a forged report?")
    assert planned.boot_mac and planned.boot_address
    who = f"{planned.host} ({planned.place})"
    if token is None:
        raise Rejected(401, f"report for {who} carries no token (Authorization: Bearer <railforge.token>)")
    if not same(token, host_token(key, planned.host, planned.boot_mac)):
        raise Rejected(403, f"report for {who} carries a token that is not {planned.host}'s")
    wanted = str(ip_interface(planned.boot_address).ip)
    if _source(source) != wanted:
        raise Rejected(403, f"report for {who} comes from {source}, planned {wanted}")
    if report.phase == "installed" and planned.target != "installer":
        raise Rejected(403, f"{who} reports installed, but its target is {planned.target}")
    return planned


def match(report: Report, ids: list[BootIdentity]) -> Outcome:
    by_mac = {i.boot_mac: i for i in ids if i.boot_mac}
    planned = by_mac.get(report.mac)
    if planned is None:
        return Outcome(UNEXPECTED, None, [f"MAC {report.mac} is in no host's boot_mac of {TEMPLATE}"])
    findings: list[str] = []
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
    """What has reported so far; writes the state folder after each report (atomically, under a lock). `generated`
    is the generated folder whose host scripts an installed host's report switches to its local disk."""

    ids: list[BootIdentity]
    state: Path
    key: bytes
    generated: Path | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    latest: dict[str, dict] = field(default_factory=dict)  # by MAC
    installed: set[str] = field(default_factory=set)
    recent: dict[str, deque] = field(default_factory=lambda: defaultdict(deque))

    def __post_init__(self) -> None:
        if (self.state / INSTALLED).exists():
            self.installed = set(read_installed(self.state / INSTALLED, self.ids))

    def allow(self, source: str, now: float) -> bool:
        with self.lock:
            q = self.recent[source]
            while q and now - q[0] > 60:
                q.popleft()
            if len(q) >= RATE:
                return False
            q.append(now)
            return True

    def reject(self, source: str, reason: str, report: Report | None) -> None:
        """Log a refused report: stderr, and rejected.jsonl while it is under REJECTED_MAX bytes."""
        entry = {"at": round(time.time(), 3), "source": source, "reason": reason,
                 **({"host": report.host, "mac": report.mac, "phase": report.phase} if report else {})}
        line = json.dumps(entry, sort_keys=True) + "\n"
        print(f"report-in: rejected from {source}: {reason}", file=sys.stderr, flush=True)
        with self.lock:
            self.state.mkdir(parents=True, exist_ok=True)
            path = self.state / "rejected.jsonl"
            if not path.exists() or path.stat().st_size + len(line) <= REJECTED_MAX:
                with path.open("a", encoding="utf-8") as fh:
                    fh.write(line)

    def record(self, report: Report, source: str, planned: BootIdentity) -> Outcome:
        outcome = match(report, self.ids)
        entry = {"at": round(time.time(), 3), "source": source, **report.model_dump(), "status": outcome.status,
                 "planned": outcome.host, "findings": outcome.findings}
        with self.lock:
            if report.phase == "installed":
                self._local_boot(planned)
            self.latest[report.mac] = entry
            self.state.mkdir(parents=True, exist_ok=True)
            with (self.state / "reports.jsonl").open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(entry, sort_keys=True) + "\n")
            booted = sorted({e["planned"] for e in self.latest.values()
                             if e["status"] == BOOTED and e["phase"] == "booted"})
            _atomic(self.state / "booted-hosts.txt", "".join(f"{h}\n" for h in booted))
            _atomic(self.state / INSTALLED, "".join(f"{h}\n" for h in sorted(self.installed)))
            buf = io.StringIO()
            w = csv.writer(buf, lineterminator="\n")
            w.writerow(["mac", "says", "planned", "finding"])
            for mac in sorted(self.latest):
                e = self.latest[mac]
                for f in e["findings"]:
                    w.writerow([mac, e["host"], e["planned"] or "", f])
            _atomic(self.state / "findings.csv", buf.getvalue())
        return outcome

    def _local_boot(self, i: BootIdentity) -> None:
        """The installed host boots from its disk from now on: its script says so (the installer script would
        install it again), and installed-hosts.txt keeps it so for `boot files --state`."""
        self.installed.add(i.host)
        if self.generated is not None:
            served = local_script(i)
            _atomic(self.generated / served.path, served.text)


def _atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def handler_for(registry: Registry) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "railforge-report-in"
        sys_version = ""
        timeout = 10

        def handle(self) -> None:
            """A client that hangs up, resets or stalls ends its own connection, without a traceback."""
            with contextlib.suppress(ConnectionError, TimeoutError):
                super().handle()

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
            try:
                planned = authenticate(report, source, _bearer(self.headers.get("Authorization")), registry.ids,
                                       registry.key)
            except Rejected as exc:
                registry.reject(source, str(exc), report)
                return self._answer(exc.code, {"error": str(exc)})
            try:
                outcome = registry.record(report, source, planned)
            except OSError as exc:
                registry.reject(source, f"accepted, but the state could not be written ({exc})", report)
                return self._answer(500, {"error": "the report-in state could not be written"})
            self._answer(200, {"status": outcome.status, "planned": outcome.host, "findings": outcome.findings})

        def log_message(self, format: str, *args) -> None:  # noqa: A002
            return

    return Handler


def _bearer(header: str | None) -> str | None:
    if not header:
        return None
    scheme, _, token = header.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or len(token) > 128 or not token.isascii():
        return None
    return token


def serve(ids: list[BootIdentity], state: Path, host: str, port: int, key: bytes,
          generated: Path | None = None) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer((host, port), handler_for(Registry(ids, state, key, generated)))
    server.daemon_threads = True
    return server
