"""SONiC: port names, lanes and breakout modes come from the platform's own port map (`portmap.py`, data in
`platforms/`); config_db.json and frr.conf per switch (`render.py`), buffers as the SKU's own templates write them
(`buffer_defaults.py`, data in `buffers/`), ZTP by ztp.json (`ztp.py`), `show lldp table` (`lldp.py`), and the
planning check that the lossless priority is one the SKU keeps (`checks.py`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from railforge.nos.profile import LldpTable, NosProfile, PlatformError, Renderer, ZtpVariant
from railforge.nos.sonic.portmap import load_platform

if TYPE_CHECKING:
    from railforge.formats.output import Output
    from railforge.plan.model import Device, Plan
    from railforge.provision.credentials import Credentials
    from railforge.provision.served import ServedFile
    from railforge.spec.models import ClusterSpec
    from railforge.verify.names import PlanNames
    from railforge.verify.observed import Observation


def platform_ref(model: str, switch: object) -> tuple[str, str]:
    """The (platform, hwsku) a catalog switch names in its `sonic:` entry."""
    from railforge import nos

    ref = getattr(switch, "sonic", None)
    if ref is None:
        others = " or ".join(n for n in nos.names(kind="ethernet") if n != PROFILE.name)
        raise PlatformError(f"its catalog entry names no SONiC platform (`sonic: {{platform, hwsku}}`), so there is "
                            f"no port map for a SONiC config of a {model}; use a model that has one, or {others}")
    return ref.platform, ref.hwsku


def check_lossless_priority(spec: ClusterSpec, devices: list[Device]) -> None:
    from railforge.nos.sonic import checks

    checks.check_lossless_priority(spec, devices)


def write_configs(plan: Plan, out: Output) -> None:
    from railforge.nos.sonic import render as renderer

    renderer.render(plan, out)


def ztp_files(dev: Device, generated: Path, server: str, creds: Credentials) -> list[ServedFile]:
    from railforge.nos.sonic import ztp

    return ztp.files(dev, generated, server, creds)


def lab_frr(frr_conf: Path) -> str:
    """SONiC runs FRR itself: the lab boots the generated frr.conf as it is."""
    return frr_conf.read_text()


def parse_lldp_table(text: str, device: str, names: PlanNames, source: str = "") -> Observation:
    from railforge.nos.sonic import lldp

    return lldp.parse_table(text, device, names, source)


PROFILE = NosProfile(
    name="sonic",
    title="SONiC",
    kind="ethernet",
    fabrics=("compute", "storage", "oob"),
    default_for=("compute",),
    mgmt_port="mgmt0",
    config_files=("config_db.json", "frr.conf"),
    boot_config="frr.conf",
    reload="frr-reload.py --reload frr.conf, then `config load` for config_db.json changes",
    port_name=None,
    platform=load_platform,
    platform_ref=platform_ref,
    plan_checks=(check_lossless_priority,),
    renderer=Renderer("sonic", "SONiC config_db.json and FRR frr.conf per SONiC switch", write_configs, weight=32),
    ztp=ZtpVariant(entry="ztp.json", option_name="boot-file-name", files=ztp_files),
    lab_frr=lab_frr,
    lldp_table=LldpTable("SONiC 'show lldp table'", parse_lldp_table),
)
