"""The files a host fetches when it PXE-boots, rendered from the plan and the recorded boot identities.

Layout (the HTTP server's document root is the generated folder, as for ZTP; the TFTP root holds only iPXE):

    <tftp root>/ipxe.efi                     UEFI PXE firmware loads iPXE (Debian package `ipxe`: snponly.efi or
                                             ipxe.efi); Kea's `railforge-uefi-pxe` class names it
    boot/boot.ipxe                           what iPXE gets from DHCP (class `railforge-ipxe`): chains by MAC
    boot/hosts/<mac-with-hyphens>.ipxe       per host: kernel, initrd and a command line carrying its identity
    boot/preseed/<host>.cfg                  installer target: Debian 12 preseed (address, disk, keys, report-in)
    boot/report/railforge-report(.service)   the report-in client and its unit, fetched by the installer's late
                                             command (the stateless image carries its own copy)
    boot/images/stateless/{vmlinuz,initrd.img,filesystem.squashfs}   the stateless image (`railforge boot image`)
    boot/images/debian-installer/{linux,initrd.gz}      Debian's netboot installer

The kernel command line names the host (`railforge.host`, `railforge.rack`, `railforge.u`), the NIC it booted
from (`BOOTIF=01-<mac>`, as PXELINUX and the Debian installer read it), where to report in (`railforge.report`) and
the host's report-in token (`railforge.token`, see reportkey.py); the stateless image's report unit uses them, the
installer ignores what it does not know. A stateless host also gets `boot=railforge` and `railforge.image=<URL of
filesystem.squashfs>`, which the image's initramfs reads (image/railforge.boot).

An installer host's preseed ends with a late command that installs the host's SSH keys, writes the report-in
settings (/etc/railforge/report-in.json, 0600), fetches the report-in client and its unit into the target, enables
the unit (so the installed system reports `booted` on every boot) and reports `installed`: report-in then switches
the host's script to `local.ipxe.j2` (leave iPXE, boot the disk). A host listed in report-in's installed-hosts.txt
(`installed`) gets that script from this renderer too, so running `boot files` again does not install it again.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from importlib.resources import files
from ipaddress import ip_interface
from urllib.parse import urlsplit

import jinja2

from railforge.baremetal.hostmacs import TEMPLATE
from railforge.baremetal.identity import BootIdentity
from railforge.baremetal.reportkey import host_token
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


CLIENT = ("railforge-report", "railforge-report-in.service")
SQUASHFS = "filesystem.squashfs"
REPORT_CONFIG = "/etc/railforge/report-in.json"


def cmdline(i: BootIdentity, opts: BootOptions, token: str) -> str:
    assert i.boot_mac
    args = [f"BOOTIF=01-{hexhyp(i.boot_mac)}", f"railforge.host={i.host}", f"railforge.rack={i.rack}",
            f"railforge.u={i.u}", f"railforge.report={opts.report}", f"railforge.token={token}"]
    if i.target == "stateless":
        args += ["boot=railforge", f"railforge.image={opts.server}/boot/images/stateless/{SQUASHFS}"]
    if i.target == "installer":
        args += ["auto=true", "priority=critical", f"url={opts.server}/boot/preseed/{i.host}.cfg",
                 f"hostname={i.host}", f"domain={opts.domain}"]
    if opts.console:
        args += ["console=tty0", f"console={opts.console}"]
    return " ".join([*args, *opts.kernel_args])


def late_command(i: BootIdentity, opts: BootOptions, creds: Credentials, token: str) -> str:
    """Run by the installer (busybox sh, its own wget; `in-target` runs a command in the installed system) once
    the system is installed: SSH keys, report-in settings, client and unit, then report `installed`. Any failing
    step stops the installation with an error instead of rebooting into a host nobody knows is installed."""
    steps = []
    if creds.ssh_authorized_keys:
        keys = " ".join(shlex.quote(k) for k in creds.ssh_authorized_keys)
        steps.append(f"mkdir -p -m 0700 /root/.ssh && printf '%s\\n' {keys} > /root/.ssh/authorized_keys "
                     "&& chmod 0600 /root/.ssh/authorized_keys")
    settings = json.dumps({"report": opts.report, "token": token, "host": i.host, "mac": i.boot_mac},
                          sort_keys=True, separators=(",", ":"))
    steps.append(f"umask 077 && mkdir -p /etc/railforge && printf '%s\\n' {shlex.quote(settings)} > {REPORT_CONFIG}")
    commands = [f"in-target sh -c {shlex.quote(step)}" for step in steps]
    commands += [f"wget -q -O /target/usr/local/sbin/{CLIENT[0]} {opts.server}/boot/report/{CLIENT[0]}",
                 f"wget -q -O /target/etc/systemd/system/{CLIENT[1]} {opts.server}/boot/report/{CLIENT[1]}",
                 f"in-target chmod 0755 /usr/local/sbin/{CLIENT[0]}",
                 f"in-target systemctl enable {CLIENT[1]}",
                 f"in-target /usr/local/sbin/{CLIENT[0]} --phase installed"]
    return " && ".join(commands)


def local_script(i: BootIdentity) -> ServedFile:
    """The script of an installed host: leave iPXE, so that the firmware boots the next entry, the disk."""
    return ServedFile(host_script_path(i), TEMPLATES.get_template("local.ipxe.j2").render(i=i))


def client_files() -> list[ServedFile]:
    folder = files("railforge.baremetal") / "client"
    return [ServedFile(f"boot/report/{name}", (folder / name).read_text(encoding="utf-8"), 0o755 if n == 0 else 0o644)
            for n, name in enumerate(CLIENT)]


def preseed(i: BootIdentity, opts: BootOptions, creds: Credentials, token: str) -> str:
    assert i.boot_address
    iface = ip_interface(i.boot_address)
    mirror = urlsplit(opts.mirror)
    return TEMPLATES.get_template("preseed.cfg.j2").render(
        i=i, address=str(iface.ip), netmask=str(iface.netmask), dns=opts.dns, domain=opts.domain, disk=opts.disk,
        creds=creds, mirror_host=mirror.netloc, mirror_dir=mirror.path or "/debian",
        late_command=late_command(i, opts, creds, token))


def boot_files(ids: list[BootIdentity], opts: BootOptions, creds: Credentials, key: bytes,
               installed: frozenset[str] = frozenset()) -> list[ServedFile]:
    """boot.ipxe, the report-in client, one script per host with a boot MAC (the local disk for an `installed`
    host) and a preseed per installer host not installed yet."""
    written = [ServedFile("boot/boot.ipxe", TEMPLATES.get_template("boot.ipxe.j2").render(
        server=opts.server, template=TEMPLATE)), *client_files()]
    for i in sorted(ids, key=lambda x: x.host):
        if not i.boot_mac:
            continue
        if i.host in installed:
            written.append(local_script(i))
            continue
        token = host_token(key, i.host, i.boot_mac)
        written.append(ServedFile(host_script_path(i), TEMPLATES.get_template(f"{i.target}.ipxe.j2").render(
            i=i, server=opts.server, cmdline=cmdline(i, opts, token)), SECRET_MODE))
        if i.target == "installer":
            written.append(ServedFile(f"boot/preseed/{i.host}.cfg", preseed(i, opts, creds, token), SECRET_MODE))
    return written
