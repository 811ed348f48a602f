"""The files a host fetches when it PXE-boots, rendered from the plan and the recorded boot identities.

Layout (the HTTP server's document root is the generated folder, as for ZTP; the TFTP root holds only iPXE):

    <tftp root>/ipxe.efi                     UEFI PXE firmware loads iPXE (Debian package `ipxe`: snponly.efi or
                                             ipxe.efi); Kea's `railforge-uefi-pxe` class names it
    boot/boot.ipxe                           what iPXE gets from DHCP (class `railforge-ipxe`): chains by MAC
    boot/hosts/<mac-with-hyphens>.ipxe       per host: kernel, initrd and a command line carrying its identity
    boot/preseed/<host>.cfg                  installer target: Debian 12 preseed (address, disk, keys)
    boot/images/stateless/{vmlinuz,initrd.img}          the stateless image (the user's, or the test's)
    boot/images/debian-installer/{linux,initrd.gz}      Debian's netboot installer

The kernel command line names the host (`railforge.host`, `railforge.rack`, `railforge.u`), the NIC it booted
from (`BOOTIF=01-<mac>`, as PXELINUX and the Debian installer read it) and where to report in
(`railforge.report`); the stateless image's init uses them, the installer ignores what it does not know.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from ipaddress import ip_interface
from urllib.parse import urlsplit

import jinja2

from railforge.baremetal.hostmacs import TEMPLATE
from railforge.baremetal.identity import BootIdentity
from railforge.provision.credentials import Credentials
from railforge.provision.served import SECRET_MODE, ServedFile

TEMPLATES = jinja2.Environment(
    loader=jinja2.PackageLoader("railforge.baremetal", "templates"),
    undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
    autoescape=False,
)


@dataclass(slots=True, frozen=True)
class BootOptions:
    server: str  # HTTP URL whose document root is the generated folder
    report: str  # URL of the registration endpoint (railforge boot report-in)
    console: str = "ttyS0,115200n8"
    kernel_args: tuple[str, ...] = ()
    dns: tuple[str, ...] = ()
    domain: str = "cluster.local"
    disk: str = "/dev/nvme0n1"
    mirror: str = "http://deb.debian.org/debian"


def hexhyp(mac: str) -> str:
    return mac.replace(":", "-")


def host_script_path(i: BootIdentity) -> str:
    assert i.boot_mac
    return f"boot/hosts/{hexhyp(i.boot_mac)}.ipxe"


def cmdline(i: BootIdentity, opts: BootOptions) -> str:
    assert i.boot_mac
    args = [f"BOOTIF=01-{hexhyp(i.boot_mac)}", f"railforge.host={i.host}", f"railforge.rack={i.rack}",
            f"railforge.u={i.u}", f"railforge.report={opts.report}"]
    if i.target == "installer":
        args += ["auto=true", "priority=critical", f"url={opts.server}/boot/preseed/{i.host}.cfg",
                 f"hostname={i.host}", f"domain={opts.domain}"]
    if opts.console:
        args += ["console=tty0", f"console={opts.console}"]
    return " ".join([*args, *opts.kernel_args])


def _late_command(creds: Credentials) -> str:
    if not creds.ssh_authorized_keys:
        return "true"
    keys = " ".join(shlex.quote(k) for k in creds.ssh_authorized_keys)
    inner = (f"mkdir -p -m 0700 /root/.ssh && printf '%s\\n' {keys} > /root/.ssh/authorized_keys "
             "&& chmod 0600 /root/.ssh/authorized_keys")
    return f"in-target sh -c {shlex.quote(inner)}"


def preseed(i: BootIdentity, opts: BootOptions, creds: Credentials) -> str:
    assert i.boot_address
    iface = ip_interface(i.boot_address)
    mirror = urlsplit(opts.mirror)
    return TEMPLATES.get_template("preseed.cfg.j2").render(
        i=i, address=str(iface.ip), netmask=str(iface.netmask), dns=opts.dns, domain=opts.domain, disk=opts.disk,
        creds=creds, mirror_host=mirror.netloc, mirror_dir=mirror.path or "/debian",
        late_command=_late_command(creds))


def boot_files(ids: list[BootIdentity], opts: BootOptions, creds: Credentials) -> list[ServedFile]:
    """boot.ipxe, one script per host with a boot MAC, and a preseed per installer host."""
    files = [ServedFile("boot/boot.ipxe", TEMPLATES.get_template("boot.ipxe.j2").render(
        server=opts.server, template=TEMPLATE))]
    for i in sorted(ids, key=lambda x: x.host):
        if not i.boot_mac:
            continue
        files.append(ServedFile(host_script_path(i), TEMPLATES.get_template(f"{i.target}.ipxe.j2").render(
            i=i, server=opts.server, cmdline=cmdline(i, opts))))
        if i.target == "installer":
            files.append(ServedFile(f"boot/preseed/{i.host}.cfg", preseed(i, opts, creds),
                                 SECRET_MODE if creds.admin_password_hash else 0o644))
    return files
