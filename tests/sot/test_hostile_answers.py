"""`sot push` / `sot diff` against an HTTP server that answers like NetBox or Nautobot at first (a status with a
version) and then with well-formed but unexpected bodies: no `count`, a string `count`, a record that is not an object,
100,000 `[`, not JSON. A real NetBox or Nautobot never answers so, which is why this is a hand-made server on
loopback; each answer must end in one `error` line naming the product, the URL and what was wrong, exit 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli

TINY = ROOT / "tests" / "specs" / "tiny-roce.yaml"
ANSWERS = {
    "no-count": b'{"results": [], "next": null}',
    "string-count": b'{"count": "many", "results": [], "next": null}',
    "deep": b"[" * 100_000,
    "not-json": b"<html>proxy login</html>",
    "results-not-list": b'{"count": 1, "results": {"id": 1}, "next": null}',
    "record-not-object": b'{"count": 1, "results": [7], "next": null}',
    "list": b"[1, 2, 3]",
    "empty-object": b"{}",
}
NOT_A_LISTING = {"string-count", "results-not-list", "record-not-object", "list", "empty-object", "no-count"}
"""Well-formed JSON that is not a listing page: the error names the endpoint and what a listing is."""


class Fake(BaseHTTPRequestHandler):
    status: bytes = b""
    answer: bytes = b""

    def do_GET(self) -> None:  # noqa: N802
        body = self.status if self.path.rstrip("/").endswith("/status") else self.answer
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_PATCH = do_GET  # noqa: N815

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@pytest.fixture(scope="module")
def build(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("sot-hostile") / "generated"
    run_cli("build", str(TINY), "--out", str(out))
    return out


# A listing without a count is how NetBox pages by id: `diff` reads it as an empty NetBox (the site is missing), not as
# a hostile answer; `push` then gets the same listing back from a bulk create, which is one. Nautobot always counts.
CASES = [(c, a, p) for c in ("diff", "push") for a in sorted(ANSWERS) for p in ("netbox", "nautobot")
         if not (c == "diff" and a == "no-count" and p == "netbox")]


@pytest.mark.parametrize(("command", "answer", "product"), CASES)
def test_an_unexpected_answer_is_one_error_line(build: Path, tmp_path: Path, product: str, answer: str,
                                                command: str) -> None:
    handler = type("Handler", (Fake,), {"answer": ANSWERS[answer],
                                        "status": json.dumps({f"{product}-version": "4.7.3"}).encode()})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        (tmp_path / "token").write_text("0123456789abcdef0123456789abcdef01234567\n")
        url = f"http://127.0.0.1:{server.server_address[1]}"
        proc = subprocess.run([sys.executable, "-m", "railforge", "sot", command, str(build), f"--{product}", url,
                               "--token-file", str(tmp_path / "token")], capture_output=True, text=True,
                              cwd=ROOT, env={**os.environ, "COLUMNS": "300"}, timeout=120)
    finally:
        server.shutdown()
        server.server_close()
    err = proc.stderr.strip()
    assert proc.returncode == 2, (proc.returncode, proc.stdout, err)
    assert "Traceback" not in err and "internal error" not in err, err
    assert len(err.splitlines()) == 1 and err.startswith("error "), err
    assert url in err and "not what the" in err, err
    if answer in NOT_A_LISTING and not (answer == "no-count" and product == "netbox"):
        assert f"reading {url}/api/" in err and "expected a listing (an object with `results`" in err, err
        assert "Error:" not in err, err


GRAPHQL = {**ANSWERS, "data-not-lists": b'{"data": {"interfaces": {"id": 1}}}',
           "errors": b'{"errors": [{"message": "Cannot query field \'x\' on type \'InterfaceType\'."}]}'}


@pytest.mark.parametrize("answer", sorted(GRAPHQL))
def test_an_unexpected_graphql_answer_is_one_error(answer: str) -> None:
    """Nautobot's large classes are read through GraphQL: an answer that is not `{"data": {name: [objects]}}` is
    one SotError naming the GraphQL endpoint and what came instead, never a traceback or an empty listing."""
    import requests

    from railforge.sot.rest import Rest, SotError

    handler = type("Handler", (Fake,), {"answer": GRAPHQL[answer], "status": b"{}"})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with pytest.raises(SotError) as caught:
            Rest(requests.Session(), url, "Nautobot", workers=2, cursor=False).graphql_all(
                "interfaces", {"location": "x"}, "id name")
    finally:
        server.shutdown()
        server.server_close()
    err = str(caught.value)
    assert "\n" not in err and url in err and "graphql" in err, err
    if answer == "errors":
        assert "answered the query with an error: Cannot query field 'x'" in err, err
    elif answer not in ("deep", "not-json"):
        assert "expected a GraphQL answer (an object with `data`" in err and "not what the Nautobot API" in err, err
