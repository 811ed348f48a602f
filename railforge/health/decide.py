"""From the set of firing alerts to the actions they call for, with escalation by topology.

Pure: the same alerts and plan give the same decision, so it is tested without Slurm or HTTP. A node rail,
a node check or a miswired node cable drains that node; several nodes' rails down on one leaf become one
leaf action (the leaf is suspect: drain every node behind it, one work order for the leaf); several leaves
of one SU (isolated, or escalated) become one SU action. Spine and uplink-cable alerts drain nothing (ECMP
routes around them) but get a work order. Anything naming a device or cable not in the plan is ignored.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from railforge.health.topology import HealthIndex
from railforge.health.webhook import Alert

NODE_ALERTS = ("RailforgeNodeRailDown", "RailforgeNodeCheckFailed", "RailforgeCableMiswired")
WORK_ONLY = ("RailforgeFabricCableDown", "RailforgeSpineIsolated", "RailforgeCableErrors")
LOG_ONLY = ("RailforgeExporterDown", "RailforgeFabricScanDown")
REASON_PREFIX = "railforge:"


@dataclass(frozen=True, slots=True)
class Policy:
    leaf_escalation_nodes: int = 2  # this many nodes with a rail down on one leaf -> a leaf action
    su_escalation_leaves: int = 2  # this many leaves of one SU in trouble -> an SU action


@dataclass(frozen=True, slots=True)
class WorkItem:
    kind: str  # cable | device | su
    subject: str  # cable label, device name or su<N>
    why: str


@dataclass(slots=True)
class Decision:
    drains: dict[str, str] = field(default_factory=dict)  # node -> reason
    work: dict[str, WorkItem] = field(default_factory=dict)  # subject -> item
    ignored: list[str] = field(default_factory=list)
    escalations: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def drain(self, node: str, reason: str) -> None:
        self.drains.setdefault(node, f"{REASON_PREFIX} {reason}")

    def order(self, kind: str, subject: str, why: str) -> None:
        self.work.setdefault(subject, WorkItem(kind, subject, why))


def _int(text: str) -> int | None:
    return int(text) if text.isdigit() else None


def decide(alerts: list[Alert], idx: HealthIndex, policy: Policy = Policy()) -> Decision:
    d = Decision()
    rail_down: dict[str, dict[str, str]] = defaultdict(dict)  # leaf -> node -> cable
    leaves_hit: dict[int, set[str]] = defaultdict(set)
    for alert in sorted(alerts, key=lambda a: (a.name, a.fingerprint)):
        if alert.status != "firing":
            continue
        labels = alert.labels
        name, device, cable = alert.name, labels.get("device", ""), labels.get("cable", "")
        if cable and cable not in idx.links:
            d.ignored.append(f"{name}: cable {cable!r} is not in the plan")
            continue
        if name in LOG_ONLY:
            d.notes.append(f"{name} on {device or '?'}: monitoring is blind there, nothing is drained")
            continue
        if name in NODE_ALERTS:
            node = idx.node_of_cable(cable) if cable else None
            node = node or (device if device in idx.devices and idx.devices[device].role == "node" else None)
            if node is None:
                d.ignored.append(f"{name}: no planned node behind device {device!r} / cable {cable!r}")
                continue
            what = f"{name} {labels.get('component') or labels.get('port', '')} {cable}".strip()
            d.drain(node, what)
            if cable:
                d.order("cable", cable, f"{name} on {node}")
                leaf = idx.leaf_of_cable(cable)
                if leaf and name == "RailforgeNodeRailDown":
                    rail_down[leaf][node] = cable
            else:
                d.order("device", node, f"{name}: {labels.get('component', 'node check')}")
            continue
        if name == "RailforgeLeafIsolated":
            if device not in idx.nodes_of_leaf:
                d.ignored.append(f"{name}: leaf {device!r} is not in the plan")
                continue
            _leaf_action(d, idx, device, f"{name} {device}")
            su = idx.devices[device].su
            if su is not None:
                leaves_hit[su].add(device)
            continue
        if name == "RailforgeSuIsolated":
            su = _int(labels.get("su", ""))
            if su not in idx.leaves_of_su:
                d.ignored.append(f"{name}: SU {labels.get('su')!r} is not in the plan")
                continue
            _su_action(d, idx, su, f"{name} su{su}")
            continue
        if name in WORK_ONLY:
            if name == "RailforgeSpineIsolated":
                if device not in idx.devices:
                    d.ignored.append(f"{name}: device {device!r} is not in the plan")
                    continue
                d.order("device", device, f"{name}: {labels.get('bisection_share', '?')} of the bisection")
            elif cable:
                d.order("cable", cable, f"{name} {device}:{labels.get('port', '')}")
            else:
                d.ignored.append(f"{name}: no cable label")
            continue
        d.ignored.append(f"{name}: not a railforge alert")
    for leaf, nodes in sorted(rail_down.items()):
        if len(nodes) >= policy.leaf_escalation_nodes:
            d.escalations.append(f"{len(nodes)} nodes lost their rail on {leaf}: one leaf action")
            for cable in nodes.values():
                d.work.pop(cable, None)
            _leaf_action(d, idx, leaf, f"{len(nodes)} rails down on {leaf}")
            su = idx.devices[leaf].su
            if su is not None:
                leaves_hit[su].add(leaf)
    for su, leaves in sorted(leaves_hit.items()):
        if len(leaves) >= policy.su_escalation_leaves:
            d.escalations.append(f"{len(leaves)} leaves of SU {su} in trouble ({', '.join(sorted(leaves))}): "
                                 "one SU action")
            for leaf in leaves:
                d.work.pop(leaf, None)
            _su_action(d, idx, su, f"{len(leaves)} leaves of su{su}")
    return d


def _leaf_action(d: Decision, idx: HealthIndex, leaf: str, why: str) -> None:
    d.order("device", leaf, why)
    for node in idx.nodes_of_leaf.get(leaf, []):
        d.drains[node] = f"{REASON_PREFIX} leaf {leaf} ({why})"


def _su_action(d: Decision, idx: HealthIndex, su: int, why: str) -> None:
    d.order("su", f"su{su}", why)
    for node in idx.nodes_of_su.get(su, []):
        d.drains[node] = f"{REASON_PREFIX} SU {su} ({why})"
