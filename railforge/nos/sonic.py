"""SONiC: port names, lanes and breakout modes come from the platform's own port map (nos/sonic_platform.py)."""

from __future__ import annotations

from railforge.nos.profile import NosProfile, ZtpVariant
from railforge.nos.sonic_platform import PlatformError, load_platform


def platform_ref(model: str, switch: object) -> tuple[str, str]:
    """The (platform, hwsku) a catalog switch names in its `sonic:` entry."""
    ref = getattr(switch, "sonic", None)
    if ref is None:
        raise PlatformError(f"its catalog entry names no SONiC platform (`sonic: {{platform, hwsku}}`), so there is "
                            f"no port map for a SONiC config of a {model}; use a model that has one, or cumulus")
    return ref.platform, ref.hwsku


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
    ztp=ZtpVariant(files="sonic", entry="ztp.json", option_name="boot-file-name"),
    port_name=None,
    platform=load_platform,
    platform_ref=platform_ref,
)
