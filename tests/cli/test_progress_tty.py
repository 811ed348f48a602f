"""The build's progress display on a real pseudo-terminal, with the default parallel rendering (`--jobs 2`):
a bar that counts every render job (the parent's and the forked worker's) to the end, and a spinner while
planning. Off a terminal the build stays quiet."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys

from railforge.cli.main import PARALLEL_MIN_DEVICES
from railforge.cli.parallel import jobs_for
from railforge.render import families
from tests.conftest import ROOT, example_spec, plan_of

FAMILIES = "sonic,netbox,cabling"


def _run_on_pty(args: list[str], timeout: float = 300) -> tuple[int, str]:
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "railforge", *args], stdin=slave, stdout=slave, stderr=slave,
                            cwd=ROOT, env={**os.environ, "COLUMNS": "120", "TERM": "xterm"})
    os.close(slave)
    chunks = []
    try:
        while True:
            ready, _, _ = select.select([master], [], [], timeout)
            if not ready:
                proc.kill()
                raise AssertionError("no output from the build for a long time")
            try:
                data = os.read(master, 1 << 16)
            except OSError:  # EIO: the child side closed
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(master)
    return proc.wait(timeout=60), b"".join(chunks).decode(errors="replace")


def test_parallel_build_shows_progress_on_a_terminal(tmp_path):
    plan = plan_of("roce-16k-railplane")
    assert len(plan.devices) >= PARALLEL_MIN_DEVICES  # the parallel path, not the serial one
    total = len(jobs_for([f for f in families() if f.name in FAMILIES.split(",")], 2))
    rc, screen = _run_on_pty(["build", str(example_spec("roce-16k-railplane")), "--out", str(tmp_path / "out"),
                              "--jobs", "2", "--only", FAMILIES])
    assert rc == 0, screen
    assert "planning" in screen
    counts = [int(m) for m in re.findall(rf"\b(\d+)/{total}\b", screen)]
    assert counts and max(counts) == total, screen[-2000:]
    assert {"sonic", "netbox", "cabling"} <= set(re.findall(r"rendered ([a-z]+)", screen))


def test_quiet_off_a_terminal(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "railforge", "build", str(example_spec("roce-16k-railplane")),
                           "--out", str(tmp_path / "out"), "--jobs", "2", "--only", "netbox"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "rendered" not in proc.stderr and "planning" not in proc.stderr
    assert "\nwrote " in "\n" + proc.stderr
