"""Pass thresholds from link speed, rail count and oversubscription, and how long a full burn-in takes.

Pair bandwidth (`ib_write_bw`, Gb/s), every NIC of a round sending at once:
    pass >= link_gbps * RDMA_EFFICIENCY * min(1, up/down of every tier the pair crosses)
RDMA_EFFICIENCY 0.9: perftest reports 97-98% of line rate on a healthy link (perftest issue #273 and the samples
in tests/acceptance/samples); 0.9 leaves room for a loaded round without passing a cable that lost a lane (a
400G link trained down to 200G or 300G always fails it).

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


def tier_factor(plan: Plan, roles: tuple[str, ...]) -> Fraction:
    """min(1, up/down) over the compute tiers `roles` (a 2:1 leaf gives 1/2)."""
    out = Fraction(1)
    for t in plan.cluster.tier_summaries:
        if t.fabric == "compute" and t.role in roles and t.uplink_gbps and t.downlink_gbps:
            out = min(out, Fraction(t.uplink_gbps, t.downlink_gbps))
    return out


def pair_threshold_gbps(link_gbps: float, factor: Fraction) -> float:
    return round(link_gbps * RDMA_EFFICIENCY * float(min(Fraction(1), factor)), 2)


def nccl_threshold_gbytes(nics_per_node: int, link_gbps: float, factor: Fraction) -> float:
    target = nics_per_node * link_gbps / 8 * NCCL_NIC_EFFICIENCY * float(min(Fraction(1), factor))
    return round(target * NCCL_MARGIN, 2)


def thresholds(plan: Plan, link_gbps: float) -> dict:
    c = plan.cluster
    upper = ("leaf", "spine") if c.tiers >= 3 else ("leaf",)
    return {
        "ib_write_bw_gbps": {"leaf_local": pair_threshold_gbps(link_gbps, Fraction(1)),
                             "across_fabric": pair_threshold_gbps(link_gbps, tier_factor(plan, upper))},
        "all_reduce_busbw_gbytes": {"per_su": nccl_threshold_gbytes(c.rails, link_gbps, Fraction(1)),
                                    "cluster": nccl_threshold_gbytes(c.rails, link_gbps, tier_factor(plan, upper))},
        "formula": {"ib_write_bw": f"link_gbps * {RDMA_EFFICIENCY} * min(1, up/down of tiers crossed)",
                    "all_reduce": f"nics * link_gbps / 8 * {NCCL_NIC_EFFICIENCY} * min(1, up/down) * {NCCL_MARGIN}",
                    "dcgm": "no row reads Fail"},
    }
