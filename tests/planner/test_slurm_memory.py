"""RealMemory from the memory Linux reports, not the memory installed: a node whose slurmd reports less than its
RealMemory drains on arrival ("Low RealMemory"). Linux keeps 1/64 of RAM for its page array alone; measured nodes
report 98.15-98.38 % of what they have installed. The planner takes the catalog's measured memtotal_mib, else
125/128 of installed (97.66 %), and keeps reserved_memory_mib from that for the OS. The live proof (slurmd
reporting a measured MemTotal, slurmctld checking it) is tests/slurm."""

from __future__ import annotations

import pytest

from railforge.hardware.catalog import builtin_catalog
from railforge.spec.slurm import LINUX_MEMORY_DEN, LINUX_MEMORY_NUM
from tests.render.test_slurm_conf import lab_plan

# `slurmd -C` RealMemory of real nodes (MIT Engaging, github.com/mit-orcd/ehwprobe README, "Example output"),
# with the installed memory the nearest DIMM population gives (the README names GPUs and NUMA sizes, not DIMMs)
MEASURED = {  # node: (installed MiB, reported MiB)
    "node2901 (8 x H100, 2 x 56 cores)": (2 << 20, 2_063_205),
    "node3402 (4 x L40S)": (1 << 20, 1_031_051),
    "node5105 (2 x H200 NVL)": (768 << 10, 772_552),
    "node1463 (4 x A100)": (512 << 10, 515_047),
    "node1600 (CPU)": (384 << 10, 385_957),
}


@pytest.mark.parametrize("node", sorted(MEASURED))
def test_the_estimate_is_below_what_each_measured_node_reports(node):
    installed, reported = MEASURED[node]
    assert reported < installed, "a node reports less than it has"
    assert installed * LINUX_MEMORY_NUM // LINUX_MEMORY_DEN < reported


@pytest.mark.parametrize("model", sorted(builtin_catalog().nodes))
def test_every_bundled_model_registers_on_a_node_like_the_measured_ones(model):
    """RealMemory with the default 16 GiB reserve fits under the lowest measured ratio of installed memory."""
    hw = builtin_catalog().nodes[model]
    linux, estimated = hw.linux_memory_mib()
    lowest = min(reported / installed for installed, reported in MEASURED.values())
    assert estimated and linux - 16384 < linux < hw.memory_mib * lowest


def test_the_lab_plan_declares_what_a_2_tib_h100_reports_less_the_reserve():
    n = lab_plan().slurm.node
    installed, reported = MEASURED["node2901 (8 x H100, 2 x 56 cores)"]
    assert n.memory_mib == installed and n.linux_memory_estimated
    assert n.real_memory_mib == installed * 125 // 128 - 16384 == 2_031_616
    assert n.real_memory_mib <= reported < installed - 16384, "installed - 16 GiB (the old RealMemory) drains"
