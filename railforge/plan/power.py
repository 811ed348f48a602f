"""Power and heat per device, rack and row, from the plan's power facts (the catalog's figures for the models and
parts it uses) and the parts every cable lays (railforge.plan.parts): the report, the rack elevations, the BOM and
the build's warnings all read these sums.

A device draws its own model's figure plus every pluggable in its ports: the transceiver at its end of a link (a
twin-port module once per split cage) and each end of an active cable (a shared cable's head once per cage).
A model or part without figures counts 0 W and is listed in `unknown`. Heat equals power: cooling is sized for the
same watts (1 W = 3.412 BTU/h)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from railforge.plan.model import Plan, PowerFact
from railforge.plan.parts import split_ends

BTU_PER_W = 3.412
BUDGET_FIELD = "layout.rack_power_kw"


@dataclass(slots=True)
class Draw:
    typical_w: float = 0.0
    max_w: float = 0.0

    def add(self, fact: PowerFact, n: int = 1) -> None:
        self.typical_w += fact.typical_w * n
        self.max_w += fact.max_w * n


@dataclass(slots=True)
class RackPower:
    rack: str
    row: int
    kind: str
    draw: Draw
    devices: int
    over: bool


@dataclass(slots=True)
class PowerView:
    devices: dict[str, Draw]
    racks: list[RackPower]
    rows: dict[int, Draw]
    budget_w: float | None
    unknown: list[str] = field(default_factory=list)
    estimates: list[str] = field(default_factory=list)

    @property
    def total(self) -> Draw:
        out = Draw()
        for d in self.rows.values():
            out.typical_w += d.typical_w
            out.max_w += d.max_w
        return out

    def over_budget(self) -> list[RackPower]:
        return [r for r in self.racks if r.over]


def power(plan: Plan) -> PowerView:
    """The plan's power view, computed once per plan and shared by the families that read it."""
    return plan.view("power", _power)


def _power(plan: Plan) -> PowerView:
    facts = plan.power.facts if plan.power is not None else {}
    unknown: set[str] = set()
    devices: dict[str, Draw] = {d.name: Draw() for d in plan.devices}

    def charge(device: str, name: str | None) -> None:
        if not name:
            return
        fact = facts.get(name)
        if fact is None:
            unknown.add(name)
        else:
            devices[device].add(fact)

    for d in plan.devices:
        charge(d.name, d.model)
    split = split_ends(plan.devices)
    twins = set(plan.twin_parts.values())
    seen: set[tuple[str, int]] = set()
    for link in plan.links:
        for end, module in ((link.a, link.a_module), (link.b, link.b_module)):
            plug = module if module is not None else link.part
            if plug is None or (module is None and plug not in facts and _passive(link.media)):
                continue
            cage = split.get((end.device, end.port))
            shared = cage is not None and ((module is not None and module in twins)
                                           or (module is None and link.assembly is not None))
            if shared:
                key = (end.device, cage[0])
                if key in seen:
                    continue
                seen.add(key)
            charge(end.device, plug)
    budget = plan.power.rack_budget_w if plan.power is not None else None
    in_rack: dict[str, list[str]] = defaultdict(list)
    for d in plan.devices:
        in_rack[d.rack].append(d.name)
    racks, rows = [], defaultdict(Draw)
    for r in sorted(plan.racks, key=lambda r: (r.row, r.position, r.name)):
        draw = Draw()
        for name in in_rack.get(r.name, []):
            draw.typical_w += devices[name].typical_w
            draw.max_w += devices[name].max_w
        racks.append(RackPower(r.name, r.row, r.kind, draw, len(in_rack.get(r.name, [])),
                               budget is not None and draw.max_w > budget + 1e-9))
        rows[r.row].typical_w += draw.typical_w
        rows[r.row].max_w += draw.max_w
    used = {d.model for d in plan.devices} | {m for link in plan.links for m in (link.a_module, link.b_module,
                                                                                  link.part) if m}
    estimates = sorted(name for name, fact in facts.items() if fact.estimate and name in used)
    return PowerView(devices, racks, dict(sorted(rows.items())), budget, sorted(unknown), estimates)


def _passive(media: str) -> bool:
    """Cables that draw nothing and whose part may have no figure: passive copper and twisted pair."""
    return media.startswith(("DAC", "Cat"))


def kw(watts: float) -> str:
    return f"{watts / 1000:,.1f} kW"


def warnings(plan: Plan, shown: int = 5) -> list[str]:
    """One line when some racks' maximum draw exceeds the budget: how many, the heaviest few, and the budget's key."""
    view = power(plan)
    over = view.over_budget()
    if not over or view.budget_w is None:
        return []
    heaviest = sorted(over, key=lambda r: (-r.draw.max_w, r.rack))[:shown]
    named = ", ".join(f"{r.rack} {kw(r.draw.max_w)} ({kw(r.draw.typical_w)} typical)" for r in heaviest)
    more = f" and {len(over) - len(heaviest)} more" if len(over) > len(heaviest) else ""
    kinds = {r.kind for r in over}
    fixes = (["fewer nodes per compute rack (layout.nodes_per_rack)"] if "compute" in kinds else []) + (
        ["fewer switches per network rack (they are packed by height: layout.rack_height_u)"]
        if kinds - {"compute"} else [])
    return [f"{len(over)} of {len(view.racks)} racks draw more than the {kw(view.budget_w)} rack power budget "
            f"({BUDGET_FIELD}) at their maximum: {named}{more}. Provision power and cooling for them, plan "
            f"{' or '.join(fixes)}, or set the budget the racks are built for."]
