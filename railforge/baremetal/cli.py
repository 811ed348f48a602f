"""`railforge boot`: the PXE/iPXE files from the plan, and the report-in endpoint booted hosts call."""

from __future__ import annotations

from ipaddress import ip_address
from pathlib import Path
from typing import Annotated
from urllib.parse import urlsplit

import typer
from rich.console import Console
from rich.markup import escape

from railforge.baremetal.files import BootOptions, boot_files
from railforge.baremetal.hostmacs import TEMPLATE, HostMacError, read_host_macs
from railforge.baremetal.identity import identities
from railforge.baremetal.tree import write_boot_tree
from railforge.verify.source import MissingBuild, load_generated_plan
from railforge.ztp.credentials import CredentialError, load_credentials

boot_app = typer.Typer(no_args_is_help=True, help=__doc__)
IMAGES = {"stateless": ("vmlinuz", "initrd.img"), "installer": ("linux", "initrd.gz")}
IMAGE_DIRS = {"stateless": "stateless", "installer": "debian-installer"}


class BootError(ValueError):
    pass


def http_url(option: str, value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment \
            or any(c.isspace() for c in value):
        raise BootError(f"{option} {value!r}: want an HTTP(S) URL such as http://10.20.0.33:8080")
    return value.rstrip("/")


def host_file(cluster: Path, given: Path | None) -> Path:
    base = cluster.parent if cluster.suffix in (".yaml", ".yml") else cluster
    path = given if given is not None else base / TEMPLATE
    if not path.is_file() and given is None:
        raise BootError(f"{path} not found: fill in the {TEMPLATE} that `railforge build` wrote (or pass --host-macs)")
    return path


def say(console: Console, level: str, text: str) -> None:
    colour = {"error": "red", "note": "yellow"}.get(level, "green")
    console.print(f"[{colour}]{level}[/{colour}] {escape(text)}", highlight=False)


@boot_app.command("files")
def files_cmd(
    cluster: Annotated[Path, typer.Argument(help="inventory/<cluster> or its cluster.yaml")],
    server: Annotated[str, typer.Option(help="URL of the HTTP server whose document root is the generated folder")],
    report: Annotated[str, typer.Option(help="URL booted hosts POST to (railforge boot report-in)")],
    host_macs: Annotated[Path | None, typer.Option(help=f"filled-in {TEMPLATE} (default: <cluster>/{TEMPLATE})")
                         ] = None,
    credentials: Annotated[str | None, typer.Option(help="YAML with admin_password_hash and ssh_authorized_keys "
                                                         "for installed hosts; '-' reads stdin")] = None,
    dns: Annotated[list[str] | None, typer.Option(help="DNS server for installed hosts (repeat)")] = None,
    domain: Annotated[str, typer.Option(help="domain of installed hosts")] = "cluster.local",
    disk: Annotated[str, typer.Option(help="disk the installer partitions")] = "/dev/nvme0n1",
    mirror: Annotated[str, typer.Option(help="Debian mirror for the installer")] = "http://deb.debian.org/debian",
    console: Annotated[str, typer.Option(help="serial console for the kernel ('' for none)")] = "ttyS0,115200n8",
    kernel_arg: Annotated[list[str] | None, typer.Option(help="extra kernel argument (repeat)")] = None,
    out: Annotated[Path | None, typer.Option(help="generated folder (default: <cluster>/generated)")] = None,
) -> None:
    """Write boot/boot.ipxe, boot/hosts/<mac>.ipxe and boot/preseed/<host>.cfg; rerun after every build."""
    err = Console(stderr=True, soft_wrap=True)
    try:
        plan, generated = load_generated_plan(cluster, out)
        ids = identities(plan, read_host_macs(host_file(cluster, host_macs), plan))
        creds = load_credentials(credentials)
        for d in dns or []:
            try:
                ip_address(d)
            except ValueError:
                raise BootError(f"--dns {d!r}: want an IP address such as 10.250.0.53") from None
        for value, option in ((disk, "--disk"), (domain, "--domain"), (console, "--console"),
                              *((a, "--kernel-arg") for a in kernel_arg or [])):
            if any(c.isspace() or not c.isprintable() for c in value) or (option != "--console" and not value):
                raise BootError(f"{option} {value!r}: want one word without spaces")
        opts = BootOptions(http_url("--server", server), http_url("--report", report), console,
                           tuple(kernel_arg or ()), tuple(dns or ()), domain, disk, http_url("--mirror", mirror))
        written = boot_files(ids, opts, creds)
        write_boot_tree(generated, written)
    except HostMacError as exc:
        for e in exc.errors:
            say(err, "error", e)
        raise typer.Exit(2) from None
    except (MissingBuild, CredentialError, BootError, OSError) as exc:
        say(err, "error", str(exc))
        raise typer.Exit(2) from None
    booting = [i for i in ids if i.boot_mac]
    targets = {t: sum(1 for i in booting if i.target == t) for t in IMAGES}
    say(err, "ok", f"wrote {len(written)} files to {generated / 'boot'}: {len(booting)} hosts boot "
        f"({', '.join(f'{n} {t}' for t, n in targets.items())}); {len(ids) - len(booting)} without a boot MAC")
    for target, names in IMAGES.items():
        folder = generated / "boot" / "images" / IMAGE_DIRS[target]
        missing = [n for n in names if not (folder / n).is_file()]
        if targets[target] and missing:
            say(err, "note", f"{target} hosts need {', '.join(missing)} in {folder}")


def _listen(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    try:
        ip_address(host.strip("[]"))
        number = int(port)
        if not 0 < number < 65536:
            raise ValueError
    except ValueError:
        raise BootError(f"--listen {value!r}: want ADDRESS:PORT such as 10.20.0.33:8081") from None
    return host.strip("[]"), number


@boot_app.command("report-in")
def report_in_cmd(
    cluster: Annotated[Path, typer.Argument(help="inventory/<cluster> or its cluster.yaml")],
    listen: Annotated[str, typer.Option(help="ADDRESS:PORT to serve POST /register on")],
    state: Annotated[Path, typer.Option(help="folder for reports.jsonl, booted-hosts.txt, findings.csv")],
    host_macs: Annotated[Path | None, typer.Option(help=f"filled-in {TEMPLATE} (default: <cluster>/{TEMPLATE})")
                         ] = None,
    out: Annotated[Path | None, typer.Option(help="generated folder (default: <cluster>/generated)")] = None,
) -> None:
    """Serve the registration endpoint until stopped; booted hosts go to <state>/booted-hosts.txt for site.yml."""
    from railforge.baremetal.register import serve

    err = Console(stderr=True, soft_wrap=True)
    try:
        plan, _ = load_generated_plan(cluster, out)
        ids = identities(plan, read_host_macs(host_file(cluster, host_macs), plan))
        address, port = _listen(listen)
        server = serve(ids, state, address, port)
    except HostMacError as exc:
        for e in exc.errors:
            say(err, "error", e)
        raise typer.Exit(2) from None
    except (MissingBuild, BootError, OSError) as exc:
        say(err, "error", str(exc))
        raise typer.Exit(2) from None
    say(err, "ok", f"report-in on http://{listen}/register for {sum(1 for i in ids if i.boot_mac)} hosts; "
        f"state in {state}")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
