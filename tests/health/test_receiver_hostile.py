"""The webhook receiver against clients that misbehave: a number past Python's 4,300-digit limit, a body shorter
than its Content-Length, a client that resets the connection. Each gets an answer or a closed connection and one
log line; the server keeps serving and prints no traceback."""

from __future__ import annotations

import http.client
import socket
import struct
import time
from pathlib import Path

import pytest

from railforge.health.receiver import Engine, ReceiverConfig
from railforge.health.slurm import Scontrol
from railforge.health.topology import HealthIndex
from railforge.health.webhook import WebhookError, parse_webhook
from tests.conftest import plan_of
from tests.health.alerts import alert, body
from tests.health.test_receiver import Running


@pytest.fixture
def running(tmp_path: Path):
    cfg = ReceiverConfig(state_dir=tmp_path / "state", dry_run=True, client_timeout=0.5)
    r = Running(Engine(HealthIndex.of(plan_of("roce-a800-4nic")), cfg, Scontrol("/nonexistent/scontrol"),
                       echo=lambda line: None))
    r.thread.start()
    yield r
    r.stop.set()
    r.thread.join(5)


def test_a_huge_integer_is_one_clear_error() -> None:
    with pytest.raises(WebhookError, match="a number of over 4,300 digits"):
        parse_webhook(b'{"version": "4", "groupKey": ' + b"9" * 5000 + b"}")


def test_huge_integer_lying_length_and_resets_leave_the_server_serving(running: Running, capfd) -> None:
    code, reply = running.post(b'{"version": "4", "groupKey": ' + b"9" * 5000 + b"}")
    assert code == 400 and "4,300 digits" in reply["error"]

    with socket.create_connection(("127.0.0.1", running.port()), timeout=10) as s:
        s.sendall(b"POST /alerts HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"version\"")
        started = time.monotonic()
        assert s.recv(100) == b""  # closed by the server's timeout, not held open
        assert time.monotonic() - started < 5

    for _ in range(5):
        s = socket.create_connection(("127.0.0.1", running.port()), timeout=10)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.sendall(b"POST /alerts HTTP/1.1\r\nHost: x\r\nContent-Length: 40\r\n\r\n{")
        s.close()  # RST: the server's next read or write fails

    code, _ = running.post(body(alert("RailforgeExporterDown", device="spine01")))
    assert code == 200
    actions = [a["action"] for a in running.actions()]
    assert "connection-dropped" in actions
    assert "Traceback" not in capfd.readouterr().err
    conn = http.client.HTTPConnection("127.0.0.1", running.port(), timeout=10)
    conn.request("GET", "/healthz")
    assert conn.getresponse().status == 200
