"""The strict reader for a node's host_vars JSON (what `railforge build` writes to ansible/host_vars/)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

MAX_BYTES = 1 << 20


class HostVarsError(ValueError):
    pass


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class RailVars(_Model):
    rail: int = Field(ge=0, le=63)
    ifname: str = Field(min_length=1, max_length=15)
    hca: str | None = None
    pci: str | None = None
    speed_mbps: int = Field(gt=0)
    address: str = Field(min_length=3, max_length=64)
    leaf: str = Field(min_length=1, max_length=128)
    leaf_port: str = Field(min_length=1, max_length=64)
    cable: str = Field(min_length=1, max_length=64)


class BondMemberVars(_Model):
    ifname: str = Field(min_length=1, max_length=15)
    speed_mbps: int = Field(gt=0)
    switch: str
    switch_port: str
    cable: str


class BondVars(_Model):
    name: str = Field(min_length=1, max_length=15)
    mtu: int = Field(ge=68, le=65535)
    members: list[BondMemberVars] = Field(max_length=16)


class HostVars(_Model):
    railforge_rails: list[RailVars] = Field(max_length=64)
    railforge_bond: BondVars | None = None


def read_host_vars(path: Path) -> HostVars:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise HostVarsError(f"{path}: cannot open: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise HostVarsError(f"{path}: not a regular file")
        if st.st_size > MAX_BYTES:
            raise HostVarsError(f"{path}: {st.st_size:,} bytes; at most {MAX_BYTES:,} are read")
        data = os.read(fd, MAX_BYTES + 1)
    finally:
        os.close(fd)
    try:
        raw = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise HostVarsError(f"{path}: not JSON: {exc}") from None
    try:
        return HostVars.model_validate(raw)
    except ValidationError as exc:
        e = exc.errors()[0]
        where = ".".join(str(p) for p in e["loc"]) or "(top)"
        raise HostVarsError(f"{path}: {where}: {e['msg']} (got {repr(e.get('input'))[:60]})") from None
