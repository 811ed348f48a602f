"""What every monitoring target of a healthy cluster, built exactly as railforge generates it, would report.

Nothing here reads the expected state (`health/expected.prom`): the exporters' series are written from the
other generated artifacts, the way each exporter would see a healthy device:

- prometheus-frr-exporter on each target in `health/targets/frr.json`: one `frr_bgp_peer_state` = 1
  (Established) per BGP neighbour in the FRR configuration that switch runs (its OS profile's translation of
  its generated file, what the lab boots), named as FRR names it (the address, or the interface when unnumbered);
  a target at a switch that runs no FRR (no such translation: InfiniBand) does not answer;
- node-exporter on each target in `health/targets/node.json`: on an Ethernet switch, `node_network_carrier` for
  each of its ports (1 where the plan cables it; an InfiniBand switch runs none and does not answer); on a GPU
  node, from its `ansible/host_vars` (what the host roles set up):
  carrier on each rail (RoCE) or each rail's HCA port ACTIVE/LinkUp with zero error counters (InfiniBand,
  node-exporter's infiniband collector names), and the node check's textfile (no finding);
- the InfiniBand fabric scan on the host of the `ib_fabric_scan` inventory group: every switch port of
  `configs/opensm/expected-topology.txt` Active, written by the scan's own textfile writer.

The pages are served over HTTP and scraped by a real Prometheus through the generated file_sd files
(tests/helpers/prom_stack.py `scrape_pages`), so the targets' labels, and the renaming of a series' own `device`
label to `exported_device`, are Prometheus's own. The expected state is scraped with `honor_labels: true`, as
docs/health.md says.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from railforge import nos
from railforge.health import ibfabric
from railforge.lab.runner import frr_text
from railforge.plan.io import read_plan
from railforge.plan.model import Plan

IB_COUNTERS = ("symbol_error", "link_error_recovery", "link_downed", "port_errors_received",
               "local_link_integrity_errors", "excessive_buffer_overrun_errors")


def frr_neighbours(conf: str) -> list[str]:
    """Neighbours of every `router bgp` block of an FRR configuration (peer-group names are not neighbours)."""
    groups, seen = set(), []
    for line in conf.splitlines():
        words = line.split()
        if len(words) >= 3 and words[0] == "neighbor":
            if words[2] == "peer-group" and len(words) == 3:
                groups.add(words[1])
            elif words[1] not in seen:
                seen.append(words[1])
    return [n for n in seen if n not in groups]


@dataclass
class Healthy:
    """Each target's page (exposition text) by job and device, and the expected state's page."""

    plan: Plan
    targets: dict[str, list[dict]]  # job -> file_sd groups
    pages: dict[str, dict[str, str]] = field(default_factory=dict)  # job -> device -> text (absent: no answer)
    expected: str = ""

    def series(self) -> int:
        return sum(t.count("\n") - t.count("# ") for job in self.pages.values() for t in job.values())


def _page(lines: list[tuple[str, dict[str, str], str]]) -> str:
    out = []
    for name, labels, value in lines:
        inner = ",".join(f'{k}="{v}"' for k, v in labels.items())
        out.append(f"{name}{{{inner}}} {value}")
    return "\n".join(out) + "\n"


def healthy(out: Path, scan: str | None = None) -> Healthy:
    """What each target of the healthy cluster built in `out` serves; `scan`: the fabric scan's textfile to serve
    on the scanning node instead of one written from the OpenSM topology (a real scan, e.g. of ibsim)."""
    plan = read_plan(out / "plan.json")
    devices = plan.device_index()
    targets = {job: json.loads((out / "health" / "targets" / f"{job}.json").read_text()) for job in ("frr", "node")}
    got = Healthy(plan, targets, {"frr": {}, "node": {}}, (out / "health" / "expected.prom").read_text())
    for group in targets["frr"]:
        dev = devices[group["labels"]["device"]]
        if nos.profile(dev.nos).lab_frr is None:
            continue  # a switch that runs no FRR: an FRR exporter pointed at it does not answer
        got.pages["frr"][dev.name] = _page([
            ("frr_bgp_peer_state", {"afi": "ipv4", "safi": "unicast", "vrf": "default", "peer": peer}, "1")
            for peer in frr_neighbours(frr_text(out / "configs", dev))])
    scanners = set((yaml.safe_load((out / "ansible" / "hosts.yml").read_text())["all"]["children"]
                    .get("ib_fabric_scan") or {}).get("hosts") or {})
    for group in targets["node"]:
        dev = devices[group["labels"]["device"]]
        lines = [("node_exporter_build_info", {"version": "1.5.0"}, "1")]
        if dev.role != "node" and nos.profile(dev.nos).kind == "infiniband":
            continue  # an InfiniBand switch runs no node-exporter: a target at it does not answer
        if dev.role != "node":
            lines += [("node_network_carrier", {"device": p.name}, "1" if p.link else "0") for p in dev.ports]
            got.pages["node"][dev.name] = _page(lines)
            continue
        hv = json.loads((out / "ansible" / "host_vars" / f"{dev.name}.json").read_text())
        for rail in hv["railforge_rails"]:
            if plan.cluster.fabric == "infiniband":
                ib = {"device": rail["hca"], "port": "1"}
                lines += [("node_infiniband_state_id", ib, "4"), ("node_infiniband_physical_state_id", ib, "5")]
                lines += [(f"node_infiniband_{c}_total", ib, "0") for c in IB_COUNTERS]
            else:
                lines.append(("node_network_carrier", {"device": rail["ifname"]}, "1"))
        lines.append(("railforge_nodecheck_findings", {}, "0"))
        page = _page(lines)
        if dev.name in scanners:
            page += scan if scan is not None else ibfabric.textfile(_healthy_ports(out), time.time(), 0.5)
        got.pages["node"][dev.name] = page
    return got


def _healthy_ports(out: Path) -> list[ibfabric.SwitchPort]:
    """Every cabled switch port of the planned InfiniBand fabric, Active and LinkUp, as the scan reports them."""
    ports: dict[tuple[str, int], ibfabric.SwitchPort] = {}
    for line in (out / "configs" / "opensm" / "expected-topology.txt").read_text().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        _, a_node, a_port, b_node, b_port, *_ = line.split("\t")
        for node, port in ((a_node, a_port), (b_node, b_port)):
            if " " not in node:  # a switch (an HCA is `<host> <hca>`)
                ports[(node, int(port))] = ibfabric.SwitchPort("0x0", node, 1, int(port), 4, 5,
                                                               dict.fromkeys(ibfabric.ERROR_COUNTERS, 0))
    return list(ports.values())


def switch_oses(plan: Plan) -> dict[str, tuple[str, ...]]:
    """Each switch OS in the plan and what its profile says it runs (for the test's report)."""
    return {d.nos: nos.profile(d.nos).telemetry for d in plan.devices if d.nos}
