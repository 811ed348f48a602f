"""The every-command fuzz (test_every_command.py), extended to what the commands serve and to what they read from
the other end of a connection.

Servers: the health webhook receiver (`health serve`) and the boot report-in endpoint (`boot report-in`) get
fuzzed bodies (`tests.helpers.hostile.mutated` of a valid one) framed honestly, with a Content-Length longer or
shorter than the body, without one, or followed by a reset. Each answer is an HTTP status from the documented
set or a closed connection within the client timeout; afterwards the server still answers, and nothing printed
a traceback.

Remote answers: `sot diff` (NetBox and Nautobot) and `bmc inventory` (Redfish) against a loopback server that
answers the first requests correctly and then with a fuzzed body. Each run ends with exit 0, 1 or 2 and no
internal error or traceback. A real NetBox, Nautobot or BMC never answers so; the live tests use the real ones.

RAILFORGE_CLI_FUZZ_EXAMPLES sets the cases per target (default 10).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import struct
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from railforge.baremetal.hostmacs import read_host_macs
from railforge.baremetal.identity import identities
from railforge.baremetal.register import serve as serve_report_in
from railforge.baremetal.reportkey import create_key, load_key
from railforge.cli.main import app
from railforge.health.receiver import Engine, ReceiverConfig
from railforge.health.slurm import Scontrol
from railforge.health.topology import HealthIndex
from railforge.plan.io import read_plan
from tests.baremetal.conftest import fill_host_macs
from tests.conftest import ROOT, run_cli
from tests.health.alerts import alert, body
from tests.health.test_receiver import Running
from tests.helpers.hostile import mutated

EXAMPLES = int(os.environ.get("RAILFORGE_CLI_FUZZ_EXAMPLES", "10"))
TINY = ROOT / "tests" / "specs" / "tiny-roce.yaml"
fuzz = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck))
FRAMING = st.sampled_from(["exact", "longer", "shorter", "none", "reset"])


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("server-fuzz") / "cluster"
    base.mkdir()
    shutil.copy(TINY, base / "cluster.yaml")
    run_cli("build", str(base / "cluster.yaml"))
    fill_host_macs(base / "generated" / "host-macs.csv", base / "host-macs.csv")
    return base


def exchange(port: int, path: str, data: bytes, framing: str) -> bytes:
    """One raw HTTP POST; the server's answer, or b"" when it closed the connection."""
    length = {"exact": len(data), "longer": len(data) + 50, "shorter": max(0, len(data) - 5)}.get(framing)
    head = f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    head += f"Content-Length: {length}\r\n" if length is not None else ""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(head.encode() + b"\r\n" + data)
        if framing == "reset":
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            return b""
        answer = b""
        try:
            while chunk := s.recv(65536):
                answer += chunk
        except ConnectionResetError:
            pass
        return answer


def check_answer(answer: bytes, allowed: set[int]) -> None:
    if answer:
        assert answer.startswith(b"HTTP/1."), answer[:200]
        assert int(answer.split()[1]) in allowed, answer[:300]


@pytest.fixture
def webhook(cluster: Path, tmp_path: Path):
    cfg = ReceiverConfig(state_dir=tmp_path / "state", dry_run=True, client_timeout=0.5, rate_per_s=1000, burst=1000)
    r = Running(Engine(HealthIndex.of(read_plan(cluster / "generated" / "plan.json")), cfg,
                       Scontrol("/nonexistent/scontrol"), echo=lambda line: None))
    r.thread.start()
    yield r
    r.stop.set()
    r.thread.join(5)


SEED_ALERT = body(alert("RailforgeExporterDown", device="spine01"))


def test_fuzz_webhook_receiver(webhook: Running, capfd) -> None:
    port = webhook.port()

    @fuzz
    @given(data=mutated(SEED_ALERT), framing=FRAMING)
    def case(data: bytes, framing: str) -> None:
        check_answer(exchange(port, "/alerts", data, framing), {200, 400, 411, 413, 429})

    case()
    assert exchange(port, "/alerts", SEED_ALERT, "exact").split()[1] == b"200"
    assert "Traceback" not in capfd.readouterr().err


def test_fuzz_report_in(cluster: Path, tmp_path: Path, capfd) -> None:
    plan = read_plan(cluster / "generated" / "plan.json")
    ids = identities(plan, read_host_macs(cluster / "host-macs.csv", plan))
    create_key(tmp_path / "report-in.key")
    server = serve_report_in(ids, tmp_path / "state", "127.0.0.1", 0, load_key(tmp_path / "report-in.key"))
    server.RequestHandlerClass.timeout = 0.5
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    i = next(x for x in ids if x.boot_mac)
    seed = json.dumps({"host": i.host, "mac": i.boot_mac, "addresses": [i.boot_address], "serial": i.serial}).encode()
    try:
        @fuzz
        @given(data=mutated(seed), framing=FRAMING)
        def case(data: bytes, framing: str) -> None:
            # no token: an intact report is refused (401/403), a broken one is a 4xx of its own, never a traceback
            check_answer(exchange(port, "/register", data, framing), {200, 400, 401, 403, 411, 413, 429})

        case()
        for _ in range(5):  # a reset right after the headers: the server's read fails
            exchange(port, "/register", b"{", "reset")
    finally:
        server.shutdown()
        server.server_close()
    assert "Traceback" not in capfd.readouterr().err


class Remote(BaseHTTPRequestHandler):
    """Answers GETs from `answers` by path (the longest matching prefix), the fuzzed body at `fuzzed_path`."""

    answers: dict[str, bytes] = {}
    fuzzed_path = ""
    fuzzed = b""

    def do_GET(self) -> None:  # noqa: N802
        path = self.path.split("?")[0].rstrip("/")
        data = self.fuzzed if path == self.fuzzed_path else next(
            (v for k, v in sorted(self.answers.items(), key=lambda kv: -len(kv[0])) if path.startswith(k)), b"{}")
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_POST = do_PATCH = do_GET  # noqa: N815

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


def remote(answers: dict[str, bytes], fuzzed_path: str, fuzzed: bytes) -> ThreadingHTTPServer:
    handler = type("Handler", (Remote,), {"answers": answers, "fuzzed_path": fuzzed_path, "fuzzed": fuzzed})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def run_in_process(args: list[str], env: dict[str, str]) -> None:
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200", **env})
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code in (0, 1, 2), (result.exit_code, result.output)
    assert "Traceback" not in result.output and "internal error" not in result.output, result.output


EMPTY = b'{"count": 0, "results": [], "next": null, "previous": null}'
SOT = {
    "netbox": ({"/api/status": b'{"netbox-version": "4.7.3"}', "/api": EMPTY},
               ["/api/status", "/api/dcim/sites", "/api/dcim/manufacturers", "/api/extras/tags"]),
    "nautobot": ({"/api/status": b'{"nautobot-version": "3.2.7"}', "/api": EMPTY},
                 ["/api/status", "/api/dcim/locations", "/api/extras/tags", "/api/dcim/location-types"]),
}


@pytest.mark.parametrize("product", sorted(SOT))
def test_fuzz_sot_answers(cluster: Path, tmp_path: Path, product: str) -> None:
    answers, paths = SOT[product]
    (tmp_path / "token").write_text("0123456789abcdef0123456789abcdef01234567\n")

    @fuzz
    @given(path=st.sampled_from(paths), data=st.data())
    def case(path: str, data: st.DataObject) -> None:
        fuzzed = data.draw(mutated(answers["/api/status" if path == "/api/status" else "/api"]))
        server = remote(answers, path, fuzzed)
        try:
            run_in_process(["sot", "diff", str(cluster / "generated"), f"--{product}",
                            f"http://127.0.0.1:{server.server_address[1]}", "--token-file", str(tmp_path / "token")],
                           {})
        finally:
            server.shutdown()
            server.server_close()

    case()


def redfish_answers(serial: str, mac: str) -> dict[str, bytes]:
    systems = "/redfish/v1/Systems"
    return {systems: json.dumps({"Members": [{"@odata.id": f"{systems}/1"}]}).encode(),
            f"{systems}/1": json.dumps({"SerialNumber": serial, "PowerState": "On",
                                        "EthernetInterfaces": {"@odata.id": f"{systems}/1/EthernetInterfaces"}}
                                       ).encode(),
            f"{systems}/1/EthernetInterfaces": json.dumps(
                {"Members": [{"@odata.id": f"{systems}/1/EthernetInterfaces/1"}]}).encode(),
            f"{systems}/1/EthernetInterfaces/1": json.dumps({"PermanentMACAddress": mac}).encode()}


def test_fuzz_redfish_answers(cluster: Path) -> None:
    plan = read_plan(cluster / "generated" / "plan.json")
    i = next(x for x in identities(plan, read_host_macs(cluster / "host-macs.csv", plan)) if x.boot_mac)
    answers = redfish_answers(i.serial, i.boot_mac)

    @fuzz
    @given(path=st.sampled_from(sorted(answers)), data=st.data())
    def case(path: str, data: st.DataObject) -> None:
        server = remote(answers, path, data.draw(mutated(answers[path])))
        try:
            run_in_process(["bmc", "inventory", str(cluster), "--hosts", i.host, "--retries", "0", "--timeout", "5",
                            "--url", f"http://127.0.0.1:{server.server_address[1]}"],
                           {"RAILFORGE_BMC_USERNAME": "admin", "RAILFORGE_BMC_PASSWORD": "secret"})
        finally:
            server.shutdown()
            server.server_close()

    case()
