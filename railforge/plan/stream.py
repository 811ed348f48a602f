"""plan.json read item by item, for a day-2 tool that needs every device and cable of a very large plan but not
every switch port (the burn-in planner: 131K GPUs are 1.03 million switch ports, 45 % of the file).

`read_plan(path)` (plan/io.py) validates the whole file in one pydantic-core call, which first parses it into a
JSON tree in memory: 3.4 GB for the 366 MB plan.json of 131K GPUs. Here plan.json's own layout (`write_plan`:
one device or link per line between `"devices":[` and `"links":[`) is read a batch of lines at a time, each batch
validated by the same strict models (the plan's dataclasses, no coercion, no unknown keys, no NaN) and the same
name, reference and address checks, so only the objects kept are in memory at once. Switch ports are validated
like every other field, their names kept for the reference check, then dropped unless asked for.

Anything else takes the full reader, whose messages are the canonical ones: a file in another layout (reformatted
by hand), another schema version (migrated there), or a batch that fails or holds what orjson and pydantic-core
read differently (`io._one_pass`). The stream never names an error itself, so both readers refuse the same files
with the same words.
"""

from __future__ import annotations

import dataclasses
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from pydantic import ConfigDict, ValidationError, create_model

from railforge.inputs import InputError
from railforge.plan import io
from railforge.plan.model import SCHEMA_VERSION, SWITCH_ROLES, Device, Link, Plan

BATCH = 256
_STRICT = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False)
_Devices = create_model("DeviceLines", __config__=_STRICT, items=(list[Device], ...))
_Links = create_model("LinkLines", __config__=_STRICT, items=(list[Link], ...))
_DEVICES, _LINKS = b'"devices":[', b'"links":['


class _NotStreamable(Exception):
    """The file is not in `write_plan`'s layout, or a batch needs the full reader's verdict."""


def read_plan_lean(path: str | Path, switch_ports: bool = False) -> Plan:
    """The plan of `path`, strictly read; switches keep their ports only with `switch_ports` (without, a switch's
    `ports` is empty: nothing that renders per-port output may take this plan)."""
    try:
        return _stream(Path(path), switch_ports)
    except _NotStreamable:
        plan = io.read_plan(path)
    if not switch_ports:
        for d in plan.devices:
            if d.role in SWITCH_ROLES:
                d.ports = []
    return plan


def _lines(path: Path) -> Iterator[bytes]:
    """The file's lines, opened as `inputs.read_bytes` opens a file (no blocking, regular files only, bounded);
    any refusal is left to the full reader."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except (OSError, ValueError):
        raise _NotStreamable from None
    with os.fdopen(fd, "rb", buffering=1 << 20) as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_size > io.PLAN_MAX_BYTES:
            raise _NotStreamable
        yield from fh


def _stream(path: Path, switch_ports: bool) -> Plan:
    with io._gc_paused():
        lines = _lines(path)
        head: list[bytes] = []
        for line in lines:
            if line.startswith(_DEVICES):
                break
            head.append(line)
        else:
            raise _NotStreamable
        devices, state = _section(lines, _Devices, _LINKS, _Names(path, switch_ports))
        links, _ = _section(lines, _Links, b"}", state)
        for _ in lines:
            raise _NotStreamable  # anything after the closing brace
        top = b"".join(head) + b'"devices":[],\n"links":[]\n}\n'
        if not io._one_pass(top):
            raise _NotStreamable
        try:
            model = io._PlanFile.model_validate_json(top)
        except ValidationError:
            raise _NotStreamable from None
        if model.schema_version != SCHEMA_VERSION:
            raise _NotStreamable
        fields = {name: getattr(model, name) for name in type(model).model_fields}
        plan = Plan(**(fields | {"devices": devices, "links": links}))
        try:
            io.check_references(dataclasses.replace(plan, devices=[], links=[]), path)
        except InputError:
            raise _NotStreamable from None
    return plan


class _Names:
    """What the reference check needs from items already read: device names, their port names, link ids."""

    def __init__(self, path: Path, switch_ports: bool):
        self.path = path
        self.switch_ports = switch_ports
        self.ports: dict[str, set[str]] = {}
        self.links: set[str] = set()


def _section(lines: Iterator[bytes], model, end: bytes, names: _Names) -> tuple[list, _Names]:
    """Items up to the line `]` (devices: followed by `"links":[`); each batch validated and checked."""
    out: list = []
    batch: list[bytes] = []
    for line in lines:
        if line.startswith(b"]"):
            _flush(batch, model, out, names)
            nxt = next(lines, b"") if end == _LINKS else line[1:].lstrip(b"\n") or next(lines, b"")
            if not nxt.startswith(end):
                raise _NotStreamable
            return out, names
        item = line.rstrip(b"\n")
        batch.append(item[:-1] if item.endswith(b",") else item)
        if len(batch) >= BATCH:
            _flush(batch, model, out, names)
            batch = []
    raise _NotStreamable


def _flush(batch: list[bytes], model, out: list, names: _Names) -> None:
    if not batch:
        return
    raw = b'{"items":[' + b",".join(batch) + b"]}"
    if not io._one_pass(raw):
        raise _NotStreamable
    try:
        items = model.model_validate_json(raw).items
    except ValidationError:
        raise _NotStreamable from None
    try:
        for item in items:
            if isinstance(item, Device):
                _device(item, names)
            else:
                _link(item, names)
    except InputError:
        raise _NotStreamable from None
    out.extend(items)


def _device(d: Device, names: _Names) -> None:
    """`io.check_references` and `io.check_addresses` for one device (their messages come from the full reader)."""
    io.check_device_addresses(d, d.name, names.path)
    if not io.SAFE_NAME.fullmatch(d.name) or d.name in names.ports:
        raise InputError(names.path, d.name)
    ports = names.ports[d.name] = {p.name for p in d.ports}
    if len(ports) != len(d.ports):
        raise InputError(names.path, d.name)
    if not names.switch_ports and d.role in SWITCH_ROLES:
        d.ports = []


def _link(lk: Link, names: _Names) -> None:
    if lk.id in names.links:
        raise InputError(names.path, lk.id)
    names.links.add(lk.id)
    for end in (lk.a, lk.b):
        if end.port not in names.ports.get(end.device, ()):
            raise InputError(names.path, lk.id)
