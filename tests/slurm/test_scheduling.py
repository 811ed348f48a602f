"""Scheduling on a real Slurm 22.05 cluster built from the plan of tests/specs/slurm-lab.yaml: 3 SUs of 4 nodes,
12 slurmd, slurmctld and slurmdbd (tests/slurm/conftest.py). Every assertion reads squeue, sacct, sacctmgr,
scontrol or what a job wrote."""

from __future__ import annotations

import re
import time
from datetime import datetime

import pytest

from tests.helpers.slurm_cluster import SlurmCluster
from tests.slurm.conftest import MEASURED_MEMTOTAL_MIB

pytestmark = [pytest.mark.root]


def running(cluster: SlurmCluster, job: int) -> dict | None:
    j = cluster.job(job)
    return j if j and j["state"] == "RUNNING" else None


def su_of(node: str) -> str:
    return node.split("-")[0]


def test_every_node_of_the_plan_registers_with_its_catalog_hardware(slurm, slurm_plan):
    states = slurm.sinfo_states()
    assert sorted(states) == sorted(slurm.nodes) and len(states) == 12
    assert set(states.values()) == {"idle"}, states
    node = slurm.node("su002-gpu03")
    assert node["CPUTot"] == "224" and node["Sockets"] == "2"
    assert node["RealMemory"] == str(slurm_plan.slurm.node.real_memory_mib)
    assert node["Gres"].startswith("gpu:h100:8")
    assert "config_overrides" not in slurm.scontrol("show", "config"), "slurmctld must check what nodes report"
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


def occupy(cluster: SlurmCluster, nodes: list[str], qos: str = "p3", *extra: str, wrap: str = "sleep 3600"
           ) -> list[int]:
    jobs = [cluster.submit("-N1", "--exclusive", f"--nodelist={n}", *extra, qos=qos, wrap=wrap) for n in nodes]
    cluster.wait_for(lambda: all(running(cluster, j) for j in jobs), 30, what=f"jobs running on {nodes}")
    return jobs


def test_nodes_report_the_memory_linux_reports_and_slurmctld_checks_it(slurm, slurm_plan):
    """Each slurmd reports a real 2 TiB H100 server's MemTotal; the plan's RealMemory fits under it. A node that
    reports less than RealMemory drains with slurmctld's own reason, so the check is live, not overridden."""
    n = slurm_plan.slurm.node
    shown = slurm.slurmd_config()
    assert f"RealMemory={MEASURED_MEMTOTAL_MIB}" in shown and "CPUs=224" in shown, shown
    assert n.real_memory_mib <= MEASURED_MEMTOTAL_MIB < n.memory_mib - 16384
    node = "su003-gpu04"
    slurm.restart_slurmd(node, memtotal_mib=n.real_memory_mib - 1)
    try:
        drained = slurm.wait_for(lambda: "DRAIN" in (x := slurm.node(node))["State"] and x, 60,
                                 what=f"{node} drained for low memory")
        assert drained["Reason"].startswith(f"Low RealMemory (reported:{n.real_memory_mib - 1} < 100.00% of "
                                            f"configured:{n.real_memory_mib})"), drained["Reason"]
    finally:
        slurm.restart_slurmd(node)
        slurm.wait_for(lambda: slurm.sinfo_states().get(node) in ("idle", "drain"), 60, what=f"{node} back")
        slurm.scontrol("update", f"NodeName={node}", "State=RESUME")
        slurm.wait_for(lambda: slurm.sinfo_states().get(node) == "idle", 60, what=f"{node} idle again")


def test_topology_a_job_with_switches_1_stays_inside_one_su(slurm):
    """Free nodes su001-gpu04, su002-gpu01, su002-gpu02 are three consecutive nodes: without the tree topology,
    cons_tres' best fit of consecutive nodes takes them (two SUs). With it, --switches=1 asks for one leaf switch,
    and only SU 3 (gpu01, 02, 04) has three free nodes."""
    occupy(slurm, ["su001-gpu01", "su001-gpu02", "su001-gpu03", "su002-gpu03", "su002-gpu04", "su003-gpu03"])
    topology = slurm.scontrol("show", "topology")
    assert re.search(r"SwitchName=su003 Level=0 .*Nodes=su003-gpu\[01-04\]", topology), topology
    job = slurm.submit("-N3", "--exclusive", "--switches=1", qos="p3")
    j = slurm.wait_for(lambda: running(slurm, job), 30, what="the --switches=1 job")
    assert sorted(j["nodes"]) == ["su003-gpu01", "su003-gpu02", "su003-gpu04"], \
        f"--switches=1 job outside SU 3: {j['nodes']}"
    shown = slurm.scontrol("show", "job", str(job))
    assert "Switches=1@" in shown


def test_topology_a_two_su_job_takes_two_whole_sus(slurm):
    occupy(slurm, ["su001-gpu03"])
    job = slurm.submit("-N8", "--exclusive", qos="p3")
    j = slurm.wait_for(lambda: running(slurm, job), 30, what="the 8-node job")
    assert sorted(j["nodes"]) == [f"su00{s}-gpu0{i}" for s in (2, 3) for i in range(1, 5)], \
        f"8-node job scattered over {j['nodes']} instead of taking su002 and su003 whole"


# slurmctld requeues a job whose grace time is over in its time-limit pass, every 30 s (PERIODIC_TIMEOUT)
REQUEUE_PASS_S = 30
GRACEFUL = """#!/bin/sh
# a job step that checkpoints on SIGTERM: it logs each SIGTERM with the time and exits on the second one
n=0
trap 'n=$((n + 1)); echo "TERM $(date +%s.%N)" >> grace-$SLURM_JOB_ID.log; [ $n -lt 2 ] || exit 0' TERM
while :; do sleep 0.2; done
"""


def first_sigterm(log) -> float | None:
    """When a graceful job step logged its first SIGTERM."""
    words = log.read_text().split() if log.exists() else []
    return float(words[1]) if len(words) >= 2 else None


def test_priority_p0_preempts_a_cluster_full_of_p5_and_the_victims_get_their_grace_time_and_are_requeued(
        slurm, slurm_plan):
    """The victims' job steps get SIGTERM at once, keep running for the QOS GraceTime, and are requeued after it
    (accounting's end of the preempted run is a grace time after the step's SIGTERM); the P0 job starts then.
    The end is read from sacct, not from a second SIGTERM in the step's log: that line was missing in two CI runs in
    a row (never alone here), and accounting's End does not depend on the step's shell running its trap before the
    requeue kills it."""
    grace = slurm_plan.slurm.preempt_grace_time
    script = slurm.dir / "jobs" / "graceful.sh"
    script.write_text(GRACEFUL)
    victims = occupy(slurm, slurm.nodes, "p5", wrap=f"srun sh {script}")
    started = time.monotonic()
    urgent = slurm.submit("-N4", "--exclusive", qos="p0")
    j = slurm.wait_for(lambda: running(slurm, urgent), grace + REQUEUE_PASS_S + 10, interval=0.2, what="the P0 job")
    waited = time.monotonic() - started
    assert grace <= waited < grace + REQUEUE_PASS_S + 5, f"P0 job waited {waited:.1f} s, grace time {grace} s"
    queue = {q["id"]: q for q in slurm.squeue()}
    assert set(victims) <= set(queue), "preempted P5 jobs were lost from the queue"
    requeued = [v for v in victims if queue[v]["state"] != "RUNNING"]
    assert len(requeued) == 4, [queue[v] for v in victims]
    assert {n for v in victims if queue[v]["state"] == "RUNNING" for n in queue[v]["nodes"]}.isdisjoint(j["nodes"])
    for v in requeued:
        assert queue[v]["state"] in ("PENDING", "REQUEUED", "REQUEUE_HOLD") or queue[v]["state"].startswith("COMPL")
        records = slurm.wait_for(lambda v=v: [r for r in slurm.sacct(v) if r["State"].startswith(
            ("PREEMPTED", "REQUEUED"))], 30, what=f"sacct record of preempted job {v}")
        assert records
        log = slurm.dir / "jobs" / f"grace-{v}.log"
        term = slurm.wait_for(lambda log=log: first_sigterm(log), 10, what=f"the SIGTERM logged by job {v}")
        ended = datetime.fromisoformat(records[0]["End"]).timestamp()
        assert grace - 1 <= ended - term < grace + REQUEUE_PASS_S + 5, \
            f"job {v} ended {ended - term:.1f} s after its SIGTERM; grace time {grace} s " \
            f"(sacct End {records[0]['End']}, 1 s resolution)"
    assert not [v for v in victims if v not in requeued and (slurm.dir / "jobs" / f"grace-{v}.log").exists()], \
        "a job that was not preempted got SIGTERM"


def test_priority_p3_does_not_preempt_p2(slurm, slurm_plan):
    holders = occupy(slurm, slurm.nodes, "p2")
    job = slurm.submit("-N1", "--exclusive", qos="p3")
    time.sleep(8)
    j = slurm.job(job)
    assert j["state"] == "PENDING", f"P3 job ran on a cluster full of P2 jobs: {j}"
    assert all(running(slurm, h) for h in holders), "a P2 job was preempted by P3"
    assert not [r for h in holders for r in slurm.sacct(h) if r["State"].startswith(("PREEMPTED", "REQUEUED"))]
    higher = slurm.submit("-N1", "--exclusive", qos="p1")
    slurm.wait_for(lambda: running(slurm, higher), slurm_plan.slurm.preempt_grace_time + REQUEUE_PASS_S + 10,
                   what="a P1 job, which does preempt P2 (after the grace time)")


def reserved_start(cluster: SlurmCluster, job: int) -> str:
    out = cluster.slurm("squeue", "--start", "-h", "-j", str(job), "-o", "%S").stdout.strip()
    return out if out and out != "N/A" else ""


def test_no_starvation_a_large_jobs_reserved_start_never_moves_later(slurm):
    blockers = occupy(slurm, slurm.nodes, "p3", "--time=20:00")
    large = slurm.submit("-N12", "--exclusive", "--time=60:00", qos="p3")
    first = slurm.wait_for(lambda: reserved_start(slurm, large), 30, what="a reserved start for the 12-node job")
    long_small, short_small, seen = [], [], [first]
    for blocker in blockers[:4]:
        slurm.slurm("scancel", str(blocker))
        long_small.append(slurm.submit("-N1", "--exclusive", "--time=40:00", qos="p3"))
        short_small.append(slurm.submit("-N1", "--exclusive", "--time=5:00", qos="p3"))
        for _ in range(4):
            time.sleep(1)
            seen.append(reserved_start(slurm, large))
    slurm.wait_for(lambda: sum(bool(running(slurm, s)) for s in short_small) >= 4, 30,
                   what="short small jobs backfilled onto the freed nodes")
    for _ in range(6):
        time.sleep(1)
        seen.append(reserved_start(slurm, large))
    assert all(seen), f"the 12-node job lost its reservation: {seen}"
    later = [(a, b) for a, b in zip(seen, seen[1:], strict=False) if b > a]
    assert not later, f"the 12-node job's reserved start moved later ({later}): {seen}"
    assert not [s for s in long_small if running(slurm, s)], \
        "a small job that would end after the reservation started and delayed the 12-node job"


def test_qos_script_is_idempotent(slurm):
    """The harness ran the generated qos.sh once at start; a second run succeeds and changes nothing."""
    fields = ["sacctmgr", "-n", "-P", "show", "qos", "format=name,priority,preempt,preemptmode,gracetime"]
    before = slurm.slurm(*fields).stdout
    slurm.slurm("sh", str(slurm.source / "qos.sh"))
    assert slurm.slurm(*fields).stdout == before
    rows = {line.split("|")[0]: line.split("|")[1:] for line in before.splitlines()}
    assert rows["p0"] == ["5000", "p1,p2,p3,p4,p5", "requeue", "00:00:05"]
    assert rows["p5"] == ["0", "", "requeue", "00:00:05"]
    assoc = slurm.slurm("sacctmgr", "-n", "-P", "show", "assoc", "user=root", "format=qos,defaultqos").stdout
    assert assoc.split()[0].split("|") == ["p0,p1,p2,p3,p4,p5", "p3"]


def test_a_tenant_user_runs_a_job_on_its_own_partition(slurm, tenant_users):
    user = next(u for u, a in tenant_users.items() if a == "research")
    job = slurm.submit("-p", "research", "-N1", qos="p3", user=user, wrap="id -un; hostname")
    # sacct showed an empty Partition right at COMPLETED once; it is filled a moment later
    record = slurm.wait_for(lambda: [r for r in slurm.sacct(job, "JobID,User,Account,Partition,State,NodeList")
                                     if r["State"] == "COMPLETED" and r["Partition"]], 60,
                            what=f"{user}'s job completed")
    assert record[0]["User"] == user and record[0]["Account"] == "research" and record[0]["Partition"] == "research"
    assert record[0]["NodeList"].startswith("su001-"), record
    assert (slurm.dir / "jobs" / f"{job}.out").read_text().split()[0] == user


def test_a_user_of_another_tenant_is_refused_on_that_partition(slurm, tenant_users):
    other = next(u for u, a in tenant_users.items() if a == "production")
    refused = "Batch job submission failed: Invalid account or account/partition combination specified"
    for args, why in ((["-p", "research"], "research allows research not production"),
                      (["-p", "research", "--account=research"], None),
                      (["-p", "gpu"], "gpu allows ops not production")):
        proc = slurm.as_user(other, "sbatch", *args, "--wrap", "true", check=False)
        assert proc.returncode != 0 and refused in proc.stderr, (args, proc.stderr)
        if why:
            assert f"Job's account not permitted to use this partition ({why})" in slurm.log(), args
    assert not slurm.squeue(), "a refused job must not be queued"


def test_accounts_script_is_idempotent(slurm, slurm_plan):
    """The harness ran the generated accounts.sh once at start; a second run prints nothing and changes nothing."""
    fields = ["sacctmgr", "-n", "-P", "show", "assoc", f"cluster={slurm.cluster_name}",
              "format=account,user,parentname,qos,defaultqos,share"]
    before = slurm.slurm(*fields).stdout
    again = slurm.slurm("sh", str(slurm.source / "accounts.sh"))
    assert again.stdout == "" and slurm.slurm(*fields).stdout == before
    rows = {tuple(line.split("|")[:2]) for line in before.splitlines()}
    wanted = {(a.name, "") for a in slurm_plan.slurm.accounts} | {(a.name, u) for a in slurm_plan.slurm.accounts
                                                                   for u in a.users}
    assert wanted <= rows, wanted - rows
    defaults = slurm.slurm("sacctmgr", "-n", "-P", "show", "user", "rf-alice", "format=user,defaultaccount").stdout
    assert defaults.strip() == "rf-alice|research"


def test_every_job_gets_an_extern_step_on_each_node(slurm):
    """PrologFlags=Contain: the allocation starts an extern step on every node (what pam_slurm_adopt adopts into)."""
    job = slurm.submit("-N2", "--exclusive", qos="p3", wrap="sleep 2")
    steps = slurm.wait_for(lambda: [line for line in slurm.slurm(
        "sacct", "-n", "-P", "-j", str(job), "--format=JobID,State,NNodes").stdout.splitlines()
        if line.startswith(f"{job}.extern|")], 60, what="the extern step")
    assert steps[0].split("|")[2] == "2", steps


def test_mpi_default_is_pmix_and_every_task_gets_a_pmix_rank(slurm):
    job = slurm.submit("-N2", "-n2", "--exclusive", qos="p3",
                       wrap="srun sh -c 'echo $SLURM_MPI_TYPE $PMIX_RANK $(hostname)'")
    slurm.wait_for(lambda: [r for r in slurm.sacct(job) if r["State"] in ("COMPLETED", "FAILED")], 60,
                   what="the srun job")
    out = sorted((slurm.dir / "jobs" / f"{job}.out").read_text().split("\n"))
    lines = [line.split() for line in out if line.strip()]
    assert [x[:2] for x in lines] == [["pmix", "0"], ["pmix", "1"]], out
    assert slurm.sacct(job)[0]["State"] == "COMPLETED"
