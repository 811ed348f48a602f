"""Prometheus, Alertmanager and exporters around a running FRR lab, for the live health tests.

Why hand-written: nothing starts these daemons without systemd, and the exporters must run inside the lab's
network namespaces while Prometheus (root namespace, loopback) scrapes them. The trick is systemd's socket
activation, which both exporters support (`--web.systemd-socket`): the listening socket is opened here on
127.0.0.1 and handed to the exporter as fd 3 (LISTEN_FDS=1, LISTEN_PID = its pid) as it enters the namespace
with `ip netns exec` (which also remounts /sys, so node-exporter sees the namespace's interfaces).

What runs (all stopped by PID in `stop()`):
  - prometheus-frr-exporter per lab switch, reading that switch's FRR sockets in the lab's run folder;
  - prometheus-node-exporter per lab host (netclass over netlink; netdev and ethtool for the dashboards' link-error
    and PFC panels; textfile for the node check's findings);
  - one node-exporter in the root namespace serving the plan's expected.prom (textfile collector only);
  - prometheus (5 s scrape and rule evaluation) with the generated rules, and prometheus-alertmanager with
    the generated routing, its webhook pointed at the receiver's URL.

`scrape_pages` is the other way in: Prometheus reads the generated `health/targets/*.json` itself (file_sd) and
scrapes each target's page from a loopback HTTP server here (relabelled to it, `instance` kept as generated), so
a whole cluster's targets can be scraped without one exporter process per device.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from datetime import UTC
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

TOOLS = ("prometheus", "promtool", "prometheus-alertmanager", "prometheus-frr-exporter", "prometheus-node-exporter")


def _seconds(rfc3339: str) -> float:
    """A Prometheus API time (`2026-11-28T10:19:03.897123456Z`, nanoseconds) as Unix seconds."""
    from datetime import datetime

    whole, _, frac = rfc3339.rstrip("Z").partition(".")
    return datetime.fromisoformat(whole).replace(tzinfo=UTC).timestamp() + float(f"0.{frac or 0}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Stack:
    workdir: Path
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    targets: dict[str, list[tuple[str, int]]] = field(default_factory=dict)  # job -> [(device, port)]
    prom_port: int = 0
    am_port: int = 0
    servers: list[ThreadingHTTPServer] = field(default_factory=list)
    pages: dict[str, bytes] = field(default_factory=dict)  # scrape_pages: path -> page, replace one to change it

    def _log(self, name: str):
        return (self.workdir / "logs" / f"{name}.log").open("wb")

    def activated(self, name: str, argv: list[str], ns: str | None) -> int:
        """Start `argv` (an exporter taking --web.systemd-socket) on a loopback socket opened here; its port."""
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)
        fd, port = sock.fileno(), sock.getsockname()[1]
        move = "" if fd == 3 else f"exec 3<&{fd} {fd}<&-; "
        enter = f"ip netns exec {ns} " if ns else ""
        script = f'export LISTEN_PID=$$ LISTEN_FDS=1; {move}exec {enter}"$@"'
        with self._log(name) as log:
            self.procs[name] = subprocess.Popen(["bash", "-c", script, "bash", *argv, "--web.systemd-socket"],
                                                pass_fds=(fd,), stdout=log, stderr=subprocess.STDOUT,
                                                start_new_session=True)
        sock.close()
        return port

    def daemon(self, name: str, argv: list[str]) -> None:
        with self._log(name) as log:
            self.procs[name] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def stop(self) -> None:
        for server in self.servers:
            server.shutdown()
            server.server_close()
        for proc in self.procs.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        end = time.monotonic() + 10
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)

    # ---- queries ------------------------------------------------------------------------------------------------
    def _get(self, port: int, path: str) -> dict:
        # 60 s: a query over the 16K example's 190,000 series took over 10 s in CI beside four other stages
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=60) as resp:
            return json.loads(resp.read())

    def query(self, expr: str) -> list[dict]:
        return self._get(self.prom_port, "/api/v1/query?" + urllib.parse.urlencode({"query": expr}))["data"]["result"]

    def prom_alerts(self, state: str = "firing") -> list[dict]:
        return [a for a in self._get(self.prom_port, "/api/v1/alerts")["data"]["alerts"] if a["state"] == state]

    def am_alerts(self) -> list[dict]:
        return self._get(self.am_port, "/api/v2/alerts?active=true&silenced=false&inhibited=false")

    def _evaluated_twice(self, groups: list[dict], since: float) -> bool:
        """Every rule group evaluated at least two intervals after `since` (Prometheus's time, in seconds)."""
        return all(_seconds(g["lastEvaluation"]) - since >= 2 * g["interval"] for g in groups)

    def targets_up(self) -> tuple[int, int]:
        active = self._get(self.prom_port, "/api/v1/targets")["data"]["activeTargets"]
        return sum(t["health"] == "up" for t in active), len(active)


def start(workdir: Path, switches: dict[str, Path], hosts: dict[str, str], expected_prom: str, rules: str,
          alertmanager_yml: str, scrape_s: int = 5) -> Stack:
    """`switches`: device -> its FRR socket folder; `hosts`: device -> its namespace. Returns when every target
    is up (or raises with the logs' tails)."""
    for sub in ("logs", "textfile/expected", "tsdb", "am"):
        (workdir / sub).mkdir(parents=True, exist_ok=True)
    (workdir / "textfile/expected/expected.prom").write_text(expected_prom)
    (workdir / "rules.yml").write_text(rules)
    stack = Stack(workdir)
    try:
        frr = [(dev, stack.activated(f"frr-{dev}", ["prometheus-frr-exporter", f"--frr.socket.dir-path={path}",
                                                    "--no-collector.ospf"], None))
               for dev, path in sorted(switches.items())]
        node = []
        for dev, ns in sorted(hosts.items()):
            (workdir / "textfile" / dev).mkdir(parents=True, exist_ok=True)
            node.append((dev, stack.activated(f"node-{dev}", [
                "prometheus-node-exporter", "--collector.disable-defaults", "--collector.netclass",
                "--collector.netclass.netlink", "--collector.netdev", "--collector.ethtool", "--collector.textfile",
                f"--collector.textfile.directory={workdir / 'textfile' / dev}"], ns)))
        expected = stack.activated("expected", [
            "prometheus-node-exporter", "--collector.disable-defaults", "--collector.textfile",
            f"--collector.textfile.directory={workdir / 'textfile/expected'}"], None)
        stack.targets = {"frr": frr, "node": node}
        stack.am_port, stack.prom_port = free_port(), free_port()
        (workdir / "alertmanager.yml").write_text(alertmanager_yml)
        stack.daemon("alertmanager", ["prometheus-alertmanager", f"--config.file={workdir / 'alertmanager.yml'}",
                                      f"--storage.path={workdir / 'am'}", "--cluster.listen-address=",
                                      f"--web.listen-address=127.0.0.1:{stack.am_port}"])

        def static(job: str) -> list[dict]:
            return [{"targets": [f"127.0.0.1:{port}"], "labels": {"device": dev}} for dev, port in stack.targets[job]]

        config = {
            "global": {"scrape_interval": f"{scrape_s}s", "evaluation_interval": f"{scrape_s}s",
                       "scrape_timeout": f"{max(1, scrape_s - 1)}s"},
            "rule_files": [str(workdir / "rules.yml")],
            "alerting": {"alertmanagers": [{"static_configs": [{"targets": [f"127.0.0.1:{stack.am_port}"]}]}]},
            "scrape_configs": [
                {"job_name": "railforge-expected", "honor_labels": True,
                 "static_configs": [{"targets": [f"127.0.0.1:{expected}"]}]},
                {"job_name": "frr", "static_configs": static("frr")},
                {"job_name": "node", "static_configs": static("node")},
            ],
        }
        (workdir / "prometheus.yml").write_text(json.dumps(config, indent=1))
        check = subprocess.run(["promtool", "check", "config", str(workdir / "prometheus.yml")], capture_output=True,
                               text=True)
        if check.returncode != 0:
            raise RuntimeError(f"promtool check config: {check.stdout}{check.stderr}")
        stack.daemon("prometheus", ["prometheus", f"--config.file={workdir / 'prometheus.yml'}",
                                    f"--storage.tsdb.path={workdir / 'tsdb'}",
                                    f"--web.listen-address=127.0.0.1:{stack.prom_port}",
                                    "--storage.tsdb.retention.time=2h", "--rules.alert.resend-delay=1s"])
        want = len(frr) + len(node) + 1
        deadline = time.monotonic() + 90
        while True:
            with contextlib.suppress(OSError, KeyError, ValueError):
                up, total = stack.targets_up()
                if up == total == want:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError("targets not up in 90 s:\n" + tails(workdir))
            time.sleep(1)
        return stack
    except BaseException:
        stack.stop()
        raise


def tails(workdir: Path, lines: int = 8) -> str:
    out = []
    for log in sorted((workdir / "logs").glob("*.log")):
        text = log.read_text(errors="replace").splitlines()[-lines:]
        out.append(f"== {log.name}\n" + "\n".join(text))
    return "\n".join(out)


def serve_pages(stack: Stack, pages: dict[str, bytes]) -> int:
    """A loopback HTTP server answering GET <path> with pages[path] (text exposition format); its port."""
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: Prometheus scrapes thousands of targets through a few connections

        def do_GET(self) -> None:  # noqa: N802
            body = pages.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body or b"")))
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    stack.servers.append(server)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True).start()
    return server.server_address[1]


def scrape_pages(workdir: Path, health: Path, pages: dict[str, dict[str, str]], expected: str, rules: str,
                 scrape_s: int = 10, timeout: float = 600) -> Stack:
    """Prometheus with `rules`, scraping every target of the generated `health/targets/<job>.json` (file_sd, as a
    site configures it) from `pages[job][device]` (a device without a page does not answer: 404), and the expected
    state with honor_labels. Returns once every target has been scraped and the rules evaluated twice since (or
    raises)."""
    for sub in ("logs", "tsdb"):
        (workdir / sub).mkdir(parents=True, exist_ok=True)
    (workdir / "rules.yml").write_text(rules)
    stack = Stack(workdir)
    try:
        served = {f"/{job}/{device}": text.encode() for job, by_device in pages.items() for device, text in
                  by_device.items()}
        stack.pages = {"/expected": expected.encode(), **served}
        port = serve_pages(stack, stack.pages)
        jobs = [{"job_name": "railforge-expected", "honor_labels": True, "metrics_path": "/expected",
                 "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}]
        for job in sorted(pages):
            jobs.append({"job_name": job, "file_sd_configs": [{"files": [str(health / "targets" / f"{job}.json")]}],
                         "relabel_configs": [
                             {"source_labels": ["__address__"], "target_label": "instance"},
                             {"source_labels": ["device"], "target_label": "__metrics_path__",
                              "replacement": f"/{job}/$1"},
                             {"target_label": "__address__", "replacement": f"127.0.0.1:{port}"}]})
        stack.prom_port = free_port()
        config = {"global": {"scrape_interval": f"{scrape_s}s", "evaluation_interval": f"{scrape_s}s",
                             "scrape_timeout": f"{max(1, scrape_s - 1)}s"},
                  "rule_files": [str(workdir / "rules.yml")], "scrape_configs": jobs}
        (workdir / "prometheus.yml").write_text(json.dumps(config, indent=1))
        check = subprocess.run(["promtool", "check", "config", str(workdir / "prometheus.yml")], capture_output=True,
                               text=True)
        if check.returncode != 0:
            raise RuntimeError(f"promtool check config: {check.stdout}{check.stderr}")
        stack.daemon("prometheus", ["prometheus", f"--config.file={workdir / 'prometheus.yml'}",
                                    f"--storage.tsdb.path={workdir / 'tsdb'}",
                                    f"--web.listen-address=127.0.0.1:{stack.prom_port}",
                                    "--storage.tsdb.retention.time=2h"])
        want = 1 + sum(len(json.loads((health / "targets" / f"{job}.json").read_text())) for job in pages)
        deadline = time.monotonic() + timeout
        scraped_at = None
        while True:
            with contextlib.suppress(OSError, KeyError, ValueError, IndexError):
                if scraped_at is None:
                    if stack.query(f"count(up) == {want}"):
                        scraped_at = stack._get(stack.prom_port, "/api/v1/query?query=time()")["data"]["result"][1]
                else:
                    groups = stack._get(stack.prom_port, "/api/v1/rules")["data"]["groups"]
                    if groups and stack._evaluated_twice(groups, float(scraped_at)):
                        return stack
            if time.monotonic() > deadline:
                got = stack.query("count(up)") if stack.prom_port else []
                raise RuntimeError(f"{want} targets not scraped and evaluated in {timeout:.0f} s ({got}):\n"
                                   + tails(workdir))
            time.sleep(2)
    except BaseException:
        stack.stop()
        raise
