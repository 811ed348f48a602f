"""The work order: one workbook a technician follows top to bottom, rack by rack.

Steps in a safe order: place new racks and install new devices (unpowered, uncabled); load the configurations
of new switches; reload changed configurations on running switches (FRR's frr-reload.py / `nv config apply`
add neighbours and drain removed ones before any cable moves); pull cables; lay new and moved cables; remove
devices; verify. A device that moves is unracked after its cables are pulled and installed at its new place
before cables are laid. Each row names the rack, U, device, port and cable, and the rack elevation drawing to look at.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from pathlib import Path

from railforge import nos
from railforge.change.compare import ADDED, CONFIG, ChangeSet, Item
from railforge.formats.xlsx import Workbook
from railforge.plan.model import Device, Link, Plan
from railforge.plan.tables import PlanIndex, speed_label
from railforge.render.elevations import elevation_file

ORDER_COLUMNS = ("step", "phase", "action", "rack", "u", "device", "port", "port_label", "cable",
                 "to_rack", "to_u", "to_device", "to_port", "to_port_label", "speed", "media", "length_m",
                 "detail", "elevation")
SUMMARY_COLUMNS = ("kind", "action", "count", "breaks_existing")
CHANGE_COLUMNS = ("kind", "action", "subject", "old", "new")
PHASES = ("place-rack", "install", "configure-new", "reload-config", "pull", "unrack", "rerack", "lay", "remove-device",
          "verify")


class Steps:
    def __init__(self, plan: Plan):
        self.idx = PlanIndex(plan)
        self.plan = plan
        self.row_of = {r.name: r.row for r in plan.racks}
        self.rows: list[tuple] = []

    def elevation(self, rack: str) -> str:
        row = self.row_of.get(rack)
        return elevation_file(row) if row is not None else ""

    def _place(self, rack: str, u: int, device: str) -> tuple:
        return self.idx.rack_order.get(rack, 1 << 30), -u, device

    def device(self, phase: str, action: str, dev: Device, detail: str) -> None:
        self.rows.append((PHASES.index(phase), self._place(dev.rack, dev.u, dev.name),
                          (phase, action, dev.rack, dev.u, dev.name, "", "", "", "", "", "", "", "", "", "", "",
                           detail, self.elevation(dev.rack))))

    def cable(self, phase: str, action: str, link: Link, detail: str = "") -> None:
        r = self.idx.cable_row(link)
        a_rack, a_u, a_dev, a_port, a_label, b_rack, b_u, b_dev, b_port, b_label = r[5:15]
        self.rows.append((PHASES.index(phase), self._place(a_rack, a_u, a_dev) + (a_port,),
                          (phase, action, a_rack, a_u, a_dev, a_port, a_label, link.id, b_rack, b_u, b_dev,
                           b_port, b_label, speed_label(link.speed_mbps), link.media, link.length_m, detail,
                           self.elevation(a_rack))))

    def rack(self, name: str, detail: str) -> None:
        self.rows.append((0, (self.idx.rack_order.get(name, 1 << 30), 0, name),
                          ("place-rack", "place", name, "", "", "", "", "", "", "", "", "", "", "", "", "",
                           detail, self.elevation(name))))

    def sorted(self) -> Iterable[tuple]:
        for i, (_, _, row) in enumerate(sorted(self.rows, key=lambda r: (r[0], r[1])), 1):
            yield (i, *row)


def steps(cs: ChangeSet) -> list[tuple]:
    """Every work-order row, numbered in the safe order."""
    new, old = Steps(cs.new), Steps(cs.old)
    new_devs, old_devs = cs.new.device_index(), cs.old.device_index()
    racks = {r.name: r for r in cs.new.racks}
    for it in cs.of("rack", ADDED):
        r = racks[it.subject]
        new.rack(r.name, f"{r.kind} rack, row {r.row} position {r.position}, {r.height_u}U")
    for it in cs.of("device", ADDED):
        d = new_devs[it.subject]
        ports = sum(1 for p in d.ports if p.link)
        new.device("install", "install", d, f"{d.role} {d.model}, {d.height_u}U, {ports} cabled ports")
    for it in cs.of("config"):
        d = new_devs[it.subject]
        if it.action == ADDED:
            new.device("configure-new", "load", d, f"ZTP / first boot: configs/{d.name}/ ({it.new})")
        elif it.action == CONFIG:
            new.device("reload-config", "reload", d,
                       f"{it.new}: {_reload_how(d.nos)}")
    new_links, old_links = cs.new.link_index(), cs.old.link_index()
    for it in cs.of("cable"):
        if it.action == "removed":
            old.cable("pull", "pull", old_links[it.subject])
        elif it.action == "re-cabled":
            old.cable("pull", "pull", old_links[it.subject], f"re-cabled as {it.new}")
            new.cable("lay", "lay", new_links[it.subject], f"was {it.old}")
        elif it.action == "re-labelled":
            new.cable("lay", "relabel", new_links[it.new], f"same cable, label {it.old} becomes {it.new}")
        elif it.action == ADDED:
            new.cable("lay", "lay", new_links[it.subject])
    for it in cs.of("device", "removed"):
        old.device("remove-device", "remove", old_devs[it.subject], "after its cables are pulled")
    moved = {it.subject for it in cs.of("device", "moved")}
    if moved:
        pulled = {it.subject for it in cs.of("cable") if it.action in ("removed", "re-cabled")}
        for link in cs.old.links:
            ends = {link.a.device, link.b.device} & moved
            if ends and link.id not in pulled and link.id in new_links:
                why = f"{', '.join(sorted(ends))} moves"
                old.cable("pull", "pull", link, why)
                new.cable("lay", "lay", new_links[link.id], why)
    for it in cs.of("device", "moved"):
        old.device("unrack", "unrack", old_devs[it.subject], f"moves to {it.new}")
        d = new_devs[it.subject]
        new.device("rerack", "install", d, f"moved from {it.old}: {d.role} {d.model}, {d.height_u}U")
    merged = Steps(cs.new)
    merged.rows = new.rows + old.rows
    merged.rows.append((PHASES.index("verify"), (1 << 30, 0, ""),
                        ("verify", "verify", "", "", "", "", "", "", "", "", "", "", "", "", "", "",
                         "railforge verify cabling (LLDP) against the new plan; check BGP sessions", "")))
    return list(merged.sorted())


def write_work_order(cs: ChangeSet, path: Path) -> int:
    """Write the workbook atomically (a temporary file beside `path`, then rename); return the step count."""
    rows = steps(cs)
    path = path.absolute()
    tmp = path.parent / f".{path.name}.tmp-{os.getpid()}"
    wb = None
    try:
        wb = Workbook(tmp)
        wb.table("work-order", ORDER_COLUMNS, rows)
        wb.table("summary", SUMMARY_COLUMNS, [(kind, action, n, "yes" if Item(kind, action, "").breaking else "no")
                                              for (kind, action), n in sorted(cs.counts().items())])
        wb.table("changes", CHANGE_COLUMNS, [(it.kind, it.action, it.subject, it.old, it.new) for it in cs.items])
        wb.close()
        os.replace(tmp, path)
    except BaseException:
        if wb is not None:
            wb.abort()
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    return len(rows)


def _reload_how(name: str | None) -> str:
    profile = nos.find(name)
    return profile.reload if profile is not None else "load the new configuration"
