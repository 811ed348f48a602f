"""HyperNode tiers for topologies the examples do not cover (several spine groups)."""

from __future__ import annotations

import pytest
from railforge_k8s.plan_input import NodeTopology
from railforge_k8s.scheduling import hypernode_specs


def _node(name: str, leaf: str, spine: str) -> NodeTopology:
    return NodeTopology(name=name, su=int(leaf[-1]), rack="R1", leaf_group=leaf, spine_group=spine, rail_plane=None)


def test_cluster_tier_joins_several_spine_groups():
    nodes = (
        _node("a", "su1", "pod01"),
        _node("b", "su2", "pod01"),
        _node("c", "su3", "pod02"),
    )
    specs = {s.name: s for s in hypernode_specs("Big Cluster", nodes)}
    assert {name: s.tier for name, s in specs.items()} == {
        "leaf-su1": 1,
        "leaf-su2": 1,
        "leaf-su3": 1,
        "spine-pod01": 2,
        "spine-pod02": 2,
        "cluster-big-cluster": 3,
    }
    members = lambda name: [m["selector"]["exactMatch"]["name"] for m in specs[name].members]  # noqa: E731
    assert members("spine-pod01") == ["leaf-su1", "leaf-su2"]
    assert members("cluster-big-cluster") == ["spine-pod01", "spine-pod02"]


def test_single_spine_group_has_no_cluster_tier():
    specs = hypernode_specs("c", (_node("a", "su1", "pod01"), _node("b", "su2", "pod01")))
    assert max(s.tier for s in specs) == 2


def test_leaf_group_across_spine_groups_is_refused():
    with pytest.raises(ValueError, match="leaf group su1 spans spine groups pod01 and pod02"):
        hypernode_specs("c", (_node("a", "su1", "pod01"), _node("b", "su1", "pod02")))
