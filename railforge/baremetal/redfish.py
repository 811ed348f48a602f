"""Redfish, host by host: read inventory (serial, NIC MACs) and compare it with the plan, set a one-time UEFI PXE boot
override, power-cycle. Bounded concurrency, retries on transport errors and 5xx, one result per host.

Every BMC answer goes through a strict reader: at most `MAX_ANSWER` bytes, JSON, then a pydantic model of only the
fields used (`Members`, `SerialNumber`, `PowerState`, `MACAddress`, the reset action's target); anything else is an
error naming the host and the URL, and only that host fails. Hand-written on http.client rather than the `sushy`
client: sushy parses answers loosely and unbounded, and this needs a size limit, a strict model and one connection
per BMC reused for every request.
"""

from __future__ import annotations

import base64
import http.client
import json
import ssl
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from railforge.baremetal.identity import BootIdentity

MAX_ANSWER = 1024 * 1024
OK, MISMATCH, ERROR = "ok", "mismatch", "error"
ACTIONS = ("inventory", "pxe", "power", "bringup")


class _Loose(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class _Link(_Loose):
    odata_id: str = Field(alias="@odata.id", pattern=r"^/redfish/v1/[\x21-\x7e]{1,200}$")


class Collection(_Loose):
    Members: list[_Link] = Field(max_length=4096)


class _ResetAction(_Loose):
    target: str = Field(pattern=r"^/redfish/v1/[\x21-\x7e]{1,200}$")


class _Actions(_Loose):
    reset: _ResetAction = Field(alias="#ComputerSystem.Reset")


class _Boot(_Loose):
    BootSourceOverrideTarget: str | None = Field(default=None, max_length=64)
    BootSourceOverrideEnabled: str | None = Field(default=None, max_length=64)


class System(_Loose):
    Id: str = Field(max_length=256)
    SerialNumber: str | None = Field(default=None, max_length=256)
    PowerState: Literal["On", "Off", "PoweringOn", "PoweringOff", "Paused"] | None = None
    EthernetInterfaces: _Link | None = None
    Boot: _Boot | None = None
    Actions: _Actions | None = None


class EthernetInterface(_Loose):
    MACAddress: str | None = Field(default=None, max_length=64)
    PermanentMACAddress: str | None = Field(default=None, max_length=64)


class BmcError(Exception):
    """One host's failure, already phrased for the result table."""

    def __init__(self, message: str, retry: bool = False):
        super().__init__(message)
        self.retry = retry


@dataclass(slots=True, frozen=True)
class Credentials:
    username: str
    password: str

    def header(self) -> str:
        return "Basic " + base64.b64encode(f"{self.username}:{self.password}".encode()).decode()


@dataclass(slots=True, frozen=True)
class Settings:
    url: str = "https://{bmc}"  # {bmc}: the planned BMC IP, {host}: the host name
    system_id: str | None = None  # None: the BMC's only system; else a template like "{host}"
    concurrency: int = 64
    retries: int = 3
    timeout: float = 10.0
    backoff: float = 0.5
    verify_tls: bool = True
    ca_file: str | None = None


@dataclass(slots=True)
class HostResult:
    host: str
    place: str
    bmc: str
    status: str
    detail: str
    attempts: int = 1
    seconds: float = 0.0


class Bmc:
    """One BMC over one HTTP(S) connection."""

    def __init__(self, base: str, creds: Credentials, settings: Settings):
        parts = urlsplit(base)
        self.base = base
        self.settings = settings
        self.auth = creds.header()
        if parts.scheme == "https":
            ctx = ssl.create_default_context(cafile=settings.ca_file)
            if not settings.verify_tls:
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
            self.conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                parts.hostname or "", parts.port, timeout=settings.timeout, context=ctx)
        else:
            self.conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=settings.timeout)

    def close(self) -> None:
        self.conn.close()

    def request(self, method: str, path: str, body: dict | None = None) -> dict:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": self.auth, "Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        try:
            self.conn.request(method, path, body=data, headers=headers)
            resp = self.conn.getresponse()
            raw = resp.read(MAX_ANSWER + 1)
        except (OSError, http.client.HTTPException) as exc:
            self.conn.close()
            raise BmcError(f"{method} {path}: unreachable ({exc.__class__.__name__}: {exc})", retry=True) from None
        if resp.status >= 500:
            raise BmcError(f"{method} {path}: HTTP {resp.status}", retry=True)
        if resp.status in (401, 403):
            raise BmcError(f"{method} {path}: HTTP {resp.status}, the BMC refused the credentials")
        if resp.status >= 400:
            raise BmcError(f"{method} {path}: HTTP {resp.status}")
        if len(raw) > MAX_ANSWER:
            self.conn.close()
        return parse_json(raw, f"{method} {path}")

    def read(self, path: str, model: type[BaseModel]) -> BaseModel:
        return validate(self.request("GET", path), model, f"GET {path}")


def parse_json(raw: bytes, where: str) -> dict:
    """The strict reader's first half: bounded bytes -> a JSON object (empty answer: {})."""
    if len(raw) > MAX_ANSWER:
        raise BmcError(f"{where}: answer over {MAX_ANSWER} bytes")
    if not raw.strip():
        return {}
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise BmcError(f"{where}: malformed answer, not JSON ({exc.__class__.__name__})") from None
    if not isinstance(doc, dict):
        raise BmcError(f"{where}: malformed answer, want a JSON object")
    return doc


def validate(doc: dict, model: type[BaseModel], where: str) -> BaseModel:
    """The second half: a JSON object -> the model of the fields railforge uses, or BmcError naming the field."""
    try:
        return model.model_validate(doc)
    except ValidationError as exc:
        e = exc.errors()[0]
        loc = ".".join(str(p) for p in e["loc"]) or "answer"
        raise BmcError(f"{where}: malformed answer, {loc}: {str(e['msg'])[:200]}") from None


def _system_path(bmc: Bmc, i: BootIdentity) -> str:
    if bmc.settings.system_id:
        return f"/redfish/v1/Systems/{bmc.settings.system_id.format(host=i.host, bmc=i.bmc_ip)}"
    members = bmc.read("/redfish/v1/Systems", Collection).Members  # type: ignore[attr-defined]
    if len(members) != 1:
        raise BmcError(f"the BMC lists {len(members)} systems; pass --system-id to pick one")
    return members[0].odata_id


def _norm_mac(text: str | None) -> str | None:
    return text.strip().lower().replace("-", ":") if text else None


def inventory(bmc: Bmc, i: BootIdentity) -> tuple[str, str, System, str]:
    path = _system_path(bmc, i)
    system: System = bmc.read(path, System)  # type: ignore[assignment]
    macs: list[str] = []
    if system.EthernetInterfaces is not None:
        coll: Collection = bmc.read(system.EthernetInterfaces.odata_id, Collection)  # type: ignore[assignment]
        for link in coll.Members:
            nic: EthernetInterface = bmc.read(link.odata_id, EthernetInterface)  # type: ignore[assignment]
            mac = _norm_mac(nic.PermanentMACAddress or nic.MACAddress)
            if mac:
                macs.append(mac)
    problems = []
    if i.serial and system.SerialNumber is not None and system.SerialNumber.strip() != i.serial:
        problems.append(f"serial {system.SerialNumber.strip()!r}, recorded {i.serial!r}: a swapped server?")
    if i.serial and system.SerialNumber is None:
        problems.append(f"the BMC reports no serial, recorded {i.serial!r}")
    if i.boot_mac and i.boot_mac not in macs:
        problems.append(f"boot MAC {i.boot_mac} not among the system's NICs ({', '.join(macs) or 'none'})")
    detail = f"serial {system.SerialNumber or '-'}, {len(macs)} NICs, power {system.PowerState or '-'}"
    return (MISMATCH if problems else OK), ("; ".join(problems) or detail), system, path


def set_pxe_once(bmc: Bmc, path: str) -> str:
    bmc.request("PATCH", path, {"Boot": {"BootSourceOverrideTarget": "Pxe", "BootSourceOverrideEnabled": "Once",
                                         "BootSourceOverrideMode": "UEFI"}})
    boot = bmc.read(path, System).Boot  # type: ignore[attr-defined]
    if boot is None or boot.BootSourceOverrideTarget != "Pxe":
        raise BmcError(f"PATCH {path}: the boot override reads back as "
                       f"{boot.BootSourceOverrideTarget if boot else 'nothing'}, not Pxe")
    return f"next boot: Pxe ({boot.BootSourceOverrideEnabled or '?'}, UEFI)"


def power_cycle(bmc: Bmc, system: System, path: str) -> str:
    target = system.Actions.reset.target if system.Actions else f"{path}/Actions/ComputerSystem.Reset"
    reset = "ForceRestart" if system.PowerState == "On" else "On"
    bmc.request("POST", target, {"ResetType": reset})
    return f"{reset} sent"


def run_host(i: BootIdentity, action: str, creds: Credentials, settings: Settings) -> HostResult:
    base = settings.url.format(bmc=i.bmc_ip, host=i.host).rstrip("/")
    started = time.monotonic()
    attempts = 0
    while True:
        attempts += 1
        bmc = Bmc(base, creds, settings)
        try:
            status, detail, system, path = inventory(bmc, i)
            if action in ("pxe", "bringup") and status == OK:
                detail = set_pxe_once(bmc, path)
            if action in ("power", "bringup") and status == OK:
                detail = f"{detail}; {power_cycle(bmc, system, path)}" if action == "bringup" else \
                    power_cycle(bmc, system, path)
            return HostResult(i.host, i.place, base, status, detail, attempts, time.monotonic() - started)
        except BmcError as exc:
            if exc.retry and attempts <= settings.retries:
                time.sleep(settings.backoff * 2 ** (attempts - 1))
                continue
            return HostResult(i.host, i.place, base, ERROR, str(exc), attempts, time.monotonic() - started)
        finally:
            bmc.close()


def run(ids: list[BootIdentity], action: str, creds: Credentials, settings: Settings) -> list[HostResult]:
    """`action` on every host, at most `settings.concurrency` at a time; results in the order of `ids`."""
    with ThreadPoolExecutor(max_workers=max(1, settings.concurrency)) as pool:
        return list(pool.map(lambda i: run_host(i, action, creds, settings), ids))
