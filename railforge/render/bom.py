"""Bill of materials: switches by model and role, hosts, transceiver modules, cables by media and length, fibre
length and NIC ports, as quantities a purchasing team can order from. Parts and counts are the plan's own
(`railforge.plan.parts`: the same the cabling workbook, pull sheets, work order and report show)."""

from __future__ import annotations

import csv
from collections import Counter, defaultdict
from dataclasses import dataclass

from railforge.formats.output import Output
from railforge.plan.model import SWITCH_ROLES, Plan
from railforge.plan.parts import fibre_runs, module_rows, orders, speed_label, twin_speed
from railforge.plan.power import kw, power

BOM_COLUMNS = ("category", "item", "part", "speed", "length_m", "quantity", "unit", "note")


@dataclass(slots=True)
class Bom:
    rows: list[tuple]
    optical_modules: int
    """Parts that fail like optics: transceiver modules plus both ends of every active optical cable."""
    modules: int
    """Transceiver modules to order (a twin-port module serving a split switch cage once)."""
    aoc_cables: int
    cables: int
    """Cables to lay and order: cables and fibre patch cords, a cable shared by several links once."""
    links: int
    fibre_m: float
    shared_links: int = 0  # links carried by a splitter or twin-port copper cable with others
    shared_cables: int = 0  # those cables


def is_aoc(media: str) -> bool:
    return "AOC" in media


def bill_of_materials(plan: Plan) -> Bom:
    """The BOM of `plan`, computed once per plan (bom.csv and the report both read it; rendering in one process
    shares it)."""
    return plan.view("bill_of_materials", _bill_of_materials)


CABLE_NOTES = {
    "twin-port": "one per pair of split switch cages cabled to each other",
    "unshared": "one per link: its split cages are cabled to several others, which no one copper cable does (see "
                "the BOM page)",
}


def _bill_of_materials(plan: Plan) -> Bom:
    rows: list[tuple] = []
    facts = plan.power.facts if plan.power is not None else {}

    def each(name: str, note: str = "", per_plug: bool = False) -> str:
        """`note`, then the part's power per unit (the catalog's figure) when the plan has one."""
        fact = facts.get(name)
        if fact is None:
            return note
        watts = (f"{_w(fact.typical_w)} typical / {_w(fact.max_w)} max {'per plug' if per_plug else 'each'}"
                 + (" (estimate)" if fact.estimate else ""))
        return f"{note}; {watts}" if note else watts

    switches = Counter((d.model, d.role) for d in plan.devices if d.role in SWITCH_ROLES)
    for (model, role), n in sorted(switches.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        rows.append(("switch", role, model, "", "", n, "pcs", each(model)))
    hosts = Counter((d.model, d.role) for d in plan.devices if d.role not in SWITCH_ROLES)
    for (model, role), n in sorted(hosts.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        gpus = f"{n * plan.cluster.gpus_per_node} GPUs" if role == "node" else ""
        rows.append(("host", role, model, "", "", n, "pcs", each(model, gpus)))

    o = orders(plan)
    for media, part, speed, ways, n in module_rows(o):
        if ways > 1:
            rows.append(("transceiver", f"{media} twin-port", part, speed, "", n, "pcs",
                         each(part, f"one per split switch cage, serving its {ways} ports")))
        else:
            rows.append(("transceiver", media, part, speed, "", n, "pcs", each(part, "one per cable end")))
    aoc = 0
    for (media, part, mbps, length, kind), n in sorted(o.cables.items(), key=lambda kv: (kv[0][4] != "", kv[0])):
        if kind.startswith("splitter"):
            ways = int(kind.rsplit(":", 1)[1])
            rows.append(("cable", f"{media} {kind}", part, twin_speed(mbps, ways), length, n, "pcs",
                         each(part, "one per split switch cage, one leg per link", per_plug=True)))
        elif kind == "twin-port":
            rows.append(("cable", f"{media} twin-port", part, speed_label(mbps), length, n, "pcs",
                         each(part, CABLE_NOTES[kind], per_plug=True)))
        else:
            rows.append(("cable", media, part, speed_label(mbps), length, n, "pcs",
                         each(part, CABLE_NOTES.get(kind, ""), per_plug=True)))
        if is_aoc(media):
            aoc += n
    fibre: dict[str, float] = defaultdict(float)
    cords: Counter = Counter()
    for link in fibre_runs(plan):
        kind = link.fibre or "fibre"
        cords[(kind, link.speed_mbps, link.length_m)] += 1
        fibre[kind] += link.length_m
    for (kind, mbps, length), n in sorted(cords.items()):
        rows.append(("fibre patch cord", kind, "", speed_label(mbps), length, n, "pcs", "between two transceivers"))
    for kind, metres in sorted(fibre.items()):
        rows.append(("fibre total", kind, "", "", "", round(metres, 1), "m", ""))

    fabric_of = {link.id: link.fabric for link in plan.links}
    nic_ports = Counter((d.role, fabric_of[p.link], p.speed_mbps) for d in plan.devices if d.role not in SWITCH_ROLES
                        for p in d.ports if p.link in fabric_of)
    for (role, fabric, mbps), n in sorted(nic_ports.items()):
        rows.append(("nic port", f"{role} {fabric}", "", speed_label(mbps), "", n, "ports",
                     "BMC" if fabric == "oob" else ""))
    view = power(plan)
    if plan.power is not None:
        budget = view.budget_w or 0.0
        for row, draw in view.rows.items():
            racks = [r for r in view.racks if r.row == row]
            heaviest = min(racks, key=lambda r: (-r.draw.max_w, r.rack))
            over = sum(r.over for r in racks)
            rows.append(("power", f"row {row}", "", "", "", round(draw.max_w / 1000, 1), "kW max",
                         f"{kw(draw.typical_w)} typical; {len(racks)} racks, heaviest {heaviest.rack} "
                         f"{kw(heaviest.draw.max_w)} max; {over} over the {kw(budget)} rack budget"))
        total = view.total
        rows.append(("power", "all rows", "", "", "", round(total.max_w / 1000, 1), "kW max",
                     f"{kw(total.typical_w)} typical; heat to remove equals the power drawn"))
    modules = o.module_total
    return Bom(rows, modules + 2 * aoc, modules, aoc, sum(o.link_cables), len(plan.links),
               round(sum(fibre.values()), 1), o.shared_links, o.shared_cables)


def _w(watts: float) -> str:
    return f"{watts:,.0f} W" if watts >= 100 else f"{watts:g} W"


def render(plan: Plan, out: Output) -> None:
    bom = bill_of_materials(plan)
    with out.open("bom.csv") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(BOM_COLUMNS)
        w.writerows(bom.rows)
