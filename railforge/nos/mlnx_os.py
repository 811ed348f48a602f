"""NVIDIA MLNX-OS on InfiniBand switches: ports are named by their front-panel label (`1/2` broken out); the
fabric is configured by OpenSM on the subnet manager host, so a switch has no per-switch file and no ZTP."""

from __future__ import annotations

from railforge.nos.profile import NosProfile, front_label


def port_name(cage: int, sub: int, split: int, _lanes: int) -> str:
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
    ztp=None,
    port_name=port_name,
)
