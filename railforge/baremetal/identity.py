"""A host's boot identity: what the plan says (name, SU, rack, U, BMC address, boot NIC and in-band address) joined
with what the user recorded after racking (BMC and boot-NIC MACs, serial, boot target). Boot mode is UEFI.

Also the host sets every bare-metal command takes: all hosts, an SU, a rack, or a list of names.
"""

from __future__ import annotations

from dataclasses import dataclass
from ipaddress import ip_interface

from railforge.baremetal.hostmacs import HostId, boot_nic, hosts
from railforge.plan.model import Device, Plan

BOOT_MODE = "uefi"


class SelectionError(ValueError):
    pass


@dataclass(slots=True, frozen=True)
class BootIdentity:
    host: str
    su: int | None
    rack: str
    u: int
    bmc_address: str  # CIDR, as planned
    bmc_mac: str | None
    boot_nic: str | None
    boot_mac: str | None
    boot_address: str | None  # CIDR: the in-band bond address, used by the boot NIC until the OS builds the bond
    boot_gateway: str | None
    serial: str | None
    target: str
    boot_mode: str = BOOT_MODE

    @property
    def bmc_ip(self) -> str:
        return str(ip_interface(self.bmc_address).ip)

    @property
    def place(self) -> str:
        return f"rack {self.rack} U{self.u}"


def identity(dev: Device, rec: HostId | None) -> BootIdentity:
    assert dev.bmc is not None
    nic = boot_nic(dev)
    return BootIdentity(
        host=dev.name, su=dev.su, rack=dev.rack, u=dev.u, bmc_address=dev.bmc.address,
        bmc_mac=rec.bmc_mac if rec else None, boot_nic=nic, boot_mac=rec.boot_mac if rec else None,
        boot_address=dev.bond.address if nic and dev.bond else None,
        boot_gateway=dev.bond.gateway if nic and dev.bond else None,
        serial=rec.serial if rec else None, target=rec.target if rec else "stateless")


def identities(plan: Plan, recs: list[HostId]) -> list[BootIdentity]:
    """Every host with a planned BMC, in plan order, with what the MAC file says about it."""
    by_host = {r.host: r for r in recs}
    return [identity(d, by_host.get(d.name)) for d in hosts(plan)]


def select(ids: list[BootIdentity], spec: str) -> list[BootIdentity]:
    """`all`, or comma-separated `su:N`, `su:N-M`, `rack:NAME` and host names; an unknown name, a bad range or an
    empty set is an error that says what is valid."""
    spec = spec.strip()
    if spec == "all":
        return ids
    known = {i.host for i in ids}
    wanted: set[str] = set()
    for token in (t.strip() for t in spec.split(",")):
        if not token:
            continue
        if token.startswith("su:"):
            first, _, last = token[3:].partition("-")
            try:
                lo, hi = int(first), int(last or first)
            except ValueError:
                raise SelectionError(f"--hosts {token!r}: want su:<number> or su:<first>-<last>, e.g. su:1-4") from None
            wanted |= {i.host for i in ids if i.su is not None and lo <= i.su <= hi}
        elif token.startswith("rack:"):
            wanted |= {i.host for i in ids if i.rack == token[5:]}
        elif token in known:
            wanted.add(token)
        else:
            raise SelectionError(f"--hosts: {token!r} is not a host with a BMC in the plan (want all, su:N, su:N-M, "
                                 "rack:NAME or host names separated by commas)")
    chosen = [i for i in ids if i.host in wanted]
    if not chosen:
        raise SelectionError(f"--hosts {spec!r} selects no host (want all, su:N, su:N-M, rack:NAME or host names)")
    return chosen
