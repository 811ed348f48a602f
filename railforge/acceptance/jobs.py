"""The runnable burn-in: per-round pair lists, the pair script (perftest `ib_write_bw` then `ib_read_lat`), a
plain ssh runner, Slurm batch scripts for every round, NCCL `all_reduce_perf` per SU and cluster-wide, DCGM diag
on every node; written with `plan.json` into one folder, atomically (a staging folder replaces the old one)."""

from __future__ import annotations

import contextlib
import math
import os
import shutil
from pathlib import Path

import jinja2

from railforge.acceptance.document import AcceptancePlan, dumps
from railforge.plan import outdir

TEMPLATES = jinja2.Environment(
    loader=jinja2.PackageLoader("railforge.acceptance", "templates"),
    undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False)
PERFTEST_PORT = 18515
ROCE_GID_INDEX = 3  # RoCEv2 over IPv4 on ConnectX with the default GID table; set per site if it differs
EXECUTABLE = ("pair.sh", "run-round.sh")


def _minutes(seconds: float) -> int:
    return max(5, math.ceil(seconds * 1.5 / 60))


def files(ap: AcceptancePlan) -> dict[str, bytes]:
    """Relative path -> bytes of every file of the acceptance folder."""
    doc = ap.doc
    cluster = doc["cluster"]
    d = doc["durations"]
    flows = doc["routing"]["flows_per_pair"]
    gid = f" -x {ROCE_GID_INDEX}" if doc["fabric"] != "infiniband" else ""
    out: dict[str, bytes] = {outdir.ACCEPTANCE_PLAN: dumps(doc)}
    t = TEMPLATES
    out["jobs/pair.sh"] = t.get_template("pair.sh.j2").render(
        cluster=cluster, flows=flows, pair_s=d["pair_s"], port=PERFTEST_PORT, gid=gid).encode()
    out["jobs/run-round.sh"] = t.get_template("run-round.sh.j2").render(
        cluster=cluster, rounds=len(doc["rounds"])).encode()
    for r in doc["rounds"]:
        n = r["round"]
        lines = ["# test\ta_node\ta_hca\ta_address\tb_node\tb_hca\tb_address"]
        nodes: set[str] = set()
        for test in r["tests"]:
            a, b = test["a"], test["b"]
            lines.append("\t".join((test["id"], a["node"], a["hca"], a["address"], b["node"], b["hca"], b["address"])))
            nodes.update((a["node"], b["node"]))
        out[f"jobs/pairs-round-{n:02d}.tsv"] = ("\n".join(lines) + "\n").encode()
        out[f"jobs/nodes/round-{n:02d}.txt"] = ("\n".join(sorted(nodes)) + "\n").encode()
        out[f"jobs/slurm/round-{n:02d}.sbatch"] = t.get_template("round.sbatch.j2").render(
            cluster=cluster, round=n, rounds=len(doc["rounds"]), tests=len(r["tests"]), nodes=len(nodes),
            nodelist=f"nodes/round-{n:02d}.txt", minutes=_minutes(d["pair_s"] + 60 + d["round_overhead_s"]),
            jobs_dir="$SLURM_SUBMIT_DIR", rails=doc["rails"]).encode()
    th = doc["thresholds"]["all_reduce_busbw_gbytes"]
    gpus = doc["gpus_per_node"]
    every: list[str] = []
    for su in doc["nccl"]["per_su"]:
        scope = f"su{su['su']:03d}"
        every += su["nodes"]
        out[f"jobs/nodes/{scope}.txt"] = ("\n".join(su["nodes"]) + "\n").encode()
        out[f"jobs/slurm/nccl-{scope}.sbatch"] = t.get_template("nccl.sbatch.j2").render(
            cluster=cluster, scope=scope, nodes=len(su["nodes"]), nodelist=f"nodes/{scope}.txt", gpus=gpus,
            minutes=_minutes(d["nccl_su_s"]), threshold=th["per_su"]).encode()
    out["jobs/nodes/all.txt"] = ("\n".join(every) + "\n").encode()
    out["jobs/slurm/nccl-cluster.sbatch"] = t.get_template("nccl.sbatch.j2").render(
        cluster=cluster, scope="cluster", nodes=len(every), nodelist="nodes/all.txt", gpus=gpus,
        minutes=_minutes(d["nccl_cluster_s"]), threshold=th["cluster"]).encode()
    out["jobs/slurm/dcgm.sbatch"] = t.get_template("dcgm.sbatch.j2").render(
        cluster=cluster, nodes=len(every), nodelist="nodes/all.txt", level=d["dcgm_level"],
        minutes=_minutes(d["dcgm_s"])).encode()
    return out


def write(ap: AcceptancePlan, target: Path) -> int:
    """Write every file under `target` (replacing what was there only once all are written); the file count."""
    target = target.absolute()
    stage = target.parent / f".{target.name}.staging-{os.getpid()}"
    old = target.parent / f".{target.name}.old-{os.getpid()}"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        for rel, data in sorted(files(ap).items()):
            path = stage / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            if path.name in EXECUTABLE:
                path.chmod(0o755)
        if target.exists():
            os.replace(target, old)
        os.replace(stage, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(stage)
        if old.exists() and not target.exists():
            os.replace(old, target)
        raise
    shutil.rmtree(old, ignore_errors=True)
    return len(list(p for p in target.rglob("*") if p.is_file()))
