"""`railforge ztp`: write the ZTP files and the Kea DHCPv4 configuration into the generated folder."""

from __future__ import annotations

import json
import os
import shutil
from ipaddress import ip_address
from pathlib import Path
from typing import Annotated

import typer

from railforge.baremetal.hostmacs import TEMPLATE as HOST_TEMPLATE
from railforge.baremetal.hostmacs import HostMacError, read_host_macs
from railforge.baremetal.identity import identities
from railforge.baremetal.kea import join_hosts
from railforge.cli import show
from railforge.cli.args import ArgumentError, check_path, check_url
from railforge.formats.output import sweep_stale_stages
from railforge.inputs import InputError
from railforge.plan import outdir
from railforge.plan.outdir import BuildError
from railforge.provision.credentials import CredentialError, load_credentials
from railforge.provision.dhcp import DhcpError, DhcpOptions
from railforge.provision.served import ServedFile
from railforge.ztp.macs import TEMPLATE, MacFileError, provisioned, read_macs
from railforge.ztp.render import ZtpError, kea_config, oob_gateways, switch_files

KEA_FILE = outdir.KEA


def _server(value: str) -> str:
    try:
        return check_url(value, "--server")
    except ArgumentError as exc:
        raise ZtpError(f"{exc} (the URL that serves the generated folder)") from None


def _dns(value: str) -> None:
    try:
        ip_address(value)
    except ValueError:
        raise ZtpError(f"--dns {value!r}: want an IP address such as 10.250.0.53") from None


def _mkdirs(stage: Path, folder: Path) -> None:
    """`folder` and its parents up to and including `stage`, each 0755 whatever the umask."""
    for d in [*reversed(folder.relative_to(stage).parents), folder.relative_to(stage)]:
        path = stage / d
        if not path.is_dir():
            path.mkdir()
            os.chmod(path, 0o755)


def write_tree(generated: Path, files: list[ServedFile]) -> None:
    """Replace generated/ztp as a whole; files are created with their final mode (no window at 0644)."""
    stage = generated / f".ztp.staging-{os.getpid()}"
    sweep_stale_stages(generated, "ztp", marks=(None, Path(KEA_FILE).name))
    shutil.rmtree(stage, ignore_errors=True)
    try:
        for f in files:
            dest = stage / Path(f.path).relative_to(outdir.ZTP)
            _mkdirs(stage, dest.parent)
            fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL, f.mode)
            with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
                fh.write(f.text)
            os.chmod(dest, f.mode)
        old = generated / f".ztp.old-{os.getpid()}"
        if (generated / outdir.ZTP).exists():
            os.rename(generated / outdir.ZTP, old)
        os.rename(stage, generated / outdir.ZTP)
        shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise


def ztp(
    cluster: Annotated[Path, typer.Argument(help="inventory/<cluster> or its cluster.yaml")],
    server: Annotated[str, typer.Option(help="URL of the HTTP server whose document root is the generated folder")],
    macs: Annotated[Path | None, typer.Option(help=f"filled-in {TEMPLATE} (default: <cluster>/{TEMPLATE} if "
                                                   "present)")] = None,
    credentials: Annotated[str | None, typer.Option(help="YAML with admin_password_hash, ssh_authorized_keys, "
                                                          "bgp_password; '-' reads stdin (ansible-vault view ...)")
                           ] = None,
    dns: Annotated[list[str] | None, typer.Option(help="DNS server handed out by DHCP (repeat)")] = None,
    domain: Annotated[str | None, typer.Option(help="domain name handed out by DHCP")] = None,
    dhcp_interface: Annotated[list[str] | None, typer.Option(help="interface Kea listens on (repeat; default *)")
                              ] = None,
    lease_file: Annotated[str, typer.Option(help="Kea memfile lease database")] = "/var/lib/kea/kea-leases4.csv",
    out: Annotated[Path | None, typer.Option(help="generated folder (default: <cluster>/generated)")] = None,
    host_macs: Annotated[Path | None, typer.Option(help=f"filled-in {HOST_TEMPLATE}: BMC and boot-NIC reservations "
                                                        f"join the Kea file (default: <cluster>/{HOST_TEMPLATE} if "
                                                        "present)")] = None,
    tftp_server: Annotated[str | None, typer.Option(help="TFTP server (IP) that hands UEFI PXE firmware ipxe.efi")
                           ] = None,
) -> None:
    """Write ztp/<switch>/ (SONiC ztp.json, Cumulus script) and ztp/kea-dhcp4.conf; rerun after every build."""
    err = show.console(stderr=True)
    try:
        for value, option in ((out, "--out"), (macs, "--macs"), (host_macs, "--host-macs"), (cluster, "CLUSTER")):
            if value is not None:
                check_path(value, option)
        plan, generated = outdir.load(cluster, out)
        base = cluster.parent if cluster.suffix in (".yaml", ".yml") else cluster
        mac_file = macs if macs is not None else (base / TEMPLATE if (base / TEMPLATE).is_file() else None)
        ids = read_macs(mac_file, plan) if mac_file else []
        creds = load_credentials(credentials)
        for d in dns or []:
            _dns(d)
        opts = DhcpOptions(_server(server), tuple(dns or ()), domain, tuple(dhcp_interface or ("*",)), lease_file)
        files = switch_files(plan, generated, opts.server, creds)
        host_file = host_macs if host_macs is not None else (
            base / HOST_TEMPLATE if (base / HOST_TEMPLATE).is_file() else None)
        kea = kea_config(plan, ids, opts)
        host_ids = []
        if host_file:
            if tftp_server:
                try:
                    ip_address(tftp_server)
                except ValueError:
                    raise ZtpError(f"--tftp-server {tftp_server!r}: want an IP address such as 10.20.0.10") from None
            host_ids = identities(plan, read_host_macs(host_file, plan))
            kea = json.dumps(join_hosts(json.loads(kea), host_ids, opts, oob_gateways(plan), tftp_server),
                             indent=2) + "\n"
        files.append(ServedFile(KEA_FILE, kea))
        write_tree(generated, files)
    except (MacFileError, HostMacError) as exc:
        for e in exc.errors:
            show.error(err, e)
        raise typer.Exit(2) from None
    except (BuildError, CredentialError, ZtpError, DhcpError, InputError, ArgumentError, OSError) as exc:
        show.error(err, exc)
        raise typer.Exit(2) from None
    switches = provisioned(plan)
    known = {i.switch for i in ids}
    waiting = [d.name for d in switches if d.name not in known]
    err.print(show.text(f"wrote {len(files)} files to {generated / outdir.ZTP}: {len(switches)} switches, "
                        f"{len(ids)} DHCP reservations" + (f", credentials for {len(switches)} switches (files 0600)"
                                                            if creds.any else "")))
    if host_file:
        err.print(show.text(f"hosts from {host_file}: {sum(1 for i in host_ids if i.bmc_mac)} BMC and "
                            f"{sum(1 for i in host_ids if i.boot_mac)} boot-NIC reservations"))
    if waiting:
        where = (f"fill in {mac_file}" if mac_file else
                 f"copy {generated / TEMPLATE} (the build's template) to {base / TEMPLATE}, fill it in and rerun "
                 "(or pass --macs FILE); the build replaces generated/, so keep the filled-in copy outside it")
        show.note(err, f"{len(waiting)} switches have no MAC or client-id yet, e.g. {', '.join(waiting[:5])}: {where}")
