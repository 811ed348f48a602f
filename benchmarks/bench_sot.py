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


def timed_push(server, folder: Path, token: Path, product: str) -> tuple[float, int]:
    started = time.monotonic()
    proc = rf("sot", "push", str(folder), f"--{product}", server.url, "--token-file", str(token), "--workers", "4")
    took = time.monotonic() - started
    if proc.returncode != 0:
        raise SystemExit(f"push failed: {proc.stderr}")
    return took, int(re.search(r"wrote (\d+) objects", proc.stdout).group(1))


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
                first, written = timed_push(server, out, token, product)
                again, rewritten = timed_push(server, out, token, product)
                print(f"{product} {name}: {len(plan['devices'])} devices, {len(plan['links'])} cables; first push "
                      f"{written} objects in {first:.0f} s ({written / first:.0f}/s); no-op push {rewritten} writes in "
                      f"{again:.0f} s", flush=True)
        finally:
            server.stop()


if __name__ == "__main__":
    args = sys.argv[1:]
    chosen = "nautobot" if "--nautobot" in args else "netbox"
    names = [a for a in args if a != "--nautobot"]
    main(names or list(DEFAULT), chosen)
