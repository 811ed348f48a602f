"""Two switches as network namespaces running real lldpd, wired by veth pairs named as the plan names the ports:
the LLDP tables `collect-lldp.sh` fetches, for the burn-in's LLDP check. lldpd is stopped by its PID and the
namespaces are deleted however the test ends."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

TX_INTERVAL_S = 1
WAIT_S = 30


def sh(*cmd: str) -> None:
    subprocess.run(list(cmd), check=True, capture_output=True, text=True)


class LldpPair:
    """`prefix` names the namespaces and the short folder under /tmp that holds lldpd's sockets (with a pytest
    tmp_path, 91 characters to the socket, lldpcli printed nothing)."""

    def __init__(self, prefix: str, a: str, b: str):
        self.work = Path(tempfile.mkdtemp(prefix=f"{prefix}lldp-", dir="/tmp"))
        self.work.chmod(0o755)  # lldpcli drops root for lldpd's user: it must reach the socket
        self.devices = (a, b)
        self.ns = {a: f"{prefix}{a}", b: f"{prefix}{b}"}
        self.ports: dict[str, list[str]] = {a: [], b: []}
        self.procs: dict[str, subprocess.Popen] = {}

    def __enter__(self) -> LldpPair:
        for ns in self.ns.values():
            sh("ip", "netns", "add", ns)
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        return self

    def __exit__(self, *exc) -> None:
        self._stop()
        for ns in self.ns.values():
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        shutil.rmtree(self.work, ignore_errors=True)

    def wire(self, pairs: list[tuple[str, str]]) -> None:
        """Cable port pa of the first switch to port pb of the second for each pair (earlier cables removed)."""
        a, b = self.devices
        self._stop()
        for port in self.ports[a]:
            subprocess.run(["ip", "-n", self.ns[a], "link", "del", port], capture_output=True)
        self.ports = {a: [pa for pa, _ in pairs], b: [pb for _, pb in pairs]}
        for pa, pb in pairs:
            sh("ip", "link", "add", pa, "netns", self.ns[a], "type", "veth", "peer", "name", pb, "netns", self.ns[b])
            sh("ip", "-n", self.ns[a], "link", "set", pa, "up")
            sh("ip", "-n", self.ns[b], "link", "set", pb, "up")
        for dev in self.devices:
            d = self.work / dev
            d.mkdir(parents=True, exist_ok=True)
            pattern = ",".join(sorted(self.ports[dev]))
            (d / "lldpd.conf").write_text(f"configure system hostname {dev}\nconfigure system interface pattern "
                                          f"{pattern}\nconfigure lldp portidsubtype ifname\n"
                                          f"configure lldp tx-interval {TX_INTERVAL_S}\n")
            self.procs[dev] = subprocess.Popen(
                ["ip", "netns", "exec", self.ns[dev], "lldpd", "-d", "-u", str(d / "lldpd.socket"), "-I", pattern,
                 "-O", str(d / "lldpd.conf")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def _table(self, dev: str) -> str:
        return subprocess.run(["lldpcli", "-u", str(self.work / dev / "lldpd.socket"), "-f", "json", "show",
                               "neighbors", "details"], capture_output=True, text=True).stdout

    def collect(self, folder: Path) -> Path:
        """Each switch's `lldpcli -f json show neighbors details` once it sees a neighbour on every port."""
        folder.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + WAIT_S
        for dev in self.devices:
            while True:
                text = self._table(dev)
                with contextlib.suppress(ValueError):
                    seen = json.loads(text).get("lldp", {})
                    ifs = seen.get("interface", []) if isinstance(seen, dict) else []
                    ifs = [ifs] if isinstance(ifs, dict) else ifs
                    if len({k for item in ifs for k in item}) == len(self.ports[dev]):
                        break
                if time.monotonic() > deadline:
                    raise AssertionError(f"{dev}: lldpd saw no neighbour on every port in {WAIT_S} s: {text[:300]}")
                time.sleep(0.5)
            (folder / f"{dev}.json").write_text(text)
        return folder

    def _stop(self) -> None:
        for proc in self.procs.values():
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.procs = {}
