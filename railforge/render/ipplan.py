"""The IP and ASN plan: ipplan.csv (every assigned address), ipplan-pools.csv (headroom per pool) and
asnplan.csv (every ASN with its device)."""

from __future__ import annotations

from railforge.formats.csvrows import write_rows
from railforge.formats.output import Output
from railforge.plan.model import Plan
from railforge.plan.tables import ADDRESS_COLUMNS, POOL_COLUMNS, address_table, pool_row

ASN_COLUMNS = ("asn", "device", "role", "fabric", "group", "su", "rail")


def render(plan: Plan, out: Output) -> None:
    rows, usage = address_table(plan)
    with out.open("ipplan.csv") as fh:
        write_rows(fh, [ADDRESS_COLUMNS])
        write_rows(fh, rows)
    with out.open("ipplan-pools.csv") as fh:
        write_rows(fh, [POOL_COLUMNS, *(pool_row(u) for u in usage)])
    with out.open("asnplan.csv") as fh:
        write_rows(fh, [ASN_COLUMNS])
        write_rows(fh, ((d.asn, d.name, d.role, d.fabric, d.group, d.su, d.rail)
                    for d in sorted((d for d in plan.devices if d.asn is not None), key=lambda d: (d.asn, d.name))))
