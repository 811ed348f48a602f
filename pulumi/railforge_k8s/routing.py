"""Which secondary networks pods get on each rail, and whether their addresses are routable in the fabric.

Reads the plan's pod_networks only; never recomputes addressing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from pulumi.errors import RunError

from .plan_input import PlanInput, PodNetwork, Rail

CNI_VERSION = "0.3.1"
ROUTED_SUFFIX = "routed"  # the rails role names its node-local networks <rail ifname>-routed (rails_pod_network_suffix)


class RoutabilityError(ValueError, RunError):
    """The requested mode would give pods addresses the fabric cannot route.
    A RunError: the Pulumi CLI reports its message as one error line, without a traceback."""


@dataclass(frozen=True, slots=True)
class AttachmentSpec:
    name: str
    rail: Rail
    network: PodNetwork
    cni_config: dict | None  # None: Multus loads the node-local file whose network name is `name`

    @property
    def config_json(self) -> str | None:
        return None if self.cni_config is None else json.dumps(self.cni_config, sort_keys=True, separators=(",", ":"))


def _ipam(net: PodNetwork, name: str) -> dict:
    return {
        "type": "whereabouts",
        "range": net.subnet,
        "range_start": net.range_start,
        "range_end": net.range_end,
        "network_name": name,
    }


def _macvlan(net: PodNetwork, name: str, mtu: int) -> dict:
    return {
        "cniVersion": CNI_VERSION,
        "name": name,
        "type": "macvlan",
        "master": net.ifname,
        "mode": "bridge",
        "mtu": mtu,
        "ipam": _ipam(net, name),
    }


def _ipoib(net: PodNetwork, name: str) -> dict:
    return {
        "cniVersion": CNI_VERSION,
        "name": name,
        "type": "ipoib",
        "master": net.ifname,
        "ipam": _ipam(net, name),
    }


def _refuse_macvlan(plan: PlanInput, per_rail: dict[Rail, list[PodNetwork]]) -> None:
    crowded = [(rail, nets) for rail, nets in per_rail.items() if len(nets) > 1]
    if not crowded:
        return
    detail = "; ".join(
        f"rail {rail.index} ({rail.ifname}) has {len(nets)} leaf subnets "
        f"({', '.join(n.subnet for n in nets[:3])}"
        f"{', ...' if len(nets) > 3 else ''})"
        for rail, nets in crowded
    )
    raise RoutabilityError(
        f"rdmaMode macvlan refused for cluster {plan.cluster}: {detail}. A cluster-wide macvlan "
        "NetworkAttachmentDefinition per rail hands every pod an address from one whereabouts range, "
        "but each "
        "rail leaf routes only its own host subnet, so pods on other leaves would get unroutable addresses. "
        "Use rdmaMode: host (pods run with hostNetwork: true and request the shared RDMA device "
        "rdma/<rail>, e.g. rdma/rail0; no NetworkAttachmentDefinitions are created)."
    )


def _check_ipoib(plan: PlanInput, per_rail: dict[Rail, list[PodNetwork]]) -> None:
    for rail, nets in per_rail.items():
        if len(nets) != 1 or nets[0].scope != "rail":
            raise RoutabilityError(
                f"rdmaMode ipoib for cluster {plan.cluster}: rail {rail.index} ({rail.ifname}) "
                "needs exactly one "
                f"IPoIB subnet with scope 'rail', the plan has {len(nets)} "
                f"({', '.join(f'{n.subnet}/{n.scope}' for n in nets)}). Use rdmaMode: host."
            )


def _check_routed(plan: PlanInput, per_rail: dict[Rail, list[PodNetwork]]) -> None:
    for rail, nets in per_rail.items():
        bad = [n for n in nets if n.scope != "leaf" or not n.gateway]
        if not nets or bad:
            raise RoutabilityError(
                f"rdmaMode routed for cluster {plan.cluster}: rail {rail.index} ({rail.ifname}) needs a pod range "
                f"with a gateway in every leaf subnet, the plan has {len(nets)} pod networks"
                f"{' (' + ', '.join(f'{n.subnet}/{n.scope}' for n in bad[:3]) + ')' if bad else ''}. Routed pods "
                "need a RoCE plan with addressing.pod_addresses_per_node of at least 1; else use rdmaMode: host."
            )


def default_mode(plan: PlanInput) -> str:
    """The mode when the stack sets none: the first of ipoib (InfiniBand) or macvlan, routed (RoCE) whose
    addresses the plan's fabric routes, else host. macvlan fits only one leaf subnet per rail (one SU); a
    multi-SU RoCE plan gets routed when it reserves pod addresses, else host."""
    per_rail = {rail: plan.networks_of(rail) for rail in plan.rails}
    candidates = ((("ipoib", _check_ipoib),) if plan.fabric == "infiniband"
                  else (("macvlan", _refuse_macvlan), ("routed", _check_routed)))
    for mode, check in candidates:
        try:
            check(plan, per_rail)
        except RoutabilityError:
            continue
        return mode
    return "host"


def plan_attachments(plan: PlanInput, mode: str, mtu: int) -> list[AttachmentSpec]:
    """One attachment per rail, or none in host mode; raises RoutabilityError before anything is created."""
    if mode == "host":
        return []
    per_rail = {rail: plan.networks_of(rail) for rail in plan.rails}
    if mode == "routed":
        _check_routed(plan, per_rail)
        return [AttachmentSpec(f"{rail.ifname}-{ROUTED_SUFFIX}", rail, nets[0], None)
                for rail, nets in per_rail.items()]
    if mode == "macvlan":
        _refuse_macvlan(plan, per_rail)
    elif mode == "ipoib":
        _check_ipoib(plan, per_rail)
    else:
        raise ValueError(f"unknown rdma mode {mode!r}")
    specs = []
    for rail, (net,) in per_rail.items():
        name = f"{rail.resource_name}-{mode}"
        config = _macvlan(net, name, mtu) if mode == "macvlan" else _ipoib(net, name)
        specs.append(AttachmentSpec(name=name, rail=rail, network=net, cni_config=config))
    return specs
