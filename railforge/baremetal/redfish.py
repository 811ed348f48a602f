"""Redfish, host by host: read inventory (serial, NIC MACs) and compare it with the plan, set a one-time UEFI PXE boot
override, power-cycle. Bounded concurrency, one result per host.

Safe to retry: reads (GET) are retried on transport errors and HTTP 5xx; a state-changing request (the boot override
PATCH, the reset POST) is never re-sent blind. Each action is sent once on a fresh connection: a failed connect sent
nothing; once the request is on the wire, no answer in time, a broken connection or HTTP 5xx leaves its effect
unknown (`EffectUnknown`), and what happens next is decided from what the BMC then says. The override is read before
it is written (already pending: not written again) and read back after; a PATCH that read-back shows was not applied
may be sent again, because setting the same override twice changes nothing. A reset is never re-sent: after an
unknown answer the BMC is watched for `settle` seconds for a sign the reset took effect (`LastResetTime` moved, the
power state changed, the one-time override consumed); with a sign the host is `ok`, without one it is `unknown`
and nothing more is sent to it. A host whose BMC reports a power transition under way gets no action at all.

Every BMC answer goes through a strict reader: at most `MAX_ANSWER` bytes, JSON, then a pydantic model of only the
fields used (`Members`, `SerialNumber`, `PowerState`, `LastResetTime`, `Boot`, `MACAddress`, the reset action's
target); anything else is an error naming the host and the URL, and only that host fails. Hand-written on
http.client rather than the `sushy` client: sushy parses answers loosely and unbounded and retries on its own, and
this needs a size limit, a strict model, one connection per BMC and control over what is re-sent.
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
OK, MISMATCH, ERROR, UNKNOWN = "ok", "mismatch", "error", "unknown"
ACTIONS = ("inventory", "pxe", "power", "bringup")
TRANSITIONS = ("PoweringOn", "PoweringOff")


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
    BootSourceOverrideMode: str | None = Field(default=None, max_length=64)

    @property
    def pxe_once(self) -> bool:
        return self.BootSourceOverrideTarget == "Pxe" and self.BootSourceOverrideEnabled == "Once"

    def shown(self) -> str:
        return f"{self.BootSourceOverrideTarget or 'None'} ({self.BootSourceOverrideEnabled or '?'}, " \
               f"{self.BootSourceOverrideMode or '?'})"


class System(_Loose):
    Id: str = Field(max_length=256)
    SerialNumber: str | None = Field(default=None, max_length=256)
    PowerState: Literal["On", "Off", "PoweringOn", "PoweringOff", "Paused"] | None = None
    LastResetTime: str | None = Field(default=None, max_length=64)
    EthernetInterfaces: _Link | None = None
    Boot: _Boot | None = None
    Actions: _Actions | None = None

    @property
    def boot(self) -> _Boot:
        return self.Boot or _Boot()


class EthernetInterface(_Loose):
    MACAddress: str | None = Field(default=None, max_length=64)
    PermanentMACAddress: str | None = Field(default=None, max_length=64)


class BmcError(Exception):
    """One host's failure, already phrased for the result table."""


class EffectUnknown(BmcError):
    """A state-changing request went out and no clear answer came back (none in time, a broken connection, HTTP 5xx):
    the BMC may or may not have acted."""


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
    retries: int = 3  # re-reads after a transport error or HTTP 5xx (never a re-sent reset)
    timeout: float = 10.0
    backoff: float = 0.5
    verify_tls: bool = True
    ca_file: str | None = None
    settle: float = 120.0  # seconds to watch for a sign that a reset with an unknown answer took effect
    poll: float = 2.0


@dataclass(slots=True)
class HostResult:
    host: str
    place: str
    bmc: str
    status: str
    detail: str
    attempts: int = 1
    seconds: float = 0.0
    resets: int = 0  # reset requests put on the wire (at most one)


class Bmc:
    """One BMC over one HTTP(S) connection; `retried` counts re-reads, `resets` the reset requests sent."""

    def __init__(self, base: str, creds: Credentials, settings: Settings):
        parts = urlsplit(base)
        self.base = base
        self.settings = settings
        self.auth = creds.header()
        self.retried = 0
        self.resets = 0
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

    def _exchange(self, method: str, path: str, body: dict | None) -> tuple[int, bytes]:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": self.auth, "Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        self.conn.request(method, path, body=data, headers=headers)
        resp = self.conn.getresponse()
        raw = resp.read(MAX_ANSWER + 1)
        if len(raw) > MAX_ANSWER or resp.will_close:
            self.conn.close()
        return resp.status, raw

    @staticmethod
    def _refused(status: int, where: str) -> None:
        if status in (401, 403):
            raise BmcError(f"{where}: HTTP {status}, the BMC refused the credentials")
        if status >= 400:
            raise BmcError(f"{where}: HTTP {status}")

    def pause(self, attempt: int) -> None:
        self.retried += 1
        time.sleep(self.settings.backoff * 2 ** attempt)

    def get(self, path: str, model: type[BaseModel]) -> BaseModel:
        """A read: retried on transport errors and HTTP 5xx (reading twice changes nothing)."""
        where = f"GET {path}"
        for attempt in range(self.settings.retries + 1):
            try:
                status, raw = self._exchange("GET", path, None)
            except (OSError, http.client.HTTPException) as exc:
                self.conn.close()
                problem = f"unreachable ({exc.__class__.__name__}: {exc})"
            else:
                if status < 500:
                    self._refused(status, where)
                    return validate(parse_json(raw, where), model, where)
                problem = f"HTTP {status}"
            if attempt < self.settings.retries:
                self.pause(attempt)
        raise BmcError(f"{where}: {problem}")

    def act(self, method: str, path: str, body: dict) -> None:
        """A state-changing request, sent once on a fresh connection. A failed connect sent nothing and is retried;
        after that, no answer in time, a broken connection or HTTP 5xx raise EffectUnknown (never re-sent here),
        HTTP 4xx a BmcError (refused: nothing happened)."""
        where = f"{method} {path}"
        for attempt in range(self.settings.retries + 1):
            self.conn.close()
            try:
                self.conn.connect()
                break
            except OSError as exc:
                problem = f"unreachable ({exc.__class__.__name__}: {exc}), nothing sent"
                if attempt < self.settings.retries:
                    self.pause(attempt)
        else:
            raise BmcError(f"{where}: {problem}")
        if body.get("ResetType"):
            self.resets += 1
        try:
            status, _ = self._exchange(method, path, body)
        except TimeoutError:
            self.conn.close()
            raise EffectUnknown(f"{where}: no answer in {self.settings.timeout:g} s") from None
        except (OSError, http.client.HTTPException) as exc:
            self.conn.close()
            raise EffectUnknown(f"{where}: no answer ({exc.__class__.__name__})") from None
        if status >= 500:
            raise EffectUnknown(f"{where}: HTTP {status}")
        self._refused(status, where)


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
    members = bmc.get("/redfish/v1/Systems", Collection).Members  # type: ignore[attr-defined]
    if len(members) != 1:
        raise BmcError(f"the BMC lists {len(members)} systems; pass --system-id to pick one")
    return members[0].odata_id


def _norm_mac(text: str | None) -> str | None:
    return text.strip().lower().replace("-", ":") if text else None


def inventory(bmc: Bmc, i: BootIdentity) -> tuple[str, str, System, str]:
    path = _system_path(bmc, i)
    system: System = bmc.get(path, System)  # type: ignore[assignment]
    macs: list[str] = []
    if system.EthernetInterfaces is not None:
        coll: Collection = bmc.get(system.EthernetInterfaces.odata_id, Collection)  # type: ignore[assignment]
        for link in coll.Members:
            nic: EthernetInterface = bmc.get(link.odata_id, EthernetInterface)  # type: ignore[assignment]
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


PXE_ONCE = {"Boot": {"BootSourceOverrideTarget": "Pxe", "BootSourceOverrideEnabled": "Once",
                     "BootSourceOverrideMode": "UEFI"}}


def set_pxe_once(bmc: Bmc, path: str, system: System, i: BootIdentity) -> tuple[str, System]:
    """Read, then write the one-time UEFI PXE override only when it is not pending yet, then read it back. A BMC that
    keeps it `Continuous` would PXE-boot the host on every boot: tolerated for a stateless host (it boots from the
    network anyway), refused for an installer host (it would reinstall on every boot)."""
    patched, last = False, ""
    for attempt in range(bmc.settings.retries + 1):
        boot = system.boot
        if boot.pxe_once:
            return f"next boot: {boot.shown()}{'' if patched else ', already pending'}", system
        if patched and boot.BootSourceOverrideTarget == "Pxe":
            if i.target == "installer":
                raise BmcError(f"PATCH {path}: the override reads back {boot.shown()}, not Once: an installer host "
                               "would install again on every boot; not power-cycled")
            return f"next boot: {boot.shown()} (the BMC keeps it: the host PXE-boots on every boot)", system
        if attempt:
            bmc.pause(attempt - 1)
        try:
            bmc.act("PATCH", path, PXE_ONCE)
            patched = True
        except EffectUnknown as exc:
            last = f" after {exc}"
        system = bmc.get(path, System)  # type: ignore[assignment]
    raise BmcError(f"PATCH {path}: the boot override reads back {system.boot.shown()}, not Pxe (Once){last}; "
                   "not power-cycled")


def took_effect(before: System, now: System) -> str | None:
    """What the BMC shows that a reset sent after `before` was read has happened, or None."""
    if before.LastResetTime and now.LastResetTime and now.LastResetTime != before.LastResetTime:
        return f"LastResetTime {before.LastResetTime} -> {now.LastResetTime}"
    if before.boot.pxe_once and not now.boot.pxe_once:
        return f"the one-time override was consumed (now {now.boot.shown()})"
    if now.PowerState != before.PowerState:
        return f"power {before.PowerState} -> {now.PowerState}"
    return None


def watch(bmc: Bmc, path: str, before: System) -> tuple[str | None, str]:
    """Read the system until it shows a reset took effect or `settle` seconds passed: (the sign or None, what the
    BMC said last)."""
    deadline = time.monotonic() + bmc.settings.settle
    said = "nothing readable"
    while True:
        try:
            now: System = bmc.get(path, System)  # type: ignore[assignment]
        except BmcError as exc:
            said = str(exc)
        else:
            said = f"power {now.PowerState or '-'}, override {now.boot.shown()}, LastResetTime " \
                   f"{now.LastResetTime or '-'}"
            sign = took_effect(before, now)
            if sign:
                return sign, said
        left = deadline - time.monotonic()
        if left <= 0:
            return None, said
        time.sleep(min(bmc.settings.poll, left))


def power_cycle(bmc: Bmc, system: System, path: str) -> tuple[str, str]:
    """(status, detail): ForceRestart when on, On when off; sent once, whatever answer comes back."""
    target = system.Actions.reset.target if system.Actions else f"{path}/Actions/ComputerSystem.Reset"
    reset = "ForceRestart" if system.PowerState == "On" else "On"
    try:
        bmc.act("POST", target, {"ResetType": reset})
    except EffectUnknown as exc:
        sign, said = watch(bmc, path, system)
        if sign:
            return OK, f"{reset} {exc}; not re-sent: it took effect ({sign})"
        return UNKNOWN, (f"{reset} {exc}; not re-sent: after {bmc.settings.settle:g} s the BMC shows no sign it "
                         f"took effect ({said}); look at the host's console before running again")
    return OK, f"{reset} sent"


def run_host(i: BootIdentity, action: str, creds: Credentials, settings: Settings) -> HostResult:
    base = settings.url.format(bmc=i.bmc_ip, host=i.host).rstrip("/")
    started = time.monotonic()
    bmc = Bmc(base, creds, settings)
    try:
        status, detail, system, path = inventory(bmc, i)
        if status == OK and action != "inventory" and system.PowerState in TRANSITIONS:
            status, detail = UNKNOWN, (f"the BMC reports power {system.PowerState}: a power action is under way; "
                                       "nothing sent")
        if status == OK and action in ("pxe", "bringup"):
            detail, system = set_pxe_once(bmc, path, system, i)
        if status == OK and action in ("power", "bringup"):
            status, done = power_cycle(bmc, system, path)
            detail = f"{detail}; {done}" if action == "bringup" else done
    except BmcError as exc:
        status, detail = ERROR, str(exc)
    finally:
        bmc.close()
    return HostResult(i.host, i.place, base, status, detail, bmc.retried + 1, time.monotonic() - started, bmc.resets)


def run(ids: list[BootIdentity], action: str, creds: Credentials, settings: Settings) -> list[HostResult]:
    """`action` on every host, at most `settings.concurrency` at a time; results in the order of `ids`."""
    with ThreadPoolExecutor(max_workers=max(1, settings.concurrency)) as pool:
        return list(pool.map(lambda i: run_host(i, action, creds, settings), ids))
