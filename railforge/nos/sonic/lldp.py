"""SONiC's `show lldp table`: a header, a rule of dashes giving the column spans, rows, a closing rule. Read
through the same strict limits as every LLDP file (`railforge/verify/lldp.py`)."""

from __future__ import annotations

import re

from pydantic import BaseModel, TypeAdapter

from railforge.inputs import MAX_LINE_CHARS, InputError, Name, shown, validate
from railforge.verify.lldp import LldpFormatError
from railforge.verify.names import PlanNames
from railforge.verify.observed import Adjacency, Observation


class SonicRow(BaseModel):
    """One row of `show lldp table`, each cell a printable name."""

    local: Name
    sysname: Name
    port_id: Name
    descr: Name


SONIC_ROW = TypeAdapter(SonicRow)


def _columns(rule: str) -> list[tuple[int, int]]:
    return [(m.start(), m.end()) for m in re.finditer(r"-+", rule)]


def parse_table(text: str, device: str, names: PlanNames, source: str = "") -> Observation:
    """`show lldp table`: a header, a rule of dashes giving the column spans, rows, a closing rule."""
    where = source or device
    lines = text.splitlines()
    for n, line in enumerate(lines, 1):
        if len(line) > MAX_LINE_CHARS:
            raise LldpFormatError(f"{where}:{n}: a line of {len(line):,} characters; a `show lldp table` line is at "
                                  f"most {MAX_LINE_CHARS:,}")
    head = next((i for i, x in enumerate(lines) if x.split()[:2] == ["LocalPort", "RemoteDevice"]), None)
    if head is None or head + 1 >= len(lines) or not set(lines[head + 1].strip()) <= {"-", " "}:
        raise LldpFormatError(f"{source or device}: no 'LocalPort RemoteDevice ...' header in SONiC LLDP table")
    header = lines[head].split()
    spans = _columns(lines[head + 1])
    obs = Observation(devices={device})
    for n, row in enumerate(lines[head + 2:], head + 3):
        if not row.strip() or set(row.strip()) <= {"-"} or row.startswith("Total entries"):
            continue
        cells: dict[str, str] = {}
        for i, (start, _) in enumerate(spans):
            end = spans[i + 1][0] if i + 1 < len(spans) else len(row)
            cells[header[i] if i < len(header) else str(i)] = row[start:end].strip()
        try:
            row_ = validate(SONIC_ROW, {"local": cells.get("LocalPort", ""), "sysname": cells.get("RemoteDevice", ""),
                                        "port_id": cells.get("RemotePortID", ""),
                                        "descr": cells.get("RemotePortDescr", "")}, f"{where}:{n}", "an LLDP row")
        except InputError as exc:
            raise LldpFormatError(str(exc)) from None
        local, sysname, port_id, descr = row_.local, row_.sysname, row_.port_id, row_.descr
        peer = names.device(sysname)
        if peer is None:
            obs.unresolved.append(f"{device}:{local} sees unknown system {shown(sysname)} port {shown(port_id)}")
            continue
        peer_port = names.port(peer, port_id)
        if peer_port not in names.ports[peer] and descr:
            peer_port = names.port(peer, descr)
        obs.adjacencies.append(Adjacency((device, names.port(device, local)), (peer, peer_port), None,
                                         source or device))
    return obs
