"""host-macs.csv: the template of host BMC and boot-NIC MACs, serials and boot targets to fill in after racking.

It lists every host with a planned BMC, in plan order, with where to find it (SU, rack, U, model) and what it will
get (BMC address, boot NIC and its in-band address); `bmc_mac`, `boot_mac`, `serial` and `target` are left empty.
`railforge ztp`, `railforge boot` and `railforge bmc` read it back (railforge/baremetal/hostmacs.py).
"""

from __future__ import annotations

import csv
import io

from railforge.formats.output import Output
from railforge.plan.model import HOST_ROLES, Device, Plan

TEMPLATE = "host-macs.csv"
COLUMNS = ("host", "bmc_mac", "boot_mac", "serial", "target", "model", "su", "rack", "u", "bmc_address",
           "boot_nic", "boot_address")


def hosts(plan: Plan) -> list[Device]:
    """Hosts with a planned BMC, in plan order: the ones railforge can bring up from power-off."""
    return [d for d in plan.devices if d.role in HOST_ROLES and d.bmc is not None]


def boot_nic(dev: Device) -> str | None:
    """The NIC a host PXE-boots from: the first member of its in-band bond (the switch must let it up alone,
    e.g. LACP bypass, until the OS builds the bond)."""
    return dev.bond.members[0].ifname if dev.bond and dev.bond.members else None


def template_csv(plan: Plan) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS)
    for d in hosts(plan):
        nic = boot_nic(d)
        w.writerow([d.name, "", "", "", "", d.model, d.su if d.su is not None else "", d.rack, d.u,
                    d.bmc.address if d.bmc else "", nic or "", d.bond.address if nic and d.bond else ""])
    return buf.getvalue()


def render(plan: Plan, out: Output) -> None:
    out.write_text(TEMPLATE, template_csv(plan))
