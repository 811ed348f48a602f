"""Scheduling on a real Slurm 22.05 cluster built from the plan of tests/specs/slurm-lab.yaml: 3 SUs of 4 nodes,
12 slurmd, slurmctld and slurmdbd (tests/slurm/conftest.py). Every assertion reads squeue, sacct or scontrol."""

from __future__ import annotations

import time

import pytest

from tests.helpers.slurm_cluster import SlurmCluster

pytestmark = [pytest.mark.root]


def running(cluster: SlurmCluster, job: int) -> dict | None:
    j = cluster.job(job)
    return j if j and j["state"] == "RUNNING" else None


def su_of(node: str) -> str:
    return node.split("-")[0]


def test_every_node_of_the_plan_registers_with_its_catalog_hardware(slurm):
    states = slurm.sinfo_states()
    assert sorted(states) == sorted(slurm.nodes) and len(states) == 12
    node = slurm.node("su002-gpu03")
    assert node["CPUTot"] == "224" and node["Sockets"] == "2" and node["RealMemory"] == "2080768"
    assert node["Gres"].startswith("gpu:h100:8")
    partitions = {p: slurm.hostnames(n) for p, n in
                  (line.split() for line in slurm.slurm("sinfo", "-h", "-o", "%R %N").stdout.splitlines())}
    assert partitions == {"gpu": slurm.nodes, "research": [n for n in slurm.nodes if n.startswith("su001")],
                          "production": [n for n in slurm.nodes if not n.startswith("su001")]}


def test_gang_a_multi_node_job_never_starts_on_fewer_nodes(slurm):
    blockers = [slurm.submit("-N1", "--exclusive", qos="p3") for _ in range(10)]
    slurm.wait_for(lambda: all(running(slurm, j) for j in blockers), 30, what="10 one-node jobs running")
    gang = slurm.submit("-N4", "--exclusive", qos="p3")
    deadline = time.monotonic() + 8
    while time.monotonic() < deadline:
        j = slurm.job(gang)
        assert j["state"] == "PENDING" and j["nodes"] == [], f"4-node job started with 2 free nodes: {j}"
        time.sleep(0.5)
    assert slurm.job(gang)["reason"] in ("Resources", "Priority")
    slurm.slurm("scancel", str(blockers[0]))
    time.sleep(4)
    j = slurm.job(gang)
    assert j["state"] == "PENDING" and j["nodes"] == [], f"4-node job started with 3 free nodes: {j}"
    slurm.slurm("scancel", str(blockers[1]))
    j = slurm.wait_for(lambda: running(slurm, gang), 30, what="the 4-node job once 4 nodes are free")
    assert len(j["nodes"]) == 4 and j["count"] == "4"
    record = slurm.wait_for(lambda: [r for r in slurm.sacct(gang) if r["State"] == "RUNNING"], 30,
                            what="sacct record of the running 4-node job")
    assert len(slurm.hostnames(record[0]["NodeList"])) == 4


def test_packing_two_four_gpu_jobs_share_one_node(slurm):
    first = slurm.submit("-N1", "--gres=gpu:4", qos="p3")
    second = slurm.submit("-N1", "--gres=gpu:4", qos="p3")
    a = slurm.wait_for(lambda: running(slurm, first), 30, what="first 4-GPU job")
    b = slurm.wait_for(lambda: running(slurm, second), 30, what="second 4-GPU job")
    assert a["nodes"] == b["nodes"] and len(a["nodes"]) == 1, f"two 4-GPU jobs on {a['nodes']} and {b['nodes']}"
    node = slurm.node(a["nodes"][0])
    assert "gres/gpu=8" in node["AllocTRES"], node["AllocTRES"]
    busy = [n for n, s in slurm.sinfo_states().items() if not s.startswith("idle")]
    assert busy == a["nodes"]


def test_health_check_failure_drains_the_node_with_its_reason(slurm):
    flag = slurm.health_flags / "fail-su003-gpu02"
    flag.write_text("railforge-health: rail 1 link down")
    try:
        node = slurm.wait_for(lambda: (n := slurm.node("su003-gpu02"))["State"].startswith("IDLE+DRAIN") and n,
                              30, what="su003-gpu02 drained by its health check")
    finally:
        flag.unlink()
    assert node["Reason"].startswith("railforge-health: rail 1 link down")
    others = {n: s for n, s in slurm.sinfo_states().items() if n != "su003-gpu02"}
    assert all(s == "idle" for s in others.values()), others
    job = slurm.submit("-N12", "--exclusive", qos="p3")
    time.sleep(3)
    assert slurm.job(job)["state"] == "PENDING", "a 12-node job must not start while a node is drained"
