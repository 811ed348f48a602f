"""NVIDIA Cumulus Linux (NVUE): `configs/<switch>/startup.yaml` for every Cumulus switch.

The file is NVUE's object model as `nv config apply -y startup.yaml` (or /etc/nvue.d/startup.yaml)
takes it, written for the Cumulus Linux release in the plan (`nos_release.cumulus` in the spec):
interfaces with MTU, speed and breakouts (`breakout <n>x`), numbered or unnumbered eBGP with BFD per
peer group, prefix lists and route maps that announce only loopbacks and host subnets, host VLANs
with VRR for leaf pairs, MLAG (peerlink, backup IP, system MAC) or EVPN multihoming, and RoCE
lossless QoS with the explicit DSCP, PFC and ECN values of the plan's QoS profile.

Cumulus Linux 5.15 changed the object model: `enable: on` became `state: enabled` (and `on` values
`enabled`), `interface <if> ip` split into `ipv4`/`ipv6` (with `vrf` on the interface itself), and
BFD moved into `router bfd` profiles that BGP peer groups name. Releases before 5.15 have no
`router bfd`; their peer groups carry the BFD timers themselves.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import jinja2

from railforge.formats.output import Output
from railforge.plan import outdir
from railforge.plan.model import Plan
from railforge.plan.switch_model import PEERLINK_VLAN, SwitchConfig, build_models

VRR_MAC = "00:00:5e:00:01:01"
DEFAULT_RELEASE = "5.18"


@dataclass(frozen=True, slots=True)
class Syntax:
    """How one Cumulus Linux release spells the parts of the object model that changed in 5.15."""

    release: str
    state: str
    on: str
    split_ip: bool
    bfd_profiles: bool


@dataclass(frozen=True, slots=True)
class BfdProfile:
    name: str = "RF-BFD"
    multiplier: int = 3
    interval_ms: int = 300


def syntax(release: str) -> Syntax:
    major, minor = (int(x) for x in release.split("."))
    if (major, minor) >= (5, 15):
        return Syntax(release, "state", "enabled", split_ip=True, bfd_profiles=True)
    return Syntax(release, "enable", "on", split_ip=False, bfd_profiles=False)

TEMPLATES = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
    undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
)
_SUB = re.compile(r"s\d+$")


def _parents(sw: SwitchConfig) -> dict[str, str]:
    """Cage port -> NVUE breakout mode (`2x`, `4x` ...) for every split cage."""
    out = {}
    for i in sw.interfaces:
        if i.sub == 0 and "x" in i.breakout and int(i.breakout.split("x")[0]) > 1:
            out[_SUB.sub("", i.name)] = i.breakout.split("x")[0] + "x"
    return out


def startup_yaml(sw: SwitchConfig, release: str = DEFAULT_RELEASE) -> str:
    bonds = {b.member for b in sw.pair.bonds} if sw.pair else set()
    return TEMPLATES.get_template("startup.yaml.j2").render(
        sw=sw, nv=syntax(release), bfd=BfdProfile(), parents=_parents(sw), bonds=bonds,
        peerlink_vlan=PEERLINK_VLAN, vrr_mac=VRR_MAC)


def release_of(plan: Plan) -> str:
    return plan.cluster.nos_release.get("cumulus", DEFAULT_RELEASE)


def render(plan: Plan, out: Output) -> None:
    release = release_of(plan)
    for sw in build_models(plan, nos="cumulus", select=out.selects):
        out.write_text(outdir.config_file(sw.hostname, "startup.yaml"), startup_yaml(sw, release))
