"""What the design maximum (`scalable_units.max`) means for this plan, said at `validate` and `build`: growth up
to it only adds; growth past it re-sizes spines, pools and ASN ranges, so existing cables and addresses change
and the renumbering guard refuses the build. Users met that only when the guard refused a later build."""

from __future__ import annotations

from railforge.plan.model import Plan


def growth_note(plan: Plan) -> str:
    c = plan.cluster
    past = ("spines, address pools and ASN ranges are re-sized, so existing cables, labels and addresses change "
            "(the build refuses that without --allow-renumber)")
    if c.sus < c.max_sus:
        return (f"growth: {c.sus} of {c.max_sus} SUs built (scalable_units.max: {c.max_sus}); growing to "
                f"{c.max_sus} SUs only adds devices, cables and addresses. Past {c.max_sus}, {past}.")
    return (f"growth: {c.sus} of {c.max_sus} SUs built, the design maximum (scalable_units.max, default: count). "
            f"A further SU means {past}; set scalable_units.max to the most SUs this cluster may ever have "
            "before the first build to grow without renumbering.")
