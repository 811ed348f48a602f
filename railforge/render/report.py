"""The design report (report.md, also printed by `railforge validate`): counts, oversubscription, bisection,
where traffic goes, failure arithmetic and address headroom."""

from __future__ import annotations

from collections import Counter
from fractions import Fraction

from railforge.formats.output import Output
from railforge.plan.model import Plan, TierSummary
from railforge.plan.tables import ROLE_ORDER, address_table
from railforge.render.bom import bill_of_materials
from railforge.render.elevations import elevation_file
from railforge.render.rails_svg import rails_file

HOURS_PER_MONTH = 730.0


def failure_interval_hours(modules: int, mtbf_hours: float) -> float:
    """Expected time between failures of any one of `modules` independent parts with the given MTBF."""
    return mtbf_hours / modules if modules else float("inf")


def job_interruption_probability(gpus: int, monthly_availability: float) -> float:
    """P(a job spanning `gpus` GPUs loses at least one of them within a month)."""
    return 1.0 - monthly_availability ** gpus


def _ratio(s: TierSummary) -> Fraction:
    if not s.downlink_gbps or not s.uplink_gbps:
        return Fraction(1)
    return min(Fraction(1), Fraction(s.uplink_gbps, s.downlink_gbps))


def ratio_label(s: TierSummary) -> str:
    """down:up as 'N:1' ('3:1', '1.5:1', '0.24:1'), read from the tier's bandwidths; 'top' for the top tier."""
    if not s.uplink_gbps:
        return s.oversubscription
    r = Fraction(s.downlink_gbps, s.uplink_gbps)
    return f"{float(r):.2f}".rstrip("0").rstrip(".") + ":1"


def cabled_ports(plan: Plan) -> dict[tuple[str, str], tuple[int, int]]:
    """(fabric, role) -> the most cabled down and up ports on any one switch of that tier, from the links."""
    role = {d.name: (d.role, d.fabric) for d in plan.devices}
    down: Counter = Counter()
    up: Counter = Counter()
    for link in plan.links:
        a, b = role[link.a.device][0], role[link.b.device][0]
        if a != b:
            down[link.b.device] += 1
            up[link.a.device] += 1
    most: dict[tuple[str, str], list[int]] = {}
    for d in plan.devices:
        m = most.setdefault((d.fabric, d.role), [0, 0])
        m[0] = max(m[0], down[d.name])
        m[1] = max(m[1], up[d.name])
    return {k: (v[0], v[1]) for k, v in most.items()}


def bisection_gbps(plan: Plan) -> tuple[int, Fraction]:
    """Half the compute injection bandwidth times the up/down ratio of every tier below the top."""
    injection = sum(link.speed_mbps for link in plan.links if link.fabric == "compute" and link.tier == "node-leaf")
    factor = Fraction(1)
    for s in plan.cluster.tier_summaries:
        if s.fabric == "compute" and s.uplink_ports:
            factor *= _ratio(s)
    return int(Fraction(injection, 2000) * factor), factor


def _table(header: tuple[str, ...], rows: list[tuple]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return out


def _fmt_hours(h: float) -> str:
    if h == float("inf"):
        return "never (no optical modules)"
    return f"{h:,.1f} h (about {h / 24:,.1f} days)"


def _traffic(plan: Plan) -> list[str]:
    c = plan.cluster
    hop = "leaf"
    lines = [f"- Same rail, same SU: NIC *k* → {hop} *k* of the SU → NIC *k*: one switch hop, never leaves the leaf."]
    if c.tiers == 2:
        lines += [
            "- Same rail, other SU: leaf → spine → leaf (3 switch hops).",
            "- Other rail (any SU): leaf → spine → leaf (3 switch hops), unless the collective library first moves "
            "the data over NVLink to the GPU on the destination's rail (NCCL PXN), which keeps it on one rail.",
        ]
    elif c.mode == "rail-plane":
        lines += [
            "- Same rail, other SU: leaf → spine of that rail's plane → leaf (3 switch hops); "
            "each rail has its own spine plane, so rails never share a spine.",
            "- Other rail: leaf → rail-plane spine → super-spine → other rail's spine → leaf (5 switch hops); "
            "NCCL PXN avoids this by crossing rails over NVLink inside the node.",
        ]
    else:
        lines += [
            "- Same rail, other SU in the same spine group: leaf → spine → leaf (3 switch hops).",
            "- Other spine group, or other rail: leaf → spine → super-spine → spine → leaf (5 switch hops).",
        ]
    lines.append("- Storage and in-band traffic stays on the separate storage fabric (bonded NICs); "
                 "BMC and switch management on the OOB fabric.")
    return lines


def report_markdown(plan: Plan) -> str:
    c = plan.cluster
    rel = plan.reliability
    bom = bill_of_materials(plan)
    _, usage = address_table(plan)
    out = [f"# Design report: {c.name}", ""]
    out += _table(("GPUs", "nodes", "GPUs/node", "SUs (design max)", "nodes/SU", "rails", "compute fabric", "tiers",
                   "mode", "node model"),
                  [(c.gpus, c.nodes, c.gpus_per_node, f"{c.sus} ({c.max_sus})", c.nodes_per_su, c.rails, c.fabric,
                    c.tiers, c.mode, c.node_model)])

    roles = Counter((d.role, d.fabric, d.model) for d in plan.devices)
    out += ["", "## Devices", ""]
    out += _table(("role", "fabric", "model", "count"),
                  [(r, f, m, n) for (r, f, m), n in sorted(roles.items(), key=lambda kv: (ROLE_ORDER.get(kv[0][0], 99),
                                                                                         kv[0]))])

    tiers: dict[tuple[str, str], list] = {}
    for link in plan.links:
        t = tiers.setdefault((link.fabric, link.tier), [0, 0, 0.0, 0, set()])
        t[0] += 1
        t[1] += link.transceivers
        t[2] += link.length_m if link.transceivers else 0.0
        t[3] += link.speed_mbps
        t[4].add(link.media)
    out += ["", "## Cables per fabric and tier", ""]
    out += _table(("fabric", "tier", "cables", "transceivers", "fibre m", "bandwidth Gb/s", "media"),
                  [(f, t, v[0], v[1], round(v[2], 1), v[3] // 1000, ", ".join(sorted(v[4])))
                   for (f, t), v in tiers.items()])
    nic_ports = sum(1 for d in plan.devices if d.role in ("node", "ufm", "mgmt") for p in d.ports if p.link)
    shared = (f" ({bom.shared_links} of them carried in {bom.shared_cables} copper splitter or twin-port cables, "
              "one per split switch cage or cage pair)") if bom.shared_cables else ""
    out += ["", f"Totals: {bom.cables} cables{shared}, {bom.transceivers} transceivers, {bom.aoc_cables} active "
                f"optical cables, {bom.fibre_m:,.1f} m of fibre between transceivers, {nic_ports} host NIC ports "
                "cabled."]

    out += ["", "## Oversubscription and bisection", ""]
    cabled = cabled_ports(plan)
    out += _table(("fabric", "tier", "switches", "down ports (design)", "down ports cabled", "up ports",
                   "down Gb/s", "up Gb/s", "down:up"),
                  [(s.fabric, s.role, s.switches, s.downlink_ports, cabled.get((s.fabric, s.role), (0, 0))[0],
                    s.uplink_ports, s.downlink_gbps, s.uplink_gbps, ratio_label(s)) for s in c.tier_summaries])
    out += ["", f"Down ports (design) are what each switch of a tier is laid out for at scalable_units.max "
                f"({c.max_sus} SUs, every slot filled); cabled is the most any one switch of the tier has in this "
                "build. Gb/s and down:up are for the design."]
    bis, factor = bisection_gbps(plan)
    out += ["", f"Compute bisection bandwidth: {bis:,} Gb/s (half the node injection bandwidth × {factor} from the "
                f"tiers' up/down ratios; {'non-blocking' if factor == 1 else 'oversubscribed'})."]

    out += ["", "## Where traffic goes", ""] + _traffic(plan)

    interval = failure_interval_hours(bom.optical_modules, rel.optics_mtbf_hours)
    per_month = bom.optical_modules * HOURS_PER_MONTH / rel.optics_mtbf_hours
    out += ["", "## Failure arithmetic", "",
            f"Optical modules: {bom.optical_modules} ({bom.transceivers} transceivers + 2 ends of each of "
            f"{bom.aoc_cables} AOCs) at an MTBF of {rel.optics_mtbf_hours:,.0f} h: one fails every "
            f"{_fmt_hours(interval)}; about {per_month:.1f} per month.", ""]
    sizes = sorted({*(n for n in rel.job_gpus if n <= c.gpus), c.gpus})
    too_big = sorted(n for n in set(rel.job_gpus) if n > c.gpus)
    out += _table(("job GPUs", "per-GPU monthly availability", "P(interrupted within a month)"),
                  [(n, f"{rel.gpu_monthly_availability:.4%}",
                    f"{job_interruption_probability(n, rel.gpu_monthly_availability):.1%}") for n in sizes])
    if too_big:
        out += ["", f"Left out: job sizes larger than this cluster's {c.gpus:,} GPUs "
                    f"({', '.join(f'{n:,}' for n in too_big)}; `reliability.job_gpus`)."]
    out += ["", "Assumes independent failures; plan checkpoints accordingly."]

    out += ["", "## Address and ASN headroom", ""]
    out += _table(("pool", "range", "size", "allocated", "assigned", "free", "allocated %"),
                  [(u.name, u.range, u.size, u.allocated, u.assigned, u.free, f"{u.allocated_pct:.1f}")
                   for u in usage])
    rows = sorted({r.row for r in plan.racks})
    out += ["", "## Drawings", "", "Fabric by tier, 2-tier fabrics also spine by spine: [fabric.svg](fabric.svg). "
            "Rack elevations (every device at its U): "
            + ", ".join(f"[row {r}]({elevation_file(r)})" for r in rows) + "."]
    sus = sorted({d.su for d in plan.devices if d.rails and d.su is not None})
    if sus:
        shown = sus if len(sus) <= RAIL_LINKS else [*sus[:RAIL_LINKS - 1], sus[-1]]
        links = [f"[SU {s}]({rails_file(s)})" for s in shown]
        if len(shown) < len(sus):
            links[-1:] = [f"… ({len(sus) - len(shown)} more, one `{rails_file(0).replace('000', 'NNN')}` per SU)",
                          links[-1]]
        out += ["", "Rail view (which NIC of which node goes to which leaf port): " + ", ".join(links) + "."]
    out.append("")
    return "\n".join(out)


RAIL_LINKS = 16  # rail-view links listed in full; past this the first 15 and the last (512 SUs at 131K GPUs)


def render(plan: Plan, out: Output) -> None:
    out.write_text("report.md", report_markdown(plan))
