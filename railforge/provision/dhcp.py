"""The parts of the Kea DHCPv4 configuration that switch and host reservations share."""

from __future__ import annotations

from dataclasses import dataclass
from ipaddress import ip_interface


class DhcpError(ValueError):
    """A reservation the plan cannot place (an address on no subnet of the plan)."""


SOCKET_RETRY_MS = 5000
SOCKET_RETRIES = 720  # an hour of retries, every 5 s


@dataclass(slots=True, frozen=True)
class DhcpOptions:
    server: str
    dns: tuple[str, ...] = ()
    domain: str | None = None
    interfaces: tuple[str, ...] = ("*",)
    lease_file: str = "/var/lib/kea/kea-leases4.csv"


def interfaces_config(opts: DhcpOptions) -> dict:
    """Kea's `interfaces-config`. Kea opens no socket on an interface that is down or has no carrier when it starts
    (`DHCPSRV_OPEN_SOCKET_FAIL ... is not running`) and, without retries, never tries again: a Kea started before
    its links are up (a boot where kea-dhcp4.service wins the race with the network, a switch port still
    negotiating) serves nothing. With retries, Kea 2.2 looks at the interfaces again every SOCKET_RETRY_MS and opens
    the sockets once the links are up."""
    return {"interfaces": list(opts.interfaces), "service-sockets-max-retries": SOCKET_RETRIES,
            "service-sockets-retry-wait-time": SOCKET_RETRY_MS}


def subnet_id(network: str) -> int:
    """Stable under growth: the subnet's position in the IPv4 space at its own prefix length."""
    net = ip_interface(network).network
    return int(net.network_address) >> (32 - net.prefixlen)
