"""What pushing a plan into a source of truth means, whatever the product: match by natural key, create what is
missing with the owner tag in the same request, refuse to change what railforge owns unless asked, never touch
what it does not own, and report every difference by the plan's names, field by field.

The product adapters (`netbox.py`, `nautobot.py`) describe each object class as a `Kind`: where it lives in the
API, its natural key, and the fields railforge sets (each with the plan's value). The rules and the comparison
live here, so both products obey the same ones and `diff` compares every field `push` writes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from railforge.render.netbox import slug
from railforge.sot.desired import Desired
from railforge.sot.rest import RESUME, Rest, SotError

__all__ = ["RESUME", "WRITTEN_NOT_COMPARED", "Change", "Client", "Field", "Kind", "Live", "PushResult", "Refused",
           "SotError", "State", "compare", "owner_tag"]


_KEY = "the natural key: an object whose key changes reads as the planned one missing and an unexpected one"
_SCOPE = "the plan's scope: an object moved out of it reads as missing"
WRITTEN_NOT_COMPARED: dict[str | tuple[str, str], str] = {
    "tags": "the owner tag: read back to decide whether railforge owns the object",
    "name": _KEY, "model": _KEY, "label": _KEY, "prefix": _KEY, "address": _KEY, "vid": _KEY, "asn": _KEY,
    ("RIR", "slug"): _KEY, ("BGP instance", "device"): _KEY, ("IP assignment", "ip_address"): _KEY,
    ("IP assignment", "interface"): _KEY,
    "site": _SCOPE, "location": _SCOPE, "namespace": _SCOPE,
    ("site", "description"): "the GPU count: growth changes it, and growth only adds",
    ("location", "description"): "the GPU count: growth changes it, and growth only adds",
    ("role", "color"): "Nautobot's roles carry no tags: railforge cannot own one, so it uses one as it finds it",
    ("role", "content_types"): "Nautobot's roles carry no tags: railforge cannot own one",
    ("location type", "content_types"): "Nautobot's location types carry no tags: railforge cannot own one",
}
"""Every key a push writes that is not a compared `Field`, and why (`tests/sot/test_sot_compare.py` fails on a
written key that is neither): by name, or by (class, name) where only one class writes it."""


def plural(cls: str) -> str:
    return cls + ("es" if cls.endswith(("x", "s")) else "s")


def owner_tag(cluster: str) -> str:
    return f"railforge-{slug(cluster)}"


@dataclass(frozen=True, slots=True)
class Field:
    """One field railforge sets on an object class: its name in the product's API and the plan's value, as
    compared (a reference compares by the referred object's key, and is written as its id)."""

    api: str
    want: Callable[[Any], Any]
    ref: str | None = None
    """The class a reference points to."""
    ref_key: Callable[[Any], Any] | None = None
    """The referred object's key, where it is not the compared value (a LAG is compared by name, found by device
    and name)."""
    write: Callable[[Any, State], dict] | None = None
    """The request body fragment, where it is not `{api: value}`."""
    recreate: bool = False
    """A difference is put right by deleting the object and making it again (a cable's terminations)."""


@dataclass(frozen=True, slots=True)
class Kind:
    """An object class as railforge writes it: `records(want)` are the plan's, `key` their natural key."""

    cls: str
    path: str
    records: Callable[[Desired], list]
    key: Callable[[Any], Any]
    fields: tuple[Field, ...] = ()
    scoped: bool = True
    """Objects in the plan's scope that the plan does not know are `unexpected` (not for shared catalogs)."""
    shared: bool = False
    """An object with a planned key that railforge does not own is used as it is, not in the way (manufacturers,
    device types, a private ASN another cluster holds)."""
    group: Callable[[Any], Any] | None = None
    """Records of one group go in one bulk request (see Rest.create)."""
    wave: Callable[[Any], int] = lambda rec: 0
    """Creation order within the class (a LAG before its members)."""
    delete_last: bool = False
    """Owned objects the plan does not know are deleted after the others are put right (an AS that routing
    instances point at until they are re-pointed)."""
    extra: Callable[[Any, State], dict] = lambda rec, st: {}
    """Body fields that are not compared (the owner tag, the scope, and the site's description: its GPU count
    changes when the plan grows, and growth only adds)."""
    show: Callable[[Any], str] = lambda key: key if isinstance(key, str) else ":".join(map(str, key)) \
        if isinstance(key, tuple) else str(key)


@dataclass(slots=True)
class Live:
    """One object read back: its id, whether railforge owns it, and its owned fields as compared."""

    id: Any
    owned: bool
    values: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class State:
    """What the source of truth holds in the plan's scope, by class and natural key."""

    objects: dict[str, dict[Any, Live]] = field(default_factory=dict)

    def of(self, cls: str) -> dict[Any, Live]:
        return self.objects.setdefault(cls, {})

    def id(self, cls: str, key: Any) -> Any:
        if key is None:
            return None
        live = self.objects.get(cls, {}).get(key)
        if live is None:
            raise SotError(f"{cls} {key} is not in the source of truth and the plan cannot make it{RESUME}")
        return live.id

    def keys(self, cls: str) -> dict[Any, Any]:
        """id -> natural key, for reading references back."""
        return {live.id: key for key, live in self.objects.get(cls, {}).items()}


@dataclass(slots=True)
class Change:
    kind: str  # create | update | conflict | unexpected | missing
    cls: str
    key: str
    detail: str = ""
    field: str = ""
    have: Any = None
    want: Any = None
    owned: bool = True


@dataclass(slots=True)
class PushResult:
    created: dict[str, int] = field(default_factory=dict)
    updated: dict[str, int] = field(default_factory=dict)
    deleted: dict[str, int] = field(default_factory=dict)
    changes: list[Change] = field(default_factory=list)

    @property
    def writes(self) -> int:
        return sum(self.created.values()) + sum(self.updated.values()) + sum(self.deleted.values())


class Refused(SotError):
    def __init__(self, changes: list[Change], tag: str):
        self.changes = changes
        first = changes[0]
        super().__init__(f"{len(changes)} difference(s) in objects railforge owns (tag {tag}), first: "
                         f"{first.cls} {first.key}: {first.detail}. A push only adds; run `railforge sot diff` to "
                         f"see them all, and `sot push --apply-changes` to make the source of truth follow the plan")


def _text(value: Any) -> str:
    if value is None or value == "":
        return "(none)"
    if isinstance(value, tuple) and value and isinstance(value[0], tuple):
        return " - ".join(":".join(map(str, end)) for end in value)
    if isinstance(value, tuple):
        return ":".join(map(str, value))
    return str(value)


def compare(kinds: list[Kind], want: Desired, st: State) -> list[Change]:
    """Every difference between the plan and the source of truth, by the plan's names: `create` (planned, not
    there), `update` (one per owned field that differs, live and planned value side by side), `conflict` (a
    planned key held by an object railforge does not own), `unexpected` (in the plan's scope, not in the plan)."""
    out: list[Change] = []
    for kind in kinds:
        have = st.objects.get(kind.cls, {})
        planned = set()
        for rec in kind.records(want):
            key = kind.key(rec)
            planned.add(key)
            live = have.get(key)
            name = kind.show(key)
            if live is None:
                out.append(Change("create", kind.cls, name))
            elif not live.owned:
                if not kind.shared:
                    out.append(Change("conflict", kind.cls, name, "exists without railforge's tag", owned=False))
            else:
                for f in kind.fields:
                    planned_value, live_value = f.want(rec), live.values.get(f.api)
                    if planned_value != live_value:
                        out.append(Change("update", kind.cls, name,
                                          f"{f.api} {_text(live_value)}, planned {_text(planned_value)}",
                                          f.api, live_value, planned_value))
        if kind.scoped:
            for key, live in have.items():
                if key not in planned:
                    out.append(Change("unexpected", kind.cls, kind.show(key),
                                      "railforge's tag, not in the plan" if live.owned else
                                      "in the plan's scope, not in the plan (not railforge's)", owned=live.owned))
    return out


class Client:
    """One source-of-truth instance, one cluster: the owner tag scopes every read and marks every write.
    Adapters set `product`, make `self.rest`, and implement check, has_site, kinds, prepare (the tag and what
    every read needs) and read_state."""

    product = "source of truth"

    def __init__(self, url: str, token: str, cluster: str, workers: int = 4, timeout_s: float = 900.0):
        self.api = self.connect(url, token)
        self.cluster = cluster
        self.tag = owner_tag(cluster)
        self.workers = workers
        self.timeout_s = timeout_s
        self.rest = self.make_rest()
        self.notes: list[str] = []
        """What the push or diff left out and why (said on stderr, not an error)."""

    def connect(self, url: str, token: str):  # pragma: no cover - adapters
        raise NotImplementedError

    def make_rest(self) -> Rest:  # pragma: no cover - adapters
        raise NotImplementedError

    def kinds(self) -> list[Kind]:  # pragma: no cover - adapters
        raise NotImplementedError

    def prepare(self) -> None:
        """The owner tag exists and what every read needs is known."""

    def read_state(self, want: Desired) -> State:  # pragma: no cover - adapters
        raise NotImplementedError

    def after_create(self, kind: Kind, made: list[dict], result: PushResult) -> None:
        """A product's fix-up after a bulk create (Nautobot drops a new cable's tags)."""

    # -- the push ------------------------------------------------------------------------------------------------

    def push(self, want: Desired, apply_changes: bool = False, dry_run: bool = False) -> PushResult:
        """Create what is missing; put owned objects that differ back to the plan only if `apply_changes`."""
        result = PushResult()
        self.prepare()
        st = self.read_state(want)
        kinds = self.kinds()
        result.changes = compare(kinds, want, st)
        conflicts = [c for c in result.changes if c.kind == "conflict"]
        if conflicts:
            first = conflicts[0]
            raise SotError(f"{len(conflicts)} object(s) in the way that railforge does not own (no tag "
                           f"{self.tag}), first: {first.cls} {first.key}: {first.detail}; rename or tag them")
        owned = [c for c in result.changes if c.kind == "update" or (c.kind == "unexpected" and c.owned)]
        if owned and not apply_changes:
            raise Refused(owned, self.tag)
        foreign = sum(1 for c in result.changes if c.kind == "unexpected" and not c.owned)
        if foreign:
            self.notes.append(f"{foreign} object(s) in the plan's scope that railforge does not own and the plan "
                              f"does not know: left alone (`sot diff` lists them)")
        if dry_run:
            return result
        if apply_changes:
            self._delete([k for k in kinds if not k.delete_last], want, st, result)
        self._create(kinds, want, st, result)
        if apply_changes:
            self._patch(kinds, want, st, result)
            self._delete([k for k in kinds if k.delete_last], want, st, result)
        return result

    def drift(self, want: Desired) -> list[Change]:
        """What differs between the plan and the source of truth: an owned object missing (deleted, or never
        pushed) is `missing`; changed fields `update`; a foreign object in the way `conflict`; objects in scope the
        plan does not know `unexpected`."""
        self.prepare()
        if not self.has_site(want):
            return [Change("missing", "site", want.site, f"not in {self.product}: run `railforge sot push`")]
        changes = compare(self.kinds(), want, self.read_state(want))
        for c in changes:
            if c.kind == "create":
                c.kind, c.detail = "missing", "planned, not there"
        return changes

    def _create(self, kinds: list[Kind], want: Desired, st: State, result: PushResult) -> None:
        for kind in kinds:
            have = st.of(kind.cls)
            missing = [rec for rec in kind.records(want) if kind.key(rec) not in have]
            for wave in sorted({kind.wave(rec) for rec in missing}):
                batch = [rec for rec in missing if kind.wave(rec) == wave]
                bodies = [self.body(kind, rec, st) for rec in batch]
                groups = [kind.group(rec) for rec in batch] if kind.group else None
                made = self.rest.create(kind.path, plural(kind.cls), bodies, groups)
                for rec, answer in zip(batch, made, strict=True):
                    have[kind.key(rec)] = Live(answer["id"], True, {f.api: f.want(rec) for f in kind.fields})
                self.after_create(kind, made, result)
                if made:
                    result.created[plural(kind.cls)] = result.created.get(plural(kind.cls), 0) + len(made)

    def body(self, kind: Kind, rec: Any, st: State) -> dict:
        out = kind.extra(rec, st)
        for f in kind.fields:
            if f.write is not None:
                out.update(f.write(rec, st))
            elif f.ref is not None:
                out[f.api] = st.id(f.ref, (f.ref_key or f.want)(rec))
            else:
                out[f.api] = f.want(rec)
        return out

    def _delete(self, kinds: list[Kind], want: Desired, st: State, result: PushResult) -> None:
        """Owned objects the plan does not know, and owned objects whose difference is put right by making them
        again, deleted: the last class first (addresses before interfaces, cables before their ports)."""
        for kind in reversed(kinds):
            have = st.of(kind.cls)
            records = kind.records(want)
            stale = [kind.key(rec) for rec in records if (live := have.get(kind.key(rec))) is not None and live.owned
                     and any(f.recreate and f.want(rec) != live.values.get(f.api) for f in kind.fields)]
            if kind.scoped:
                planned = {kind.key(rec) for rec in records}
                stale += [key for key, live in have.items() if live.owned and key not in planned]
            if not stale:
                continue
            self.rest.delete(kind.path, plural(kind.cls), [have[key].id for key in stale])
            for key in stale:
                del have[key]
            result.deleted[plural(kind.cls)] = result.deleted.get(plural(kind.cls), 0) + len(stale)

    def _patch(self, kinds: list[Kind], want: Desired, st: State, result: PushResult) -> None:
        for kind in kinds:
            have = st.of(kind.cls)
            patches = []
            for rec in kind.records(want):
                live = have.get(kind.key(rec))
                if live is None or not live.owned:
                    continue
                differ = [f for f in kind.fields if f.want(rec) != live.values.get(f.api) and not f.recreate]
                if not differ:
                    continue
                body = {"id": live.id}
                for f in differ:
                    if f.write is not None:
                        body.update(f.write(rec, st))
                    elif f.ref is not None:
                        body[f.api] = st.id(f.ref, (f.ref_key or f.want)(rec))
                    else:
                        body[f.api] = f.want(rec)
                    live.values[f.api] = f.want(rec)
                patches.append(body)
            if patches:
                self.rest.update(kind.path, plural(kind.cls), patches)
                result.updated[plural(kind.cls)] = result.updated.get(plural(kind.cls), 0) + len(patches)

    def has_site(self, want: Desired) -> bool:  # pragma: no cover - adapters
        raise NotImplementedError
