"""Bill of materials: switches by model and role, hosts, transceivers per end, cables by media and length,
fibre length and NIC ports, as quantities a purchasing team can order from."""

from __future__ import annotations

import csv
from collections import Counter, defaultdict
from dataclasses import dataclass

from railforge.output import Output
from railforge.plan import SWITCH_ROLES, Plan
from railforge.render.tables import speed_label

BOM_COLUMNS = ("category", "item", "part", "speed", "length_m", "quantity", "unit", "note")


@dataclass(slots=True)
class Bom:
    rows: list[tuple]
    optical_modules: int
    transceivers: int
    aoc_cables: int
    cables: int
    fibre_m: float


def is_aoc(media: str) -> bool:
    return "AOC" in media


def bill_of_materials(plan: Plan) -> Bom:
    """The BOM of `plan`, computed once per plan (bom.csv and the report both read it; rendering in one process
    shares it)."""
    return plan.view("bill_of_materials", _bill_of_materials)


def _bill_of_materials(plan: Plan) -> Bom:
    rows: list[tuple] = []
    switches = Counter((d.model, d.role) for d in plan.devices if d.role in SWITCH_ROLES)
    for (model, role), n in sorted(switches.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        rows.append(("switch", role, model, "", "", n, "pcs", ""))
    hosts = Counter((d.model, d.role) for d in plan.devices if d.role not in SWITCH_ROLES)
    for (model, role), n in sorted(hosts.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        gpus = f"{n * plan.cluster.gpus_per_node} GPUs" if role == "node" else ""
        rows.append(("host", role, model, "", "", n, "pcs", gpus))

    xcvr: Counter = Counter()
    cables: Counter = Counter()
    fibre: dict[str, float] = defaultdict(float)
    fibre_cords: Counter = Counter()
    aoc = 0
    kinds = Counter((link.media, link.part or "", link.speed_mbps, link.length_m, link.transceivers,
                     link.fibre or "fibre") for link in plan.links)  # a few hundred kinds of ~500 K cables
    for (media, part, mbps, length, per_cable, fibre_kind), n in kinds.items():
        speed = speed_label(mbps)
        if per_cable:
            xcvr[(media, part, speed)] += per_cable * n
            fibre_cords[(fibre_kind, speed, length)] += n
            fibre[fibre_kind] += length * n
        else:
            cables[(media, part, speed, length)] += n
            if is_aoc(media):
                aoc += n
    twin_ends, twin_cages = _twin_port_ends(plan)
    for key, ends in twin_ends.items():
        xcvr[key] -= ends
    for (media, part, speed), n in sorted(xcvr.items()):
        if n:
            rows.append(("transceiver", media, part, speed, "", n, "pcs",
                         "single-port, one per cable end not on a split switch cage" if part in plan.twin_parts
                         else "counted per cable end"))
    for (media, part, speed), n in sorted(twin_cages.items()):
        rows.append(("transceiver", f"{media} twin-port", part, speed, "", n, "pcs",
                     "one per split switch cage, serving its ports"))
    for (media, part, speed, length), n in sorted(cables.items()):
        rows.append(("cable", media, part, speed, length, n, "pcs", ""))
    for (kind, speed, length), n in sorted(fibre_cords.items()):
        rows.append(("fibre patch cord", kind, "", speed, length, n, "pcs", "between two transceivers"))
    for kind, metres in sorted(fibre.items()):
        rows.append(("fibre total", kind, "", "", "", round(metres, 1), "m", ""))

    fabric_of = {link.id: link.fabric for link in plan.links}
    nic_ports = Counter((d.role, fabric_of[p.link], p.speed_mbps) for d in plan.devices if d.role not in SWITCH_ROLES
                        for p in d.ports if p.link in fabric_of)
    for (role, fabric, mbps), n in sorted(nic_ports.items()):
        rows.append(("nic port", f"{role} {fabric}", "", speed_label(mbps), "", n, "ports",
                     "BMC" if fabric == "oob" else ""))
    n_xcvr = sum(xcvr.values()) + sum(twin_cages.values())
    return Bom(rows, n_xcvr + 2 * aoc, n_xcvr, aoc, len(plan.links), round(sum(fibre.values()), 1))


def _twin_port_ends(plan: Plan) -> tuple[Counter, Counter]:
    """Link ends on split switch cages whose transceiver part has a twin-port module (plan.twin_parts):
    ({(media, part, speed): ends served}, {(media, twin part, speed): modules, one per cage})."""
    ends: Counter = Counter()
    cages: set[tuple[str, int, str, str, str]] = set()
    if not plan.twin_parts:
        return ends, Counter()
    twin_links = {link.id: link for link in plan.links if link.transceivers and link.part in plan.twin_parts}
    for d in plan.devices:
        if d.role not in SWITCH_ROLES:
            continue
        for p in d.ports:
            link = twin_links.get(p.link) if p.link else None
            if link is None or not _split(p.breakout):
                continue
            speed = speed_label(link.speed_mbps)
            ends[(link.media, link.part, speed)] += 1
            cages.add((d.name, p.index, link.media, plan.twin_parts[link.part], speed))
    return ends, Counter((media, twin, speed) for _, _, media, twin, speed in cages)


def _split(breakout: str) -> bool:
    """'2x400G' -> True: the port shares its cage with others."""
    count = breakout.split("x", 1)[0]
    return count.isdigit() and int(count) > 1


def render(plan: Plan, out: Output) -> None:
    bom = bill_of_materials(plan)
    with out.open("bom.csv") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(BOM_COLUMNS)
        w.writerows(bom.rows)
