"""The cables of an `ibtracert` path (infiniband-diags), mapped to the plan's cable labels by switch name and
InfiniBand port number: the tests' independent reading of a route, hop by hop as the switches forward it."""

from __future__ import annotations

import re

from railforge.plan.model import Plan
from railforge.verify.ibnet import device_of

HOP = re.compile(r'\[(\d+)\] -> (?:switch|ca) port \{0x[0-9a-f]+\}\[\d+\].*"([^"]*)"\s*$')
FROM = re.compile(r'From ca \{0x[0-9a-f]+\} portnum \d+ lid \S+ "([^"]*)"')


def port_cables(plan: Plan) -> dict[tuple[str, int], str]:
    """(switch, IB port number) -> cable label, for the compute fabric."""
    ports = {(d.name, p.name): p.ib_number() for d in plan.devices if d.fabric == "compute" for p in d.ports}
    out = {}
    for lk in plan.links:
        if lk.fabric != "compute":
            continue
        for end in (lk.a, lk.b):
            if (end.device, end.port) in ports:
                out[(end.device, ports[(end.device, end.port)])] = lk.id
    return out


def upper_cables(text: str, plan: Plan) -> list[str]:
    """The switch-to-switch cables of one ibtracert path, in order."""
    switches = {d.name: d for d in plan.devices if d.fabric == "compute" and d.role in ("leaf", "spine", "superspine")}
    cables = port_cables(plan)
    lines = [ln for ln in text.splitlines() if ln.strip()]
    m = FROM.match(lines[0])
    assert m, lines[0]
    prev, out = m[1], []
    for ln in lines[1:]:
        hop = HOP.match(ln)
        if hop is None:
            assert ln.startswith("To "), ln
            break
        here = device_of(prev, switches)
        nxt = device_of(hop[2], switches)
        if here is not None and nxt is not None:
            out.append(cables[(here.name, int(hop[1]))])
        prev = hop[2]
    return out
