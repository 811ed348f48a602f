"""plan.json: one object per line inside `devices` and `links`, so large plans stream and diff well; read back
through the strict reader (`railforge.inputs`), then checked against the plan's types and its own references.

Reading is one pass in the common case: pydantic-core parses and validates the bytes together (`validate_json`),
with the garbage collector paused (a plan is millions of acyclic objects; collections during their creation
doubled the read). Only a plan that fails there, or whose bytes hold what orjson and pydantic-core parse
differently (see `_one_pass`), takes the second, slower pass that names the problem the way every reader does."""

from __future__ import annotations

import dataclasses
import gc
import re
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from ipaddress import ip_interface
from pathlib import Path
from typing import IO, Annotated, get_type_hints

import orjson
import pydantic_core
from pydantic import BaseModel, ConfigDict, Field, ValidationError, WrapValidator, create_model

from railforge.inputs import MAX_INT_DIGITS, InputError, dotted, parse_json, read_bytes, shown, validation_errors
from railforge.plan.model import SCHEMA_VERSION, Plan, Reliability

_OPTS = orjson.OPT_SORT_KEYS
# items per write (256 nodes ~1.5 MB). One write per item (~6 KB for a node) made a 131K plan.json 51,408 writes
# and cost 0.1-0.17 s more system CPU
WRITE_ITEMS = 256


def write_plan(plan: Plan, fh: IO[bytes]) -> None:
    d = orjson.dumps
    fh.write(b'{"schema_version":' + d(plan.schema_version) + b',\n"cluster":' + d(plan.cluster, option=_OPTS))
    fh.write(b',\n"qos":' + d(plan.qos, option=_OPTS) + b',\n"reliability":' + d(plan.reliability, option=_OPTS))
    fh.write(b',\n"tenants":' + d(plan.tenants, option=_OPTS))
    fh.write(b',\n"device_types":' + d(plan.device_types, option=_OPTS))
    fh.write(b',\n"twin_parts":' + d(plan.twin_parts, option=_OPTS))
    fh.write(b',\n"splitter_parts":' + d(plan.splitter_parts, option=_OPTS))
    if plan.slurm is not None:
        fh.write(b',\n"slurm":' + d(plan.slurm, option=_OPTS))
    for key in ("pools", "asn_pools", "racks", "pod_networks", "devices", "links"):
        items = getattr(plan, key)
        fh.write(b',\n"' + key.encode() + b'":[')
        for start in range(0, len(items), WRITE_ITEMS):
            fh.write((b"\n" if start == 0 else b",\n")
                     + b",\n".join([d(item, option=_OPTS) for item in items[start:start + WRITE_ITEMS]]))
        fh.write(b"\n]")
    fh.write(b"\n}\n")


PLAN_MAX_BYTES = 4 << 30
SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def _as_written(value: object, handler: pydantic_core.core_schema.ValidatorFunctionWrapHandler) -> object:
    """`reliability` validated, then kept as written: an int where the type says float (the spec's default
    optics_mtbf_hours) stays an int, as the planner made it, so a plan read back renders and serialises to the same
    bytes."""
    handler(value)
    return Reliability(**value)


def _plan_file_model() -> type[BaseModel]:
    """plan.json's top level as a strict pydantic model over the plan's own dataclasses: no coercion ("3" is not
    an int), no unknown keys, no NaN or infinity, at any depth. `schema_version` is required here (the reader
    checks it before anything else)."""
    hints = get_type_hints(Plan)
    fields = {f.name: (hints[f.name], _default(f)) for f in dataclasses.fields(Plan) if f.name != "views"}
    fields["reliability"] = (Annotated[Reliability, WrapValidator(_as_written)], ...)
    fields["schema_version"] = (int, ...)
    return create_model("PlanFile", __config__=ConfigDict(strict=True, extra="forbid", allow_inf_nan=False),
                        **fields)


def _default(f: dataclasses.Field) -> object:
    """A top-level key with a default in `Plan` may be absent from plan.json (an older plan of the same schema
    version); nested dataclasses keep their own defaults."""
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return Field(default_factory=f.default_factory)
    return ...


_PlanFile = _plan_file_model()


def check_references(plan: Plan, source: object) -> None:
    """Every name the plan refers to is one it defines: unique device names, unique port names per device,
    unique link ids, and both ends of every link a device and a port of the plan."""
    if not SAFE_NAME.fullmatch(plan.cluster.name):
        raise InputError(source, f"cluster.name {shown(plan.cluster.name)} is not a cluster name (letters, digits, "
                                 "'.', '_' and '-'; tools name files after it)")
    ports: dict[str, set[str]] = {}
    for i, d in enumerate(plan.devices):
        if not SAFE_NAME.fullmatch(d.name):
            raise InputError(source, f"devices[{i}].name {shown(d.name)} is not a device name (letters, digits, "
                                     "'.', '_' and '-', at most 128; tools name files and folders after it)")
        if d.name in ports:
            raise InputError(source, f"devices[{i}]: the device name {shown(d.name)} is used twice")
        names = ports[d.name] = set()
        for j, p in enumerate(d.ports):
            if p.name in names:
                raise InputError(source, f"devices[{i}].ports[{j}]: {d.name} has two ports named {shown(p.name)}")
            names.add(p.name)
    ids: set[str] = set()
    for i, link in enumerate(plan.links):
        if link.id in ids:
            raise InputError(source, f"links[{i}]: the link id {shown(link.id)} is used twice")
        ids.add(link.id)
        for side, end in (("a", link.a), ("b", link.b)):
            if end.device not in ports:
                raise InputError(source, f"links[{i}].{side}: link {shown(link.id)} ends on {shown(end.device)}, "
                                         "which is not a device of the plan")
            if end.port not in ports[end.device]:
                raise InputError(source, f"links[{i}].{side}: link {shown(link.id)} ends on port {shown(end.port)}, "
                                         f"which {shown(end.device)} does not have")


_IPV4 = re.compile(r"(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
                   r"(?:/(?:3[0-2]|[12]?\d))?")


def _address(value: str | None, where: str, source: object) -> None:
    """An address or prefix of the plan parses (tools hand them to ipaddress); IPv4 by a regular expression, as
    a large plan holds millions."""
    if value is None or _IPV4.fullmatch(value):
        return
    try:
        ip_interface(value)
    except ValueError:
        raise InputError(source, f"{where}: {shown(value)} is not an IP address or prefix") from None


def check_addresses(plan: Plan, source: object) -> None:
    """Every address, gateway and prefix in the plan is one."""
    for i, pool in enumerate(plan.pools):
        _address(pool.prefix, f"pools[{i}].prefix", source)
    for i, pn in enumerate(plan.pod_networks):
        for f in ("subnet", "gateway", "range_start", "range_end"):
            _address(getattr(pn, f), f"pod_networks[{i}].{f}", source)
    for i, d in enumerate(plan.devices):
        at = f"devices[{i}]"
        _address(d.loopback, f"{at}.loopback", source)
        _address(d.mgmt_address, f"{at}.mgmt_address", source)
        for j, p in enumerate(d.ports):
            _address(p.address, f"{at}.ports[{j}].address", source)
        for j, h in enumerate(d.host_subnets):
            for f in ("prefix", "gateway", "address"):
                _address(getattr(h, f), f"{at}.host_subnets[{j}].{f}", source)
        for j, r in enumerate(d.rails):
            for f in ("address", "gateway", "pod_first", "pod_last"):
                _address(getattr(r, f), f"{at}.rails[{j}].{f}", source)
        if d.bond:
            _address(d.bond.address, f"{at}.bond.address", source)
            _address(d.bond.gateway, f"{at}.bond.gateway", source)
            if d.bond.storage_vlan:
                _address(d.bond.storage_vlan.address, f"{at}.bond.storage_vlan.address", source)
        if d.bmc:
            _address(d.bmc.address, f"{at}.bmc.address", source)


@contextmanager
def _gc_paused() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


_NUMBERS = bytes(48 if 48 <= b <= 57 else 101 if b in b"eE" else 43 if b in b"+-" else 32 for b in range(256))
_UNLIKE_ORJSON = (b"0" * 19, b"e000", b"e+000")
_INT_LIMIT = 10 ** MAX_INT_DIGITS


def _one_pass(raw: bytes) -> bool:
    """Whether pydantic-core alone may read `raw`, reading it as orjson would. They differ in two ways, both seen
    cheaply in the bytes (a hit inside a string only costs the second pass): pydantic-core reads NaN and
    Infinity, which orjson refuses; orjson reads an integer beyond 64 bits as a float and refuses a number beyond
    1.8e308, pydantic-core reads integers of any size and such a float as infinity. Such numbers have a run of 19
    or more digits or an exponent of three digits."""
    if b"NaN" in raw or b"Infinity" in raw:
        return False
    numbers = raw.translate(_NUMBERS)
    return not any(pattern in numbers for pattern in _UNLIKE_ORJSON)


RENAMED_IN_2 = {"sonic_platform": "platform", "sonic_hwsku": "hwsku"}


def _from_1(data: dict, source: object) -> bytes:
    """A schema_version 1 plan as version 2 writes it: each device's `sonic_platform`/`sonic_hwsku` (the only
    difference) under their OS-neutral names `platform`/`hwsku`."""
    for i, device in enumerate(data.get("devices") or []):
        if not isinstance(device, dict):
            continue
        for old, new in RENAMED_IN_2.items():
            if new in device:
                raise InputError(source, f"devices[{i}]: {new!r} is not a key of a schema_version 1 plan (it has "
                                         f"{old!r})")
            if old in device:
                device[new] = device.pop(old)
    data["schema_version"] = 2
    return orjson.dumps(data)


MIGRATIONS = {1: _from_1}
"""Older schema versions this railforge still reads: each turns the parsed plan into the current version's bytes."""


def _model(raw: bytes, source: object) -> BaseModel:
    """The second pass: orjson's syntax errors by line and column, the schema version before anything else (an older
    one is migrated), every integer within MAX_INT_DIGITS digits, then the model's errors by dotted path."""
    try:
        data = parse_json(raw, source, check=False)
    except InputError as exc:
        raise InputError(source, f"not a railforge plan: {exc.message}", line=exc.line) from None
    version = data.get("schema_version") if isinstance(data, dict) else None
    if not isinstance(data, dict):
        raise InputError(source, "not a railforge plan: want the JSON object `railforge build` writes as plan.json")
    if version in MIGRATIONS:
        raw = MIGRATIONS[version](data, source)
    elif version != SCHEMA_VERSION:
        raise InputError(source, f"plan schema_version {shown(version)}; this railforge reads schema_version "
                                 f"{SCHEMA_VERSION}: rebuild it with this version")
    del data
    try:
        model = _PlanFile.model_validate_json(raw)
    except ValidationError as exc:
        raise validation_errors(exc, source, "a valid railforge plan") from None
    _check_integers(pydantic_core.from_json(raw), source)
    return model


def _check_integers(data: object, source: object) -> None:
    """No integer of the plan has more than MAX_INT_DIGITS digits (pydantic-core reads any size; the shape is the
    model's, so the walk is shallow)."""
    stack: list[tuple[object, tuple[str | int, ...]]] = [(data, ())]
    while stack:
        value, at = stack.pop()
        if isinstance(value, dict):
            stack.extend((v, (*at, k)) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((v, (*at, i)) for i, v in enumerate(value))
        elif isinstance(value, int) and not isinstance(value, bool) and abs(value) >= _INT_LIMIT:
            raise InputError(source, f"not a valid railforge plan: {dotted(at)}: an integer of more than "
                                     f"{MAX_INT_DIGITS} digits")


def parse_plan(raw: bytes, source: object) -> Plan:
    """A plan from plan.json's bytes: bounded JSON, the schema version, every field's type, every reference."""
    with _gc_paused():
        model = None
        if _one_pass(raw):
            with suppress(ValidationError):
                model = _PlanFile.model_validate_json(raw)
        if model is None or model.schema_version != SCHEMA_VERSION:
            model = _model(raw, source)
        plan = Plan(**{name: getattr(model, name) for name in type(model).model_fields})
        del model
        check_references(plan, source)
        check_addresses(plan, source)
    return plan


def read_plan(path: str | Path) -> Plan:
    """plan.json through the strict reader; InputError names the file and the first bad values."""
    return parse_plan(read_bytes(path, PLAN_MAX_BYTES), path)
