"""LLDP neighbour tables: lldpd's `lldpcli -f json show neighbors [details]`, and the text table of a switch OS
that has one (its profile's `lldp_table`, e.g. SONiC's `show lldp table` in railforge/nos/sonic/lldp.py).

Neither names the local system, so each file is one device's view and its stem names the device
(`su001-leaf-r0.json`, `su001-leaf-r0.txt`). A folder holds one file per device. Each file goes through the
strict reader (`railforge.inputs`: regular file, at most MAX_BYTES, UTF-8) and the pydantic models below; every
refusal is an LldpFormatError naming the file (and line).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from railforge import nos
from railforge.inputs import MAX_LINE_CHARS, InputError, MiB, Name, parse_json, read_text, shown, validate
from railforge.verify.names import PlanNames
from railforge.verify.observed import Adjacency, Observation

MAU_SPEED = re.compile(r"^\s*(\d{1,7})\s*(G?)base", re.IGNORECASE)
SUFFIXES = (".json", ".txt", ".lldp")
MAX_BYTES = 16 * MiB
MAX_FILES = 100_000


class LldpFormatError(ValueError):
    pass


def mau_speed_mbps(mau: str | None) -> int | None:
    """`100GbaseCR4 - ...` -> 100000, `1000BaseTFD` -> 1000; None when the MAU type names no speed."""
    m = MAU_SPEED.match(mau or "")
    if not m:
        return None
    return int(m.group(1)) * (1000 if m.group(2) else 1)


class _Loose(BaseModel):
    """lldpd prints more than the verifier reads; what it reads is typed, the rest is allowed and ignored."""

    model_config = ConfigDict(extra="allow")


class IdValue(_Loose):
    value: Name = ""


class AutoNegotiation(_Loose):
    current: str | None = Field(None, max_length=MAX_LINE_CHARS)


class NeighbourPort(_Loose):
    id: IdValue | None = None
    descr: Name = ""
    auto_negotiation: AutoNegotiation | None = Field(None, alias="auto-negotiation")


class Neighbour(_Loose):
    chassis: dict[Name, Any] = Field(default_factory=dict)
    port: NeighbourPort = Field(default_factory=NeighbourPort)


class LldpBody(_Loose):
    interface: list[dict[Name, Neighbour]] = Field(default_factory=list)


class LldpcliJson(_Loose):
    """`lldpcli -f json show neighbors [details]`, in the one shape `_regular` gives it."""

    lldp: LldpBody = Field(default_factory=LldpBody)


def _regular(raw: object) -> object:
    """lldpcli prints one interface as an object and several as a list of objects, and an empty table as
    `{"lldp": []}` on some versions: make both lists, so the model has one shape (and errors one path)."""
    if not isinstance(raw, dict):
        return raw
    lldp = raw.get("lldp")
    if isinstance(lldp, list):
        lldp = lldp[0] if lldp else {}
    if isinstance(lldp, dict) and isinstance(lldp.get("interface"), dict):
        lldp = {**lldp, "interface": [lldp["interface"]]}
    return {**raw, "lldp": lldp} if "lldp" in raw else raw


LLDPCLI = TypeAdapter(LldpcliJson)


def _sysname(chassis: dict) -> str | None:
    if isinstance(chassis.get("name"), dict):
        value = chassis["name"].get("value")
        return value if isinstance(value, str) else None
    names = [k for k, v in chassis.items() if isinstance(v, dict) and k not in ("id", "descr", "mgmt-ip")]
    return names[0] if names else None


def parse_lldpcli_json(text: str, device: str, names: PlanNames, source: str = "") -> Observation:
    where = source or device
    try:
        raw = parse_json(text, where)
    except InputError as exc:
        raise LldpFormatError(f"{where}: not lldpcli JSON ({exc.message})") from None
    if not isinstance(raw, dict) or "lldp" not in raw:
        raise LldpFormatError(f"{where}: not lldpcli JSON (no top-level 'lldp' object; expected the output of "
                              "`lldpcli -f json show neighbors details`)")
    try:
        doc = validate(LLDPCLI, _regular(raw), where, "lldpcli JSON (`lldpcli -f json show neighbors details`)")
    except InputError as exc:
        raise LldpFormatError(str(exc)) from None
    obs = Observation(devices={device})
    for local, entry in ((k, v) for item in doc.lldp.interface for k, v in item.items()):
        sysname = _sysname(entry.chassis)
        port = entry.port
        port_id = port.id.value if port.id else ""
        peer = names.device(sysname) if sysname else None
        if peer is None:
            obs.unresolved.append(f"{device}:{local} sees unknown system {shown(sysname)} port {shown(port_id)}")
            continue
        peer_port = names.port(peer, port_id)
        if peer_port not in names.ports[peer] and port.descr:
            peer_port = names.port(peer, port.descr)
        speed = mau_speed_mbps(port.auto_negotiation.current if port.auto_negotiation else None)
        obs.adjacencies.append(Adjacency((device, names.port(device, local)), (peer, peer_port), speed, where))
    return obs


def parse_lldp_file(path: Path, names: PlanNames, device: str | None = None) -> Observation:
    try:
        text = read_text(path, MAX_BYTES, bom=True)
    except InputError as exc:
        raise LldpFormatError(str(exc)) from None
    dev = device or path.stem
    if names.device(dev) is None:
        raise LldpFormatError(f"{path}: file name must be a planned device name, {shown(dev)} is not in the plan")
    dev = names.device(dev) or dev
    if path.suffix == ".json" or text.lstrip().startswith(("{", "[")):
        return parse_lldpcli_json(text, dev, names, str(path))
    return nos.lldp_table(names.nos.get(dev)).parse(text, dev, names, str(path))


def load_lldp(path: Path, names: PlanNames) -> Observation:
    try:
        files = sorted(p for p in path.iterdir() if p.suffix in SUFFIXES) if path.is_dir() else [path]
    except OSError as exc:
        raise LldpFormatError(f"{path}: cannot list the folder ({exc.strerror})") from None
    if len(files) > MAX_FILES:
        raise LldpFormatError(f"{path}: {len(files):,} files; at most {MAX_FILES:,} are read")
    if not files:
        raise LldpFormatError(f"{path}: no {', '.join(SUFFIXES)} files")
    obs = Observation()
    for f in files:
        obs.merge(parse_lldp_file(f, names))
    return obs
