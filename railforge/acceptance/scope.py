"""Burn in part of a cluster: the plan cut down to the devices and cables a lab (or a partial hand-over) holds,
so the rounds, paths and bundles are those of that part (one spine and one cable per leaf-spine pair makes
every path certain)."""

from __future__ import annotations

import dataclasses

from railforge.lab.scope import LabTopology
from railforge.plan.model import Plan


def restrict(plan: Plan, topo: LabTopology) -> Plan:
    keep = {d.name for d in topo.devices()}
    cables = {lk.id for lk in topo.links}
    devices = [d for d in plan.devices if d.name in keep]
    links = [lk for lk in plan.links if lk.id in cables]
    return dataclasses.replace(plan, devices=devices, links=links, views={})
