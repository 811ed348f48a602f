"""NVIDIA Cumulus Linux (NVUE): `configs/<switch>/startup.yaml` for every Cumulus switch.

The file is NVUE's object model as `nv config apply -y startup.yaml` (or /etc/nvue.d/startup.yaml)
takes it, written for Cumulus Linux 5.x (`enable: on` style): interfaces with MTU, speed and
breakouts (Cumulus 5.4+ `breakout <n>x`), numbered or unnumbered eBGP with BFD per peer group,
prefix lists and route maps that announce only loopbacks and host subnets, host VLANs with VRR for
leaf pairs, MLAG (peerlink, backup IP, system MAC) or EVPN multihoming, and RoCE lossless QoS with
the explicit DSCP, PFC and ECN values of the plan's QoS profile.
"""

from __future__ import annotations

import re
from pathlib import Path

import jinja2

from topology.output import Output
from topology.plan import Plan
from topology.render.switch_model import PEERLINK_VLAN, SwitchConfig, build_models

VRR_MAC = "00:00:5e:00:01:01"
TEMPLATES = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates" / "nvue"),
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


def startup_yaml(sw: SwitchConfig) -> str:
    bonds = {b.member for b in sw.pair.bonds} if sw.pair else set()
    return TEMPLATES.get_template("startup.yaml.j2").render(
        sw=sw, parents=_parents(sw), bonds=bonds, peerlink_vlan=PEERLINK_VLAN, vrr_mac=VRR_MAC)


def render(plan: Plan, out: Output) -> None:
    for sw in build_models(plan, nos="cumulus", select=out.selects):
        out.write_text(f"configs/{sw.hostname}/startup.yaml", startup_yaml(sw))
