"""`railforge verify fabric`: read a folder of per-switch FRR dumps and judge it with the shared fabric rules."""

from __future__ import annotations

from dataclasses import dataclass
from ipaddress import ip_interface
from pathlib import Path

from railforge.plan.model import Plan
from railforge.verify.cabling import CablingReport, compare
from railforge.verify.fabric import (
    FabricReport,
    Finding,
    expected_routes,
    judge_routes,
    judge_sessions,
    planned_sessions,
)
from railforge.verify.frrdump import BGP_FILE, ROUTE_FILE, DumpError, lldp_file, read_bgp_routes, read_bgp_summary
from railforge.verify.lldp import LldpFormatError, parse_lldp_file
from railforge.verify.names import PlanNames
from railforge.verify.observed import Observation


@dataclass(slots=True)
class FabricResult:
    report: FabricReport
    cabling: CablingReport | None
    switches: int


def _owners(plan: Plan) -> dict[str, str]:
    out: dict[str, str] = {}
    for d in plan.switches():
        for p in ([d.loopback] if d.loopback else []) + [hs.prefix for hs in d.host_subnets]:
            net = str(ip_interface(p).network)
            out[net] = f"{out[net]}+{d.name}" if net in out else d.name
    return out


def verify_fabric(plan: Plan, folder: Path, check_speed: bool = True, partial: bool = False) -> FabricResult:
    switches = plan.switches()
    by_name = {d.name: d for d in switches}
    names = PlanNames(plan)
    report = FabricReport()
    folders = sorted(p for p in folder.iterdir() if p.is_dir())
    fabrics = {by_name[d].fabric for d in (names.device(p.name) for p in folders) if d in by_name}
    in_view = [d for d in switches if d.fabric in fabrics]  # fabrics share no BGP session: judge only those seen
    sessions = planned_sessions(in_view, plan.links)
    want = expected_routes(in_view, plan.links, loopbacks=True)
    owners = _owners(plan)
    cable_of: dict[str, dict[str, str]] = {}
    for link in plan.links:
        cable_of.setdefault(link.a.device, {})[link.a.port] = link.id
        cable_of.setdefault(link.b.device, {})[link.b.port] = link.id
    lldp = Observation()
    seen_lldp = False
    read = 0
    for sub in folders:
        device = names.device(sub.name)
        if device not in by_name:
            what = "a host, not a switch" if device else "not in the plan"
            report.findings.append(Finding("unknown-switch", sub.name, [], f"{sub}: {sub.name!r} is {what}; skipped"))
            continue
        read += 1
        try:
            summary = read_bgp_summary(sub / BGP_FILE)
            judge_sessions(report, device, sessions.get(device, {}), summary.peers, summary.local_as,
                           by_name[device].asn)
        except DumpError as exc:
            report.findings.append(Finding("unreadable", device, [], str(exc)))
        try:
            judge_routes(report, device, want.get(device, {}), read_bgp_routes(sub / ROUTE_FILE),
                         cable_of.get(device, {}), owners)
        except DumpError as exc:
            report.findings.append(Finding("unreadable", device, [], str(exc)))
        lf = lldp_file(sub)
        if lf is not None:
            seen_lldp = True
            try:
                lldp.merge(parse_lldp_file(lf, names, device))
            except (LldpFormatError, UnicodeDecodeError) as exc:
                report.findings.append(Finding("unreadable", device, [], str(exc)))
    report.sort()
    cabling = compare(plan.links, lldp, check_speed=check_speed, partial=partial) if seen_lldp else None
    return FabricResult(report, cabling, read)
