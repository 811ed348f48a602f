"""Host reservations joined into the Kea DHCPv4 configuration that `railforge ztp` writes for the switches.

BMCs get their planned OOB address on the OOB leaf subnets the switches use. Boot NICs get their host's planned
in-band (bond) address on the bond's subnet, whose router is the storage leaf's gateway (the leaf relays DHCP to
Kea). Two client classes pick the boot file: UEFI PXE firmware (client architecture 7 or 9, option 93) gets
`ipxe.efi` from the TFTP server; iPXE itself (user class "iPXE", option 77) gets `boot/boot.ipxe` over HTTP,
which chains the host's own script by MAC. A reservation carries the host, rack and U in its user-context.
"""

from __future__ import annotations

from ipaddress import ip_interface

from railforge.baremetal.identity import BootIdentity
from railforge.provision.dhcp import DhcpError, DhcpOptions, subnet_id
from railforge.provision.served import url

IPXE_CLASS = "railforge-ipxe"
UEFI_CLASS = "railforge-uefi-pxe"
ENTRY_SCRIPT = "boot/boot.ipxe"
UEFI_LOADER = "ipxe.efi"


def client_classes(server: str, tftp_server: str | None) -> list[dict]:
    entry = url(server, ENTRY_SCRIPT)
    classes = [{"name": IPXE_CLASS, "test": "substring(option[77].hex,0,4) == 'iPXE'", "boot-file-name": entry,
                "option-data": [{"name": "boot-file-name", "data": entry}]}]
    if tftp_server:
        classes.append({"name": UEFI_CLASS,
                        "test": f"not member('{IPXE_CLASS}') and "
                                "(option[93].hex == 0x0007 or option[93].hex == 0x0009)",
                        "next-server": tftp_server, "boot-file-name": UEFI_LOADER,
                        "option-data": [{"name": "boot-file-name", "data": UEFI_LOADER},
                                        {"name": "tftp-server-name", "data": tftp_server}]})
    return classes


def _context(i: BootIdentity, kind: str) -> dict:
    ctx: dict = {"railforge": kind, "host": i.host, "rack": i.rack, "u": i.u}
    if i.serial:
        ctx["serial"] = i.serial
    return ctx


def join_hosts(config: dict, ids: list[BootIdentity], opts: DhcpOptions, oob: dict[str, str],
               tftp_server: str | None = None) -> dict:
    """`config` (the switches' Kea configuration) with a reservation per recorded BMC and boot-NIC MAC; `oob` maps
    each OOB subnet to its gateway (`ztp.render.oob_gateways`)."""
    dhcp = config["Dhcp4"]
    subnets = {s["subnet"]: s for s in dhcp["subnet4"]}
    for i in sorted(ids, key=lambda x: x.host):
        wanted: list[tuple[str, str, str, dict]] = []
        if i.bmc_mac:
            net = str(ip_interface(i.bmc_address).network)
            if net not in oob:
                raise DhcpError(f"{i.host}: BMC address {i.bmc_address} is on no OOB leaf subnet of the plan")
            wanted.append((net, oob[net], i.bmc_mac, {"hostname": f"{i.host}-bmc", "ip-address": i.bmc_ip,
                                                      "user-context": _context(i, "bmc")}))
        if i.boot_mac and i.boot_address and i.boot_gateway:
            net = str(ip_interface(i.boot_address).network)
            wanted.append((net, i.boot_gateway, i.boot_mac, {
                "hostname": i.host, "ip-address": str(ip_interface(i.boot_address).ip),
                "user-context": _context(i, f"boot {i.boot_nic} {i.target} {i.boot_mode}")}))
        for net, gateway, mac, res in wanted:
            subnet = subnets.get(net)
            if subnet is None:
                options = [{"name": "routers", "data": gateway}]
                if opts.dns:
                    options.append({"name": "domain-name-servers", "data": ", ".join(opts.dns)})
                if opts.domain:
                    options.append({"name": "domain-name", "data": opts.domain})
                subnet = subnets[net] = {"id": subnet_id(net), "subnet": net, "option-data": options,
                                         "reservations": []}
            subnet["reservations"].append({"hw-address": mac, **res})
    dhcp["subnet4"] = sorted(subnets.values(), key=lambda s: s["id"])
    if any(i.boot_mac for i in ids):
        dhcp["client-classes"] = client_classes(opts.server, tftp_server)
    return config

