"""Fabric health from the plan: the expected state as data, and a fixed set of Prometheus rules over it.

The plan's BGP sessions, cabled ports and devices are written as series for node-exporter's textfile
collector (`health/expected.prom`), each carrying the cable label, SU, rail, tier and the leaf it hangs off.
The alert rules (`health/rules.yml`) join those series against what `prometheus-frr-exporter`
(`frr_bgp_peer_state`) and node-exporter (`node_network_carrier`) report, so their number does not grow with
the cluster: a 100,000-GPU plan has the same rules as the 2-SU example, only a longer expected.prom.
`health/targets/*.json` are file_sd target lists (management addresses of switches, in-band of nodes) whose
`device` label is the plan's name, which is what the rules join on. `health/alertmanager.yml` routes to the
remediation receiver and inhibits the small alerts a bigger one explains.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from ipaddress import ip_interface
from pathlib import Path

import jinja2

from railforge.formats.output import Output
from railforge.plan.model import Device, Link, Plan

BGP_TIERS = ("leaf-spine", "spine-superspine", "storage-leaf-spine", "storage-spine-superspine")
LINK_TIERS = ("node-leaf", "leaf-spine", "spine-superspine")
SWITCH_ROLES = ("leaf", "spine", "superspine")
EXPORTER_PORTS = {"frr": 9342, "node": 9100}
TEMPLATES = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates" / "health"),
    undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
)


@dataclass(frozen=True, slots=True)
class Series:
    name: str
    labels: tuple[tuple[str, str], ...]
    value: str = "1"

    def line(self) -> str:
        inner = ",".join(f'{k}="{_escape(v)}"' for k, v in self.labels if v != "")
        return f"{self.name}{{{inner}}} {self.value}"


HELP = {
    "railforge_expected_bgp_session": "A BGP session the plan expects on this switch (peer = address, or the port "
                                      "on unnumbered links).",
    "railforge_expected_link": "A planned cable end: this device's port is cabled to peer_device:peer_port.",
    "railforge_expected_device": "A device the plan expects; bisection_share: its share of its tier's uplinks.",
}


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _s(value: int | str | None) -> str:
    return "" if value is None else str(value)


class Expected:
    """The expected-state series of one plan, in plan order (links, then devices): same plan, same bytes."""

    def __init__(self, plan: Plan):
        self.plan = plan
        self.devices = plan.device_index()
        self.ports = {(d.name, p.name): p for d in plan.devices for p in d.ports}
        self.cables: dict[str | tuple[str, str], int] = {}

    def _leaf(self, link: Link) -> str:
        for end in (link.a, link.b):
            if self.devices[end.device].role in ("leaf", "storage-leaf"):
                return end.device
        return ""

    def _node(self, link: Link) -> str:
        return next((e.device for e in (link.a, link.b) if self.devices[e.device].role == "node"), "")

    def _common(self, link: Link) -> list[tuple[str, str]]:
        return [("cable", link.id), ("fabric", link.fabric), ("tier", link.tier), ("su", _s(link.su)),
                ("rail", _s(link.rail)), ("leaf", self._leaf(link))]

    def _peer_key(self, link: Link, far_device: str, far_port: str, local_port: str) -> str:
        address = self.ports[(far_device, far_port)].address
        return str(ip_interface(address).ip) if address else local_port

    def bgp_sessions(self) -> list[Series]:
        out = []
        for link in self.plan.links:
            if link.tier not in BGP_TIERS:
                continue
            a, b = self.devices[link.a.device], self.devices[link.b.device]
            if a.asn is None or b.asn is None:
                continue
            for near, far in ((link.a, link.b), (link.b, link.a)):
                dev, peer = self.devices[near.device], self.devices[far.device]
                out.append(Series("railforge_expected_bgp_session", (
                    ("device", near.device), ("port", near.port), ("role", dev.role),
                    ("peer", self._peer_key(link, far.device, far.port, near.port)),
                    ("peer_device", far.device), ("peer_port", far.port), ("peer_role", peer.role),
                    *self._common(link))))
        return out

    def links(self) -> list[Series]:
        out = []
        for link in self.plan.links:
            if link.fabric != "compute" or link.tier not in LINK_TIERS:
                continue
            for near, far in ((link.a, link.b), (link.b, link.a)):
                out.append(Series("railforge_expected_link", (
                    ("device", near.device), ("port", near.port), ("role", self.devices[near.device].role),
                    ("peer_device", far.device), ("peer_port", far.port), ("node", self._node(link)),
                    *self._common(link))))
        return out

    def _share(self, dev: Device) -> str:
        """A spine's or super-spine's share of its tier's cables: what of the bisection its loss takes."""
        if dev.role not in ("spine", "superspine"):
            return ""
        if not self.cables:
            for link in self.plan.links:
                self.cables[link.tier] = self.cables.get(link.tier, 0) + 1
                for end in {link.a.device, link.b.device}:
                    self.cables[(link.tier, end)] = self.cables.get((link.tier, end), 0) + 1
        tier = "leaf-spine" if dev.role == "spine" else "spine-superspine"
        total = self.cables.get(tier, 0)
        return f"{self.cables.get((tier, dev.name), 0) / total:.4f}" if total else ""

    def devices_series(self) -> list[Series]:
        out = []
        for dev in self.plan.devices:
            if dev.fabric != "compute" or dev.role not in (*SWITCH_ROLES, "node"):
                continue
            out.append(Series("railforge_expected_device", (
                ("device", dev.name), ("role", dev.role), ("su", _s(dev.su)), ("rail", _s(dev.rail)),
                ("group", _s(dev.group)), ("bisection_share", self._share(dev)))))
        return out

    def text(self) -> str:
        lines = []
        for name, series in (("railforge_expected_bgp_session", self.bgp_sessions()),
                             ("railforge_expected_link", self.links()),
                             ("railforge_expected_device", self.devices_series())):
            lines += [f"# HELP {name} {HELP[name]}", f"# TYPE {name} gauge", *(s.line() for s in series)]
        return "\n".join(lines) + "\n"


def _address(dev: Device) -> str | None:
    cidr = (dev.bond.address if dev.bond else None) if dev.role == "node" else dev.mgmt_address
    return str(ip_interface(cidr).ip) if cidr else None


def targets(plan: Plan, exporter: str) -> str:
    """file_sd list: one target per device that runs `exporter`, labelled with the plan's device name."""
    roles = SWITCH_ROLES if exporter == "frr" else (*SWITCH_ROLES, "node")
    groups = []
    for dev in plan.devices:
        addr = _address(dev)
        if dev.fabric == "compute" and dev.role in roles and addr:
            groups.append({"targets": [f"{addr}:{EXPORTER_PORTS[exporter]}"],
                           "labels": {"device": dev.name, "role": dev.role}})
    return json.dumps(groups, indent=1, sort_keys=True) + "\n"


def rules_text(plan: Plan) -> str:
    return TEMPLATES.get_template("rules.yml.j2").render(cluster=plan.cluster.name)


def alertmanager_text(plan: Plan, receiver_url: str = "http://127.0.0.1:9777/alerts") -> str:
    return TEMPLATES.get_template("alertmanager.yml.j2").render(cluster=plan.cluster.name, url=receiver_url)


def render(plan: Plan, out: Output) -> None:
    if not any(d.fabric == "compute" and d.role in SWITCH_ROLES for d in plan.devices):
        return
    out.write_text("health/expected.prom", Expected(plan).text())
    out.write_text("health/rules.yml", rules_text(plan))
    out.write_text("health/alertmanager.yml", alertmanager_text(plan))
    for exporter in sorted(EXPORTER_PORTS):
        out.write_text(f"health/targets/{exporter}.json", targets(plan, exporter))
