"""The DGX H100 SuperPOD reference architecture (2-tier NDR InfiniBand, QM9700, 32 slots per SU,
one slot of the fabric given to UFM with 4 leaf ports), at every size the RA tabulates.
Expected figures are the RA's published counts, not outputs of railforge."""

from __future__ import annotations

from collections import Counter

import pytest
import yaml

from railforge.planner import build_plan
from railforge.spec.loader import validate
from tests.conftest import example_spec, plan_of

# SUs: (nodes, leaf switches, spine switches, node/UFM-to-leaf cables, leaf-to-spine cables)
RA = {
    1: (31, 8, 4, 31 * 8 + 4, 8 * 32),
    2: (63, 16, 8, 63 * 8 + 4, 16 * 32),
    3: (95, 24, 16, 95 * 8 + 4, 24 * 32),
    4: (127, 32, 16, 1020, 1024),
}


def _plan_with_sus(sus: int):
    data = yaml.safe_load(example_spec("dgx-h100-4su").read_text())
    data["scalable_units"]["count"] = sus
    data["scalable_units"]["max"] = sus
    data["scalable_units"]["reserved_slots"][0]["su"] = sus
    data.pop("tenants", None)  # the example's tenants name SUs and nodes of the full 4-SU build
    return build_plan(validate(data, {}, "test"))


@pytest.mark.parametrize("sus", sorted(RA))
def test_superpod_sizes(sus: int) -> None:
    nodes, leaves, spines, node_cables, spine_cables = RA[sus]
    plan = _plan_with_sus(sus)
    roles = Counter(d.role for d in plan.devices)
    tiers = Counter(link.tier for link in plan.links if link.fabric == "compute")
    assert plan.cluster.tiers == 2
    assert roles["node"] == nodes
    assert plan.cluster.gpus == nodes * 8
    assert roles["ufm"] == 1
    assert roles["leaf"] == leaves
    assert roles["spine"] == spines
    assert tiers["node-leaf"] == node_cables
    assert tiers["leaf-spine"] == spine_cables
    assert "superspine" not in roles


def test_bundled_example_is_the_4su_reference() -> None:
    plan = plan_of("dgx-h100-4su")
    roles = Counter(d.role for d in plan.devices)
    assert (roles["node"], plan.cluster.gpus, roles["leaf"], roles["spine"]) == (127, 1016, 32, 16)
    tiers = Counter(link.tier for link in plan.links if link.fabric == "compute")
    assert (tiers["node-leaf"], tiers["leaf-spine"]) == (1020, 1024)


def test_superpod_is_non_blocking_with_uniform_wiring() -> None:
    plan = plan_of("dgx-h100-4su")
    leaf = next(s for s in plan.cluster.tier_summaries if s.fabric == "compute" and s.role == "leaf")
    assert leaf.downlink_gbps == leaf.uplink_gbps == 32 * 400
    per_pair = Counter((link.a.device, link.b.device) for link in plan.links if link.tier == "leaf-spine")
    assert set(per_pair.values()) == {2}
    assert len(per_pair) == 32 * 16


def test_ufm_takes_four_leaf_ports_of_its_slot() -> None:
    plan = plan_of("dgx-h100-4su")
    ufm_links = [link for link in plan.links if link.a.device == "ufm01" and link.fabric == "compute"]
    assert sorted(link.b.device for link in ufm_links) == [f"su004-leaf-r{k}" for k in range(4)]
    assert {link.b.port for link in ufm_links} == {"16/2"}


def test_16k_rail_plane_example() -> None:
    plan = plan_of("roce-16k-railplane")
    roles = Counter(d.role for d in plan.devices)
    assert plan.cluster.gpus == 16384 and plan.cluster.tiers == 3 and plan.cluster.mode == "rail-plane"
    assert roles["leaf"] == 32 * 8
    # 8 rail planes of 32 spines (each leaf meets each spine of its plane twice: 64 uplinks / 32 spines)
    assert roles["spine"] == 256
    planes = Counter(d.rail for d in plan.devices if d.role == "spine")
    assert planes == {r: 32 for r in range(8)}
    # super-spines: 8 planes x 32 spines x 64 uplinks / 128 ports
    assert roles["superspine"] == 8 * 32 * 64 // 128
    leaf_to_spine = Counter((link.a.device, link.b.device) for link in plan.links if link.tier == "leaf-spine")
    assert set(leaf_to_spine.values()) == {2}
    dev = plan.device_index()
    for (leaf, spine), _ in leaf_to_spine.items():
        assert dev[leaf].rail == dev[spine].rail, "rail-plane: a leaf only meets the spines of its own rail"
    # spine j of every rail plane meets the 4 super-spines of plane j, 64 uplinks / 4 = 16 links each
    spine_to_ss = Counter((link.a.device, link.b.device) for link in plan.links if link.tier == "spine-superspine")
    assert len(spine_to_ss) == 256 * 4 and set(spine_to_ss.values()) == {16}
    for spine, ss in spine_to_ss:
        assert dev[ss].plane == f"plane{int(spine.rsplit('spine', 1)[1])}"
    ss_ports = Counter(link.b.device for link in plan.links if link.tier == "spine-superspine")
    assert set(ss_ports.values()) == {128}, "non-blocking: every super-spine port is used"


def test_roce_4nic_example() -> None:
    plan = plan_of("roce-a800-4nic")
    nodes = plan.devices_by_role("node")
    assert len(nodes) == 32 and plan.cluster.gpus == 256
    assert all(len(n.rails) == 4 for n in nodes)
    assert Counter(d.role for d in plan.devices)["leaf"] == 2 * 4
