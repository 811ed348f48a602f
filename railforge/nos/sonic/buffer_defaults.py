"""What SONiC's own buffer and QoS templates write for a SKU and device type (railforge/nos/sonic/buffers).

A SONiC switch does not take its buffers from config_db.json alone: `config qos reload` clears every QoS and
buffer table and renders the SKU's `buffers_dynamic.json.j2` (Mellanox, Barefoot) or `buffers.json.j2` and
`qos.json.j2` again, picking `buffers_defaults_<t0|t1|t2|...>.j2` by DEVICE_METADATA.type. A file railforge
writes is merged on top of that (`config load`), so it must use the device types, buffer model, profile
names and BUFFER_PG/BUFFER_QUEUE keys those templates use. The facts here are the templates' output, rendered
once with SONiC's sonic-cfggen at the pinned sonic-buildimage commit (commands in nos/sonic/README.md), per
SKU, per device type and per buffer model: global tables as rendered, per-port tables for one port with a
neighbour ("active") and one without ("inactive"), which SKU files exist, and pg_profile_lookup.ini's keys.

Hand-written because no library carries these facts; the files are read through a pydantic model.
"""

from __future__ import annotations

import math
from functools import cache
from importlib import resources
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

MAX_BYTES = 1 << 20
Fields = dict[str, str]
Entries = dict[str, Fields]  # key (or key suffix after "Ethernet<n>|") -> fields
# What SONiC operators do where a SKU ships no defaults for the planned type: a super-spine on a SKU without
# buffers_defaults_t2.j2 runs the t1 (LeafRouter) defaults, whose every port faces a router as a spine's does.
FALLBACK_TYPES = {"SpineRouter": "LeafRouter"}
TYPE_FILES = {"ToRRouter": "t0", "LeafRouter": "t1", "SpineRouter": "t2"}


class BufferDataError(ValueError):
    pass


class BufferTemplateMissing(ValueError):
    pass


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CableLength(_Strict):
    name: str
    active: str
    inactive: str


class Rendered(_Strict):
    """One template rendered for one device type."""

    global_: dict[str, Entries] = Field(alias="global")
    ports: dict[Literal["active", "inactive"], dict[str, Entries]]
    cable_length: CableLength | None = None


class Failed(_Strict):
    error: str


class RenderedWith(_Strict):
    active_port: str
    inactive_port: str


class SkuBuffers(_Strict):
    sonic_buildimage: str
    platform: str
    hwsku: str
    asic_type: str
    files: tuple[str, ...]
    ports: int
    platform_asic_table_j2: bool
    qos_reload_buffer_template: Literal["buffers.json.j2", "buffers_dynamic.json.j2"]
    pg_profile_lookup: dict[str, tuple[str, ...]]
    rendered_with: RenderedWith
    buffers: dict[str, dict[Literal["traditional", "dynamic"], Rendered | Failed]]
    qos: dict[str, Rendered | Failed]

    @property
    def buffer_model(self) -> str:
        """The model `config qos reload` puts in DEVICE_METADATA.buffer_model (sonic-utilities: dynamic on
        Mellanox/Barefoot SKUs that ship buffers_dynamic.json.j2, traditional otherwise)."""
        return "dynamic" if self.qos_reload_buffer_template == "buffers_dynamic.json.j2" else "traditional"

    def _rendered(self, device_type: str) -> tuple[Rendered | Failed | None, Rendered | Failed | None]:
        return self.buffers.get(device_type, {}).get(self.buffer_model), self.qos.get(device_type)

    def renders(self, device_type: str) -> bool:
        return all(isinstance(r, Rendered) for r in self._rendered(device_type))

    def device_type(self, planned: str) -> str:
        """`planned` where this SKU's templates render it, else its documented fallback; a clear error if neither."""
        for candidate in (planned, FALLBACK_TYPES.get(planned)):
            if candidate is not None and self.renders(candidate):
                return candidate
        missing = f"buffers_defaults_{TYPE_FILES[planned]}.j2" if planned in TYPE_FILES else "its buffer defaults"
        tried = " or ".join(t for t in (planned, FALLBACK_TYPES.get(planned)) if t)
        raise BufferTemplateMissing(
            f"SONiC SKU {self.hwsku} ({self.platform}) ships no {missing} and no defaults for {tried}: "
            f"`config qos reload` would fail on DEVICE_METADATA.type {planned!r} (its files: {', '.join(self.files)})")

    def buffer_tables(self, device_type: str) -> Rendered:
        r = self._rendered(device_type)[0]
        if not isinstance(r, Rendered):
            raise BufferTemplateMissing(f"SONiC SKU {self.hwsku}: {self.qos_reload_buffer_template} does not "
                                        f"render for {device_type}: {r.error if r else 'not rendered'}")
        return r

    def qos_tables(self, device_type: str) -> Rendered:
        r = self._rendered(device_type)[1]
        if not isinstance(r, Rendered):
            raise BufferTemplateMissing(f"SONiC SKU {self.hwsku}: qos.json.j2 does not render for {device_type}: "
                                        f"{r.error if r else 'not rendered'}")
        return r

    def lossless_priorities(self, device_type: str) -> set[int]:
        """The priorities whose queues the templates give egress_lossless_profile (3 and 4 on every pinned SKU)."""
        queues = self.buffer_tables(device_type).ports.get("active", {}).get("BUFFER_QUEUE", {})
        return {n for ids, e in queues.items() if e.get("profile") == "egress_lossless_profile"
                for n in priorities(ids)}

    def pfc_enable(self, device_type: str) -> str:
        """PORT_QOS_MAP pfc_enable the templates write for a used port ("3,4")."""
        return self.qos_tables(device_type).ports["active"]["PORT_QOS_MAP"][""]["pfc_enable"]

    def cable_length(self, speed_mbps: int, meters: float) -> str:
        """CABLE_LENGTH for a port: the planned length rounded up to a whole metre; in the traditional model, to
        the next length pg_profile_lookup.ini lists for the port's speed (buffermgrd creates no lossless PG for a
        speed/length pair missing there)."""
        exact = f"{math.ceil(meters)}m"
        if self.buffer_model == "dynamic":
            return exact
        listed = sorted(self.pg_profile_lookup.get(str(speed_mbps), ()), key=lambda c: int(c.removesuffix("m")))
        for c in listed:
            if int(c.removesuffix("m")) >= meters:
                return c
        raise BufferTemplateMissing(
            f"SONiC SKU {self.hwsku}: pg_profile_lookup.ini has no lossless profile for {speed_mbps} Mb/s at "
            f"{exact} (it lists {', '.join(listed) or 'nothing'} for that speed)")


def priorities(key_range: str) -> set[int]:
    """'3-4' -> {3, 4}; '0' -> {0} (SONiC's BUFFER_PG/BUFFER_QUEUE key suffix)."""
    first, _, last = key_range.partition("-")
    return set(range(int(first), int(last or first) + 1))


def id_ranges(ids: set[int]) -> list[str]:
    """Contiguous slices of `ids` named as swss's generateIdListFromMap names them: {1, 2, 5} -> ['1-2', '5']
    (the BUFFER_PG keys the traditional buffermgrd writes for a port's pfc_enable)."""
    out, run = [], []
    for n in sorted(ids):
        if run and n != run[-1] + 1:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
            run = []
        run.append(n)
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return out


@cache
def known_skus() -> tuple[str, ...]:
    root = resources.files("railforge.nos.sonic").joinpath("buffers")
    return tuple(sorted(p.name.removesuffix(".json") for p in root.iterdir() if p.name.endswith(".json")))


def parse(text: bytes, source: str) -> SkuBuffers:
    if len(text) > MAX_BYTES:
        raise BufferDataError(f"{source}: {len(text)} bytes; at most {MAX_BYTES} are read")
    try:
        return SkuBuffers.model_validate_json(text)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(x) for x in err["loc"]) or "(top)"
        raise BufferDataError(f"{source}: {where}: {err['msg']}") from None


@cache
def load_buffers(hwsku: str) -> SkuBuffers:
    if hwsku not in known_skus():
        raise BufferDataError(f"no SONiC buffer data for hwsku {hwsku!r} in railforge/nos/sonic/buffers "
                              f"(known: {', '.join(known_skus())})")
    path = resources.files("railforge.nos.sonic").joinpath("buffers", f"{hwsku}.json")
    data = parse(path.read_bytes(), f"railforge/nos/sonic/buffers/{hwsku}.json")
    if data.hwsku != hwsku:
        raise BufferDataError(f"railforge/nos/sonic/buffers/{hwsku}.json: hwsku says {data.hwsku!r}")
    return data


def defaults_for(sku: SkuBuffers, device_type: str, ports: list[str], active: set[str]) -> dict[str, dict]:
    """The buffer and QoS tables `config qos reload` writes for a switch of this SKU and type whose PORT table
    holds `ports` and whose DEVICE_NEIGHBOR holds `active` (the templates' notion of an active port)."""
    out: dict[str, dict] = {}
    for r in (sku.buffer_tables(device_type), sku.qos_tables(device_type)):
        for table, entries in r.global_.items():
            out.setdefault(table, {}).update({k: dict(v) for k, v in entries.items()})
        for port in ports:
            cls = "active" if port in active else "inactive"
            for table, entries in r.ports.get(cls, {}).items():
                out.setdefault(table, {}).update(
                    {(f"{port}|{suffix}" if suffix else port): dict(v) for suffix, v in entries.items()})
        if r.cable_length is not None:
            out["CABLE_LENGTH"] = {r.cable_length.name: {
                p: r.cable_length.active if p in active else r.cable_length.inactive for p in ports}}
    return out
