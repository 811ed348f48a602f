"""Pass thresholds from link speed, rail count and oversubscription, and how long a full burn-in takes.

Pair bandwidth (`ib_write_bw -b`, Gb/s), every NIC of a round sending at once, both directions at once:
    per direction >= link_gbps * RDMA_EFFICIENCY * min(1, up/down of every tier the pair crosses)
    pass          >= DIRECTIONS * per direction
perftest's `-b` reports the sum of both directions (`print_full_bw_report` in perftest_parameters.c adds the
remote side's `bw_avg` to its own), so the pass mark is twice the one-direction figure. RDMA_EFFICIENCY 0.9:
perftest reports 97-98% of line rate on a healthy link (perftest issue #273 and the samples in
tests/acceptance/samples); 0.9 leaves room for a loaded round without passing a cable that lost a lane: a 400G
link trained down to 300G in one direction sums to at most 0.98 + 0.75 = 1.73 line rates, under the 1.8 needed.

Storage pairs run the same tool over each host's storage bond (its RDMA device, `mlx5_bond_0` by default) with
K queue pairs that the bond and the switches hash over the bond's members and the uplinks. A hash may put every
flow of a direction on one member, so a healthy bond is only sure to carry one member's line rate: the storage
pass mark is one member's rate (times the storage tiers' up/down), per direction. A dead bond, a leaf pair whose
uplinks are down or congested, or both members degraded fail it; one slow member among two is found by the
ports' error counters, not by bandwidth (docs/acceptance.md).

NCCL `all_reduce_perf` bus bandwidth (GB/s per rank, large messages):
    target = nics_per_node * link_gbps / 8 * NCCL_NIC_EFFICIENCY * min(1, up/down of the tiers crossed)
    pass  >= target * NCCL_MARGIN
NCCL_NIC_EFFICIENCY 0.96: "24GB/s is the peak performance per 200G NIC" (NCCL maintainer,
https://github.com/NVIDIA/nccl-tests/issues/119). Per SU, rail traffic stays on the rail's leaf (no upper tier
crossed); cluster-wide it crosses every tier. NVLink SHARP or in-network reduction can exceed the target: the
threshold is a floor, not a prediction.

DCGM: `dcgmi diag -r LEVEL` passes when no row reads Fail.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from railforge.plan.model import Plan

RDMA_EFFICIENCY = 0.9
DIRECTIONS = 2  # perftest -b: both directions at once, reported as their sum
NCCL_NIC_EFFICIENCY = 0.96
NCCL_MARGIN = 0.9


@dataclass(frozen=True, slots=True)
class Durations:
    """Seconds: per pair test, per round's set-up and tear-down, NCCL per SU and cluster-wide, DCGM diag."""

    pair_s: int = 30
    round_overhead_s: int = 15
    nccl_su_s: int = 600
    nccl_cluster_s: int = 900
    dcgm_s: int = 2700
    dcgm_level: int = 3

    def total(self, rounds: int) -> int:
        return self.dcgm_s + rounds * (self.pair_s + self.round_overhead_s) + self.nccl_su_s + self.nccl_cluster_s


def tier_factor(plan: Plan, roles: tuple[str, ...], fabric: str = "compute") -> Fraction:
    """min(1, up/down) over the tiers `roles` of `fabric` (a 2:1 leaf gives 1/2)."""
    out = Fraction(1)
    for t in plan.cluster.tier_summaries:
        if t.fabric == fabric and t.role in roles and t.uplink_gbps and t.downlink_gbps:
            out = min(out, Fraction(t.uplink_gbps, t.downlink_gbps))
    return out


def pair_threshold_gbps(link_gbps: float, factor: Fraction) -> float:
    return round(link_gbps * RDMA_EFFICIENCY * float(min(Fraction(1), factor)), 2)


def nccl_threshold_gbytes(nics_per_node: int, link_gbps: float, factor: Fraction) -> float:
    target = nics_per_node * link_gbps / 8 * NCCL_NIC_EFFICIENCY * float(min(Fraction(1), factor))
    return round(target * NCCL_MARGIN, 2)


def pair_marks(link_gbps: float, factor: Fraction) -> dict:
    """Pass marks of a bidirectional pair test: leaf-local and across the fabric (`factor`), and per direction."""
    one = {"leaf_local": pair_threshold_gbps(link_gbps, Fraction(1)),
           "across_fabric": pair_threshold_gbps(link_gbps, factor)}
    return {k: round(v * DIRECTIONS, 2) for k, v in one.items()} | {"per_direction": one}


def thresholds(plan: Plan, link_gbps: float, storage_gbps: float = 0.0) -> dict:
    c = plan.cluster
    upper = ("leaf", "spine") if c.tiers >= 3 else ("leaf",)
    storage_upper = ("storage-leaf", "storage-spine")
    out = {
        "ib_write_bw_gbps": pair_marks(link_gbps, tier_factor(plan, upper)),
        "all_reduce_busbw_gbytes": {"per_su": nccl_threshold_gbytes(c.rails, link_gbps, Fraction(1)),
                                    "cluster": nccl_threshold_gbytes(c.rails, link_gbps, tier_factor(plan, upper))},
        "formula": {"ib_write_bw": f"{DIRECTIONS} directions (perftest -b reports their sum) * link_gbps * "
                                   f"{RDMA_EFFICIENCY} * min(1, up/down of tiers crossed)",
                    "storage_ib_write_bw": f"{DIRECTIONS} directions * one bond member's gbps * {RDMA_EFFICIENCY} * "
                                           "min(1, up/down of the storage tiers crossed)",
                    "all_reduce": f"nics * link_gbps / 8 * {NCCL_NIC_EFFICIENCY} * min(1, up/down) * {NCCL_MARGIN}",
                    "dcgm": "no row reads Fail"},
    }
    if storage_gbps:
        out["storage_ib_write_bw_gbps"] = pair_marks(storage_gbps, tier_factor(plan, storage_upper, "storage"))
    return out
