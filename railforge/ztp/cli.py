"""`railforge ztp`: write the ZTP files and the Kea DHCPv4 configuration into the generated folder."""

from __future__ import annotations

import os
import shutil
from ipaddress import ip_address
from pathlib import Path
from typing import Annotated
from urllib.parse import urlsplit

import typer
from rich.console import Console

from railforge import outdir
from railforge.outdir import BuildError
from railforge.ztp.credentials import CredentialError, load_credentials
from railforge.ztp.macs import TEMPLATE, MacFileError, provisioned, read_macs
from railforge.ztp.render import DhcpOptions, ZtpError, ZtpFile, kea_config, switch_files

KEA_FILE = outdir.KEA


def _server(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        raise ZtpError(f"--server {value!r}: want the HTTP(S) URL that serves the generated folder, "
                       "e.g. http://10.250.0.10:8080")
    return value.rstrip("/")


def _dns(value: str) -> None:
    try:
        ip_address(value)
    except ValueError:
        raise ZtpError(f"--dns {value!r}: want an IP address such as 10.250.0.53") from None


def write_tree(generated: Path, files: list[ZtpFile]) -> None:
    """Replace generated/ztp as a whole; files are created with their final mode (no window at 0644)."""
    stage = generated / f".ztp.staging-{os.getpid()}"
    shutil.rmtree(stage, ignore_errors=True)
    try:
        for f in files:
            dest = stage / Path(f.path).relative_to(outdir.ZTP)
            dest.parent.mkdir(parents=True, exist_ok=True)
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
) -> None:
    """Write ztp/<switch>/ (SONiC ztp.json, Cumulus script) and ztp/kea-dhcp4.conf; rerun after every build."""
    err = Console(stderr=True, soft_wrap=True)
    try:
        plan, generated = outdir.load(cluster, out)
        base = cluster.parent if cluster.suffix in (".yaml", ".yml") else cluster
        mac_file = macs if macs is not None else (base / TEMPLATE if (base / TEMPLATE).is_file() else None)
        ids = read_macs(mac_file, plan) if mac_file else []
        creds = load_credentials(credentials)
        for d in dns or []:
            _dns(d)
        opts = DhcpOptions(_server(server), tuple(dns or ()), domain, tuple(dhcp_interface or ("*",)), lease_file)
        files = switch_files(plan, generated, opts.server, creds)
        files.append(ZtpFile(KEA_FILE, kea_config(plan, ids, opts)))
        write_tree(generated, files)
    except MacFileError as exc:
        for e in exc.errors:
            err.print(f"[red]error[/red] {e}", highlight=False)
        raise typer.Exit(2) from None
    except (BuildError, CredentialError, ZtpError, OSError) as exc:
        err.print(f"[red]error[/red] {exc}", highlight=False)
        raise typer.Exit(2) from None
    switches = provisioned(plan)
    known = {i.switch for i in ids}
    waiting = [d.name for d in switches if d.name not in known]
    err.print(f"wrote {len(files)} files to {generated / outdir.ZTP}: {len(switches)} switches, {len(ids)} DHCP "
              f"reservations" + (f", credentials for {len(switches)} switches (files 0600)" if creds.any else ""),
              highlight=False)
    if waiting:
        err.print(f"[yellow]note[/yellow] {len(waiting)} switches have no MAC or client-id yet, e.g. "
                  f"{', '.join(waiting[:5])}: fill in {mac_file or base / TEMPLATE}", highlight=False)
