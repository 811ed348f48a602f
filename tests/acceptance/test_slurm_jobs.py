"""The burn-in's Slurm batch scripts read by the real Slurm 22.05: a private slurmctld on 127.0.0.1 (its own
ports, auth/none, the plan's GPU nodes with 64 CPUs and 8 GPUs each, as powered-down cloud nodes) and
`sbatch --test-only` for every round, NCCL and DCGM script, submitted from the jobs folder as documented. sbatch
parses every #SBATCH line and slurmctld decides the job could start on the named nodes; a directive it rejects,
a node list it cannot resolve or a node count the list does not match fails the test. The controller is stopped
by its PID."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from railforge.acceptance.document import build
from railforge.acceptance.jobs import write
from tests.conftest import plan_of, require_tool
from tests.render import test_slurmctld as ctl

PORT, SLURMD_PORT = 16837, 16838


@pytest.mark.root
def test_sbatch_accepts_every_job(built, tmp_path: Path, monkeypatch) -> None:
    require_tool("slurmctld", "scontrol", "sbatch")
    monkeypatch.setattr(ctl, "PORT", PORT)
    monkeypatch.setattr(ctl, "SLURMD_PORT", SLURMD_PORT)
    assert ctl._port_free(), f"127.0.0.1:{PORT} is taken"
    plan = plan_of("roce-a800-4nic")
    conf = ctl.slurm_conf(tmp_path, plan)
    # CLOUD nodes with no-op power programs: no slurmd runs here, and slurmctld plans jobs on powered-down
    # cloud nodes (UNKNOWN nodes without slurmd it refuses: "Requested node configuration is not available")
    text = conf.read_text().replace("CPUs=1 State=UNKNOWN", "CPUs=64 Gres=gpu:8 State=CLOUD")
    conf.write_text("GresTypes=gpu\nResumeProgram=/bin/true\nSuspendProgram=/bin/true\nSuspendTime=600\n" + text)
    (tmp_path / "gres.conf").write_text("Name=gpu Count=8\n")
    (tmp_path / "topology.conf").write_text((built("roce-a800-4nic") / "slurm" / "topology.conf").read_text())
    acc = tmp_path / "acceptance"
    ap = build(plan)
    write(ap, acc)
    jobs = acc / "jobs"
    scripts = sorted((jobs / "slurm").glob("*.sbatch"))
    storage = [r["round"] for r in ap.doc["rounds"] if r["kind"] == "storage"]
    assert len(storage) == 3 and len(scripts) == 2 + 3 + 2 + 1 + 1  # rounds (compute, storage), NCCL, DCGM
    env = {**os.environ, "SLURM_CONF": str(conf)}
    proc = subprocess.Popen(["slurmctld", "-D", "-f", str(conf)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=env, cwd=tmp_path)
    try:
        for _ in range(300):
            assert proc.poll() is None, proc.stdout.read()
            if "UP" in subprocess.run(["scontrol", "ping"], capture_output=True, text=True, env=env).stdout:
                break
            subprocess.run(["sleep", "0.2"])
        for script in scripts:
            out = subprocess.run(["sbatch", "--test-only", f"slurm/{script.name}"], capture_output=True, text=True,
                                 env=env, cwd=jobs)
            assert out.returncode == 0 and "to start at" in out.stderr, f"{script.name}: {out.stderr}"
        bad = jobs / "slurm" / "bad.sbatch"
        bad.write_text((jobs / "slurm" / "round-01.sbatch").read_text().replace("--nodes=32", "--nodes=40"))
        out = subprocess.run(["sbatch", "--test-only", "slurm/bad.sbatch"], capture_output=True, text=True, env=env,
                             cwd=jobs)
        assert out.returncode != 0, "a node count the node list does not match must be refused"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
