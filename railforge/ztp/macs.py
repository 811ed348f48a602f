"""Switch management MACs (and serials) that the user fills in after racking: the checked reader (the template
is written by the build, railforge/render/switch_macs.py).

The template lists every switch that gets a management address, in plan order, with where to find
it (rack, U, model) and what it will get (management port and address); `mac`, `client_id` and
`serial` are left empty. The reader accepts the filled-in file back and rejects it as a whole, one
line per bad row (at most MAX_ERRORS), when a MAC is malformed or repeated or a switch name is unknown or repeated.
The file goes through the strict reader (`railforge.inputs`: regular file, at most MAX_BYTES, UTF-8 with or
without a BOM); a cell longer than csv's field limit, more than MAX_ROWS rows or a control character in a cell is
refused with the file and line.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, TypeAdapter

from railforge.inputs import InputError, MiB, Name, read_text, validate
from railforge.plan.model import Plan
from railforge.provision.macs import normalise_mac
from railforge.render.switch_macs import COLUMNS, TEMPLATE, provisioned

_CLIENT_ID = re.compile(r"(?:[0-9a-f]{2}:)*[0-9a-f]{2}")


MAX_BYTES = 16 * MiB
MAX_ROWS = 100_000
MAX_ERRORS = 50


class MacRow(BaseModel):
    """The cells of a row the reader uses: each one line of printable text, at most 256 characters."""

    switch: Name
    mac: Name
    client_id: Name
    serial: Name


ROW = TypeAdapter(MacRow)


class MacFileError(ValueError):
    def __init__(self, errors: list[str]):
        super().__init__("\n".join(errors))
        self.errors = errors


@dataclass(slots=True, frozen=True)
class SwitchId:
    switch: str
    mac: str | None
    client_id: str | None
    serial: str | None


def read_macs(path: Path, plan: Plan) -> list[SwitchId]:
    """The filled-in rows with a MAC or client-id, in file order; MacFileError naming every bad row."""
    known = {d.name for d in provisioned(plan)}
    others = {d.name for d in plan.devices} - known
    try:
        text = read_text(path, MAX_BYTES, bom=True)
    except InputError as exc:
        raise MacFileError([str(exc)]) from None
    reader = csv.reader(io.StringIO(text))
    rows: list[list[str]] = []
    try:
        for row in reader:
            rows.append(row)
            if len(rows) > MAX_ROWS + 1:
                raise MacFileError([f"{path}: more than {MAX_ROWS:,} rows; a plan has at most one per switch"])
    except csv.Error as exc:
        raise MacFileError([f"{path}:{reader.line_num}: not CSV: {exc}"]) from None
    if not rows or "switch" not in rows[0] or "mac" not in rows[0]:
        raise MacFileError([f"{path}:1: the header must name the columns `switch` and `mac` "
                            f"(the template {TEMPLATE} from `railforge build` has: {', '.join(COLUMNS)})"])
    head = [h.strip() for h in rows[0]]
    errors: list[str] = []
    out: list[SwitchId] = []
    seen_switch: dict[str, int] = {}
    seen_mac: dict[str, tuple[int, str]] = {}
    for n, row in enumerate(rows[1:], start=2):
        if not any(c.strip() for c in row):
            continue
        if len(errors) >= MAX_ERRORS:
            errors.append(f"{path}: stopped after {MAX_ERRORS} errors; fix these and run again")
            break
        cells = {h: (row[i].strip() if i < len(row) else "") for i, h in enumerate(head)}
        where = f"{path}:{n}"
        try:
            checked = validate(ROW, {k: cells.get(k, "") for k in ("switch", "mac", "client_id", "serial")}, where,
                               "a row of switch names and MACs")
        except InputError as exc:
            errors.append(str(exc))
            continue
        name, raw_mac, cid = checked.switch, checked.mac, checked.client_id.lower()
        if name not in known:
            why = ("is not a switch that boots by ZTP (hosts, OOB switches and other NOSes are provisioned otherwise)"
                   if name in others else "is not a switch of the plan")
            errors.append(f"{where}: switch {name!r} {why}; see {TEMPLATE} for the names")
            continue
        if name in seen_switch:
            errors.append(f"{where}: switch {name} is listed again (first on line {seen_switch[name]})")
            continue
        seen_switch[name] = n
        mac = None
        if raw_mac:
            mac = normalise_mac(raw_mac)
            if mac is None:
                errors.append(f"{where}: mac {raw_mac!r} of {name} is not a unicast MAC address "
                              "(want six hex pairs, e.g. 0c:42:a1:00:00:01)")
                continue
            if mac in seen_mac:
                line, other = seen_mac[mac]
                errors.append(f"{where}: mac {mac} of {name} is already given on line {line} for {other}")
                continue
            seen_mac[mac] = (n, name)
        if cid and not _CLIENT_ID.fullmatch(cid):
            errors.append(f"{where}: client_id {cid!r} of {name} is not hex pairs separated by ':' (e.g. 00:53:4e)")
            continue
        if mac or cid:
            out.append(SwitchId(name, mac, cid or None, checked.serial or None))
    if errors:
        raise MacFileError(errors)
    return out
