"""switch-macs.csv: the template of switch management MACs and serials that the user fills in after racking.

It lists every switch that gets a management address and boots by ZTP (its OS profile has a ZTP variant),
in plan order, with where to find it (rack, U, model) and what it will get (management port and address);
`mac`, `client_id` and `serial` are left empty. `railforge ztp` reads it back (railforge/ztp/macs.py).
"""

from __future__ import annotations

import csv
import io

from railforge import nos
from railforge.formats.output import Output
from railforge.plan import outdir
from railforge.plan.model import Device, Plan

TEMPLATE = outdir.SWITCH_MACS
COLUMNS = ("switch", "mac", "client_id", "serial", "model", "nos", "rack", "u", "mgmt_port", "mgmt_address")


def provisioned(plan: Plan) -> list[Device]:
    """Switches with a management address whose OS boots through ZTP here."""
    return [d for d in plan.switches() if d.mgmt_address and (p := nos.find(d.nos)) is not None and p.ztp]


def mgmt_port(dev: Device) -> str:
    return next((p.name for p in dev.ports if p.address == dev.mgmt_address), "")


def template_csv(plan: Plan) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS)
    for d in provisioned(plan):
        w.writerow([d.name, "", "", "", d.model, d.nos, d.rack, d.u, mgmt_port(d), d.mgmt_address])
    return buf.getvalue()


def render(plan: Plan, out: Output) -> None:
    out.write_text(TEMPLATE, template_csv(plan))
