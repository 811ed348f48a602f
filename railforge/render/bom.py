"""Bill of materials: switches by model and role, hosts, transceivers per end, cables by media and length,
fibre length and NIC ports, as quantities a purchasing team can order from."""

from __future__ import annotations

import csv
from collections import Counter, defaultdict
from dataclasses import dataclass

from railforge.formats.output import Output
from railforge.plan.model import SWITCH_ROLES, Plan
from railforge.plan.tables import speed_label

BOM_COLUMNS = ("category", "item", "part", "speed", "length_m", "quantity", "unit", "note")


@dataclass(slots=True)
class Bom:
    rows: list[tuple]
    optical_modules: int
    transceivers: int
    aoc_cables: int
    cables: int
    fibre_m: float
    shared_links: int = 0  # links carried by a splitter or twin-port copper cable with others
    shared_cables: int = 0  # those cables


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
    assemblies = _copper_assemblies(plan)
    for link in assemblies.covered:
        cables[(link.media, link.part or "", speed_label(link.speed_mbps), link.length_m)] -= 1
    for (media, part, speed, length), n in sorted(cables.items()):
        if n:
            rows.append(("cable", media, part, speed, length, n, "pcs", ""))
    for (item, part, speed, length, note), n in sorted(assemblies.rows.items()):
        rows.append(("cable", item, part, speed, length, n, "pcs", note))
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
    shared = sum(n for (item, *_), n in assemblies.rows.items() if "splitter" in item or "twin-port" in item)
    return Bom(rows, n_xcvr + 2 * aoc, n_xcvr, aoc, len(plan.links), round(sum(fibre.values()), 1),
               len(assemblies.covered) - sum(assemblies.rows.values()) + shared, shared)


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


@dataclass(slots=True)
class Assemblies:
    rows: Counter  # (item, part, speed, length, note) -> cables
    covered: list  # the links these cables carry, each once


def _copper_assemblies(plan: Plan) -> Assemblies:
    """Copper cables that carry several links at once. A split switch cage holds one plug, so the links of a cage
    whose cable part has a splitter for that split (plan.splitter_parts) share one cable: a splitter (twin-port
    head in the cage, one leg per link, to ports that are not split cages) ordered at its longest leg, or, when two
    split cages are cabled only to each other, one straight twin-port cable of the links' own part. Links between
    split cages cabled to several others cannot share one copper cable and stay one cable each (the note in
    docs/artifacts/bom.md says what to check)."""
    out = Assemblies(Counter(), [])
    if not plan.splitter_parts:
        return out
    links = {link.id: link for link in plan.links if not link.transceivers and link.part in plan.splitter_parts}
    heads: dict[tuple[str, int], list] = defaultdict(list)
    ways: dict[tuple[str, int], int] = {}
    for d in plan.devices:
        if d.role not in SWITCH_ROLES:
            continue
        for p in d.ports:
            link = links.get(p.link) if p.link else None
            n = _ways(p.breakout)
            if link is not None and n > 1 and str(n) in plan.splitter_parts[link.part]:
                heads[(d.name, p.index)].append(link)
                ways[(d.name, p.index)] = n
    heads_of: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for key, members in heads.items():
        for link in members:
            heads_of[link.id].append(key)
    done: set[tuple[str, int]] = set()
    for key in sorted(heads):
        if key in done:
            continue
        group = {key}
        stack = [key]
        while stack:
            for link in heads[stack.pop()]:
                for other in heads_of[link.id]:
                    if other not in group:
                        group.add(other)
                        stack.append(other)
        done |= group
        members = list({link.id: link for k in sorted(group) for link in heads[k]}.values())
        first = members[0]
        speed, length = speed_label(first.speed_mbps), max(link.length_m for link in members)
        if len(group) == 1:
            n = ways[key]
            out.rows[(f"{first.media} splitter 1:{n}", plan.splitter_parts[first.part][str(n)], speed, length,
                      "one per split switch cage, one leg per link")] += 1
        elif len(group) == 2 and all(len(heads_of[link.id]) == 2 for link in members):
            out.rows[(f"{first.media} twin-port", first.part, speed, length,
                      "one per pair of split switch cages cabled to each other")] += 1
        else:
            for link in members:
                out.rows[(link.media, link.part, speed, link.length_m, "one per link: its split cages are cabled to "
                          "several others, which no one copper cable does (see the BOM page)")] += 1
        out.covered += members
    return out


def _ways(breakout: str) -> int:
    """'2x400G' -> 2: the ports that share the cage."""
    count = breakout.split("x", 1)[0]
    return int(count) if count.isdigit() else 1


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
