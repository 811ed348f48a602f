"""Source-of-truth benchmark: `railforge sot push` of a bundled example into a real NetBox or Nautobot, first
push (every object created) and a no-op push (everything read back, nothing written), wall time and objects per
second.

    python benchmarks/bench_sot.py                          # NetBox: roce-a800-4nic, then dgx-h100-4su
    python benchmarks/bench_sot.py --nautobot roce-a800-4nic  # Nautobot (with nautobot-bgp-models)
    python benchmarks/bench_sot.py roce-16k-railplane       # the 16K example (58,559 cables): hours on 2 cores

Starts its own server (tests/helpers/sot_servers.py: PostgreSQL + Redis on loopback, cached venv and database)
and stops it at the end.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.helpers import sot_servers  # noqa: E402

DEFAULT = ("roce-a800-4nic", "dgx-h100-4su")


def rf(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "railforge", *args], capture_output=True, text=True, cwd=ROOT)


def measured(*args: str, work: Path) -> tuple[int, str, float, float]:
    """exit status, stdout+stderr, wall seconds, peak RSS in MiB of one `railforge` run."""
    log = work / "run.log"
    started = time.monotonic()
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "railforge", *args], stdout=out, stderr=subprocess.STDOUT,
                                cwd=ROOT)
        _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, log.read_text(), time.monotonic() - started, usage.ru_maxrss / 1024


def timed(server, folder: Path, token: Path, product: str, command: str, work: Path) -> tuple[float, float, int]:
    extra = ["--workers", "4"] if command == "push" else []
    rc, text, took, rss = measured("sot", command, str(folder), f"--{product}", server.url, "--token-file", str(token),
                                   *extra, work=work)
    if command == "diff":
        if rc != 0:
            raise SystemExit(f"diff after a push is not clean (exit {rc}): {text[-3000:]}")
        return took, rss, 0
    if rc != 0:
        raise SystemExit(f"push failed: {text[-3000:]}")
    return took, rss, int(re.search(r"wrote (\d+) objects", text).group(1))


def main(clusters: list[str], product: str = "netbox") -> None:
    with tempfile.TemporaryDirectory(prefix="rf-bench-sot-") as tmp:
        work = Path(tmp)
        start = sot_servers.start_nautobot if product == "nautobot" else sot_servers.start_netbox
        server = start(work / product)
        try:
            token = work / "token"
            token.write_text(server.token)
            for name in clusters:
                out = work / name
                built = rf("build", str(ROOT / "inventory" / name / "cluster.yaml"), "--out", str(out))
                if built.returncode != 0:
                    raise SystemExit(built.stderr)
                plan = json.loads((out / "plan.json").read_text())
                first, first_mb, written = timed(server, out, token, product, "push", work)
                again, again_mb, rewritten = timed(server, out, token, product, "push", work)
                diff, diff_mb, _ = timed(server, out, token, product, "diff", work)
                print(f"{product} {name}: {len(plan['devices'])} devices, {len(plan['links'])} cables; first push "
                      f"{written} objects in {first:.0f} s ({written / first:.0f}/s, client {first_mb:.0f} MiB); "
                      f"no-op push {rewritten} writes in {again:.0f} s (client {again_mb:.0f} MiB); diff in "
                      f"{diff:.0f} s (client {diff_mb:.0f} MiB)", flush=True)
        finally:
            server.stop()


if __name__ == "__main__":
    args = sys.argv[1:]
    chosen = "nautobot" if "--nautobot" in args else "netbox"
    names = [a for a in args if a != "--nautobot"]
    main(names or list(DEFAULT), chosen)
