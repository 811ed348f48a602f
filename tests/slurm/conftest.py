"""The live Slurm cluster of tests/slurm: started once per session from the plan of tests/specs/slurm-lab.yaml
(3 SUs x 4 nodes: 12 slurmd), with this issue's names and ports (prefix i26, 10.226.0.0/24, 268xx)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest

from tests.conftest import ROOT, require_tool
from tests.helpers.slurm_cluster import TOOLS, SlurmCluster, SlurmClusterConfig, build_slurm_files

SPEC = ROOT / "tests" / "specs" / "slurm-lab.yaml"
# a short backfill interval and resolution so reservations settle in seconds, not the production 30 s / 5 min
TEST_OVERRIDES = {"SchedulerParameters": "bf_continue,bf_interval=2,bf_window=10080,bf_resolution=60,"
                                         "bf_max_job_test=1000,sched_interval=2"}


@pytest.fixture(scope="session")
def slurm_files(tmp_path_factory):
    return build_slurm_files(SPEC, tmp_path_factory.mktemp("slurm-lab") / "out")


# Key=Value;Key=Value set after everything else, to watch the tests fail on a broken scheduler configuration
# (e.g. PreemptType=preempt/none); see docs/slurm.md
MUTATE = "RAILFORGE_SLURM_MUTATE"


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
def slurm_session(slurm_files, tmp_path_factory) -> Iterator[SlurmCluster]:
    require_tool(*TOOLS)
    started = time.monotonic()
    work = tmp_path_factory.mktemp("slurm-cluster")
    flags = work / "health"
    flags.mkdir()
    check = work / "health-check.sh"
    check.write_text(HEALTH_CHECK.format(flags=flags, conf=work / "etc" / "slurm.conf"))
    check.chmod(0o755)
    overrides = {**TEST_OVERRIDES, "HealthCheckProgram": str(check), "HealthCheckInterval": "5",
                 "HealthCheckNodeState": "ANY", **mutations()}
    cluster = SlurmCluster(slurm_files, work, SlurmClusterConfig(prefix="i26", overrides=overrides))
    cluster.health_flags = flags
    cluster.start()
    cluster.start_seconds = time.monotonic() - started
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def slurm(slurm_session) -> Iterator[SlurmCluster]:
    """The session's cluster with an empty queue and every node idle, before and after the test."""
    slurm_session.reset()
    yield slurm_session
    slurm_session.reset()
