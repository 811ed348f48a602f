"""The parts of the Kea DHCPv4 configuration that switch and host reservations share."""

from __future__ import annotations

from dataclasses import dataclass
from ipaddress import ip_interface


class DhcpError(ValueError):
    """A reservation the plan cannot place (an address on no subnet of the plan)."""


@dataclass(slots=True, frozen=True)
class DhcpOptions:
    server: str
    dns: tuple[str, ...] = ()
    domain: str | None = None
    interfaces: tuple[str, ...] = ("*",)
    lease_file: str = "/var/lib/kea/kea-leases4.csv"


def subnet_id(network: str) -> int:
    """Stable under growth: the subnet's position in the IPv4 space at its own prefix length."""
    net = ip_interface(network).network
    return int(net.network_address) >> (32 - net.prefixlen)
