"""The burn-in plan on every bundled example and the benchmark ladder: the rounds meet the bound, every NIC
is in two tests with two partners on other leaves, no NIC is in two tests of one round, every cable is
exercised, and the jobs are valid shell. Expectations are counted from the plan's own devices and links here,
not from the acceptance module's views."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

import orjson
import pytest

from railforge.acceptance.document import build, dumps
from railforge.acceptance.jobs import files
from railforge.acceptance.paths import miss_probability
from railforge.plan.model import Plan
from railforge.planner import build_plan
from railforge.spec import load_spec
from tests.conftest import EXAMPLES, ROOT, plan_of, run_cli

sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_build import ladder_spec  # noqa: E402


def expected_bound(plan: Plan) -> int:
    """2 tests per NIC; a rail (or, in a rail-plane 3-tier design, a rail pair) with an odd NIC count needs a
    third round; a switch with more uplinks than NICs/downlinks below it needs ceil(up/down)."""
    per_rail = Counter(r.rail for d in plan.devices if d.role == "node" and d.fabric == "compute" for r in d.rails)
    rails = sorted(per_rail)
    if plan.cluster.mode == "rail-plane" and plan.cluster.tiers >= 3:
        classes = [per_rail[a] + per_rail[b] for a, b in zip(rails[0::2], rails[1::2], strict=False)]
    else:
        classes = list(per_rail.values())
    need = 3 if any(n % 2 and n > 2 for n in classes) else 2
    up, down = Counter(), Counter()
    for lk in plan.links:
        if lk.fabric == "compute" and lk.tier in ("leaf-spine", "spine-superspine"):
            up[lk.a.device] += 1
            down[lk.b.device] += 1
        elif lk.fabric == "compute" and lk.tier == "node-leaf":
            down[lk.b.device] += 1
    upper = max((-(-up[s] // down[s]) for s in up if down[s]), default=1)
    return max(need, upper)


def check(plan: Plan, doc: dict) -> None:
    rails = {(d.name, r.hca): r for d in plan.devices if d.role == "node" and d.fabric == "compute" for r in d.rails}
    leaf_group = {d.name: d.group for d in plan.devices if d.role == "leaf"}
    assert doc["rounds_planned"] == doc["bound"]["rounds"] == expected_bound(plan)
    assert len(doc["rounds"]) == doc["rounds_planned"]
    partners: dict[tuple, set] = defaultdict(set)
    for r in doc["rounds"]:
        busy = Counter()
        for t in r["tests"]:
            a, b = (t["a"]["node"], t["a"]["hca"]), (t["b"]["node"], t["b"]["hca"])
            busy[a] += 1
            busy[b] += 1
            ra, rb = rails[a], rails[b]
            assert a[0] != b[0] and ra.leaf != rb.leaf, t
            assert t["cables"][:2] == [ra.cable, rb.cable]
            partners[a].add(b)
            partners[b].add(a)
        assert max(busy.values()) == 1, f"round {r['round']}: a NIC in two tests"
    assert set(partners) == set(rails), "every GPU node's NIC is tested"
    assert all(len(p) == 2 for p in partners.values()), "two different partners per NIC"
    compute_upper = {lk.id for lk in plan.links if lk.fabric == "compute"
                     and lk.tier in ("leaf-spine", "spine-superspine")}
    in_bundles = {c for b in doc["bundles"].values() for c in b["cables"]}
    certain = {c for r in doc["rounds"] for t in r["tests"] for c in t["cables"][2:]}
    assert compute_upper == in_bundles | certain | set(doc["coverage"]["unreachable"])
    if plan.cluster.tiers == 3 and len(set(leaf_group.values())) > 1:
        crossing = sum(1 for r in doc["rounds"] for t in r["tests"]
                       if len(t["bundles"]) == 4 or len(t["cables"]) > 4)
        assert crossing == doc["coverage"]["tests"], "in 3 tiers every test crosses the top tier"
    if doc["routing"]["kind"] == "ecmp" and in_bundles:
        uses = Counter(k for r in doc["rounds"] for t in r["tests"] for k in t["bundles"])
        bundles = {k: type("B", (), {"cables": v["cables"]}) for k, v in doc["bundles"].items()}
        k = doc["routing"]["flows_per_pair"]
        assert miss_probability(uses, bundles, k) <= 1 - doc["routing"]["confidence"]
        assert k == 1 or miss_probability(uses, bundles, k - 1) > 1 - doc["routing"]["confidence"]


@pytest.mark.parametrize("name", EXAMPLES)
def test_every_example_meets_the_bound(name: str) -> None:
    plan = plan_of(name)
    ap = build(plan)
    doc = orjson.loads(dumps(ap.doc))
    check(plan, doc)
    assert dumps(build(plan_of(name)).doc) == dumps(ap.doc), "same plan, same bytes"


def test_bound_values_on_the_examples() -> None:
    """Stated per example (docs/acceptance.md): the DGX's rails hold 127 NICs each (the UFM takes a slot)."""
    got = {name: build(plan_of(name)).doc for name in EXAMPLES}
    assert {n: d["bound"]["rounds"] for n, d in got.items()} == {
        "dgx-h100-4su": 3, "roce-a800-4nic": 2, "roce-16k-railplane": 2}
    assert got["dgx-h100-4su"]["coverage"]["not_node_cables"]
    assert all("ufm01" in why for why in got["dgx-h100-4su"]["coverage"]["not_node_cables"].values())
    assert got["dgx-h100-4su"]["routing"]["kind"] == "infiniband"
    assert got["roce-16k-railplane"]["routing"]["flows_per_pair"] > 1


def ladder_plan(gpus: int, folder: Path) -> Plan:
    path = ladder_spec(gpus, folder)
    spec, lines = load_spec(path)
    return build_plan(spec, lines, str(path))


@pytest.mark.parametrize("gpus", [1024, 4096, 16384])
def test_ladder_meets_the_bound(gpus: int, tmp_path: Path) -> None:
    plan = ladder_plan(gpus, tmp_path)
    doc = orjson.loads(dumps(build(plan).doc))
    check(plan, doc)
    if gpus <= 4096:  # one pod: nothing between two NICs reaches the super-spines
        assert len(doc["coverage"]["unreachable"]) == sum(1 for lk in plan.links if lk.tier == "spine-superspine")
    else:
        assert doc["coverage"]["unreachable"] == []


@pytest.mark.slow
def test_ladder_131k_meets_the_bound(tmp_path: Path) -> None:
    plan = ladder_plan(131072, tmp_path)
    doc = orjson.loads(dumps(build(plan).doc))
    check(plan, doc)
    assert doc["coverage"]["tests"] == 131072 and doc["coverage"]["unreachable"] == []


def test_jobs_are_shell_and_name_every_test(tmp_path: Path) -> None:
    out = files(build(plan_of("roce-a800-4nic")))
    for rel, data in out.items():
        if rel.endswith((".sh", ".sbatch")):
            p = tmp_path / rel.replace("/", "_")
            p.write_bytes(data)
            subprocess.run(["bash", "-n", str(p)], check=True)
    ids = [line.split("\t")[0] for rel, data in out.items() if rel.endswith(".tsv")
           for line in data.decode().splitlines() if not line.startswith("#")]
    doc = orjson.loads(out["plan.json"])
    assert sorted(ids) == sorted(t["id"] for r in doc["rounds"] for t in r["tests"])
    pair = out["jobs/pair.sh"].decode()
    assert f"-q {doc['routing']['flows_per_pair']} " in pair and "--report_gbits" in pair and "-x 3" in pair
    assert "#SBATCH --ntasks-per-node=4" in out["jobs/slurm/round-01.sbatch"].decode()


def test_cli_writes_the_folder_and_refuses_bad_input(built, tmp_path: Path) -> None:
    out = built("roce-a800-4nic")
    to = tmp_path / "acc"
    proc = run_cli("acceptance", "plan", "inventory/roce-a800-4nic", "--out", str(out), "--to", str(to))
    assert "bound: 2 tests per NIC" in proc.stdout
    assert orjson.loads((to / "plan.json").read_bytes())["meets_bound"] is True
    assert (to / "jobs" / "pair.sh").stat().st_mode & 0o111
    bad = run_cli("acceptance", "plan", "inventory/roce-a800-4nic", "--out", str(tmp_path / "nowhere"), check=False)
    assert bad.returncode == 2 and "plan.json" in bad.stderr and "Traceback" not in bad.stderr
    with tempfile.TemporaryDirectory() as d:
        bad = run_cli("acceptance", "plan", "inventory/roce-a800-4nic", "--out", str(out), "--confidence", "2",
                      "--to", d, check=False)
        assert bad.returncode == 2 and "confidence" in bad.stderr
