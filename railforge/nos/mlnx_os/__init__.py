"""NVIDIA MLNX-OS on InfiniBand switches: ports are named by their front-panel label (`1/2` broken out); the
fabric is configured by OpenSM on the subnet manager host (the `opensm` build family, railforge/render/opensm.py,
written for every InfiniBand compute fabric), so a switch has no per-switch file, no ZTP and no lab boot file."""

from __future__ import annotations

from railforge.nos.profile import NosProfile, front_label


def port_name(cage: int, sub: int, split: int, lanes: int) -> str:
    """The front-panel label, as the switch's CLI names the port."""
    return front_label(cage, sub, split)


PROFILE = NosProfile(
    name="mlnx-os",
    title="InfiniBand (MLNX-OS)",
    kind="infiniband",
    fabrics=("compute",),
    default_for=("compute",),
    mgmt_port="mgmt0",
    config_files=(),
    boot_config=None,
    reload="no per-switch change: reload OpenSM's files on the SM host",
    port_name=port_name,
)
