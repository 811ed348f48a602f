"""InfiniBand linear forwarding tables as the switches hold them, read from infiniband-diags' text: `dump_fts`
(every switch of an ibnetdiscover scan) or `ibroute` (one switch), the format OpenSM's `file` routing engine
loads and its `opensm-lfts.dump` writes.

Why hand-written: no Python library reads these dumps; the only readers are C (OpenSM's `file` routing engine,
ibsim). The grammar is small: a header per switch, one row per LID, a `N valid lids dumped` footer. The reader is
strict (regular file, size and line limits, every line must match; a missing footer or a wrong count is a
truncated dump, not a shorter table) and needs the destinations resolved (dump_fts without `-n`): a LID is tied
to an HCA by the node description in its row (`'<hostname> <hca>'`), which is how the plan names HCAs too.
"""

from __future__ import annotations

import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

MAX_BYTES = 256 << 20
MAX_LINE = 1024
MAX_SWITCHES = 65_536
MAX_LID = 0xBFFF  # the last unicast LID
MAX_PORT = 255  # 255: no route (dump_fts -a lists those)

_HEADER = re.compile(r"Unicast lids \[0x([0-9a-fA-F]{1,4})-0x([0-9a-fA-F]{1,4})\] of switch (.{0,200}?) "
                     r"guid 0x([0-9a-fA-F]{1,16}) \('?(.{0,200}?)'?\):\s*")
_COLUMNS = ({"Lid  Out   Destination", "Lid Out Destination"}, {"Port     Info", "Port Info"})
_ROW = re.compile(r"0x([0-9a-fA-F]{1,4}) (\d{1,3})(?: [:#] \((.{0,300})\))?\s*")
_DEST = re.compile(r"(Channel Adapter|Switch|Router) portguid 0x([0-9a-fA-F]{1,16}): '(.{0,200})'")
_FOOTER = re.compile(r"(\d{1,6}) (?:valid )?lids dumped\s*")


class LftError(ValueError):
    """A forwarding-table dump that cannot be used; the message names the file and line."""


@dataclass(slots=True)
class SwitchTable:
    guid: int
    description: str
    line: int
    routes: dict[int, int] = field(default_factory=dict)  # destination LID -> out port (0: the switch itself)


@dataclass(slots=True)
class Lfts:
    source: str
    switches: dict[int, SwitchTable]  # by node GUID
    hcas: dict[int, str]  # LID -> node description of an HCA port ('<hostname> <hca>')


def read_lfts(path: Path) -> Lfts:
    """The dump at `path` through the strict reader: regular file, at most MAX_BYTES, UTF-8."""
    try:
        st = path.stat()
    except OSError as exc:
        raise LftError(f"{path}: cannot read: {exc.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise LftError(f"{path}: not a regular file")
    if st.st_size > MAX_BYTES:
        raise LftError(f"{path}: {st.st_size:,} bytes, more than the {MAX_BYTES:,} allowed")
    try:
        text = path.read_bytes()[:MAX_BYTES + 1].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LftError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    return parse_lfts(text, str(path))


def parse_lfts(text: str, source: str = "lfts") -> Lfts:
    switches: dict[int, SwitchTable] = {}
    hcas: dict[int, str] = {}
    cur: SwitchTable | None = None
    lo = hi = 0
    for n, raw in enumerate(text.split("\n"), 1):
        where = f"{source}:{n}"
        if len(raw) > MAX_LINE:
            raise LftError(f"{where}: line of {len(raw):,} characters, more than {MAX_LINE}")
        line = raw.rstrip("\r")
        if not line.strip():
            continue
        if m := _HEADER.fullmatch(line):
            if cur is not None:
                raise LftError(f"{where}: a new switch starts before the table of {cur.description!r} (line "
                               f"{cur.line}) ended with its 'N valid lids dumped' line: truncated dump")
            guid = int(m[4], 16)
            if guid in switches:
                raise LftError(f"{where}: switch guid 0x{guid:016x} dumped twice (first at line "
                               f"{switches[guid].line})")
            if len(switches) >= MAX_SWITCHES:
                raise LftError(f"{where}: more than {MAX_SWITCHES:,} switches")
            lo, hi = int(m[1], 16), int(m[2], 16)
            if lo > hi or hi > MAX_LID:
                raise LftError(f"{where}: LID range 0x{lo:x}-0x{hi:x} is not within 0x0-0x{MAX_LID:x}")
            cur = SwitchTable(guid, m[5], n)
            continue
        if line.strip() in _COLUMNS[0] or line.strip() in _COLUMNS[1]:
            if cur is None:
                raise LftError(f"{where}: column heading before any 'Unicast lids ... of switch' line")
            continue
        if m := _ROW.fullmatch(line):
            if cur is None:
                raise LftError(f"{where}: LID row before any 'Unicast lids ... of switch' line")
            lid, port = int(m[1], 16), int(m[2])
            if not lo <= lid <= hi or lid == 0:
                raise LftError(f"{where}: LID 0x{lid:04x} is outside the table's range 0x{lo:x}-0x{hi:x}")
            if port > MAX_PORT:
                raise LftError(f"{where}: out port {port} (valid: 0-254, or 255 for no route)")
            if lid in cur.routes:
                raise LftError(f"{where}: LID 0x{lid:04x} listed twice for switch {cur.description!r}")
            cur.routes[lid] = port
            if m[3] is not None:
                _destination(m[3], lid, hcas, where)
            continue
        if m := _FOOTER.fullmatch(line):
            if cur is None:
                raise LftError(f"{where}: '{line.strip()}' without a switch table")
            if int(m[1]) != len(cur.routes):
                raise LftError(f"{where}: says {m[1]} LIDs, the table of {cur.description!r} (line {cur.line}) "
                               f"has {len(cur.routes)}: truncated or edited dump")
            switches[cur.guid] = cur
            cur = None
            continue
        if line.startswith("Multicast"):
            raise LftError(f"{where}: a multicast table: dump the unicast tables (dump_fts without -M)")
        raise LftError(f"{where}: not a line of a dump_fts/ibroute unicast dump: {line[:80]!r}")
    if cur is not None:
        raise LftError(f"{source}: the table of {cur.description!r} (line {cur.line}) has no 'N valid lids "
                       "dumped' line: truncated dump")
    if not switches:
        raise LftError(f"{source}: no switch table (expected dump_fts output)")
    return Lfts(source, switches, hcas)


def _destination(info: str, lid: int, hcas: dict[int, str], where: str) -> None:
    d = _DEST.fullmatch(info)
    if d is None:
        if info.strip() in ("", "unknown", "illegal port"):
            return
        raise LftError(f"{where}: destination {info[:80]!r} is not '<kind> portguid 0x...: '<description>''")
    if d[1] != "Channel Adapter":
        return
    if hcas.get(lid, d[3]) != d[3]:
        raise LftError(f"{where}: LID 0x{lid:04x} is {d[3]!r} here and {hcas[lid]!r} in an earlier table")
    hcas[lid] = d[3]
