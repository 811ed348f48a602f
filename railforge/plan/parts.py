"""The parts of every cable, as a technician lays them and a buyer orders them: one definition for the cabling
workbook, the pull sheets, the work order, the BOM and the report.

`lay_parts` sets each link's physical parts once, from what the media rules chose for it (a cable part, or the
same transceiver part at both ends) and the catalog's twin-port modules and copper splitters (the plan's
`twin_parts` and `splitter_parts`). A split switch cage holds one plug, so:

- a transceiver end in a split switch cage whose part has a twin-port module takes that module (one per cage);
- copper links on a split cage whose cable part has a splitter for that split share one cable, `assembly` naming the
  cage: a splitter (its part replaces the link's) when the other ends are not split cages, or the links' own
  straight twin-port cable when two split cages are cabled only to each other. Split cages cabled to several others
  keep one cable per link (no copper cable does that; docs/artifacts/bom.md).

The planner calls it after choosing media; the plan reader calls it for a schema 2 plan, whose links still hold the
media rule's part and a transceiver count, so both give the same links.

`orders(plan)` counts what to order from those fields: modules (a twin-port module once per switch cage, every
other transceiver once per end) and cables (a shared cable once per assembly), and on which link each is counted
first, so per-tier and per-row figures add up to the totals.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

from railforge.plan.model import SWITCH_ROLES, Device, Link, Plan


def split_ways(breakout: str) -> int:
    """'2x400G' -> 2: the ports that share the cage (1 for a whole cage or a host port)."""
    count = breakout.split("x", 1)[0]
    return int(count) if count.isdigit() else 1


def cage_label(port_label: str) -> str:
    """'2/1' -> '2': the front-panel label of the cage a port is on."""
    return port_label.split("/", 1)[0]


def split_ends(devices: list[Device]) -> dict[tuple[str, str], tuple[int, int, str]]:
    """(switch, port) -> (cage index, ports in the cage, cage label) for every port on a split switch cage."""
    out = {}
    for d in devices:
        if d.role in SWITCH_ROLES:
            for p in d.ports:
                ways = split_ways(p.breakout)
                if ways > 1:
                    out[(d.name, p.name)] = (p.index, ways, cage_label(p.label))
    return out


def lay_parts(devices: list[Device], links: list[Link], twin_parts: dict[str, str],
              splitter_parts: dict[str, dict[str, str]]) -> None:
    """Turn each link's rule parts into the parts laid (module docstring). Before: a cable has `part`, a transceiver
    link has the same part as `a_module` and `b_module` and no `part`."""
    split = split_ends(devices)
    if twin_parts:
        for link in links:
            if link.a_module in twin_parts and (link.a.device, link.a.port) in split:
                link.a_module = twin_parts[link.a_module]
            if link.b_module in twin_parts and (link.b.device, link.b.port) in split:
                link.b_module = twin_parts[link.b_module]
    if not splitter_parts:
        return
    heads: dict[tuple[str, int], list[Link]] = defaultdict(list)
    info: dict[tuple[str, int], tuple[int, str]] = {}
    for link in links:
        if link.a_module is not None or link.part not in splitter_parts:
            continue
        for end in (link.a, link.b):
            cage = split.get((end.device, end.port))
            if cage is not None and str(cage[1]) in splitter_parts[link.part]:
                key = (end.device, cage[0])
                heads[key].append(link)
                info[key] = (cage[1], f"{end.device}:{cage[2]}")
    heads_of: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for key, members in heads.items():
        for link in members:
            heads_of[link.id].append(key)
    done: set[tuple[str, int]] = set()
    for key in sorted(heads):
        if key in done:
            continue
        group, stack = {key}, [key]
        while stack:
            for link in heads[stack.pop()]:
                for other in heads_of[link.id]:
                    if other not in group:
                        group.add(other)
                        stack.append(other)
        done |= group
        members = list({link.id: link for k in sorted(group) for link in heads[k]}.values())
        if len(group) == 1:
            ways, name = info[key]
            splitter = splitter_parts[members[0].part][str(ways)]
            for link in members:
                link.part, link.assembly = splitter, name
        elif len(group) == 2 and all(len(heads_of[link.id]) == 2 for link in members):
            name = info[min(group)][1]
            for link in members:
                link.assembly = name


@dataclass(slots=True)
class Orders:
    """What the plan's cables need ordered, and where each count is first met (index into `plan.links`)."""

    modules: Counter = field(default_factory=Counter)
    """(media, module part, speed label, twin) -> modules; `twin` is the ports one module serves (1: single-port)."""
    cables: Counter = field(default_factory=Counter)
    """(media, part, speed Mb/s of a link, length, kind) -> cables (not the fibre patch cords): `kind` is "" for a
    cable of its own, "splitter 1:N" for a splitter (length: its longest leg), "twin-port" for a straight
    twin-port cable joining two split cages, "unshared" for a copper link between split cages cabled to several
    others (no one copper cable serves such cages: check it, docs/artifacts/bom.md)."""
    link_modules: list[int] = field(default_factory=list)
    """Per link: the modules first counted on it."""
    link_cables: list[int] = field(default_factory=list)
    """Per link: 1 when a cable to lay and order is first counted on it (a cable or fibre patch cord of its own, the
    first link of an assembly), else 0."""
    shared_links: int = 0
    """Links carried by a cable shared with others (splitter legs, twin-port cable lanes)."""
    shared_cables: int = 0
    """Those shared cables."""

    @property
    def module_total(self) -> int:
        return sum(self.modules.values())

    @property
    def cable_total(self) -> int:
        return sum(self.cables.values())


def speed_label(mbps: int) -> str:
    return f"{mbps // 1000}G" if mbps % 1000 == 0 else f"{mbps}M"


def twin_speed(mbps: int, ways: int) -> str:
    """'800G (2 x 400G)' for a module or cable that carries `ways` ports of `mbps`; the port speed alone for 1."""
    return speed_label(mbps) if ways <= 1 else f"{speed_label(mbps * ways)} ({ways} x {speed_label(mbps)})"


def orders(plan: Plan) -> Orders:
    """The plan's orders (module docstring), computed once per plan and shared by the families that read it."""
    return plan.view("orders", _orders)


def _orders(plan: Plan) -> Orders:
    out = Orders()
    split = split_ends(plan.devices)
    twins = set(plan.twin_parts.values())
    seen_modules: set[tuple[str, int]] = set()
    assemblies: dict[str, list[Link]] = defaultdict(list)
    for link in plan.links:
        n = 0
        for end, module in ((link.a, link.a_module), (link.b, link.b_module)):
            if module is None:
                continue
            cage = split.get((end.device, end.port))
            ways = 1
            if module in twins and cage is not None:
                key = (end.device, cage[0])
                if key in seen_modules:
                    continue
                seen_modules.add(key)
                ways = cage[1]
            out.modules[(link.media, module, link.speed_mbps, ways)] += 1
            n += 1
        out.link_modules.append(n)
        if link.assembly is None:
            if link.a_module is None:
                both_split = (link.a.device, link.a.port) in split and (link.b.device, link.b.port) in split
                kind = "unshared" if both_split and link.part in plan.splitter_parts else ""
                out.cables[(link.media, link.part or "", link.speed_mbps, link.length_m, kind)] += 1
            out.link_cables.append(1)
            continue
        members = assemblies[link.assembly]
        out.link_cables.append(0 if members else 1)
        members.append(link)
    splitter_ways = {part: ways for by_ways in plan.splitter_parts.values() for ways, part in by_ways.items()}
    for members in assemblies.values():
        first = members[0]
        ways = splitter_ways.get(first.part or "")
        kind = f"splitter 1:{ways}" if ways else "twin-port"
        length = max(link.length_m for link in members)
        out.cables[(first.media, first.part or "", first.speed_mbps, length, kind)] += 1
        out.shared_links += len(members)
        out.shared_cables += 1
    return out


def module_rows(o: Orders) -> list[tuple[str, str, str, int, int]]:
    """(media, part, speed, ports per module, quantity) per kind of module, sorted."""
    return sorted((media, part, twin_speed(mbps, ways), ways, n) for (media, part, mbps, ways), n in o.modules.items())


def laid(link: Link) -> str:
    """The parts a link is laid with, in one phrase for a cable's description: its cable part, or for a fibre run
    its module (both, 'A / B', when the ends differ); '' when the catalog has no part (Cat6)."""
    if link.a_module is None:
        return link.part or ""
    return link.a_module if link.a_module == link.b_module else f"{link.a_module} / {link.b_module}"


def fibre_runs(plan: Plan) -> list[Link]:
    """Links laid as a fibre patch cord between two transceivers."""
    return [link for link in plan.links if link.a_module is not None]
