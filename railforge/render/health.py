"""Fabric health from the plan: the expected state as data, and a fixed set of Prometheus rules over it.

The plan's BGP sessions, cabled ports and devices are written as series for node-exporter's textfile
collector (`health/expected.prom`), each carrying the cable label, SU, rail, tier and the leaf it hangs off.
The alert rules (`health/rules.yml`) join those series against what the exporters report, so their number does
not grow with the cluster: a 100,000-GPU plan has the same rules as the 2-SU example, only a longer expected.prom.

What is expected is what something railforge lists as a target can see, and nothing more: a switch is a target
of the exporters its OS's profile says it runs (`NosProfile.telemetry`: prometheus-frr-exporter and node-exporter
on SONiC and Cumulus, the InfiniBand fabric scan for MLNX-OS), a GPU node of node-exporter. So a session is
expected at a switch's end only when that switch runs the FRR exporter, a port only when node-exporter (Ethernet)
or the fabric scan (InfiniBand) reads it, an HCA port only on a node node-exporter runs on.
`health/targets/*.json` are file_sd target lists (management address, or loopback, of switches; in-band
address of nodes) whose `device` label is the plan's name, which is what the rules join on.
`health/alertmanager.yml` routes to the remediation receiver and inhibits the small alerts a bigger one explains.

InfiniBand: node-exporter's infiniband collector reads each HCA port (`node_infiniband_state_id`, error
counters) on the nodes; the switches' ports are read over the fabric by `railforge/health/ibfabric.py`, which
one GPU node runs on a timer into its node-exporter's textfile folder (`railforge_ib_port_state_id`,
`railforge_ib_port_errors_total`); `railforge_expected_fabric_scan` names that node.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from ipaddress import ip_interface
from itertools import islice
from pathlib import Path
from typing import TextIO

import jinja2

from railforge import nos
from railforge.formats.output import Output
from railforge.plan.model import SWITCH_ROLES as ALL_SWITCH_ROLES
from railforge.plan.model import Device, Link, Plan
from railforge.plan.switch_model import build_models

LINK_TIERS = ("node-leaf", "leaf-spine", "spine-superspine")
SWITCH_ROLES = ("leaf", "spine", "superspine")
EXPORTER_PORTS = {"frr": 9342, "node": 9100}
# the InfiniBand error counters a bad cable or optic raises, as the fabric scan (PortCounters, perfquery's names) and
# node-exporter's infiniband collector (the kernel's sysfs counters) name them; infiniband-diags' error_thresholds
# file gives each the same default threshold, 10, which the rules use
SWITCH_ERROR_COUNTERS = ("SymbolErrorCounter", "LinkErrorRecoveryCounter", "LinkDownedCounter", "PortRcvErrors",
                         "LocalLinkIntegrityErrors", "ExcessiveBufferOverrunErrors")
HCA_ERROR_COUNTERS = ("symbol_error", "link_error_recovery", "link_downed", "port_errors_received",
                      "local_link_integrity_errors", "excessive_buffer_overrun_errors")
TEMPLATES = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates" / "health"),
    undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
)


HELP = {
    "railforge_expected_bgp_session": "A BGP session the plan expects on this switch (peer = address, or the port "
                                      "on unnumbered links).",
    "railforge_expected_link": "A planned cable end: this device's port is cabled to peer_device:peer_port.",
    "railforge_expected_device": "A device the plan expects; bisection_share: its share of its tier's uplinks.",
    "railforge_expected_fabric_scan": "The node whose InfiniBand fabric scan reads the switches' ports.",
}


def _escape(value: str) -> str:
    if "\\" in value or '"' in value or "\n" in value:
        return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return value


def _labels(pairs: Iterable[tuple[str, str]]) -> str:
    """`k="v",...` in the text exposition format, empty values left out."""
    return ",".join(f'{k}="{_escape(v)}"' for k, v in pairs if v != "")


class LabelSet:
    """Labels with fixed names rendered by one `str.format` call: a 131K-GPU plan writes 1.4 million series. Values
    that are empty (left out) or hold a character the format escapes take `_labels`, which gives the same text."""

    def __init__(self, *keys: str):
        self.keys = keys
        self.template = ",".join(f'{k}="{{}}"' for k in keys)
        self.quotes = 2 * len(keys)

    def __call__(self, *values: str) -> str:
        text = self.template.format(*values)
        if all(values) and text.count('"') == self.quotes and "\\" not in text and "\n" not in text:
            return text
        return _labels(zip(self.keys, values, strict=True))


COMMON = LabelSet("cable", "fabric", "tier", "su", "rail", "leaf")
SESSION = LabelSet("device", "port", "role", "peer", "peer_device", "peer_port", "peer_role")
LINK_END = LabelSet("device", "port", "role", "peer_device", "peer_port", "node")
DEVICE = LabelSet("device", "role", "su", "rail", "group", "bisection_share")


def _series(name: str, *parts: str) -> str:
    """One series line from already rendered label parts (an empty part adds nothing)."""
    return f"{name}{{{','.join(p for p in parts if p)}}} 1"


def _s(value: int | str | None) -> str:
    return "" if value is None else str(value)


def address(dev: Device) -> str | None:
    """Where Prometheus reaches a device: a node's in-band (bond) address; a switch's management address, else
    its loopback (OOB switches have no management port of their own)."""
    cidr = (dev.bond.address if dev.bond else None) if dev.role == "node" else dev.mgmt_address or dev.loopback
    return str(ip_interface(cidr).ip) if cidr else None


def telemetry(dev: Device) -> tuple[str, ...]:
    """The exporters a device runs for the health rules: node-exporter on a GPU node, its OS profile's on a switch."""
    if dev.role == "node":
        return ("node",)
    profile = nos.find(dev.nos) if dev.role in ALL_SWITCH_ROLES else None
    return profile.telemetry if profile is not None else ()


def scan_host(plan: Plan) -> Device | None:
    """The GPU node that scans an InfiniBand compute fabric (the first node node-exporter can be scraped on), or
    None: not InfiniBand, no switch read by the scan, or no reachable node."""
    if plan.cluster.fabric != "infiniband":
        return None
    if not any(d.fabric == "compute" and "ibfabric" in telemetry(d) for d in plan.devices):
        return None
    return next((d for d in plan.devices if d.fabric == "compute" and d.role == "node" and address(d)), None)


def watched(plan: Plan) -> dict[str, frozenset[str]]:
    """Device -> what reads it: the exporters it runs that Prometheus can reach (it has an address), and
    `ibfabric` for a switch the fabric scan reads when some node runs the scan."""
    scanning = scan_host(plan) is not None
    out: dict[str, frozenset[str]] = {}
    for dev in plan.devices:
        seen = {t for t in telemetry(dev) if t in EXPORTER_PORTS and address(dev)}
        if scanning and dev.fabric == "compute" and "ibfabric" in telemetry(dev):
            seen.add("ibfabric")
        if seen:
            out[dev.name] = frozenset(seen)
    return out


class Expected:
    """The expected-state series of one plan (sessions by switch, links, devices) as text lines: same plan, same
    bytes. `write` streams them to a file: at 131K GPUs they are 1.4 million lines (345 MB), which held as one
    string and as objects per line took 1.7 GB at the build's peak."""

    def __init__(self, plan: Plan):
        self.plan = plan
        self.devices = plan.device_index()
        self.link_of = plan.link_index()
        self.watch = watched(plan)
        self.cables: dict[str | tuple[str, str], int] = {}
        self.kind = "infiniband" if plan.cluster.fabric == "infiniband" else "ethernet"
        self._common_text: dict[str, str] = {}

    def _leaf(self, link: Link) -> str:
        for end in (link.a, link.b):
            if self.devices[end.device].role in ("leaf", "storage-leaf", "oob-leaf"):
                return end.device
        return ""

    def _node(self, link: Link) -> str:
        return next((e.device for e in (link.a, link.b) if self.devices[e.device].role == "node"), "")

    def _common(self, link: Link) -> str:
        """The labels every series of a cable carries, rendered once per cable (each is on up to four lines)."""
        text = self._common_text.get(link.id)
        if text is None:
            text = self._common_text[link.id] = COMMON(link.id, link.fabric, link.tier, _s(link.su), _s(link.rail),
                                                       self._leaf(link))
        return text

    def _sees(self, device: str, what: str) -> bool:
        return what in self.watch.get(device, ())

    def bgp_sessions(self) -> Iterator[str]:
        """Each BGP neighbour of each switch whose FRR an exporter reads, as the switch configs name it (the
        per-switch view they are rendered from); a session with no cable of its own (MLAG's peerlink) is left out."""
        name = "railforge_expected_bgp_session"
        for sw in build_models(self.plan, select=lambda device: self._sees(device, "frr")):
            ports = {i.name: i for i in sw.interfaces}
            for n in sw.neighbors:
                iface = ports.get(n.interface)
                if iface is None or iface.cable is None:
                    continue
                yield _series(name, SESSION(sw.hostname, n.interface, sw.role, n.key, n.peer_name, n.peer_port,
                                            self.devices[n.peer_name].role), self._common(self.link_of[iface.cable]))

    def _end_labels(self, device: Device, port: str) -> str | None:
        """How this cable end is read, as rendered labels; None when nothing reads it."""
        if self.kind == "ethernet":
            return 'kind="ethernet"' if self._sees(device.name, "node") else None
        if device.role == "node":
            if not self._sees(device.name, "node"):
                return None
            hca = next((device.hca(p) for p in device.ports if p.name == port), "")
            return _labels((("kind", "infiniband"), ("hca", hca), ("ib_port", "1")))
        if not self._sees(device.name, "ibfabric"):
            return None
        number = next(p.ib_number() for p in device.ports if p.name == port)
        return _labels((("kind", "infiniband"), ("ib_port", str(number))))

    def links(self) -> Iterator[str]:
        name = "railforge_expected_link"
        for link in self.plan.links:
            if link.fabric != "compute" or link.tier not in LINK_TIERS:
                continue
            for near, far in ((link.a, link.b), (link.b, link.a)):
                dev = self.devices[near.device]
                how = self._end_labels(dev, near.port)
                if how is None:
                    continue
                yield _series(name, LINK_END(near.device, near.port, dev.role, far.device, far.port, self._node(link)),
                              self._common(link), how)

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

    def devices_series(self) -> Iterator[str]:
        for dev in self.plan.devices:
            if dev.fabric != "compute" or dev.role not in (*SWITCH_ROLES, "node"):
                continue
            yield _series("railforge_expected_device", DEVICE(dev.name, dev.role, _s(dev.su), _s(dev.rail),
                                                              _s(dev.group), self._share(dev)))

    def fabric_scan(self) -> Iterator[str]:
        host = scan_host(self.plan)
        if host is not None:
            yield _series("railforge_expected_fabric_scan", _labels((("device", host.name), ("fabric", "compute"))))

    def lines(self) -> Iterator[str]:
        for name, series in (("railforge_expected_bgp_session", self.bgp_sessions()),
                             ("railforge_expected_link", self.links()),
                             ("railforge_expected_device", self.devices_series()),
                             ("railforge_expected_fabric_scan", self.fabric_scan())):
            yield f"# HELP {name} {HELP[name]}"
            yield f"# TYPE {name} gauge"
            yield from series

    def text(self) -> str:
        return "\n".join(self.lines()) + "\n"

    def write(self, fh: TextIO, batch: int = 4096) -> None:
        """The same text as `text()`, written `batch` lines at a time."""
        lines = self.lines()
        while chunk := list(islice(lines, batch)):
            fh.write("\n".join(chunk) + "\n")




def targets(plan: Plan, exporter: str) -> str:
    """file_sd list: one target per device that runs `exporter` (a GPU node, or a switch whose OS profile lists
    it) and has an address, labelled with the plan's device name, its role and fabric."""
    groups = []
    for dev in plan.devices:
        addr = address(dev)
        if exporter in telemetry(dev) and addr:
            groups.append({"targets": [f"{addr}:{EXPORTER_PORTS[exporter]}"],
                           "labels": {"device": dev.name, "fabric": dev.fabric, "role": dev.role}})
    return json.dumps(groups, indent=1, sort_keys=True) + "\n"


def rules_text(plan: Plan) -> str:
    return TEMPLATES.get_template("rules.yml.j2").render(cluster=plan.cluster.name,
                                                         switch_error_counters=SWITCH_ERROR_COUNTERS,
                                                         hca_error_counters=HCA_ERROR_COUNTERS)


def alertmanager_text(plan: Plan, receiver_url: str = "http://127.0.0.1:9777/alerts") -> str:
    return TEMPLATES.get_template("alertmanager.yml.j2").render(cluster=plan.cluster.name, url=receiver_url)


def render(plan: Plan, out: Output) -> None:
    if not any(d.fabric == "compute" and d.role in SWITCH_ROLES for d in plan.devices):
        return
    with out.open("health/expected.prom") as fh:
        Expected(plan).write(fh)
    out.write_text("health/rules.yml", rules_text(plan))
    out.write_text("health/alertmanager.yml", alertmanager_text(plan))
    for exporter in sorted(EXPORTER_PORTS):
        out.write_text(f"health/targets/{exporter}.json", targets(plan, exporter))
