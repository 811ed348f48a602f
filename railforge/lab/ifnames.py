"""The plan as the lab's Linux sees it: port names a network device can take.

The lab names every veth end as its plan port, and FRR, lldpd and every check name ports the same way. That holds
for SONiC (`Ethernet8`) and Cumulus (`swp3s1`); an OS whose port names have a character Linux refuses in a device
name (EOS's `Ethernet3/5`) names the kernel device in its profile (`kernel_ifname`), and the lab runs on a copy of
the plan with those names, so namespaces, daemons and checks agree on one name per port.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

from railforge import nos
from railforge.plan.model import Plan


def lab_plan(plan: Plan) -> Plan:
    """`plan` itself when every port name is a Linux name already, else a renamed copy."""
    rename: dict[str, Callable[[str], str]] = {
        d.name: f for d in plan.devices if (p := nos.find(d.nos)) is not None and (f := p.kernel_ifname) is not None}
    if not rename:
        return plan
    plan = copy.deepcopy(plan)
    plan.views = {}
    for dev in plan.devices:
        if (f := rename.get(dev.name)) is not None:
            for port in dev.ports:
                port.name = f(port.name)
            for hs in dev.host_subnets:
                hs.ports = [f(p) for p in hs.ports]
        for rail in dev.rails:
            if (f := rename.get(rail.leaf)) is not None:
                rail.leaf_port = f(rail.leaf_port)
        if dev.bond is not None:
            for m in dev.bond.members:
                if (f := rename.get(m.switch)) is not None:
                    m.switch_port = f(m.switch_port)
        if dev.bmc is not None and (f := rename.get(dev.bmc.switch)) is not None:
            dev.bmc.switch_port = f(dev.bmc.switch_port)
    for link in plan.links:
        for end in (link.a, link.b):
            if (f := rename.get(end.device)) is not None:
                end.port = f(end.port)
    return plan
