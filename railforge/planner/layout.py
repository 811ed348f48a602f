"""Racks and U positions, then each cable's estimated length and media.

Row 0 is the core row (super-spines, spines, management); SU s is row s: compute racks with the
SU's network rack(s) in the middle. Every kind of device gets racks sized for the design maximum,
so positions never move when the cluster grows.
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict

from railforge.hardware.catalog import media_rules
from railforge.plan.model import SWITCH_ROLES, Device, Link, Rack
from railforge.planner import names
from railforge.planner.context import BuildContext
from railforge.planner.sizing import ceil_div
from railforge.spec.models import MediaRule
from railforge.units import format_speed

U_M = 0.04445
CORE_KINDS = ("superspine", "spine", "storage-superspine", "storage-spine", "oob-superspine", "oob-spine",
              "oob-leaf", "storage-leaf", "mgmt")
NETWORK_KINDS = ("leaf", "storage-leaf", "oob-leaf")


def _height(ctx: BuildContext, dev: Device) -> int:
    if dev.role == "node":
        return ctx.spec.node.height_u
    if dev.role == "mgmt":
        return ctx.spec.management.height_u
    if dev.role == "ufm":
        return 1
    return ctx.catalog.switches[dev.model].height_u


def place(ctx: BuildContext, slots: int, max_counts: dict[tuple[int, str], int], heights: dict[str, int]) -> list[Rack]:
    """Assign rack and U to every device. `max_counts[(row, kind)]` is the design maximum per kind."""
    spec = ctx.spec
    lay = spec.layout
    h_rack = lay.rack_height_u
    if lay.nodes_per_rack * spec.node.height_u > h_rack:
        raise ctx.fail("layout.nodes_per_rack", f"{lay.nodes_per_rack} nodes of {spec.node.height_u}U do not fit "
                                                f"a {h_rack}U rack; use at most {h_rack // spec.node.height_u}")
    by_row: dict[int, list[Device]] = defaultdict(list)
    for dev in ctx.devices:
        row = 0 if dev.role in ("superspine", "spine", "storage-superspine", "storage-spine", "oob-superspine",
                                "oob-spine", "mgmt") or (dev.su is None) else dev.su
        by_row[row].append(dev)
    racks: list[Rack] = []
    rows = sorted(by_row)
    for row in rows:
        devs = by_row[row]
        kinds = NETWORK_KINDS if row else CORE_KINDS
        plan_net: list[tuple[str, int, int]] = []
        net_racks = 0
        used = h_rack
        for kind in kinds:
            count = max_counts.get((row if row == 0 else 1, kind), 0)
            if count == 0:
                continue
            h = heights[kind]
            if row == 0:
                per_rack = h_rack // h
                plan_net.append((kind, net_racks, per_rack))
                net_racks += ceil_div(count, per_rack)
            else:
                if used + h * count > h_rack:
                    net_racks += 1
                    used = 0
                plan_net.append((kind, net_racks - 1, used))
                used += h * count
                if used > h_rack:
                    raise ctx.fail("layout", f"the {count} {kind} switches of one SU ({h * count}U) do not fit "
                                             f"one {h_rack}U network rack")
        compute_racks = ceil_div(slots, lay.nodes_per_rack) if row else 0
        before = compute_racks // 2 if lay.network_rack_position == "middle" else compute_racks
        positions: dict[tuple[str, int], int] = {}
        pos = 1
        for i in range(before):
            positions[("compute", i)] = pos
            pos += 1
        for i in range(net_racks):
            positions[("network", i)] = pos
            pos += 1
        for i in range(before, compute_racks):
            positions[("compute", i)] = pos
            pos += 1
        if row:
            column, line = divmod(row - 1, lay.rows_per_column)
            x0 = column * (len(positions) * lay.rack_width_m + lay.column_gap_m)
            y = round((line + 1) * lay.row_pitch_m, 3)
        else:
            x0, y = 0.0, 0.0
        for (kind, _), p in sorted(positions.items(), key=lambda kv: kv[1]):
            racks.append(Rack(names.rack(row, p), row, p, kind, h_rack, round(x0 + (p - 1) * lay.rack_width_m, 3), y))
        seen: dict[str, int] = defaultdict(int)
        index_of = {kind: (first, start) for kind, first, start in plan_net}
        for dev in devs:
            if dev.role in ("node", "ufm"):
                i = dev.slot - 1
                dev.rack = names.rack(row, positions[("compute", i // lay.nodes_per_rack)])
                dev.u = 1 + (i % lay.nodes_per_rack) * spec.node.height_u
                dev.height_u = spec.node.height_u if dev.role == "node" else 1
                continue
            kind = dev.role
            h = heights[kind]
            dev.height_u = h
            first, start = index_of[kind]
            n = dev.slot if row == 0 else dev_index_in_row(dev, seen)
            if row == 0:
                per_rack = start
                r, k = divmod(n, per_rack)
                dev.rack = names.rack(row, positions[("network", first + r)])
                dev.u = h_rack - (k + 1) * h + 1
            else:
                dev.rack = names.rack(row, positions[("network", first)])
                dev.u = h_rack - start - (n + 1) * h + 1
    return racks


def dev_index_in_row(dev: Device, seen: dict[str, int]) -> int:
    if dev.role == "leaf":
        return dev.rail
    if dev.role == "storage-leaf":
        return dev.slot
    i = seen[dev.role]
    seen[dev.role] = i + 1
    return i


def measure(ctx: BuildContext, racks: list[Rack]) -> None:
    """Estimated length (rounded up to an orderable length) and media for every link. The choice depends only on
    speed and estimated length, which few distinct links have, so it is made once per (speed, length)."""
    spec = ctx.spec
    by_name = {r.name: r for r in racks}
    devs = {d.name: d for d in ctx.devices}
    lengths = sorted(ctx.catalog.orderable_lengths_m)
    rules_cache: dict[int, list] = {}
    chosen: dict[tuple[int, float], tuple[float, str, str | None, str | None, int]] = {}
    slack = spec.layout.slack_m
    for link in ctx.links:
        a, b = devs[link.a.device], devs[link.b.device]
        ra, rb = by_name[a.rack], by_name[b.rack]
        if ra is rb:
            raw = abs(a.u - b.u) * U_M + slack
        else:
            raw = (abs(ra.x_m - rb.x_m) + abs(ra.y_m - rb.y_m) + (ra.height_u - a.u) * U_M
                   + (rb.height_u - b.u) * U_M + slack)
        choice = chosen.get((link.speed_mbps, raw))
        if choice is None:
            choice = chosen[(link.speed_mbps, raw)] = _choose(ctx, link, raw, lengths, rules_cache)
        link.length_m, link.media, link.part, link.fibre, link.transceivers = choice
    one_plug_per_cage(ctx, rules_cache)


def one_plug_per_cage(ctx: BuildContext, rules_cache: dict[int, list]) -> None:
    """A split switch cage holds one plug: a twin-port transceiver or the head of one copper splitter, never a
    copper cable beside an optic or an SR4 engine beside a DR4 one. So every link of such a cage takes the
    furthest-reaching media rule any of them needs (rules are listed by reach); a link raised at one cage may raise
    the cage at its other end, so this runs until no cage changes (ranks only rise, so it ends)."""
    devs = {d.name: d for d in ctx.devices if d.role in SWITCH_ROLES}
    cages: dict[tuple[str, int], list[Link]] = defaultdict(list)
    cages_of: dict[str, list[tuple[str, int]]] = defaultdict(list)
    split_ports = {name: {p.name: p.index for p in d.ports if split_ways(p.breakout) > 1} for name, d in devs.items()}
    for link in ctx.links:
        for end in (link.a, link.b):
            index = split_ports.get(end.device, {}).get(end.port)
            if index is not None:
                cages[(end.device, index)].append(link)
                cages_of[link.id].append((end.device, index))

    def rank(link: Link) -> int:
        return next(i for i, r in enumerate(rules_cache[link.speed_mbps]) if r.media == link.media)

    for link in ctx.links:
        a_b = cages_of.get(link.id, [])
        if len(a_b) == 2 and not link.transceivers and not _paired(cages[a_b[0]], cages[a_b[1]], a_b):
            rules = rules_cache[link.speed_mbps]
            optic = next((i for i, r in enumerate(rules) if r.per_end and r.max_m >= link.length_m), None)
            if optic is not None:
                _take(link, rules[optic])
    work = [key for key, links in cages.items() if len({link.media for link in links}) > 1]
    while work:
        key = work.pop()
        links = cages[key]
        top = max(rank(link) for link in links)
        for link in links:
            if rank(link) < top:
                _take(link, rules_cache[link.speed_mbps][top])
                work += [k for k in cages_of[link.id] if k != key]


def _paired(a: list[Link], b: list[Link], keys: list[tuple[str, int]]) -> bool:
    """Two split cages cabled only to each other: one straight twin-port cable serves both. A cable leg cannot end
    in a split switch cage otherwise (splitter legs are single-port plugs, which fit adapters, not twin-port
    switch cages), so such a link needs transceivers."""
    return {link.id for link in a} == {link.id for link in b} and keys[0] != keys[1]


def _take(link: Link, rule: MediaRule) -> None:
    ordered, part = rule.fitting(link.length_m)
    link.length_m, link.media, link.part = float(ordered), rule.media, part
    link.fibre, link.transceivers = rule.fibre, 2 if rule.per_end else 0


def split_ways(breakout: str) -> int:
    """'2x400G' -> 2: how many ports share the cage."""
    count = breakout.split("x", 1)[0]
    return int(count) if count.isdigit() else 1


def _choose(ctx: BuildContext, link: Link, raw: float, lengths: list[float],
            rules_cache: dict[int, list]) -> tuple[float, str, str | None, str | None, int]:
    """(length to order, media, part, fibre, transceivers) for a link of `raw` estimated metres."""
    i = bisect.bisect_left(lengths, raw - 1e-9)
    length = lengths[i] if i < len(lengths) else math.ceil(raw)
    rules = rules_cache.get(link.speed_mbps)
    if rules is None:
        rules = rules_cache[link.speed_mbps] = media_rules(ctx.catalog, link.speed_mbps)
    rule = next((r for r in rules if r.max_m >= length), None)
    if rule is None:
        reach = max((r.max_m for r in rules), default=0)
        raise ctx.fail("cabling.media", f"no media reaches {length} m at {format_speed(link.speed_mbps)} "
                                        f"(cable {link.id}, {link.a.device} to {link.b.device}); the longest "
                                        f"in the catalog reaches {reach} m: add a media rule for this speed")
    ordered, part = rule.fitting(length)
    return float(ordered), rule.media, part, rule.fibre, 2 if rule.per_end else 0
