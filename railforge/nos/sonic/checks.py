"""The spec's lossless priority against SONiC's own buffer templates, checked while planning so that a value
the switches cannot keep is a spec error at `qos.lossless_priority`, not a renderer failure.

`config qos reload` rewrites BUFFER_PG/BUFFER_QUEUE from the SKU's templates (buffer_defaults.py),
which keep a fixed set of priorities lossless (3 and 4 on every pinned SKU); railforge writes the templates'
own keys, so the plan's lossless priority must be one of them on every SONiC switch of a RoCE compute fabric.
"""

from __future__ import annotations

from railforge.nos.profile import PlanRefused
from railforge.nos.sonic.buffer_defaults import load_buffers
from railforge.plan.model import Device
from railforge.spec.models import ClusterSpec


def check_lossless_priority(spec: ClusterSpec, devices: list[Device]) -> None:
    if spec.compute.fabric != "roce":
        return
    wanted = spec.qos.lossless_priority
    for hwsku in sorted({d.hwsku for d in devices if d.fabric == "compute" and d.hwsku}):
        sku = load_buffers(hwsku)
        kept = set.intersection(*(sku.lossless_priorities(t) for t in sorted(sku.buffers) if sku.renders(t)))
        if wanted not in kept:
            raise PlanRefused("qos.lossless_priority",
                              f"{wanted} is not lossless on SONiC SKU {hwsku}: its buffer templates keep priorities "
                              f"{', '.join(map(str, sorted(kept)))} lossless (BUFFER_PG/BUFFER_QUEUE '3-4') and "
                              "`config qos reload` writes them back; use one of those")
