"""Run OpenStack's Redfish emulator (sushy-tools, fake driver) as many BMCs at once, for the Redfish tests.

`python redfish_emulator.py SYSTEMS.json PORT HTPASSWD STATE_DIR` serves every system of SYSTEMS.json (a list of
{"ip", "name", "uuid", "serial", "macs", "answer"} and optional "faults", "once", "power", "late") with sushy-tools'
own Flask application and fake driver, behind basic auth (sushy-tools' own middleware, bcrypt htpasswd), on
0.0.0.0:PORT inside the test's network namespace, whose loopback carries every planned BMC address.

A WSGI layer in front adds what the emulator lacks and a real BMC has:
- one BMC per address: the Systems collection at an address lists only that address's system (after the service
  root has checked the credentials), other systems are 404 there, and the system answers its SerialNumber
  (sushy-tools 2.2 has no serial field);
- `BootSourceOverrideEnabled` honoured: the fake driver stores only the target and always reads back `Continuous`.
  Here the layer keeps Once/Continuous/Disabled; a reset that takes effect makes the host boot `boot_delay` seconds
  later from the override's target if one is enabled, else from its disk (`Hdd`, the boot order's first entry), and
  a `Once` override is then cleared (Disabled, target None), as firmware does. `"once": "ignored"` restores the
  fake driver's own behaviour for one system (reads back Continuous, never cleared);
- `LastResetTime`, moved by every reset that takes effect (real BMCs report it; the fake driver does not);
- injected faults per system, each on the wire exactly as a failing BMC would answer: `reset-late` (the reset is
  performed, the answer comes `late` seconds later), `reset-503-done` (performed, answered 503), `reset-503-lost`
  (not performed, answered 503), `patch-503-lost` (the first boot override PATCH is not performed, answered 503),
  `get-503-once` (the first read of the system answers 503); `"power": "PoweringOn"` makes the system report a
  power transition under way; `"answer": "malformed"` makes one address answer truncated JSON.
`GET /_emulator/state` (any address, no auth: the test's own view, not part of Redfish) answers per system name the
boots (the source of each), the reset and PATCH requests received, and the override as the layer holds it.
The fake driver keeps its state in memory (see _MemoryDict); STATE_DIR stays for the emulator's other files.
"""

from __future__ import annotations

import io
import json
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from werkzeug.serving import run_simple

BOOTING_RESETS = ("On", "ForceOn", "ForceRestart", "GracefulRestart", "PowerCycle")
FIRST_RESET_TIME = "2026-01-01T00:00:00+00:00"


class _MemoryDict(dict):
    """The emulator's state in memory: its sqlite store opens a connection per access and, at 64 concurrent clients
    on a small machine, runs out of file descriptors and times out. Nothing here needs state across processes."""


@dataclass
class Bmc:
    """What the layer keeps per system."""

    spec: dict
    enabled: str = "Disabled"
    boots: list[str] = field(default_factory=list)
    resets: list[str] = field(default_factory=list)
    patches: int = 0
    gets: int = 0
    boot_at: float | None = None
    last_reset: str = FIRST_RESET_TIME

    @property
    def faults(self) -> list[str]:
        return self.spec.get("faults", [])

    @property
    def once_ignored(self) -> bool:
        return self.spec.get("once") == "ignored"


def _json_answer(start_response, status: str, doc: dict | None = None, delay: float = 0.0) -> list[bytes]:
    if delay:
        time.sleep(delay)
    body = json.dumps(doc if doc is not None else {"error": status}).encode()
    start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]


def main() -> None:
    systems = json.loads(Path(sys.argv[1]).read_text())
    port, htpasswd, state = int(sys.argv[2]), sys.argv[3], sys.argv[4]
    config = Path(sys.argv[1]).with_suffix(".conf.py")
    config.write_text(
        "SUSHY_EMULATOR_FAKE_DRIVER = True\n"
        f"SUSHY_EMULATOR_STATE_DIR = {state!r}\n"
        f"SUSHY_EMULATOR_AUTH_FILE = {htpasswd!r}\n"
        "SUSHY_EMULATOR_FAKE_SYSTEMS = " + repr([
            {"uuid": s["uuid"], "name": s["name"], "power_state": "On", "external_notifier": False,
             "nics": [{"mac": m} for m in s["macs"]]} for s in systems]) + "\n")
    from sushy_tools.emulator import memoize

    memoize.PersistentDict = _MemoryDict
    from sushy_tools.emulator.main import app

    app.configure(config_file=str(config))
    by_ip = {s["ip"]: s for s in systems}
    bmcs = {s["uuid"]: Bmc(s) for s in systems}
    lock = threading.Lock()
    inner = app.wsgi_app

    def settle(b: Bmc) -> None:
        """The host boots once its reset's boot time has come (called under the lock on every request)."""
        if b.boot_at is None or time.time() < b.boot_at:
            return
        b.boot_at = None
        target = app.systems.get_boot_device(b.spec["uuid"])
        if b.enabled in ("Once", "Continuous"):
            b.boots.append(target)
            if b.enabled == "Once":
                b.enabled = "Disabled"
        else:
            b.boots.append("Hdd")

    def call_inner(environ) -> tuple[str, list, bytes]:
        captured: dict = {}

        def keep(status, headers, exc_info=None):
            captured["status"], captured["headers"] = status, headers

        body = b"".join(inner(environ, keep))
        return captured["status"], captured["headers"], body

    def respond(start_response, status: str, headers: list, body: bytes) -> list[bytes]:
        headers = [(k, v) for k, v in headers if k.lower() != "content-length"]
        start_response(status, [*headers, ("Content-Length", str(len(body)))])
        return [body]

    def reset(environ, start_response, b: Bmc) -> list[bytes]:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        raw = environ["wsgi.input"].read(length)
        kind = json.loads(raw or b"{}").get("ResetType", "")
        environ = {**environ, "wsgi.input": io.BytesIO(raw)}
        with lock:
            b.resets.append(kind)
        if "reset-503-lost" in b.faults:
            return _json_answer(start_response, "503 Service Unavailable")
        was_on = app.systems.get_power_state(b.spec["uuid"]) == "On"
        status, headers, body = call_inner(environ)
        if status[:1] == "2" and kind in BOOTING_RESETS and not (kind in ("On", "ForceOn") and was_on):
            with lock:
                b.last_reset = datetime.now(UTC).isoformat()
                b.boot_at = time.time() + float(b.spec.get("boot_delay", 1.0))
        if "reset-503-done" in b.faults:
            return _json_answer(start_response, "503 Service Unavailable")
        if "reset-late" in b.faults:
            time.sleep(float(b.spec.get("late", 5.0)))
        return respond(start_response, status, headers, body)

    def patch(environ, start_response, b: Bmc) -> list[bytes]:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        raw = environ["wsgi.input"].read(length)
        environ = {**environ, "wsgi.input": io.BytesIO(raw)}
        with lock:
            b.patches += 1
            first = b.patches == 1
        if "patch-503-lost" in b.faults and first:
            return _json_answer(start_response, "503 Service Unavailable")
        status, headers, body = call_inner(environ)
        boot = json.loads(raw or b"{}").get("Boot") or {}
        if status[:1] == "2" and boot.get("BootSourceOverrideTarget"):
            with lock:
                wanted = boot.get("BootSourceOverrideEnabled", "Once")
                b.enabled = "Continuous" if b.once_ignored else wanted
        return respond(start_response, status, headers, body)

    def system(environ, start_response, b: Bmc) -> list[bytes]:
        with lock:
            b.gets += 1
            first = b.gets == 1
        if "get-503-once" in b.faults and first:
            return _json_answer(start_response, "503 Service Unavailable")
        status, headers, body = call_inner(environ)
        if status.startswith("200"):
            doc = json.loads(body)
            with lock:
                doc["SerialNumber"] = b.spec["serial"]
                doc["LastResetTime"] = b.last_reset
                doc["Boot"]["BootSourceOverrideEnabled"] = b.enabled
                if b.enabled == "Disabled":
                    doc["Boot"]["BootSourceOverrideTarget"] = "None"
                if b.spec.get("power"):
                    doc["PowerState"] = b.spec["power"]
            body = json.dumps(doc).encode()
        return respond(start_response, status, headers, body)

    def wsgi(environ, start_response):
        path = environ.get("PATH_INFO", "").rstrip("/")
        method = environ["REQUEST_METHOD"]
        if path == "/_emulator/state":
            with lock:
                for b in bmcs.values():
                    settle(b)
                doc = {b.spec["name"]: {"boots": b.boots, "resets": b.resets, "patches": b.patches,
                                        "enabled": b.enabled} for b in bmcs.values()}
            return _json_answer(start_response, "200 OK", doc)
        me = by_ip.get(environ.get("HTTP_HOST", "").rsplit(":", 1)[0])
        if me is None:
            return _json_answer(start_response, "404 Not Found", {"error": "no BMC here"})
        if me.get("answer") == "malformed":
            start_response("200 OK", [("Content-Type", "application/json")])
            return [b'{"@odata.id": "/redfish/v1/Systems", "Members": [{"@odata.id": ']
        b = bmcs[me["uuid"]]
        with lock:
            settle(b)
        if path.startswith("/redfish/v1/Systems/") and path.split("/")[4] not in (me["uuid"], me["name"]):
            return _json_answer(start_response, "404 Not Found", {"error": "not this BMC's system"})
        own = f"/redfish/v1/Systems/{me['uuid']}"
        if method == "GET" and path == "/redfish/v1/Systems":
            environ = {**environ, "PATH_INFO": "/redfish/v1/"}  # the cheap service root checks the credentials
            status, headers, body = call_inner(environ)
            if status.startswith("200"):
                body = json.dumps({"@odata.id": "/redfish/v1/Systems", "Members@odata.count": 1,
                                   "Members": [{"@odata.id": own}]}).encode()
            return respond(start_response, status, headers, body)
        if path == own and method == "GET":
            return system(environ, start_response, b)
        if path == own and method == "PATCH":
            return patch(environ, start_response, b)
        if path == f"{own}/Actions/ComputerSystem.Reset" and method == "POST":
            return reset(environ, start_response, b)
        return inner(environ, start_response)

    run_simple("0.0.0.0", port, wsgi, threaded=True)


if __name__ == "__main__":
    main()
