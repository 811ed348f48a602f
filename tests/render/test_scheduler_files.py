"""Slurm topology files parse back to the plan's switch/node tree; NCCL env and hostfile follow the plan."""

from __future__ import annotations

import re

import pytest

from railforge.render.hostlist import compress
from tests.conftest import example_spec, plan_of, run_cli


def expand(hostlist: str) -> list[str]:
    """Slurm hostlist expression -> names (prefix[a-b,c]suffix, comma separated)."""
    out = []
    for part in re.findall(r"[^,\[]+(?:\[[^\]]*\][^,\[]*)?", hostlist):
        m = re.fullmatch(r"([^\[]*)\[([^\]]*)\](.*)", part)
        if not m:
            out.append(part)
            continue
        prefix, ranges, suffix = m.groups()
        for r in ranges.split(","):
            lo, _, hi = r.partition("-")
            width = len(lo)
            for n in range(int(lo), int(hi or lo) + 1):
                out.append(f"{prefix}{n:0{width}d}{suffix}")
    return out


def parse_conf(text: str) -> list[dict[str, str]]:
    lines = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            lines.append(dict(kv.split("=", 1) for kv in line.split()))
    return lines


def test_hostlist_round_trip():
    names = ["su001-gpu01", "su001-gpu02", "su001-gpu03", "su001-gpu05", "su002-gpu01", "mgmt"]
    assert compress(names) == "su001-gpu[01-03,05],su002-gpu01,mgmt"
    assert expand(compress(names)) == names


def expected_tree(plan) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """From the plan's node rails and switch links: SU switch -> nodes, upper switch -> children."""
    devices = plan.device_index()
    leaves: dict[str, set[str]] = {}
    for node in plan.devices_by_role("node"):
        sus = {devices[r.leaf].su for r in node.rails}
        assert len(sus) == 1, f"{node.name} reaches leaves of SUs {sus}"
        leaves.setdefault(f"su{sus.pop():03d}", set()).add(node.name)
    below = {"spine": "leaf", "superspine": "spine"}
    uppers: dict[str, set[str]] = {}
    for link in plan.links:
        if link.fabric != "compute":
            continue
        for lo, hi in ((link.a.device, link.b.device), (link.b.device, link.a.device)):
            if below.get(devices[hi].role) == devices[lo].role:
                child = f"su{devices[lo].su:03d}" if devices[lo].role == "leaf" else lo
                uppers.setdefault(hi, set()).add(child)
    return leaves, uppers


@pytest.mark.parametrize("name", ["dgx-h100-4su", "roce-a800-4nic", "roce-16k-railplane"])
def test_tree_topology_parses_back_to_the_plan(built, name):
    out, plan = built(name), plan_of(name)
    entries = parse_conf((out / "slurm" / "topology.conf").read_text())
    role = {d.name: d.role for d in plan.devices}
    leaves = {e["SwitchName"]: set(expand(e["Nodes"])) for e in entries if "Nodes" in e}
    uppers = {e["SwitchName"]: set(expand(e["Switches"])) for e in entries if "Switches" in e}
    expected_leaves, expected_up = expected_tree(plan)
    assert leaves == expected_leaves
    assert len(leaves) == plan.cluster.sus
    placed = [n for ns in leaves.values() for n in ns]
    assert len(placed) == len(set(placed)), "every node under exactly one leaf switch"
    assert uppers == expected_up
    top = "superspine" if plan.cluster.tiers == 3 else "spine"
    assert {s for s in uppers if role[s] == top} == {d.name for d in plan.devices if d.role == top}
    assert set(placed) == {d.name for d in plan.devices if d.role == "node"}


def test_block_topology_has_one_block_per_su(built):
    out, plan = built("dgx-h100-4su"), plan_of("dgx-h100-4su")
    entries = parse_conf((out / "slurm" / "topology-block.conf").read_text())
    blocks = {e["BlockName"]: set(expand(e["Nodes"])) for e in entries if "BlockName" in e}
    assert sorted(blocks) == ["su001", "su002", "su003", "su004"]
    for su in range(1, 5):
        assert blocks[f"su{su:03d}"] == {d.name for d in plan.devices if d.role == "node" and d.su == su}
    sizes = next(e["BlockSizes"] for e in entries if "BlockSizes" in e)
    # SU 4 gave one slot to UFM: the base block is 31 nodes; 2 and 4 SUs aggregate it
    assert sizes == "31,62,124"


def _env(path):
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if line and not line.startswith("#"))


def test_nccl_env_on_the_rail_plane_roce_fabric(built):
    out, plan = built("roce-16k-railplane"), plan_of("roce-16k-railplane")
    node = next(d for d in plan.devices if d.role == "node" and d.su == 7)
    env = _env(out / "nccl" / f"{node.name}.env")
    assert env["NCCL_IB_HCA"] == "=" + ",".join(f"mlx5_{k}" for k in range(8))
    assert env["NCCL_IB_HCA"] == "=" + ",".join(r.hca for r in sorted(node.rails, key=lambda r: r.rail))
    assert env["NCCL_IB_GID_INDEX"] == "3"
    assert env["NCCL_IB_TC"] == str(26 << 2) == str(plan.qos.traffic_class)
    assert int(env["NCCL_IB_QPS_PER_CONNECTION"]) > 1
    assert env["NCCL_SOCKET_IFNAME"] == node.bond.name == "bond0"


def test_nccl_env_on_infiniband_has_no_roce_settings(built):
    env = _env(built("dgx-h100-4su") / "nccl" / "su002-gpu05.env")
    assert env["NCCL_IB_HCA"].count("mlx5_") == 8
    assert "NCCL_IB_GID_INDEX" not in env and "NCCL_IB_TC" not in env
    assert "NCCL_IB_QPS_PER_CONNECTION" not in env


def test_roce_4nic_lists_four_hcas(built):
    env = _env(built("roce-a800-4nic") / "nccl" / "su001-gpu01.env")
    assert env["NCCL_IB_HCA"] == "=mlx5_0,mlx5_1,mlx5_2,mlx5_3"


def test_hostfile_runs_su_by_su(built):
    out, plan = built("dgx-h100-4su"), plan_of("dgx-h100-4su")
    lines = (out / "nccl" / "hostfile").read_text().splitlines()
    su_of = {d.name: d.su for d in plan.devices}
    names = [line.split()[0] for line in lines]
    assert all(line.endswith(" slots=8") for line in lines)
    assert sorted(names) == sorted(d.name for d in plan.devices if d.role == "node")
    sus = [su_of[n] for n in names]
    assert sus == sorted(sus)
    assert names[:3] == ["su001-gpu01", "su001-gpu02", "su001-gpu03"]


def test_limit_rewrites_only_the_selected_nodes_env(tmp_path):
    out = tmp_path / "out"
    run_cli("build", str(example_spec("dgx-h100-4su")), "--out", str(out), "--only", "nccl")
    mine, other = out / "nccl" / "su002-gpu05.env", out / "nccl" / "su001-gpu01.env"
    want = mine.read_text()
    mine.write_text("stale\n")
    other.write_text("stale\n")
    run_cli("build", str(example_spec("dgx-h100-4su")), "--out", str(out), "--limit", "su002-gpu05")
    assert mine.read_text() == want
    assert other.read_text() == "stale\n"
