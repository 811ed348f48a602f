"""The node check Slurm runs drains its node only under the cluster's drained-share cap, against a real slurmctld.

A controller-only Slurm (tests/helpers/slurm_cluster.py with slurmd=False: munge, slurmdbd, slurmctld from the
generated slurm.conf of tests/specs/health-roce.yaml, 8 nodes) answers the check's own `scontrol` calls. Each
check fails for real (no `ip` on its PATH) with `--drain --max-drain-share 0.25`: 2 of 8 nodes may be drained.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from railforge.health.nodecheck import drain_refusal
from tests.conftest import ROOT, require_tool
from tests.helpers.slurm_cluster import TOOLS, SlurmCluster, SlurmClusterConfig, build_slurm_files

SPEC = ROOT / "tests" / "specs" / "health-roce.yaml"
PORTS = {"prefix": "i38h", "subnet": "10.238.0.0/24", "slurmctld_port": 38817, "slurmd_port": 38818,
         "slurmdbd_port": 38819, "mariadb_port": 38306}


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    require_tool(*TOOLS)
    tmp = tmp_path_factory.mktemp("nodecheck-cap")
    cluster = SlurmCluster(build_slurm_files(SPEC, tmp / "out"), tmp / "slurm", SlurmClusterConfig(**PORTS))
    cluster.start(slurmd=False)
    try:
        yield cluster
    finally:
        cluster.stop()


def _check(slurm: SlurmCluster, node: str, tmp: Path) -> subprocess.CompletedProcess:
    """The node check as slurmd runs it on `node`, failing: its PATH has scontrol and nothing else."""
    hv = tmp / "hv.json"
    hv.write_text(json.dumps({"railforge_rails": [{
        "rail": 0, "ifname": "rail0", "speed_mbps": 200000, "address": "100.64.0.2/26",
        "leaf": "su001-leaf-r0", "leaf_port": "Ethernet0", "cable": "CMP-000001"}]}))
    bin_dir = tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    if not (bin_dir / "scontrol").exists():
        (bin_dir / "scontrol").symlink_to(subprocess.run(["which", "scontrol"], capture_output=True, text=True,
                                                         check=True).stdout.strip())
    env = {"PATH": str(bin_dir), "PYTHONPATH": str(ROOT), "SLURM_CONF": slurm.env["SLURM_CONF"]}
    return subprocess.run([sys.executable, "-m", "railforge.health.nodecheck", "--host-vars", str(hv), "--gpus", "0",
                           "--skip", "lldp,bond,xid,peermem", "--drain", "--node-name", node,
                           "--max-drain-share", "0.25"], capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env=env)


def _drained(slurm: SlurmCluster) -> list[str]:
    return sorted(n for n in slurm.nodes if "DRAIN" in slurm.node(n)["State"])


@pytest.mark.slow
def test_a_check_failing_everywhere_drains_no_more_than_the_cap(slurm: SlurmCluster, tmp_path: Path) -> None:
    nodes = sorted(slurm.nodes)
    assert len(nodes) == 8 and _drained(slurm) == []
    slurm.scontrol("update", f"NodeName={nodes[7]}", "State=DRAIN", "Reason=a human's")
    first = _check(slurm, nodes[0], tmp_path)
    assert first.returncode == 1 and first.stderr == "", first.stderr
    assert _drained(slurm) == [nodes[0], nodes[7]]
    assert slurm.node(nodes[0])["Reason"].startswith("railforge-node-health: network:")
    for node in nodes[1:4]:
        refused = _check(slurm, node, tmp_path)
        assert refused.returncode == 1  # the findings still fail the check
        assert refused.stderr == (f"error: drain {node}: not drained: 2 of 8 nodes are drained already and "
                                  "--max-drain-share 0.25 allows 2: a human must decide\n")
    assert _drained(slurm) == [nodes[0], nodes[7]]


def test_the_cap_counts_every_drain_state() -> None:
    lines = "\n".join(f"NodeName=n{i} Arch=x86_64 State={s} Reason=x" for i, s in enumerate(
        ["IDLE", "IDLE+DRAIN", "MIXED+DRAIN", "DOWN+DRAIN", "IDLE", "IDLE", "ALLOCATED", "IDLE"]))
    assert drain_refusal(lines, 1.0) is None
    assert "3 of 8" in drain_refusal(lines, 0.25) and drain_refusal(lines, 0.5) is None
