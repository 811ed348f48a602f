"""Spec -> plan: the compute fabric, the storage/in-band fabric, OOB, then racks and cable lengths."""

from __future__ import annotations

import gc
from fractions import Fraction

from railforge import nos
from railforge.hardware.catalog import merged_catalog, ports_at, splitter_parts, twin_parts
from railforge.nos.profile import PlanRefused
from railforge.plan.model import ClusterSummary, DeviceType, NodeTopology, Plan, Qos, Reliability, Tenant
from railforge.planner import compute, layout, oob, slurm, storage
from railforge.planner.checks import check_plan
from railforge.planner.context import BuildContext
from railforge.planner.ipam import PoolExhausted, PrefixPool, check_overlaps
from railforge.spec.loader import LineMap
from railforge.spec.models import ClusterSpec

POOLS = (
    ("loopbacks", "switch loopbacks (/32)", "all"),
    ("p2p", "point-to-point uplinks (/31)", "all"),
    ("compute_hosts", "rail host subnets (RoCE: one per leaf; InfiniBand: one IPoIB subnet per rail)", "compute"),
    ("inband", "in-band subnets on the node bonds (one per storage leaf pair)", "storage"),
    ("storage", "storage VLAN subnets (one per storage leaf pair)", "storage"),
    ("oob", "BMC and switch management (one subnet per OOB leaf)", "oob"),
    ("k8s_pods", "Kubernetes pod network (primary CNI)", "storage"),
    ("k8s_services", "Kubernetes service network", "storage"),
)
FABRIC_ORDER = {"compute": 0, "storage": 1, "oob": 2}


def build_plan(spec: ClusterSpec, lines: LineMap | None = None, source: str | None = None) -> Plan:
    ctx = BuildContext(spec, merged_catalog(spec), lines or {}, source)
    collecting = gc.isenabled()
    gc.disable()  # the plan is millions of small acyclic objects: generational GC passes only cost time
    try:
        return _build(ctx)
    except PoolExhausted as exc:
        raise ctx.fail(f"addressing.{exc.pool}", str(exc)) from None
    finally:
        if collecting:
            gc.enable()


def _build(ctx: BuildContext) -> Plan:
    spec = ctx.spec
    for key, purpose, fabric in POOLS:
        ctx.pools[key] = PrefixPool(key, getattr(spec.addressing, key), purpose, fabric, f"addressing.{key}")
    active = [p for k, p in ctx.pools.items() if k != "storage" or spec.storage.storage_vlan]
    for a, b in check_overlaps(active):
        raise ctx.fail(b.spec_field, f"{b.prefix} overlaps {a.spec_field} ({a.prefix}); pools must be disjoint")

    cd = compute.design(ctx)
    sus, slots = spec.scalable_units.count, spec.scalable_units.nodes_per_su
    compute.build(ctx, cd)

    sd = storage.design(ctx, slots, cd.max_sus)
    storage.build(ctx, sd, sus, slots)

    core_counts = {"superspine": cd.superspines_max, "spine": cd.spines_max,
                   "storage-superspine": sd.clos.superspines_max, "storage-spine": sd.clos.spines_max,
                   "mgmt": spec.management.servers, "storage-leaf": sd.per_pair}
    od = oob.design(ctx, cd.max_sus, slots, cd.rails, sd.pairs_per_unit * sd.per_pair, core_counts)
    oob.build(ctx, od, sus, slots, cd.rails)
    _check_asns(ctx)

    heights = {
        "leaf": ctx.catalog.switches[spec.compute.leaf.model].height_u,
        "spine": ctx.catalog.switches[spec.compute.spine.model].height_u,
        "superspine": ctx.catalog.switches[spec.compute.superspine.model].height_u if spec.compute.superspine else 1,
        "storage-leaf": ctx.catalog.switches[spec.storage.leaf.model].height_u,
        "storage-spine": ctx.catalog.switches[spec.storage.spine.model].height_u,
        "storage-superspine": ctx.catalog.switches[spec.storage.spine.model].height_u,
        "oob-leaf": ctx.catalog.switches[spec.oob.leaf.model].height_u,
        "oob-spine": ctx.catalog.switches[spec.oob.spine.model].height_u,
        "oob-superspine": ctx.catalog.switches[spec.oob.spine.model].height_u,
        "mgmt": spec.management.height_u,
    }
    max_counts = {
        (0, "superspine"): cd.superspines_max, (0, "spine"): cd.spines_max,
        (0, "storage-superspine"): sd.clos.superspines_max, (0, "storage-spine"): sd.clos.spines_max,
        (0, "oob-superspine"): od.clos.superspines_max, (0, "oob-spine"): od.clos.spines_max,
        (0, "oob-leaf"): od.core_leaves, (0, "storage-leaf"): sd.per_pair, (0, "mgmt"): spec.management.servers,
        (1, "leaf"): cd.rails, (1, "storage-leaf"): sd.pairs_per_unit * sd.per_pair, (1, "oob-leaf"): od.leaves_per_row,
    }
    racks = layout.place(ctx, slots, max_counts, heights)
    layout.measure(ctx, racks)

    for dev in ctx.devices:
        if dev.role == "node":
            dev.topology = NodeTopology(dev.su, dev.rack, f"su{dev.su:03d}",
                                        _spine_group(cd, dev.su), "rail-plane" if cd.mode == "rail-plane" else None)
        elif (profile := nos.find(dev.nos)) is not None and profile.platform_ref is not None:
            dev.platform, dev.hwsku = profile.platform_ref(dev.model, ctx.catalog.switches[dev.model])
    _os_checks(ctx)

    counts = _counts(ctx)
    summaries = (compute.tier_summaries(cd, counts.get("leaf", 0), counts.get("spine", 0),
                                        counts.get("superspine", 0))
                 + storage.tier_summaries(sd, counts.get("storage-leaf", 0), counts.get("storage-spine", 0),
                                          counts.get("storage-superspine", 0))
                 + oob.tier_summaries(od, counts.get("oob-leaf", 0), counts.get("oob-spine", 0),
                                      counts.get("oob-superspine", 0)))
    nodes = counts.get("node", 0)
    cluster = ClusterSummary(spec.name, cd.fabric, cd.tiers, cd.mode, spec.compute.uplinks,
                             "ipoib-per-rail" if not cd.ethernet else "subnet-per-leaf", nodes * spec.node.gpus,
                             spec.node.gpus, nodes, cd.rails, sus, cd.max_sus, slots, spec.node.model,
                             spec.node.nvswitch, summaries, spec.nos_release.model_dump())
    q = spec.qos
    qos = Qos(q.lossless_priority, q.roce_dscp, q.cnp_dscp, q.cnp_priority, q.roce_dscp << 2,
              q.ecn_min_threshold_bytes, q.ecn_max_threshold_bytes, q.ecn_probability, q.host_mtu, q.switch_mtu)
    for r in ctx.asns.values():
        r.used = len({d.asn for d in ctx.devices if d.asn is not None and r.first <= d.asn <= r.last})
    ctx.links.sort(key=lambda link: (FABRIC_ORDER[link.fabric], link.id))
    plan = Plan(cluster, qos, [p.record() for p in ctx.pools.values()], [r.record() for r in ctx.asns.values()],
                racks, ctx.devices, ctx.links, compute.pod_networks(ctx, cd),
                Reliability(spec.reliability.optics_mtbf_hours, spec.reliability.gpu_monthly_availability,
                            list(spec.reliability.job_gpus)),
                tenants(ctx), device_types(ctx), twin_parts=twin_parts(ctx.catalog, ctx.links),
                splitter_parts=splitter_parts(ctx.catalog, ctx.links))
    plan.slurm = slurm.settings(ctx, plan.tenants)
    ratios = {"leaf": spec.compute.oversubscription.get("leaf", Fraction(1)),
              "spine": spec.compute.oversubscription.get("spine", Fraction(1))}
    models = {"leaf": spec.compute.leaf, "spine": spec.compute.spine, "superspine": spec.compute.superspine}
    capacity = {role: len(ports_at(ctx.catalog.switches[m.model], cd.speed)) for role, m in models.items() if m}
    problems = check_plan(plan, ratios, capacity)
    if problems:
        raise ctx.fail("compute", "the planned fabric fails its own checks (a railforge bug, please report it): "
                                  + "; ".join(problems[:5]))
    return plan


def _os_checks(ctx: BuildContext) -> None:
    """Each switch OS's own planning checks, over the devices that run it."""
    for profile in nos.profiles():
        devices = [d for d in ctx.devices if d.nos == profile.name]
        for check in profile.plan_checks if devices else ():
            try:
                check(ctx.spec, devices)
            except PlanRefused as exc:
                raise ctx.fail(exc.field, str(exc)) from None


def _spine_group(cd: compute.ComputeDesign, su: int) -> str:
    if cd.three is None:
        return "fabric"
    if cd.mode == "rail-plane":
        return f"block{(su - 1) // cd.group_sus + 1:02d}"
    return cd.group_name(cd.group_of(su, 0)[0])


def _counts(ctx: BuildContext) -> dict[str, int]:
    out: dict[str, int] = {}
    for d in ctx.devices:
        out[d.role] = out.get(d.role, 0) + 1
    return out


def _check_asns(ctx: BuildContext) -> None:
    ranges = sorted(ctx.asns.values(), key=lambda r: r.first)
    for a, b in zip(ranges, ranges[1:], strict=False):
        if b.first <= a.last:
            raise ctx.fail(f"addressing.asn.{b.name}",
                           f"ASN base {b.first} collides with the {a.name} fabric's ASNs {a.first}-{a.last}; "
                           f"use at least {a.last + 1}")
    for r in ranges:
        if r.last > 4294967294:
            raise ctx.fail(f"addressing.asn.{r.name}", f"ASNs {r.first}-{r.last} run past 4294967294")


def device_types(ctx: BuildContext) -> list[DeviceType]:
    heights: dict[str, int] = {}
    for dev in ctx.devices:
        heights.setdefault(dev.model, dev.height_u)
    return [DeviceType(model, (sw.vendor or None) if (sw := ctx.catalog.switches.get(model)) else None, height)
            for model, height in sorted(heights.items())]


def tenants(ctx: BuildContext) -> list[Tenant]:
    """Each tenant with its member hosts in plan order: every GPU node of its `sus`, plus its `nodes`."""
    hosts = [d for d in ctx.devices if d.role in ("node", "ufm") and d.fabric == "compute"]
    names = {d.name for d in hosts}
    built = sorted({d.su for d in hosts if d.role == "node"})
    out = []
    for i, t in enumerate(ctx.spec.tenants):
        if (t.sus or t.nodes) and ctx.spec.compute.fabric != "infiniband":
            raise ctx.fail(f"tenants.{i}", "tenant members (sus, nodes) are InfiniBand partition members; "
                                          "this compute fabric is roce")
        for k, su in enumerate(t.sus):
            if su not in built:
                raise ctx.fail(f"tenants.{i}.sus.{k}", f"SU {su} has no GPU nodes in this build; "
                                                       f"built SUs: {built[0]}..{built[-1]}")
        for k, name in enumerate(t.nodes):
            if name not in names:
                example = ", ".join(d.name for d in hosts[:1] + hosts[-1:])
                raise ctx.fail(f"tenants.{i}.nodes.{k}", f"{name!r} is not a GPU node or appliance of this "
                                                         f"cluster (names like {example})")
        chosen = set(t.nodes) | {d.name for d in hosts if d.role == "node" and d.su in t.sus}
        out.append(Tenant(t.name, t.pkey, [d.name for d in hosts if d.name in chosen]))
    return out

