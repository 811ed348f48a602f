"""Host BMC and boot-NIC MACs (and serials) that the user fills in after racking: the strict reader of the
template `railforge build` writes (railforge/render/host_macs.py).

The reader takes the filled-in file back and rejects it as a whole, one FILE:LINE error per bad row:
a malformed or repeated MAC (across both MAC columns and every row), an unknown or repeated host, a boot MAC on a
host that has no in-band bond to boot from, an unknown boot target, an unprintable serial. Hand-written beside
`railforge.ztp.macs` (switches) rather than inside it: the rows, columns and checks differ, only the MAC grammar
is shared (`railforge.provision.macs`).
"""

from __future__ import annotations

import csv
import io
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from railforge.plan.model import Plan
from railforge.provision.macs import normalise_mac
from railforge.render.host_macs import COLUMNS, TEMPLATE, boot_nic, hosts

__all__ = ["COLUMNS", "TEMPLATE", "HostId", "HostMacError", "boot_nic", "hosts", "read_host_macs"]

TARGETS = ("stateless", "installer")
MAX_BYTES = 16 * 1024 * 1024
MAX_SERIAL = 64


class HostMacError(ValueError):
    def __init__(self, errors: list[str]):
        super().__init__("\n".join(errors))
        self.errors = errors


@dataclass(slots=True, frozen=True)
class HostId:
    host: str
    bmc_mac: str | None
    boot_mac: str | None
    serial: str | None
    target: str
    line: int


class _Row(BaseModel):
    """One filled-in row; MACs normalised to lower-case colon form."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    host: str
    bmc_mac: str | None = None
    boot_mac: str | None = None
    serial: str | None = None
    target: str = "stateless"

    @field_validator("bmc_mac", "boot_mac", mode="before")
    @classmethod
    def _mac(cls, v: str | None) -> str | None:
        if not v:
            return None
        mac = normalise_mac(v)
        if mac is None:
            raise ValueError(f"{v!r} is not a unicast MAC address (want six hex pairs, e.g. 0c:42:a1:00:00:01)")
        return mac

    @field_validator("serial", mode="before")
    @classmethod
    def _serial(cls, v: str | None) -> str | None:
        if not v:
            return None
        if len(v) > MAX_SERIAL or not v.isascii() or not v.isprintable():
            raise ValueError(f"{v!r} is not a serial number (want up to {MAX_SERIAL} printable ASCII characters)")
        return v

    @field_validator("target", mode="before")
    @classmethod
    def _target(cls, v: str | None) -> str:
        if not v:
            return "stateless"
        if v not in TARGETS:
            raise ValueError(f"{v!r} is not a boot target (want one of: {', '.join(TARGETS)})")
        return v


def _read_text(path: Path) -> str:
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            raise HostMacError([f"{path}: not a regular file"])
        if st.st_size > MAX_BYTES:
            raise HostMacError([f"{path}: {st.st_size} bytes, more than the {MAX_BYTES} a host MAC file may have"])
        with open(path, "rb") as fh:
            data = fh.read(MAX_BYTES + 1)
        if len(data) > MAX_BYTES:
            raise HostMacError([f"{path}: more than the {MAX_BYTES} bytes a host MAC file may have"])
        return data.decode("utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise HostMacError([f"{path}: cannot read ({exc.__class__.__name__}: {exc})"]) from None


def _rows(path: Path, text: str) -> tuple[list[str], list[tuple[int, list[str]]]]:
    if "\x00" in text:
        raise HostMacError([f"{path}: contains NUL bytes; want a CSV text file"])
    reader = csv.reader(io.StringIO(text, newline=""))
    rows: list[tuple[int, list[str]]] = []
    try:
        line = 1
        for row in reader:
            rows.append((line, row))
            line = reader.line_num + 1
    except csv.Error as exc:
        raise HostMacError([f"{path}:{reader.line_num}: not CSV ({exc})"]) from None
    if not rows:
        raise HostMacError([f"{path}:1: empty; the header must name the columns `host`, `bmc_mac` and `boot_mac`"])
    head = [h.strip() for h in rows[0][1]]
    unknown = [h for h in head if h not in COLUMNS]
    if "host" not in head or unknown or len(set(head)) != len(head):
        why = f"unknown columns {', '.join(map(repr, unknown))}" if unknown else "the header must name `host` once"
        raise HostMacError([f"{path}:1: {why} (the template {TEMPLATE} from `railforge build` has: "
                            f"{', '.join(COLUMNS)})"])
    return head, rows[1:]


def read_host_macs(path: Path, plan: Plan) -> list[HostId]:
    """The filled-in rows that give a MAC, in file order; HostMacError naming every bad row as FILE:LINE."""
    head, rows = _rows(path, _read_text(path))
    planned = {d.name: d for d in hosts(plan)}
    others = {d.name for d in plan.devices} - set(planned)
    errors: list[str] = []
    out: list[HostId] = []
    seen_host: dict[str, int] = {}
    seen_mac: dict[str, tuple[int, str, str]] = {}
    for line, row in rows:
        if not any(c.strip() for c in row):
            continue
        where = f"{path}:{line}"
        if len(row) > len(head):
            errors.append(f"{where}: {len(row)} cells, the header has {len(head)}")
            continue
        cells = {h: row[i].strip() for i, h in enumerate(head) if i < len(row)}
        name = cells.get("host", "")
        if name not in planned:
            why = ("has no BMC in the plan (switches are in switch-macs.csv)" if name in others
                   else "is not a host of the plan")
            errors.append(f"{where}: host {name!r} {why}; see {TEMPLATE} for the names")
            continue
        if name in seen_host:
            errors.append(f"{where}: host {name} is listed again (first on line {seen_host[name]})")
            continue
        seen_host[name] = line
        try:
            r = _Row.model_validate({k: v for k, v in cells.items() if k in _Row.model_fields})
        except ValidationError as exc:
            for e in exc.errors():
                msg = str(e["msg"]).removeprefix("Value error, ")
                errors.append(f"{where}: {e['loc'][0]} of {name}: {msg}")
            continue
        bad = False
        for column, mac in (("bmc_mac", r.bmc_mac), ("boot_mac", r.boot_mac)):
            if mac is None:
                continue
            if mac in seen_mac:
                first, other, other_col = seen_mac[mac]
                errors.append(f"{where}: {column} {mac} of {name} is already given on line {first} "
                              f"({other_col} of {other})")
                bad = True
                continue
            seen_mac[mac] = (line, name, column)
        if r.boot_mac and boot_nic(planned[name]) is None:
            errors.append(f"{where}: boot_mac of {name}: the plan gives {name} no in-band bond to PXE-boot from; "
                          "leave boot_mac empty")
            bad = True
        if bad:
            continue
        if r.bmc_mac or r.boot_mac:
            out.append(HostId(name, r.bmc_mac, r.boot_mac, r.serial, r.target, line))
    if errors:
        raise HostMacError(errors)
    return out
