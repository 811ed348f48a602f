"""The spec's switch MTU against EOS's range, checked while planning, so that `railforge validate` refuses a value
EOS switches cannot take at `qos.switch_mtu` instead of the EOS renderer failing later.

EOS takes `mtu` 68-9214 on an Ethernet interface (the range EOS's CLI and Arista's own rbeapi and puppet-eos
modules check), below railforge's default 9216 (SONiC's and Cumulus's); `qos.switch_mtu` is the MTU of every switch
port the plan configures, so one EOS switch bounds it.
"""

from __future__ import annotations

from railforge.nos.profile import PlanRefused
from railforge.plan.model import Device
from railforge.spec.models import ClusterSpec

MAX_MTU = 9214


def check_mtu(spec: ClusterSpec, devices: list[Device]) -> None:
    mtu = spec.qos.switch_mtu
    if mtu > MAX_MTU:
        fabrics = sorted({d.fabric for d in devices})
        raise PlanRefused("qos.switch_mtu",
                          f"{mtu} is above the {MAX_MTU} bytes Arista EOS takes on an interface (`mtu` 68-{MAX_MTU}), "
                          f"and {len(devices)} switches run EOS ({', '.join(fabrics)}; e.g. {devices[0].name}); "
                          f"set qos.switch_mtu to {MAX_MTU} or less (qos.host_mtu at most that too)")
