"""Run OpenStack's Redfish emulator (sushy-tools, fake driver) as many BMCs at once, for the Redfish tests.

`python redfish_emulator.py SYSTEMS.json PORT HTPASSWD STATE_DIR` serves every system of SYSTEMS.json (a list of
{"ip", "name", "uuid", "serial", "macs", "answer"}) with sushy-tools' own Flask application and fake driver (its
state, a sqlite file, in STATE_DIR), behind basic auth (sushy-tools' own middleware, bcrypt htpasswd), on
0.0.0.0:PORT inside the test's network namespace, whose loopback carries every planned BMC address. A thin WSGI
layer in front makes each address look like one BMC, which the emulator alone cannot: the Systems collection at an
address lists only that address's system (after the service root has checked the credentials), other systems are
404 there, and the system answers its SerialNumber (sushy-tools 2.2 has no serial field). `"answer": "malformed"`
makes one address answer truncated JSON, as a broken BMC firmware would. The fake driver keeps its state in
memory (see _MemoryDict); STATE_DIR stays for the emulator's other files.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from werkzeug.serving import run_simple


class _MemoryDict(dict):
    """The emulator's state in memory: its sqlite store opens a connection per access and, at 64 concurrent clients
    on a small machine, runs out of file descriptors and times out. Nothing here needs state across processes."""


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
    inner = app.wsgi_app

    def wsgi(environ, start_response):
        host = environ.get("HTTP_HOST", "").rsplit(":", 1)[0]
        me = by_ip.get(host)
        path = environ.get("PATH_INFO", "")
        if me is None:
            start_response("404 Not Found", [("Content-Type", "application/json")])
            return [b'{"error": "no BMC here"}']
        if me.get("answer") == "malformed":
            start_response("200 OK", [("Content-Type", "application/json")])
            return [b'{"@odata.id": "/redfish/v1/Systems", "Members": [{"@odata.id": ']
        if path.startswith("/redfish/v1/Systems/") and path.split("/")[4] not in (me["uuid"], me["name"]):
            start_response("404 Not Found", [("Content-Type", "application/json")])
            return [b'{"error": "not this BMC\'s system"}']
        rewrite = None
        if environ["REQUEST_METHOD"] == "GET" and path.rstrip("/") == "/redfish/v1/Systems":
            environ = {**environ, "PATH_INFO": "/redfish/v1/"}  # the cheap service root checks the credentials

            def rewrite(doc):
                doc.clear()
                doc.update({"@odata.id": "/redfish/v1/Systems", "Members@odata.count": 1,
                            "Members": [{"@odata.id": f"/redfish/v1/Systems/{me['uuid']}"}]})
        elif environ["REQUEST_METHOD"] == "GET" and path.rstrip("/") == f"/redfish/v1/Systems/{me['uuid']}":
            def rewrite(doc):
                doc["SerialNumber"] = me["serial"]
        if rewrite is not None:
            captured: dict = {}

            def keep(status, headers, exc_info=None):
                captured["status"], captured["headers"] = status, headers

            body = b"".join(inner(environ, keep))
            if captured["status"].startswith("200"):
                doc = json.loads(body)
                rewrite(doc)
                body = json.dumps(doc).encode()
            headers = [(k, v) for k, v in captured["headers"] if k.lower() != "content-length"]
            start_response(captured["status"], [*headers, ("Content-Length", str(len(body)))])
            return [body]
        return inner(environ, start_response)

    run_simple("0.0.0.0", port, wsgi, threaded=True)


if __name__ == "__main__":
    main()
