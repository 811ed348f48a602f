"""What an alert touches, from the plan alone: cable -> link and node, leaf -> its nodes, SU -> its leaves."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from railforge.plan.model import Device, Link, Plan


@dataclass(slots=True)
class HealthIndex:
    plan: Plan
    devices: dict[str, Device] = field(default_factory=dict)
    links: dict[str, Link] = field(default_factory=dict)
    nodes_of_leaf: dict[str, list[str]] = field(default_factory=dict)
    leaves_of_su: dict[int, list[str]] = field(default_factory=dict)
    nodes_of_su: dict[int, list[str]] = field(default_factory=dict)

    @classmethod
    def of(cls, plan: Plan) -> HealthIndex:
        idx = cls(plan, plan.device_index(), plan.link_index())
        by_leaf: dict[str, set[str]] = defaultdict(set)
        for node in plan.devices_by_role("node"):
            for rail in node.rails:
                by_leaf[rail.leaf].add(node.name)
            if node.su is not None:
                idx.nodes_of_su.setdefault(node.su, []).append(node.name)
        idx.nodes_of_leaf = {leaf: sorted(nodes) for leaf, nodes in sorted(by_leaf.items())}
        for leaf in plan.devices_by_role("leaf"):
            if leaf.su is not None and leaf.fabric == "compute":
                idx.leaves_of_su.setdefault(leaf.su, []).append(leaf.name)
        return idx

    @property
    def node_count(self) -> int:
        return sum(len(v) for v in self.nodes_of_su.values()) or len(self.plan.devices_by_role("node"))

    def node_of_cable(self, cable: str) -> str | None:
        link = self.links.get(cable)
        if link is None:
            return None
        return next((e.device for e in (link.a, link.b) if self.devices[e.device].role == "node"), None)

    def leaf_of_cable(self, cable: str) -> str | None:
        link = self.links.get(cable)
        if link is None:
            return None
        return next((e.device for e in (link.a, link.b) if self.devices[e.device].role == "leaf"), None)
