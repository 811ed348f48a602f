"""installed-hosts.txt: the installer hosts that reported `installed` to report-in and boot from their disks since.
report-in writes it (sorted host names, one a line); `boot files --state` reads it, so that a later run keeps those
hosts' scripts on the local disk instead of the installer (which would install them again). To install a host
again, delete its line and run `boot files` again."""

from __future__ import annotations

from pathlib import Path

from railforge.baremetal.identity import BootIdentity
from railforge.inputs import InputError, MiB, read_text, shown

INSTALLED = "installed-hosts.txt"
MAX_BYTES = 1 * MiB


class InstalledError(ValueError):
    pass


def read_installed(path: Path, ids: list[BootIdentity]) -> list[str]:
    """The host names in `path`, each an installer host with a boot MAC; any other line is an error naming
    FILE:LINE."""
    try:
        text = read_text(path, MAX_BYTES)
    except InputError as exc:
        raise InstalledError(str(exc)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InstalledError(f"{path}: cannot read ({exc.__class__.__name__})") from None
    by_name = {i.host: i for i in ids}
    hosts: list[str] = []
    for n, line in enumerate(text.splitlines(), 1):
        name = line.strip()
        if not name:
            continue
        i = by_name.get(name)
        if i is None or not i.boot_mac:
            raise InstalledError(f"{path}:{n}: {shown(name)} is not a host with a boot MAC in the plan")
        if i.target != "installer":
            raise InstalledError(f"{path}:{n}: {name} has target {i.target}, not installer")
        hosts.append(name)
    return hosts
