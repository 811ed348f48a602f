"""Push a plan into NetBox and read it back (pynetbox over NetBox's REST API).

Objects are matched by their natural keys (slug, name, cable label, address), never by id, so a push that was
interrupted is resumed by running it again. Every object railforge creates carries the cluster's owner tag in
the same request that creates it: nothing is ever left half-owned. A push only creates: an owned object whose
fields differ from the plan is a change (a renumbering, a re-termination, a hand edit) and is refused unless the
caller asks for it, the same rule `railforge build` applies to renumbering; an object in the way that railforge
does not own is never touched.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import pynetbox
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


class NetBox:
    """One NetBox instance, one cluster: the owner tag scopes every read and marks every write."""

    def __init__(self, url: str, token: str, cluster: str, workers: int = 4, timeout_s: float = 300.0):
        session = requests.Session()
        session.request = _with_timeout(session.request, timeout_s)
        self.api = pynetbox.api(url, token=token)
        self.api.http_session = session
        self.cluster = cluster
        self.tag = owner_tag(cluster)
        self.workers = workers

    def check(self) -> str:
        """NetBox's version; a clear error for a wrong URL or token."""
        try:
            status = self.api.status()
            self.api.dcim.sites.count()
        except pynetbox.RequestError as e:
            raise SotError(_api_error(e)) from None
        except requests.RequestException as e:
            raise SotError(f"cannot reach NetBox at {self.api.base_url}: {e.__class__.__name__}") from None
        return str(status.get("netbox-version", "unknown"))

    # -- reads ---------------------------------------------------------------------------------------------------

    def _all(self, endpoint, **filters) -> list:
        try:
            return list(endpoint.filter(**filters, limit=1000))
        except pynetbox.RequestError as e:
            raise SotError(_api_error(e)) from None
        except requests.RequestException as e:
            raise SotError(f"reading {endpoint.name}: {_net_error(e)}") from None

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
            except pynetbox.RequestError as e:
                raise SotError(f"creating {cls}: {_api_error(e)}{RESUME}") from None
            except requests.RequestException as e:
                raise SotError(f"creating {cls}: {_net_error(e)}{RESUME}") from None

        with ThreadPoolExecutor(self.workers) as pool:
            made = [r for batch in pool.map(post, chunks) for r in batch]
        result.created[cls] = result.created.get(cls, 0) + len(made)
        return made

    def _update(self, endpoint, cls: str, patches: list[dict], result: PushResult) -> None:
        for i in range(0, len(patches), CHUNK):
            try:
                endpoint.update(patches[i:i + CHUNK])
            except pynetbox.RequestError as e:
                raise SotError(f"updating {cls}: {_api_error(e)}{RESUME}") from None
            except requests.RequestException as e:
                raise SotError(f"updating {cls}: {_net_error(e)}{RESUME}") from None
        if patches:
            result.updated[cls] = result.updated.get(cls, 0) + len(patches)

    # -- the push ------------------------------------------------------------------------------------------------

    def push(self, want: Desired, apply_changes: bool = False, dry_run: bool = False) -> PushResult:
        """Create what is missing; update owned objects that differ only if `apply_changes`."""
        result = PushResult()
        self._ensure_tag()
        state = State.read(self, want)
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
        site = self.api.dcim.sites.get(slug=slug(want.site))
        if site is None:
            return [Change("missing", "site", want.site, "not in NetBox: run `railforge sot push`")]
        changes = compare(want, State.read(self, want))
        return [Change("missing", c.cls, c.key, c.detail) if c.kind == "create" else c for c in changes]

    def _ensure_tag(self) -> None:
        if not self.api.extras.tags.get(slug=self.tag):
            try:
                self.api.extras.tags.create(name=f"railforge:{self.cluster}"[:100], slug=self.tag,
                                            color="76b900", description="created and owned by railforge")
            except pynetbox.RequestError as e:
                raise SotError(_api_error(e)) from None

    def _apply(self, want: Desired, st: State, result: PushResult, apply_changes: bool) -> None:
        api = self.api
        if st.site is None:
            st.site = self._create(api.dcim.sites, "sites", [{"name": want.site, "slug": slug(want.site),
                                                               "status": "planned",
                                                               "description": want.site_description}], result)[0]
        site_id = st.site.id
        made = self._create(api.dcim.manufacturers, "manufacturers",
                            [{"name": m, "slug": slug(m)} for m in want.manufacturers if m not in st.manufacturers],
                            result)
        st.manufacturers.update({r.name: r for r in made})
        made = self._create(api.dcim.device_roles, "device roles",
                            [{"name": r, "slug": slug(r), "color": c} for r, c in want.roles.items()
                             if r not in st.roles], result)
        st.roles.update({r.name: r for r in made})
        made = self._create(api.dcim.device_types, "device types",
                            [{"manufacturer": st.manufacturers[t.manufacturer].id, "model": t.model,
                              "slug": slug(t.model), "u_height": t.u_height, "is_full_depth": True}
                             for t in want.device_types if t.model not in st.device_types], result)
        st.device_types.update({r.model: r for r in made})
        made = self._create(api.dcim.racks, "racks",
                            [{"site": site_id, "name": r.name, "status": "planned", "width": 19,
                              "u_height": r.u_height, "description": r.description}
                             for r in want.racks if r.name not in st.racks], result)
        st.racks.update({r.name: r for r in made})
        made = self._create(api.dcim.devices, "devices",
                            [{"name": d.name, "role": st.roles[d.role].id,
                              "device_type": st.device_types[d.model].id, "site": site_id,
                              "rack": st.racks[d.rack].id, "position": d.position, "face": "front",
                              "status": "planned", "description": d.description}
                             for d in want.devices if d.name not in st.devices], result)
        st.devices.update({r.name: r for r in made})
        # LAGs first: members name them as their `lag`, sub-interfaces name their parent
        for wave in (lambda i: i.type == "lag", lambda i: i.type != "lag" and not i.lag and not i.parent,
                     lambda i: bool(i.lag or i.parent)):
            made = self._create(api.dcim.interfaces, "interfaces",
                                [self._interface(i, st) for i in want.interfaces
                                 if wave(i) and (i.device, i.name) not in st.interfaces], result)
            st.interfaces.update({(r.device.name, r.name): r for r in made})
        self._create(api.dcim.cables, "cables",
                     [{"a_terminations": [{"object_type": "dcim.interface",
                                           "object_id": st.interfaces[(c.a_device, c.a_port)].id}],
                       "b_terminations": [{"object_type": "dcim.interface",
                                           "object_id": st.interfaces[(c.b_device, c.b_port)].id}],
                       "type": c.type, "status": "planned", "label": c.label, "color": c.colour,
                       "length": c.length_m, "length_unit": "m", "description": c.description}
                      for c in want.cables if c.label not in st.cables], result)
        self._create(api.ipam.prefixes, "prefixes",
                     [{"prefix": p.prefix, "status": "reserved", "description": p.description}
                      for p in want.prefixes if p.prefix not in st.prefixes], result)
        self._create(api.ipam.ip_addresses, "IP addresses",
                     [{"address": a.address, "status": "active", "assigned_object_type": "dcim.interface",
                       "assigned_object_id": st.interfaces[(a.device, a.interface)].id, "role": a.role or None,
                       "description": f"{a.device} {a.interface} {a.description}"}
                      for a in want.addresses if (a.device, a.interface, a.address) not in st.addresses], result)
        if want.asns and st.rir is None:
            st.rir = self._create(api.ipam.rirs, "RIRs", [{"name": f"railforge {self.cluster}"[:100],
                                                            "slug": self.tag, "is_private": True}], result)[0]
        self._create(api.ipam.asns, "ASNs", [{"asn": n, "rir": st.rir.id, "description": self.cluster}
                                             for n in want.asns if n not in st.asns], result)
        self._create(api.ipam.vlans, "VLANs", [{"vid": v.vid, "name": v.name, "status": "active"}
                                               for v in want.vlans if v.vid not in st.vlans], result)
        if apply_changes:
            self._apply_updates(want, st, result)

    def _interface(self, i, st: State) -> dict:
        body = {"device": st.devices[i.device].id, "name": i.name, "type": i.type, "mgmt_only": i.mgmt_only,
                "label": i.label, "description": i.description}
        if i.speed_kbps:
            body["speed"] = i.speed_kbps
        if i.lag:
            body["lag"] = st.interfaces[(i.device, i.lag)].id
        if i.parent:
            body["parent"] = st.interfaces[(i.device, i.parent)].id
        return body

    def _apply_updates(self, want: Desired, st: State, result: PushResult) -> None:
        patches = [{"id": st.devices[d.name].id, "rack": st.racks[d.rack].id, "position": d.position}
                   for d in want.devices if d.name in st.devices and _device_differs(d, st.devices[d.name])]
        self._update(self.api.dcim.devices, "devices", patches, result)
        stale = [st.cables.pop(c.label) for c in want.cables
                 if c.label in st.cables and _cable_ends(st.cables[c.label]) != _planned_ends(c)]
        if stale:
            self.api.dcim.cables.delete(stale)
            self._apply(want, st, result, apply_changes=False)


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
    vlans: dict = field(default_factory=dict)
    rir: object | None = None
    owned: Callable = lambda rec: False

    @classmethod
    def read(cls, nb: NetBox, want: Desired) -> State:
        api = nb.api
        site = api.dcim.sites.get(slug=slug(want.site))
        st = cls(site, owned=nb._owned)
        st.manufacturers = {r.name: r for r in nb._all(api.dcim.manufacturers)
                            if r.name in set(want.manufacturers)}
        st.roles = {r.name: r for r in nb._all(api.dcim.device_roles) if r.name in want.roles}
        models = {t.model for t in want.device_types}
        st.device_types = {r.model: r for r in nb._all(api.dcim.device_types) if r.model in models}
        st.rir = api.ipam.rirs.get(slug=nb.tag)
        wanted_devices = {d.name for d in want.devices}
        st.devices = {r.name: r for r in _by_names(nb, api.dcim.devices, wanted_devices)}
        st.prefixes = {r.prefix: r for r in nb._all(api.ipam.prefixes, tag=nb.tag)}
        st.asns = {r.asn: r for r in nb._all(api.ipam.asns, tag=nb.tag)}
        st.vlans = {r.vid: r for r in nb._all(api.ipam.vlans, tag=nb.tag)}
        if site is not None:
            st.racks = {r.name: r for r in nb._all(api.dcim.racks, site_id=site.id)}
            st.interfaces = {(r.device.name, r.name): r for r in nb._all(api.dcim.interfaces, site_id=site.id)}
            st.cables = {r.label: r for r in nb._all(api.dcim.cables, site_id=site.id) if r.label}
            st.addresses = {(r.assigned_object.device.name, r.assigned_object.name, r.address): r
                            for r in nb._all(api.ipam.ip_addresses, tag=nb.tag) if r.assigned_object}
        return st


def _by_names(nb: NetBox, endpoint, names: set[str]) -> Iterable:
    """Devices by name, whatever site they are in (a device moved to another site is drift, not a new one)."""
    found = []
    ordered = sorted(names)
    for i in range(0, len(ordered), 100):
        found.extend(nb._all(endpoint, name=ordered[i:i + 100]))
    return found


def _device_differs(d, rec) -> bool:
    return (rec.rack is None or rec.rack.name != d.rack) or rec.position != d.position


def _cable_ends(rec) -> tuple:
    def end(terms):
        return tuple(sorted((t.object.device.name, t.object.name) for t in terms
                            if getattr(t, "object", None) is not None and hasattr(t.object, "device")))
    return end(rec.a_terminations or []), end(rec.b_terminations or [])


def _planned_ends(c) -> tuple:
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
        elif owned_or_conflict("device", d.name, rec) and _device_differs(d, rec):
            where = f"{rec.rack.name if rec.rack else 'no rack'} U{rec.position}"
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
            have = _cable_ends(rec)
            if have != _planned_ends(c):
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
    for v in want.vlans:
        if v.vid not in st.vlans:
            out.append(Change("create", "VLAN", str(v.vid)))
    return out


def _ends_text(ends: tuple) -> str:
    return " - ".join(",".join(f"{d}:{p}" for d, p in side) or "nothing" for side in ends)


def _api_error(e: pynetbox.RequestError) -> str:
    status = getattr(e.req, "status_code", "?")
    if status in (401, 403):
        return f"NetBox refused the token (HTTP {status}): check --token / RAILFORGE_NETBOX_TOKEN"
    body = str(getattr(e, "error", "") or e)
    return f"NetBox answered HTTP {status}: {body[:300]}"


def _net_error(e: requests.RequestException) -> str:
    return f"no answer from NetBox ({e.__class__.__name__})"


def _with_timeout(request, timeout_s: float):
    def call(method, url, **kw):
        kw.setdefault("timeout", timeout_s)
        return request(method, url, **kw)
    return call
