"""What pushing a plan into a source of truth means, whatever the product: match by natural key, create what is
missing with the owner tag in the same request, refuse to change what railforge owns unless asked, never touch
what it does not own, and report every difference by the plan's names.

The product adapters (`netbox.py`, `nautobot.py`) say how each object is written and read back; this module
holds the rules and the comparison, so both products obey the same ones.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import requests

from railforge.render.netbox import slug
from railforge.sot.desired import Desired

CHUNK = 100
RESUME = "; what was written is kept and owned: run the same push again to resume"


class SotError(Exception):
    """A source-of-truth problem the user can act on (bad URL or token, API error, object in the way)."""


@dataclass(slots=True)
class Change:
    kind: str  # create | update | conflict | missing
    cls: str
    key: str
    detail: str = ""


@dataclass(slots=True)
class PushResult:
    created: dict[str, int] = field(default_factory=dict)
    updated: dict[str, int] = field(default_factory=dict)
    changes: list[Change] = field(default_factory=list)

    @property
    def writes(self) -> int:
        return sum(self.created.values()) + sum(self.updated.values())


def owner_tag(cluster: str) -> str:
    return f"railforge-{slug(cluster)}"



class Client:
    """One source-of-truth instance, one cluster: the owner tag scopes every read and marks every write.
    Adapters set `api`, `product` and `RequestError`, and implement check, has_site, read_state, _ensure_tag
    and _apply."""

    product = "source of truth"
    RequestError: type = Exception

    def __init__(self, url: str, token: str, cluster: str, workers: int = 4, timeout_s: float = 300.0):
        self.api = self.connect(url, token)
        self.api.http_session = requests.Session()
        self.api.http_session.request = _with_timeout(self.api.http_session.request, timeout_s)
        self.cluster = cluster
        self.tag = owner_tag(cluster)
        self.workers = workers
        self.notes: list[str] = []
        """What the push or diff left out and why (said on stderr, not an error)."""

    # -- reads ---------------------------------------------------------------------------------------------------

    def _all(self, endpoint, **filters) -> list:
        try:
            return list(endpoint.filter(**filters, limit=1000))
        except self.RequestError as e:
            raise SotError(self._api_error(e)) from None
        except requests.RequestException as e:
            raise SotError(f"reading {endpoint.name}: {net_error(e)}") from None

    def _owned(self, rec) -> bool:
        return any(t.slug == self.tag for t in (rec.tags or []))

    # -- writes --------------------------------------------------------------------------------------------------

    def _create(self, endpoint, cls: str, payloads: list[dict], result: PushResult) -> list:
        if not payloads:
            return []
        for p in payloads:
            p.setdefault("tags", [{"slug": self.tag}])
        chunks = [payloads[i:i + CHUNK] for i in range(0, len(payloads), CHUNK)]

        def post(chunk: list[dict]) -> list:
            try:
                return endpoint.create(chunk)
            except self.RequestError as e:
                raise SotError(f"creating {cls}: {self._api_error(e)}{RESUME}") from None
            except requests.RequestException as e:
                raise SotError(f"creating {cls}: {net_error(e)}{RESUME}") from None

        with ThreadPoolExecutor(self.workers) as pool:
            made = [r for batch in pool.map(post, chunks) for r in batch]
        result.created[cls] = result.created.get(cls, 0) + len(made)
        return made

    def _update(self, endpoint, cls: str, patches: list[dict], result: PushResult) -> None:
        for i in range(0, len(patches), CHUNK):
            try:
                endpoint.update(patches[i:i + CHUNK])
            except self.RequestError as e:
                raise SotError(f"updating {cls}: {self._api_error(e)}{RESUME}") from None
            except requests.RequestException as e:
                raise SotError(f"updating {cls}: {net_error(e)}{RESUME}") from None
        if patches:
            result.updated[cls] = result.updated.get(cls, 0) + len(patches)

    # -- the push ------------------------------------------------------------------------------------------------

    def push(self, want: Desired, apply_changes: bool = False, dry_run: bool = False) -> PushResult:
        """Create what is missing; update owned objects that differ only if `apply_changes`."""
        result = PushResult()
        self._ensure_tag()
        state = self.read_state(want)
        result.changes = compare(want, state)
        conflicts = [c for c in result.changes if c.kind == "conflict"]
        if conflicts:
            first = conflicts[0]
            raise SotError(f"{len(conflicts)} object(s) in the way that railforge does not own (no tag "
                           f"{self.tag}), first: {first.cls} {first.key}: {first.detail}; rename or tag them")
        updates = [c for c in result.changes if c.kind == "update"]
        if updates and not apply_changes:
            raise Refused(updates, self.tag)
        if dry_run:
            return result
        self._apply(want, state, result, apply_changes)
        return result

    def drift(self, want: Desired) -> list[Change]:
        """What differs between the plan and NetBox: an owned object missing (deleted, or never pushed) is
        `missing`, a changed one `update`, a foreign one in the way `conflict`."""
        if not self.has_site(want):
            return [Change("missing", "site", want.site, "not in NetBox: run `railforge sot push`")]
        changes = compare(want, self.read_state(want))
        return [Change("missing", c.cls, c.key, c.detail) if c.kind == "create" else c for c in changes]

    def _apply_updates(self, want: Desired, st: State, result: PushResult) -> None:
        """Owned objects back to the plan: devices moved back to their rack and U, re-terminated cables
        deleted and made again as planned."""
        patches = [{"id": st.devices[d.name].id, "rack": st.racks[d.rack].id, "position": d.position}
                   for d in want.devices if d.name in st.devices and device_differs(d, st.devices[d.name])]
        self._update(self.api.dcim.devices, "devices", patches, result)
        stale = [st.cables.pop(c.label) for c in want.cables
                 if c.label in st.cables and st.cable_ends(st.cables[c.label]) != planned_ends(c)]
        if stale:
            self.api.dcim.cables.delete(stale)
            self._apply(want, st, result, apply_changes=False)
        self._update_bgp(want, st, result)
        planned = set(want.asns)
        for n in sorted(n for n, rec in st.asns.items() if n not in planned and rec is not None and st.owned(rec)):
            try:
                st.asns.pop(n).delete()
            except self.RequestError as e:
                raise SotError(f"deleting ASN {n}: {self._api_error(e)}{RESUME}") from None
            result.updated["ASNs removed"] = result.updated.get("ASNs removed", 0) + 1

    def _update_bgp(self, want: Desired, st: State, result: PushResult) -> None:
        """Owned per-device BGP objects back to the plan, where the product has them (Nautobot's BGP app)."""

    def _api_error(self, e: Exception) -> str:
        status = getattr(getattr(e, "req", None), "status_code", "?")
        if status in (401, 403):
            return (f"{self.product} refused the token (HTTP {status}): check --token-file / "
                    f"RAILFORGE_{self.product.upper()}_TOKEN")
        body = str(getattr(e, "error", "") or e)
        return f"{self.product} answered HTTP {status}: {body[:300]}"


class Refused(SotError):
    def __init__(self, changes: list[Change], tag: str):
        self.changes = changes
        first = changes[0]
        super().__init__(f"{len(changes)} object(s) railforge owns (tag {tag}) differ from the plan, first: "
                         f"{first.cls} {first.key}: {first.detail}. A push only adds; run `railforge sot diff` to "
                         f"see them all, and `sot push --apply-changes` to make the source of truth follow the plan")


@dataclass(slots=True)
class State:
    """The owned and in-the-way objects of one cluster, indexed by natural key."""

    site: object | None
    manufacturers: dict = field(default_factory=dict)
    roles: dict = field(default_factory=dict)
    device_types: dict = field(default_factory=dict)
    racks: dict = field(default_factory=dict)
    devices: dict = field(default_factory=dict)
    interfaces: dict = field(default_factory=dict)
    cables: dict = field(default_factory=dict)
    prefixes: dict = field(default_factory=dict)
    addresses: dict = field(default_factory=dict)
    asns: dict = field(default_factory=dict)
    bgp: dict | None = None
    """device -> (record, its ASN, its router ID address), or None where the product ties no ASN to a device."""
    vlans: dict = field(default_factory=dict)
    rir: object | None = None
    owned: Callable = lambda rec: False
    cable_ends: Callable = lambda rec: ((), ())

def rack_name(rec) -> str | None:
    """The rack a device record stands in: an adapter may have resolved it already (`rack_name`)."""
    resolved = getattr(rec, "rack_name", None)
    if resolved is not None:
        return resolved
    return getattr(rec.rack, "name", None) if rec.rack else None


def device_differs(d, rec) -> bool:
    return rack_name(rec) != d.rack or rec.position != d.position


def planned_ends(c) -> tuple:
    return ((c.a_device, c.a_port),), ((c.b_device, c.b_port),)


def compare(want: Desired, st: State) -> list[Change]:
    """Every difference between the plan and the source of truth, by the plan's names."""
    out: list[Change] = []

    def owned_or_conflict(cls: str, key: str, rec) -> bool:
        if st.owned(rec):
            return True
        out.append(Change("conflict", cls, key, "exists without railforge's tag"))
        return False

    if st.site is not None and not st.owned(st.site):
        out.append(Change("conflict", "site", want.site, "exists without railforge's tag"))
    for d in want.devices:
        rec = st.devices.get(d.name)
        if rec is None:
            out.append(Change("create", "device", d.name))
        elif owned_or_conflict("device", d.name, rec) and device_differs(d, rec):
            where = f"{rack_name(rec) or 'no rack'} U{rec.position}"
            out.append(Change("update", "device", d.name, f"at {where}, planned {d.rack} U{d.position}"))
    for r in want.racks:
        rec = st.racks.get(r.name)
        if rec is None:
            out.append(Change("create", "rack", r.name))
        elif owned_or_conflict("rack", r.name, rec) and rec.u_height != r.u_height:
            out.append(Change("update", "rack", r.name, f"{rec.u_height}U, planned {r.u_height}U"))
    for i in want.interfaces:
        rec = st.interfaces.get((i.device, i.name))
        if rec is None:
            out.append(Change("create", "interface", f"{i.device}:{i.name}"))
    for c in want.cables:
        rec = st.cables.get(c.label)
        if rec is None:
            out.append(Change("create", "cable", c.label))
        elif owned_or_conflict("cable", c.label, rec):
            have = st.cable_ends(rec)
            if have != planned_ends(c):
                out.append(Change("update", "cable", c.label,
                                  f"terminates {_ends_text(have)}, planned {c.a_device}:{c.a_port} - "
                                  f"{c.b_device}:{c.b_port}"))
    addressed = {}
    for dev, ifname, address in st.addresses:
        addressed.setdefault(address, (dev, ifname))
    for a in want.addresses:
        if (a.device, a.interface, a.address) not in st.addresses:
            moved = addressed.get(a.address)
            if moved:
                out.append(Change("update", "IP address", a.address,
                                  f"on {moved[0]}:{moved[1]}, planned {a.device}:{a.interface}"))
            else:
                out.append(Change("create", "IP address", a.address))
    planned_addr = {a.address for a in want.addresses}
    for (dev, ifname, address) in st.addresses:
        if address not in planned_addr:
            out.append(Change("update", "IP address", address, f"on {dev}:{ifname}, not in the plan"))
    for p in want.prefixes:
        if p.prefix not in st.prefixes:
            out.append(Change("create", "prefix", p.prefix))
    for n in want.asns:
        if n not in st.asns:
            out.append(Change("create", "ASN", str(n)))
    planned_asns = set(want.asns)
    for n, rec in sorted(st.asns.items()):
        if n not in planned_asns and rec is not None and st.owned(rec):
            out.append(Change("update", "ASN", str(n), "railforge's, not in the plan"))
    for b in want.bgp if st.bgp is not None else ():
        have = st.bgp.get(b.device)
        if have is None:
            out.append(Change("create", "BGP instance", b.device))
        elif owned_or_conflict("BGP instance", b.device, have[0]) and have[1:] != (b.asn, b.router_id):
            out.append(Change("update", "BGP instance", b.device, f"AS {have[1]} router ID {have[2]}, planned "
                                                                   f"AS {b.asn} router ID {b.router_id}"))
    for v in want.vlans:
        if v.vid not in st.vlans:
            out.append(Change("create", "VLAN", str(v.vid)))
    return out


def _ends_text(ends: tuple) -> str:
    return " - ".join(",".join(f"{d}:{p}" for d, p in side) or "nothing" for side in ends)


def net_error(e: requests.RequestException) -> str:
    return f"no answer from NetBox ({e.__class__.__name__})"


def _with_timeout(request, timeout_s: float):
    def call(method, url, **kw):
        kw.setdefault("timeout", timeout_s)
        return request(method, url, **kw)
    return call
