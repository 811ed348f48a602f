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
from railforge.cli import show
from railforge.inputs import is_control, shown
from railforge.plan import outdir
from railforge.plan.outdir import BuildError
from railforge.provision.credentials import CredentialError, load_credentials

boot_app = typer.Typer(no_args_is_help=True, help=__doc__)
IMAGES = {"stateless": ("vmlinuz", "initrd.img"), "installer": ("linux", "initrd.gz")}
IMAGE_DIRS = {"stateless": "stateless", "installer": "debian-installer"}


class BootError(ValueError):
    pass


def http_url(option: str, value: str) -> str:
    """An absolute http(s) URL with a host and a port 1-65535 if any; what urllib cannot split (`http://[/x]`)
    or a port it cannot read is refused like any other bad URL."""
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:
        parts, port = None, 0
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname or parts.query \
            or parts.fragment or port == 0 or any(c.isspace() or is_control(c) for c in value):
        raise BootError(f"{option} {shown(value)}: want an HTTP(S) URL such as http://10.20.0.33:8080")
    return value.rstrip("/")


TEMPLATE_FIELDS = ("{bmc}", "{host}")


def url_template(option: str, value: str) -> str:
    """A template of which only {bmc} and {host} are filled in (str.format would read any other field, or fail
    on it)."""
    rest = value
    for name in TEMPLATE_FIELDS:
        rest = rest.replace(name, "")
    if "{" in rest or "}" in rest:
        raise BootError(f"{option} {shown(value)}: only {{bmc}} and {{host}} may stand in braces")
    return value


def host_file(cluster: Path, given: Path | None) -> Path:
    base = cluster.parent if cluster.suffix in (".yaml", ".yml") else cluster
    path = given if given is not None else base / TEMPLATE
    if not path.is_file() and given is None:
        raise BootError(f"{path} not found: fill in the {TEMPLATE} that `railforge build` wrote (or pass --host-macs)")
    return path


ClusterArg = Annotated[Path, typer.Argument(help="inventory/<cluster> or its cluster.yaml")]
HostMacsOpt = Annotated[Path | None, typer.Option(help=f"filled-in {TEMPLATE} (default: <cluster>/{TEMPLATE})")]
OutOpt = Annotated[Path | None, typer.Option(help="generated folder (default: <cluster>/generated)")]

def say(console: Console, level: str, text: str) -> None:
    colour = {"error": "red", "note": "yellow"}.get(level, "green")
    console.print(f"[{colour}]{level}[/{colour}] {escape(show.plain(text))}", highlight=False)


@boot_app.command("files")
def files_cmd(
    cluster: ClusterArg,
    server: Annotated[str, typer.Option(help="URL of the HTTP server whose document root is the generated folder")],
    report: Annotated[str, typer.Option(help="URL booted hosts POST to (railforge boot report-in)")],
    host_macs: HostMacsOpt = None,
    credentials: Annotated[str | None, typer.Option(help="YAML with admin_password_hash and ssh_authorized_keys "
                                                         "for installed hosts; '-' reads stdin")] = None,
    dns: Annotated[list[str] | None, typer.Option(help="DNS server for installed hosts (repeat)")] = None,
    domain: Annotated[str, typer.Option(help="domain of installed hosts")] = "cluster.local",
    disk: Annotated[str, typer.Option(help="disk the installer partitions")] = "/dev/nvme0n1",
    mirror: Annotated[str, typer.Option(help="Debian mirror for the installer")] = "http://deb.debian.org/debian",
    console: Annotated[str, typer.Option(help="serial console for the kernel ('' for none)")] = "ttyS0,115200n8",
    kernel_arg: Annotated[list[str] | None, typer.Option(help="extra kernel argument (repeat)")] = None,
    out: OutOpt = None,
) -> None:
    """Write boot/boot.ipxe, boot/hosts/<mac>.ipxe and boot/preseed/<host>.cfg; rerun after every build."""
    err = Console(stderr=True, soft_wrap=True)
    try:
        plan, generated = outdir.load(cluster, out)
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
    except (BuildError, CredentialError, BootError, OSError) as exc:
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
    cluster: ClusterArg,
    listen: Annotated[str, typer.Option(help="ADDRESS:PORT to serve POST /register on")],
    state: Annotated[Path, typer.Option(help="folder for reports.jsonl, booted-hosts.txt, findings.csv")],
    host_macs: HostMacsOpt = None,
    out: OutOpt = None,
) -> None:
    """Serve the registration endpoint until stopped; booted hosts go to <state>/booted-hosts.txt for site.yml."""
    from railforge.baremetal.register import serve

    err = Console(stderr=True, soft_wrap=True)
    try:
        plan, _ = outdir.load(cluster, out)
        ids = identities(plan, read_host_macs(host_file(cluster, host_macs), plan))
        address, port = _listen(listen)
        server = serve(ids, state, address, port)
    except HostMacError as exc:
        for e in exc.errors:
            say(err, "error", e)
        raise typer.Exit(2) from None
    except (BuildError, BootError, OSError) as exc:
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


bmc_app = typer.Typer(no_args_is_help=True, help="Redfish on the planned BMCs: inventory, one-time PXE, power.")
BMC_ENV = ("RAILFORGE_BMC_USERNAME", "RAILFORGE_BMC_PASSWORD")


def bmc_credentials(source: Path | None, environ: dict[str, str]):
    """From a YAML file (`username`, `password`) or the environment; never echoed."""
    import yaml

    from railforge.baremetal.redfish import Credentials
    from railforge.inputs import InputError, read_text
    from railforge.spec import yamlsafe

    if source is not None:
        try:
            if not source.is_file() or source.stat().st_size > 64 * 1024:
                raise BootError(f"--bmc-credentials {source}: want a regular file under 64 KiB")
            data = yamlsafe.load(read_text(source, 64 * 1024))[0]
        except InputError as exc:
            raise BootError(f"--bmc-credentials {exc}") from None
        except (OSError, UnicodeDecodeError, yaml.YAMLError, RecursionError) as exc:
            reason = " ".join(str(exc).split())[:200] if isinstance(exc, yaml.YAMLError) else type(exc).__name__
            raise BootError(f"--bmc-credentials {source}: cannot read ({reason})") from None
        if not isinstance(data, dict) or set(data) != {"username", "password"} or \
                not all(isinstance(v, str) and v for v in data.values()):
            raise BootError(f"--bmc-credentials {source}: want a mapping with exactly `username` and `password` "
                            "(non-empty strings)")
        return Credentials(data["username"], data["password"])
    user, password = (environ.get(v, "") for v in BMC_ENV)
    if not user or not password:
        raise BootError(f"BMC credentials: set {' and '.join(BMC_ENV)}, or pass --bmc-credentials FILE")
    return Credentials(user, password)


def _bmc(action: str, cluster: Path, hosts: str, host_macs: Path | None, bmc_credentials_file: Path | None,
         url: str, system_id: str | None, concurrency: int, retries: int, timeout: float, insecure: bool,
         ca_file: Path | None, out: Path | None, results: Path | None) -> None:
    import os
    import time

    from rich.table import Table
    from rich.text import Text

    from railforge.baremetal.identity import SelectionError, select
    from railforge.baremetal.redfish import ERROR, OK, Settings, run

    err = Console(stderr=True, soft_wrap=True)
    try:
        if system_id is not None:
            url_template("--system-id", system_id)
            if any(c.isspace() or is_control(c) or c in "/?#" for c in system_id):
                raise BootError(f"--system-id {shown(system_id)}: one path segment, without spaces")
        http_url("--url", url_template("--url", url).replace("{bmc}", "192.0.2.1").replace("{host}", "h"))
        plan, _ = outdir.load(cluster, out)
        ids = select(identities(plan, read_host_macs(host_file(cluster, host_macs), plan)), hosts)
        creds = bmc_credentials(bmc_credentials_file, dict(os.environ))
        if not url.startswith(("http://", "https://")) or "{bmc}" not in url and "{host}" not in url:
            raise BootError(f"--url {url!r}: want a URL template naming {{bmc}} (the planned BMC IP) or {{host}}, "
                            "e.g. https://{bmc}")
        if not 1 <= concurrency <= 1024 or not 0 <= retries <= 10 or not 0 < timeout <= 300:
            raise BootError("--concurrency 1..1024, --retries 0..10, --timeout 0..300 s")
        settings = Settings(url, system_id, concurrency, retries, timeout, verify_tls=not insecure,
                            ca_file=str(ca_file) if ca_file else None)
    except HostMacError as exc:
        for e in exc.errors:
            say(err, "error", e)
        raise typer.Exit(2) from None
    except (BuildError, BootError, SelectionError, OSError) as exc:
        say(err, "error", str(exc))
        raise typer.Exit(2) from None
    started = time.monotonic()
    got = run(ids, action, creds, settings)
    took = time.monotonic() - started
    table = Table("host", "place", "status", "tries", "detail", title=f"railforge bmc {action}")
    for r in got:
        table.add_row(Text(r.host), Text(r.place), Text(r.status, style={OK: "green", ERROR: "red"}.get(
            r.status, "yellow")), str(r.attempts), Text(r.detail.encode("unicode_escape").decode()))
    Console(soft_wrap=True).print(table)
    if results is not None:
        import json

        results.write_text("".join(json.dumps({"host": r.host, "place": r.place, "status": r.status,
                                               "detail": r.detail, "attempts": r.attempts}, sort_keys=True) + "\n"
                                   for r in got))
    counts = {s: sum(1 for r in got if r.status == s) for s in (OK, "mismatch", ERROR)}
    say(err, "ok" if counts[OK] == len(got) else "note",
        f"{action} on {len(got)} hosts in {took:.1f} s (concurrency {concurrency}): "
        + ", ".join(f"{n} {s}" for s, n in counts.items()))
    if counts[OK] != len(got):
        raise typer.Exit(1)


def _bmc_command(action: str, doc: str):
    def command(
        cluster: ClusterArg,
        hosts: Annotated[str, typer.Option(help="all, su:N, su:N-M, rack:NAME or host names, comma-separated")
                         ] = "all",
        host_macs: Annotated[Path | None, typer.Option(help=f"filled-in {TEMPLATE}")] = None,
        bmc_credentials: Annotated[Path | None, typer.Option(
            help=f"YAML with username and password (default: {' and '.join(BMC_ENV)})")] = None,
        url: Annotated[str, typer.Option(help="BMC URL template: {bmc} planned BMC IP, {host} host name")
                       ] = "https://{bmc}",
        system_id: Annotated[str | None, typer.Option(help="system Id template, e.g. {host} (default: the only "
                                                           "system the BMC lists)")] = None,
        concurrency: Annotated[int, typer.Option(help="BMCs talked to at once")] = 64,
        retries: Annotated[int, typer.Option(help="retries after a transport error or HTTP 5xx")] = 3,
        timeout: Annotated[float, typer.Option(help="seconds per request")] = 10.0,
        insecure: Annotated[bool, typer.Option(help="do not verify the BMCs' TLS certificates")] = False,
        ca_file: Annotated[Path | None, typer.Option(help="CA bundle for the BMCs' certificates")] = None,
        out: OutOpt = None,
        results: Annotated[Path | None, typer.Option(help="also write one JSON line per host here")] = None,
    ) -> None:
        _bmc(action, cluster, hosts, host_macs, bmc_credentials, url, system_id, concurrency, retries, timeout,
             insecure, ca_file, out, results)

    command.__doc__ = doc
    return command


bmc_app.command("inventory")(_bmc_command("inventory", "Read serial and NIC MACs from each BMC; compare with "
                                                       f"{TEMPLATE}."))
bmc_app.command("pxe")(_bmc_command("pxe", "Inventory, then set a one-time UEFI PXE boot override."))
bmc_app.command("power")(_bmc_command("power", "Inventory, then power-cycle (ForceRestart, or On when off)."))
bmc_app.command("bringup")(_bmc_command("bringup", "Inventory, one-time PXE, power-cycle: racked host to PXE boot."))
