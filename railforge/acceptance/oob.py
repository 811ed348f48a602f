"""Burn-in of the cables no pair test carries: the out-of-band network and the storage leaves' peer links.

Reachability: every OOB access cable ends at a BMC or a switch's management port, and the address behind it
(the BMC's, the switch's `mgmt_address`) is reached over that cable only, so one ping per address names the
cable when it goes unanswered (`jobs/oob-reach.sh`, from a host that routes to the OOB network). A swap of two
access cables on one OOB leaf is not seen by pings (both addresses sit in the leaf's subnet): the BMCs' DHCP
reservations and `railforge verify cabling` on the leaves' LLDP tables see that.

LLDP: switch-to-switch cables that carry traffic no host test can make its own (the OOB fabric's uplinks, which
carry management traffic only; an MLAG pair's peer links, which carry host traffic only when a bond member is
down) are checked by the switches' LLDP tables (`jobs/collect-lldp.sh`, the formats `railforge verify cabling`
reads): the planned neighbour on the planned port, or the finding names the cable.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from railforge.plan.model import SWITCH_ROLES, Plan
from railforge.verify.cabling import compare
from railforge.verify.lldp import load_lldp
from railforge.verify.names import PlanNames

ACCESS_TIER = "oob-access"
LLDP_TIERS = ("oob-leaf-spine", "oob-spine-superspine", "storage-peer")


@dataclass(frozen=True, slots=True)
class Reach:
    id: str
    device: str
    port: str
    address: str
    cable: str
    switch: str

    def row(self) -> dict:
        return {"id": self.id, "device": self.device, "port": self.port, "address": self.address,
                "cable": self.cable, "switch": self.switch}


def reach_checks(plan: Plan) -> tuple[list[Reach], dict[str, str]]:
    """One check per OOB access cable whose far end has a planned address; the others with the reason."""
    devices = plan.device_index()
    out: list[Reach] = []
    why: dict[str, str] = {}
    for lk in plan.links:
        if lk.fabric != "oob" or lk.tier != ACCESS_TIER:
            continue
        d = devices[lk.a.device]
        if d.role in SWITCH_ROLES:
            address = d.mgmt_address
        else:
            address = d.bmc.address if d.bmc is not None and d.bmc.cable == lk.id else None
        if not address:
            why[lk.id] = f"{d.name} port {lk.a.port} has no planned address to reach"
            continue
        out.append(Reach(f"o{len(out) + 1:06d}", d.name, lk.a.port, address.split("/")[0], lk.id, lk.b.device))
    return out, why


def lldp_cables(plan: Plan) -> list[str]:
    return [lk.id for lk in plan.links if lk.tier in LLDP_TIERS]


def lldp_switches(plan: Plan) -> list[str]:
    """The switches whose LLDP tables see every LLDP-checked cable (both ends: a lost end still shows)."""
    ids = set(lldp_cables(plan))
    return sorted({e.device for lk in plan.links if lk.id in ids for e in (lk.a, lk.b)})


@dataclass(frozen=True, slots=True)
class ReachVerdict:
    checked: int
    answered: int
    missing: int
    lost: list[dict]  # checks that went unanswered: their cable is named
    dark: list[tuple[str, int]]  # OOB leaves none of whose addresses answered: the leaf or its uplinks, not N cables


def judge_reach(checks: list, answered: dict[str, bool]) -> ReachVerdict:
    """Unanswered addresses name their access cable; when no address behind an OOB leaf answers (two or more),
    the leaf itself or its uplinks are at fault, and its cables are not named one by one."""
    per_switch: dict[str, list] = {}
    for c in checks:
        per_switch.setdefault(c.switch, []).append(c)
    dark = sorted((sw, len(cs)) for sw, cs in per_switch.items()
                  if len(cs) >= 2 and all(answered.get(c.id) is False for c in cs))
    off = {sw for sw, _ in dark}
    lost = [{"check": c.id, "cable": c.cable, "device": c.device, "port": c.port, "address": c.address,
             "switch": c.switch} for c in checks if answered.get(c.id) is False and c.switch not in off]
    return ReachVerdict(len(checks), sum(1 for c in checks if answered.get(c.id)),
                        sum(1 for c in checks if c.id not in answered), lost, dark)


def lldp_findings(plan: Plan, folder: Path, cables: list[str],
                  check_speed: bool = True) -> tuple[int, int, list[tuple[str, list[str], str]]]:
    """The LLDP tables in `folder` against the plan (`railforge verify cabling`'s comparison, the speed from the
    neighbour's MAU type included), for the LLDP-checked cables: (checked, matched, findings as (kind, cables,
    message))."""
    obs = load_lldp(folder, PlanNames(plan))
    want = set(cables)
    report = compare([lk for lk in plan.links if lk.id in want], obs, check_speed=check_speed, partial=True)
    findings = [(f.kind, f.cables, f.message) for f in report.findings if want & set(f.cables)]
    return report.checked, report.matched, findings
