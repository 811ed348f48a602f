"""The burn-in plan on every bundled example and the benchmark ladder: the rounds meet the bound, every NIC
is in two tests with two partners on other leaves, no NIC is in two tests of one round, every cable of the plan
is covered by some check or listed with the reason none can, and the jobs are valid shell. Expectations are
counted from the plan's own devices and links here, not from the acceptance module's views."""

from __future__ import annotations

import dataclasses
import re
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
from tests.conftest import ROOT, plan_of, run_cli

ALL_EXAMPLES = tuple(sorted(p.parent.name for p in (ROOT / "inventory").glob("*/cluster.yaml")))

sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_build import ladder_spec  # noqa: E402


def compute_nics(plan: Plan) -> dict[tuple[str, str], tuple[int, str, str]]:
    """(host, HCA) -> (rail, leaf, cable) of every GPU node's rail and every appliance's port on a rail's leaf."""
    out = {(d.name, r.hca): (r.rail, r.leaf, r.cable) for d in plan.devices if d.role == "node"
           and d.fabric == "compute" for r in d.rails}
    links = plan.link_index()
    for d in plan.devices:
        if d.role == "ufm":
            for p in d.ports:
                lk = links.get(p.link or "")
                if lk is not None and lk.tier == "node-leaf":
                    out[(d.name, d.hca(p))] = (lk.rail, lk.b.device, lk.id)
    return out


def expected_bound(plan: Plan) -> int:
    """2 tests per NIC; a rail (or, in a rail-plane 3-tier design, a rail pair; or two rails of one leaf each)
    with an odd NIC count needs a third round; a switch with more uplinks than NICs/downlinks below it needs
    ceil(up/down)."""
    nics = compute_nics(plan)
    per_rail = Counter(rail for rail, _, _ in nics.values())
    leaves = {rail: {leaf for r, leaf, _ in nics.values() if r == rail} for rail in per_rail}
    rails = sorted(per_rail)
    if plan.cluster.mode == "rail-plane" and plan.cluster.tiers >= 3:
        classes = [per_rail[a] + per_rail[b] for a, b in zip(rails[0::2], rails[1::2], strict=False)]
    else:
        single = [r for r in rails if len(leaves[r]) == 1]
        classes = [per_rail[r] for r in rails if r not in single]
        classes += [per_rail[a] + per_rail[b] for a, b in zip(single[0::2], single[1::2], strict=False)]
        classes += [per_rail[single[-1]]] if len(single) % 2 else []
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


def compute_rounds(doc: dict) -> list[dict]:
    return [r for r in doc["rounds"] if r["kind"] == "compute"]


def check(plan: Plan, doc: dict) -> None:
    rails = compute_nics(plan)
    leaf_group = {d.name: d.group for d in plan.devices if d.role == "leaf"}
    assert len(compute_rounds(doc)) == doc["bound"]["rounds"] == expected_bound(plan)
    assert len(doc["rounds"]) == doc["rounds_planned"] and doc["meets_bound"]
    partners: dict[tuple, set] = defaultdict(set)
    for r in doc["rounds"]:
        busy = Counter()
        for t in r["tests"]:
            a, b = (t["a"]["node"], t["a"]["hca"]), (t["b"]["node"], t["b"]["hca"])
            busy[a] += 1
            busy[b] += 1
            assert a[0] != b[0], t
            partners[a].add(b)
            partners[b].add(a)
            if r["kind"] == "compute":
                (_, la, ca), (_, lb, cb) = rails[a], rails[b]
                assert la != lb, t
                assert t["cables"][:2] == [ca, cb]
        assert max(busy.values()) == 1, f"round {r['round']}: a NIC in two tests"
    assert {k for k in partners if k in rails} == set(rails), "every GPU node's NIC and appliance port is tested"
    assert all(len(p) == 2 for k, p in partners.items() if k in rails), "two different partners per NIC"
    compute_upper = {lk.id for lk in plan.links if lk.fabric == "compute"
                     and lk.tier in ("leaf-spine", "spine-superspine")}
    in_bundles = {c for k in {k for r in compute_rounds(doc) for t in r["tests"] for k in t["bundles"]}
                  for c in doc["bundles"][k]["cables"]}
    certain = {c for r in compute_rounds(doc) for t in r["tests"] for c in t["cables"][2:]}
    assert compute_upper == in_bundles | certain | set(doc["coverage"]["unreachable"])
    if plan.cluster.tiers == 3 and len(set(leaf_group.values())) > 1:
        crossing = sum(1 for r in compute_rounds(doc) for t in r["tests"]
                       if len(t["bundles"]) == 4 or len(t["cables"]) > 4)
        assert crossing == doc["coverage"]["tests"], "in 3 tiers every test crosses the top tier"
    if doc["routing"]["kind"] == "ecmp" and in_bundles:
        uses = Counter(k for r in compute_rounds(doc) for t in r["tests"] for k in t["bundles"])
        bundles = {k: type("B", (), {"cables": v["cables"]}) for k, v in doc["bundles"].items()}
        k = doc["routing"]["flows_per_pair"]
        assert miss_probability(uses, bundles, k) <= 1 - doc["routing"]["confidence"]
        assert k == 1 or miss_probability(uses, bundles, k - 1) > 1 - doc["routing"]["confidence"]


@pytest.mark.parametrize("name", ALL_EXAMPLES)
def test_every_example_meets_the_bound(name: str) -> None:
    plan = plan_of(name)
    ap = build(plan)
    doc = orjson.loads(dumps(ap.doc))
    check(plan, doc)
    assert dumps(build(plan_of(name)).doc) == dumps(ap.doc), "same plan, same bytes"


def test_bound_values_on_the_examples() -> None:
    """Stated per example (docs/acceptance.md): the DGX's rails hold 127 NICs each (the UFM takes a slot)."""
    got = {name: build(plan_of(name)).doc for name in ALL_EXAMPLES}
    assert {n: d["bound"]["rounds"] for n, d in got.items()} == {
        "dgx-h100-4su": 3, "minimal": 2, "roce-a800-4nic": 2, "roce-16k-railplane": 2}
    assert got["dgx-h100-4su"]["coverage"]["not_node_cables"] == {}
    assert got["dgx-h100-4su"]["coverage"]["nics"] == 127 * 8 + 4, "the UFM's four HCA ports are tested"
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
    pairs = [line.split("\t") for rel, data in out.items() if rel.startswith("jobs/pairs-round-")
             for line in data.decode().splitlines() if not line.startswith("#")]
    doc = orjson.loads(out["plan.json"])
    assert sorted(p[0] for p in pairs) == sorted(t["id"] for r in doc["rounds"] for t in r["tests"])
    kind = {t["id"]: r["kind"] for r in doc["rounds"] for t in r["tests"]}
    flows = {"compute": doc["routing"]["flows_per_pair"], "storage": doc["storage"]["flows_per_pair"]}
    assert all(int(p[7]) == flows[kind[p[0]]] for p in pairs) and flows["storage"] > 1
    storage = [p for p in pairs if kind[p[0]] == "storage"]
    assert len(storage) == 35 and all(p[2] == p[5] == "mlx5_bond_0" for p in storage)
    pair = out["jobs/pair.sh"].decode()
    assert '-q "$qps"' in pair and "--report_gbits" in pair and "-x 3" in pair and " -b " in pair
    assert "#SBATCH --ntasks-per-node=4" in out["jobs/slurm/round-01.sbatch"].decode()
    storage_round = out[f"jobs/slurm/round-{doc['rounds'][-1]['round']:02d}.sbatch"].decode()
    assert "#SBATCH --ntasks-per-node=1" in storage_round and "ssh -n" in storage_round
    mgmt = {d.name for d in plan_of("roce-a800-4nic").devices if d.role == "mgmt"}
    slurm_nodes = {line for rel, data in out.items() if rel.startswith("jobs/nodes/round-")
                   for line in data.decode().split()}
    assert mgmt and not mgmt & slurm_nodes, "management hosts are no Slurm nodes: reached over ssh"
    reach = [line.split("\t") for line in out["jobs/oob-reach.tsv"].decode().splitlines()[1:]]
    assert [r[0] for r in reach] == [c["id"] for c in doc["oob"]["reach"]] and len(reach) == 57
    assert out["jobs/lldp-switches.txt"].decode().split() == doc["oob"]["lldp"]["switches"]


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


UPPER = {"compute": ("leaf-spine", "spine-superspine"), "storage": ("storage-leaf-spine", "storage-spine-superspine")}
LLDP_TIERS = ("storage-peer", "oob-leaf-spine", "oob-spine-superspine")


def crossed(doc: dict, kind: str) -> set[str]:
    """Cables the tests of `kind` rounds cross: certain ones and every cable of a bundle they spread over."""
    out: set[str] = set()
    for r in doc["rounds"]:
        if r["kind"] == kind:
            for t in r["tests"]:
                out |= set(t["cables"])
                out |= {c for k in t["bundles"] for c in doc["bundles"][k]["cables"]}
    return out


@pytest.mark.parametrize("name", ALL_EXAMPLES)
def test_every_cable_is_covered_or_listed_with_a_reason(name: str) -> None:
    """Every cable of plan.json, by tier, is in the check that tier needs: node and upper cables in pair tests
    (compute rails, storage bonds), storage peer links and OOB uplinks in the LLDP check, OOB access cables in the
    reachability check at the planned address; or listed as not covered with a reason. RoCE examples leave
    nothing out; InfiniBand upper cables without forwarding tables are listed (with --lfts they are covered:
    tests/acceptance/test_ib_coverage.py)."""
    plan = plan_of(name)
    doc = orjson.loads(dumps(build(plan).doc))
    devices = plan.device_index()
    compute, storage = crossed(doc, "compute"), crossed(doc, "storage")
    reach = {c["cable"]: c["address"] for c in doc["oob"]["reach"]}
    lldp, lldp_switches = set(doc["oob"]["lldp"]["cables"]), set(doc["oob"]["lldp"]["switches"])
    missing = doc["cables"]["not_covered"]
    ib = plan.cluster.fabric == "infiniband"
    covered = Counter()
    for lk in plan.links:
        if lk.fabric == "compute" and lk.tier in UPPER["compute"] and ib:
            assert lk.id in missing and "--lfts" in missing[lk.id], lk.id
            continue
        assert lk.id not in missing, (lk.id, missing.get(lk.id))
        if lk.fabric in UPPER and (lk.tier in UPPER[lk.fabric] or lk.tier in ("node-leaf", "node-storage-leaf")):
            assert lk.id in (compute if lk.fabric == "compute" else storage), lk.id
        elif lk.tier in LLDP_TIERS:
            assert lk.id in lldp and {lk.a.device, lk.b.device} <= lldp_switches, lk.id
        else:
            assert lk.tier == "oob-access", lk
            d = devices[lk.a.device]
            want = d.bmc.address if d.bmc and d.bmc.cable == lk.id else d.mgmt_address
            assert reach[lk.id] == want.split("/")[0], lk.id
        covered[lk.tier] += 1
    assert doc["cables"]["total"] == len(plan.links)
    assert doc["cables"]["covered"] == sum(covered.values()) == len(plan.links) - len(missing)
    assert all(why for why in missing.values())


def test_single_leaf_rails_are_planned() -> None:
    """minimal: one SU, so each rail is one leaf. Rails pair up across the spines (0+1, 2+3, ...): every test
    crosses both leaves' uplinks, every uplink is in a bundle the tests cross. With the spines cut away, each
    rail's NICs pair on their own leaf: the node cables are still burned in, leaf-local."""
    plan = plan_of("minimal")
    doc = orjson.loads(dumps(build(plan).doc))
    check(plan, doc)
    rails = compute_nics(plan)
    for t in (t for r in compute_rounds(doc) for t in r["tests"]):
        ra, rb = rails[(t["a"]["node"], t["a"]["hca"])][0], rails[(t["b"]["node"], t["b"]["hca"])][0]
        assert {ra, rb} in ({0, 1}, {2, 3}, {4, 5}, {6, 7}) and len(t["bundles"]) == 2, t
    cut = dataclasses.replace(plan, links=[lk for lk in plan.links if lk.tier != "leaf-spine"])
    local = orjson.loads(dumps(build(cut).doc))
    tests = [t for r in compute_rounds(local) for t in r["tests"]]
    assert len(tests) == 256 and all(t["a"]["leaf"] == t["b"]["leaf"] and t["bundles"] == [] for t in tests)
    assert all(t["a"]["rail"] == t["b"]["rail"] for t in tests)
    assert {c for t in tests for c in t["cables"]} == {lk.id for lk in cut.links if lk.tier == "node-leaf"}


@pytest.mark.parametrize("name", ALL_EXAMPLES)
def test_pass_marks_are_for_both_directions(name: str) -> None:
    """perftest -b reports the sum of both directions (perftest_parameters.c, print_full_bw_report), and NVIDIA's
    ngc_multinode_perf passes a -b run at 2 x 0.9 x port rate: the pass marks here are that, from the link speed
    and the up/down ratio of the tiers crossed (from the plan's tier summaries), and pair.sh runs -b."""
    plan = plan_of(name)
    ap = build(plan)
    th = ap.doc["thresholds"]
    link = max(r.speed_mbps for d in plan.devices if d.role == "node" for r in d.rails) / 1000
    member = max(m.speed_mbps for d in plan.devices if d.bond for m in d.bond.members) / 1000
    roles = ("leaf", "spine") if plan.cluster.tiers >= 3 else ("leaf",)

    def ratio(fabric: str, roles: tuple[str, ...]) -> float:
        return min([1.0] + [t.uplink_gbps / t.downlink_gbps for t in plan.cluster.tier_summaries
                            if t.fabric == fabric and t.role in roles and t.uplink_gbps and t.downlink_gbps])

    assert th["ib_write_bw_gbps"]["leaf_local"] == pytest.approx(2 * 0.9 * link)
    assert th["ib_write_bw_gbps"]["across_fabric"] == pytest.approx(2 * 0.9 * link * ratio("compute", roles))
    assert th["ib_write_bw_gbps"]["per_direction"]["leaf_local"] == pytest.approx(0.9 * link)
    assert th["storage_ib_write_bw_gbps"]["across_fabric"] == pytest.approx(
        2 * 0.9 * member * ratio("storage", ("storage-leaf", "storage-spine")))
    pair = files(ap)["jobs/pair.sh"].decode()
    assert re.search(r"ib_write_bw [^\n]* -b ", pair), pair
