"""The live Slurm cluster of tests/slurm: started once per session from the plan of tests/specs/slurm-lab.yaml
(3 SUs x 4 nodes: 12 slurmd), with this issue's names and ports (prefix i26, 10.226.0.0/24, 268xx).

Each slurmd reports the plan's CPU topology and the memory Linux reports on a real 2 TiB H100 server
(`MEASURED_MEMTOTAL_MIB`), so slurmctld's registration check runs as on the real cluster. The tenants' users of
the spec (`slurm.users`) are created as Unix users for the session (and removed after it) so that jobs run as
them."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from railforge.plan.io import read_plan
from tests.conftest import ROOT, require_tool
from tests.helpers.slurm_cluster import TOOLS, NodeHardware, SlurmCluster, SlurmClusterConfig, build_slurm_files

SPEC = ROOT / "tests" / "specs" / "slurm-lab.yaml"
# a short backfill interval and resolution so reservations settle in seconds, not the production 30 s / 5 min
TEST_OVERRIDES = {"SchedulerParameters": "bf_continue,bf_interval=2,bf_window=10080,bf_resolution=60,"
                                         "bf_max_job_test=1000,sched_interval=2"}
# MemTotal of a 2 TiB HGX H100 server (2 x 56 cores): `slurmd -C` on MIT Engaging's node2901 reports
# RealMemory=2063205 (github.com/mit-orcd/ehwprobe, README, "H100 node"). docs/slurm.md, "Memory".
MEASURED_MEMTOTAL_MIB = 2_063_205


@pytest.fixture(scope="session")
def slurm_files(tmp_path_factory):
    return build_slurm_files(SPEC, tmp_path_factory.mktemp("slurm-lab") / "out")


@pytest.fixture(scope="session")
def slurm_plan(slurm_files):
    return read_plan(slurm_files.parent / "plan.json")


# Key=Value;Key=Value set after everything else, to watch the tests fail on a broken scheduler configuration
# (e.g. PreemptType=preempt/none); see docs/slurm.md
MUTATE = "RAILFORGE_SLURM_MUTATE"
# the mutation docs/slurm.md gives (tests/docs checks they agree); select/linear takes CR_Memory, not CR_Core_Memory
DOCUMENTED_MUTATION = ("PreemptType=preempt/none;PreemptMode=OFF;TopologyPlugin=topology/none;"
                       "SelectType=select/linear;SelectTypeParameters=CR_Memory;SchedulerType=sched/builtin")


def mutations() -> dict[str, str]:
    text = os.environ.get(MUTATE, "")
    return dict(item.split("=", 1) for item in text.split(";") if "=" in item)


HEALTH_CHECK = """#!/bin/sh
# Test health check: fails, and drains its node with the reason in the file, while {flags}/fail-<node> exists.
flag="{flags}/fail-$SLURMD_NODENAME"
[ -e "$flag" ] || exit 0
SLURM_CONF={conf} scontrol update NodeName="$SLURMD_NODENAME" State=DRAIN Reason="$(cat "$flag")"
exit 1
"""


@pytest.fixture(scope="session")
def tenant_users(slurm_plan) -> Iterator[dict[str, str]]:
    """user -> account for every user the plan's accounts name but root; the Unix users this session created are
    removed at its end (users that existed before are left alone)."""
    require_tool(*TOOLS, "useradd", "userdel")
    users = {u: a.name for a in slurm_plan.slurm.accounts for u in a.users if u != "root"}
    created = []
    for user in users:
        try:
            pwd.getpwnam(user)
        except KeyError:
            subprocess.run(["useradd", "--system", "--no-create-home", "--user-group", "--shell", "/usr/sbin/nologin",
                            user], check=True, capture_output=True)
            created.append(user)
    try:
        yield users
    finally:
        for user in created:
            subprocess.run(["userdel", user], check=False, capture_output=True)


@pytest.fixture(scope="session")
def slurm_session(slurm_files, slurm_plan, tenant_users) -> Iterator[SlurmCluster]:
    started = time.monotonic()
    # outside pytest's private (0700) temporary folder: the tenants' users read slurm.conf and write job output here
    work = Path(tempfile.mkdtemp(prefix="i26-slurm-"))
    flags = work / "health"
    flags.mkdir()
    check = work / "health-check.sh"
    check.write_text(HEALTH_CHECK.format(flags=flags, conf=work / "etc" / "slurm.conf"))
    check.chmod(0o755)
    overrides = {**TEST_OVERRIDES, "HealthCheckProgram": str(check), "HealthCheckInterval": "5",
                 "HealthCheckNodeState": "ANY", **mutations()}
    n = slurm_plan.slurm.node
    node = NodeHardware(n.sockets, n.cores_per_socket, n.threads_per_core, MEASURED_MEMTOTAL_MIB)
    cluster = SlurmCluster(slurm_files, work, SlurmClusterConfig(node=node, prefix="i26", overrides=overrides))
    cluster.health_flags = flags
    try:
        cluster.start()
        cluster.start_seconds = time.monotonic() - started
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(work, ignore_errors=True)


@pytest.fixture
def slurm(slurm_session) -> Iterator[SlurmCluster]:
    """The session's cluster with an empty queue and every node idle, before and after the test."""
    slurm_session.reset()
    yield slurm_session
    slurm_session.reset()
