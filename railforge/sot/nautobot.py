"""Push a plan into Nautobot and read it back over Nautobot's REST API (the rules are in sync.py).

Nautobot models what NetBox calls a site as a Location (of a location type railforge creates), gives every
object a Status object, needs a parent prefix for every IP address (so the network of each planned address is
added beside the pools) and assigns addresses to interfaces through its own IP-to-interface objects. Its core has
no ASN model: ASNs go to the Nautobot app `nautobot-bgp-models` (Network to Code's, on PyPI) where it is
installed, as AutonomousSystem objects and one BGP routing instance per switch (its ASN, its loopback as router
ID). Without the app ASNs are left out and the push says so (the devices' comments still carry them).

Two clusters in one Nautobot: every cluster has its own Location, its own IPAM Namespace `railforge-<cluster>`
(Nautobot keeps prefixes and addresses unique per namespace, so private address plans may repeat between
clusters) and its own tag. AutonomousSystem numbers are unique in the app, so a private ASN another cluster (or a
person) already holds is used by this cluster's routing instances as it is: never changed, never deleted.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from ipaddress import ip_interface
from typing import Any

import pynautobot
import requests

from railforge.sot.desired import ACTIVE, Desired, Prefix
from railforge.sot.rest import Rest, SotError
from railforge.sot.sync import Client, Field, Kind, Live, PushResult, State

BGP_APP = "nautobot-bgp-models"
BGP_TYPES = ["nautobot_bgp_models.autonomoussystem", "nautobot_bgp_models.bgproutinginstance"]
CONTENT_TYPES = ["dcim.location", "dcim.devicetype", "dcim.rack", "dcim.device", "dcim.interface", "dcim.cable",
                 "ipam.namespace", "ipam.prefix", "ipam.ipaddress", "ipam.vlan"]
LOCATION_TYPE = "railforge site"
GRAPHQL = {"device": ("devices", ("name",)), "interface": ("interfaces", ("name", "device { id }")),
           "cable": ("cables", ("label", "terminations { cable_end interface { id } }")),
           "prefix": ("prefixes", ("prefix",)), "IP address": ("ip_addresses", ("address",)),
           "IP assignment": ("ip_address_assignments", ("ip_address { id }", "interface { id }"))}
"""The classes read through GraphQL (99 % of the 16K example's objects): their list query and what their natural
key needs beside the compared fields."""
GRAPHQL_IDS = 1000
"""IP addresses per IP-assignment query."""


def _id(ref: Any) -> Any:
    """The UUID of a related object, as Nautobot answers it at depth 0 (`{"id": …, "object_type": …}`)."""
    return ref.get("id") if isinstance(ref, dict) else ref


def _value(raw: Any) -> Any:
    return raw.get("value") if isinstance(raw, dict) and "value" in raw else raw


class Nautobot(Client):
    product = "Nautobot"

    def connect(self, url: str, token: str):
        self.url, self.token = url, token
        return pynautobot.api(url, token=token)

    def make_rest(self) -> Rest:
        session = requests.Session()
        session.headers.update({"Authorization": f"Token {self.token}", "Accept": "application/json"})
        return Rest(session, self.url, self.product, self.workers, cursor=False, timeout_s=self.timeout_s)

    def check(self) -> str:
        try:
            status = self.api.status()
        except pynautobot.RequestError as e:
            raise SotError(self.rest.answer_error(e.req)) from None
        except requests.RequestException as e:
            raise SotError(f"cannot reach Nautobot at {self.api.base_url}: {e.__class__.__name__}") from None
        self.rest.page("dcim/locations", limit=1)
        return str(status.get("nautobot-version", "unknown"))

    def has_site(self, want: Desired) -> bool:
        return bool(self.rest.page("dcim/locations", name=want.site, limit=1)["results"])

    def _has_bgp_app(self) -> bool:
        try:
            self.rest.page("plugins/bgp/autonomous-systems", limit=1)
        except SotError as e:
            if "HTTP 404" in str(e):
                return False
            raise
        return True

    def prepare(self) -> None:
        """The owner tag (with every content type railforge tags), the statuses, and whether the BGP app is
        there."""
        self.bgp_app = self._has_bgp_app()
        if not self.bgp_app:
            self.notes = [f"Nautobot has no {BGP_APP} app (its core has no ASN model): ASNs and BGP routing "
                          f"instances are not pushed or compared"]
        types = CONTENT_TYPES + (BGP_TYPES if self.bgp_app else [])
        found = self.rest.page("extras/tags", name=self.tag)["results"]
        if not found:
            tag = self.rest.request("POST", "extras/tags", "creating the owner tag",
                                    body={"name": self.tag, "color": "76b900", "content_types": types,
                                          "description": "created and owned by railforge"})
        else:
            tag = found[0]
            if not set(types) <= set(tag["content_types"]):  # made before the app or the namespace was tagged
                tag = self.rest.request("PATCH", f"extras/tags/{tag['id']}", "adding content types to the tag",
                                        body={"content_types": sorted(set(tag["content_types"]) | set(types))})
        self.tag_id = tag["id"]
        statuses = self.rest.all("extras/statuses")
        self.status_id = {s["name"].lower(): s["id"] for s in statuses}
        self.status_name = {s["id"]: s["name"].lower() for s in statuses}

    def after_create(self, kind: Kind, made: list[dict], result: PushResult) -> None:
        if kind.cls == "cable" and made:  # Nautobot 3.2 drops `tags` when it creates a cable (its answer still
            # shows them): tag them in the same push
            self.rest.update(kind.path, "cables", [{"id": r["id"], "tags": [self.tag_id]} for r in made])

    # -- the classes railforge writes ------------------------------------------------------------------------------

    def kinds(self) -> list[Kind]:
        site, space, tag = self.cluster, self.tag, [self.tag_id]

        def terminations(c, st):
            return {"termination_a_type": "dcim.interface", "termination_a_id": st.id("interface", c.ends[0]),
                    "termination_b_type": "dcim.interface", "termination_b_id": st.id("interface", c.ends[1])}

        def wave(i) -> int:
            return 0 if i.type == "lag" else 2 if i.lag or i.parent else 1

        def stat(field: str = "status", get=lambda rec: rec.status) -> Field:
            return Field(field, get, write=lambda rec, st: {field: self._status(get(rec))})

        kinds = [
            Kind("location type", "dcim/location-types", lambda w: [LOCATION_TYPE], lambda t: t, scoped=False,
                 shared=True, extra=lambda t, st: {"name": t, "content_types": ["dcim.device", "dcim.rack",
                                                                               "ipam.prefix", "ipam.vlan"]}),
            Kind("location", "dcim/locations", lambda w: [w], lambda w: w.site,
                 (Field("location_type", lambda w: LOCATION_TYPE, ref="location type"),
                  stat(get=lambda w: "planned")),
                 scoped=False, extra=lambda w, st: {"name": w.site, "tags": tag, "description": w.site_description}),
            Kind("manufacturer", "dcim/manufacturers", lambda w: w.manufacturers, lambda m: m, scoped=False,
                 shared=True, extra=lambda m, st: {"name": m}),
            Kind("role", "extras/roles", lambda w: list(w.roles.items()), lambda r: r[0], scoped=False, shared=True,
                 extra=lambda r, st: {"name": r[0], "color": r[1], "content_types": ["dcim.device"]}),
            Kind("device type", "dcim/device-types", lambda w: w.device_types, lambda t: t.model,
                 (Field("manufacturer", lambda t: t.manufacturer, ref="manufacturer"),
                  Field("u_height", lambda t: t.u_height), Field("is_full_depth", lambda t: True)),
                 scoped=False, shared=True, extra=lambda t, st: {"model": t.model, "tags": tag}),
            Kind("namespace", "ipam/namespaces", lambda w: [space], lambda n: n,
                 (Field("description", lambda n: f"railforge cluster {site}: its prefixes and addresses"),),
                 scoped=False, extra=lambda n, st: {"name": n, "tags": tag}),
            Kind("rack", "dcim/racks", lambda w: w.racks, lambda r: r.name,
                 (Field("u_height", lambda r: r.u_height), Field("comments", lambda r: r.description), stat(),
                  Field("width", lambda r: r.width)),
                 extra=lambda r, st: {"name": r.name, "location": st.id("location", site), "tags": tag}),
            Kind("device", "dcim/devices", lambda w: w.devices, lambda d: d.name,
                 (Field("role", lambda d: d.role, ref="role"),
                  Field("device_type", lambda d: d.model, ref="device type"),
                  Field("rack", lambda d: d.rack, ref="rack"), Field("position", lambda d: d.position),
                  Field("face", lambda d: d.face), stat(), Field("comments", lambda d: d.description)),
                 extra=lambda d, st: {"name": d.name, "location": st.id("location", site), "tags": tag}),
            Kind("interface", "dcim/interfaces", lambda w: w.interfaces, lambda i: (i.device, i.name),
                 (Field("device", lambda i: i.device, ref="device"), Field("type", lambda i: i.type), stat(),
                  Field("speed", lambda i: i.speed_kbps), Field("mtu", lambda i: i.mtu),
                  Field("mgmt_only", lambda i: i.mgmt_only),
                  Field("lag", lambda i: (i.device, i.lag) if i.lag else None, ref="interface"),
                  Field("parent_interface", lambda i: (i.device, i.parent) if i.parent else None, ref="interface"),
                  Field("label", lambda i: i.label), Field("description", lambda i: i.description)),
                 group=lambda i: i.device, wave=wave, extra=lambda i, st: {"name": i.name, "tags": tag}),
            Kind("cable", "dcim/cables", lambda w: w.cables, lambda c: c.label,
                 (Field("terminations", lambda c: c.ends, write=terminations, recreate=True),
                  Field("type", lambda c: c.type or None), stat(), Field("color", lambda c: c.colour),
                  Field("length", lambda c: round(c.length_m)), Field("length_unit", lambda c: "m")),
                 extra=lambda c, st: {"label": c.label, "tags": tag}),
            Kind("prefix", "ipam/prefixes", _prefixes, lambda p: p.prefix,
                 (Field("namespace", lambda p: space, ref="namespace"), stat(),
                  Field("type", lambda p: "network"), Field("description", lambda p: p.description)),
                 extra=lambda p, st: {"prefix": p.prefix, "tags": tag}),
            Kind("IP address", "ipam/ip-addresses", _addresses, lambda a: a.address,
                 (stat(), Field("description", lambda a: a.description)),
                 extra=lambda a, st: {"address": a.address, "namespace": st.id("namespace", space), "tags": tag}),
            Kind("IP assignment", "ipam/ip-address-to-interface", lambda w: w.addresses,
                 lambda a: (a.device, a.interface, a.address),
                 extra=lambda a, st: {"ip_address": st.id("IP address", a.address),
                                      "interface": st.id("interface", (a.device, a.interface))}),
            Kind("VLAN", "ipam/vlans", lambda w: w.vlans, lambda v: v.vid,
                 (Field("name", lambda v: v.name), stat()),
                 extra=lambda v, st: {"vid": v.vid, "location": st.id("location", site), "tags": tag}),
        ]
        if self.bgp_app:
            kinds += [
                Kind("ASN", "plugins/bgp/autonomous-systems", lambda w: w.asns, lambda n: n,
                     (stat(get=lambda n: ACTIVE), Field("description", lambda n: site)), shared=True,
                     delete_last=True, extra=lambda n, st: {"asn": n, "tags": tag}),
                Kind("BGP instance", "plugins/bgp/routing-instances", lambda w: w.bgp, lambda b: b.device,
                     (Field("autonomous_system", lambda b: b.asn, ref="ASN"),
                      Field("router_id", lambda b: b.router_id, ref="IP address"),
                      stat(get=lambda b: "planned")),
                     extra=lambda b, st: {"device": st.id("device", b.device), "tags": tag}),
            ]
        return kinds

    def _status(self, name: str) -> str:
        try:
            return self.status_id[name]
        except KeyError:
            raise SotError(f"Nautobot has no status {name.title()!r}: railforge gives it to what it creates (the "
                           f"statuses there: {', '.join(sorted(self.status_id))})") from None

    # -- reading back ----------------------------------------------------------------------------------------------

    def read_state(self, want: Desired) -> State:
        """Everything in the plan's scope: its location, its namespace, its tag, the planned ASNs and catalog
        names, read all at once; the large classes through GraphQL (see rest.py), the others through REST."""
        rest, tag = self.rest, self.tag
        location = next(iter(rest.page("dcim/locations", name=want.site)["results"]), None)
        namespace = next(iter(rest.page("ipam/namespaces", name=tag)["results"]), None)
        reads: dict[str, list] = {
            "location type": [("dcim/location-types", {"name": LOCATION_TYPE})],
            "manufacturer": [("dcim/manufacturers", {})], "role": [("extras/roles", {})],
            "device type": [("dcim/device-types", {})], "namespace": [("ipam/namespaces", {})],
            "prefix": [("ipam/prefixes", {"tags": tag})], "IP address": [("ipam/ip-addresses", {"tags": tag})],
            "VLAN": [("ipam/vlans", {"tags": tag})]}
        if location is not None:
            for cls, path in (("rack", "dcim/racks"), ("device", "dcim/devices"), ("interface", "dcim/interfaces"),
                              ("cable", "dcim/cables"), ("VLAN", "ipam/vlans")):
                by = "location_id" if cls == "cable" else "location"  # a cable's `location` filter takes names
                reads.setdefault(cls, []).append((path, {by: location["id"]}))
        if namespace is not None:
            reads["prefix"].append(("ipam/prefixes", {"namespace": namespace["id"]}))
            reads["IP address"].append(("ipam/ip-addresses", {"namespace": namespace["id"]}))
        if self.bgp_app:
            reads["ASN"] = [("plugins/bgp/autonomous-systems", {"tags": tag})]
            reads["BGP instance"] = [("plugins/bgp/routing-instances", {"tags": tag})]
        kinds = {k.cls: k for k in self.kinds()}
        jobs = [(cls, path, params) for cls, asks in reads.items() for path, params in asks]

        def read(cls: str, path: str, params: dict) -> list[dict]:
            if cls not in GRAPHQL:
                return rest.all(path, **params)
            return [_from_graphql(o) for o in rest.graphql_all(GRAPHQL[cls][0], params, _selection(kinds[cls]))]

        with ThreadPoolExecutor(min(len(jobs), max(2, self.workers))) as pool:
            answers = list(pool.map(lambda j: read(*j), jobs))
            enums = dict(zip(GRAPHQL, pool.map(lambda cls: self._choices(kinds[cls]), GRAPHQL), strict=True))
        found: dict[str, dict[Any, dict]] = {}
        for (cls, _, _), objs in zip(jobs, answers, strict=True):
            found.setdefault(cls, {}).update((o["id"], o) for o in objs)
        found["location"] = {location["id"]: location} if location else {}
        if self.bgp_app and want.asns:
            found["ASN"].update((o["id"], o) for o in rest.many("plugins/bgp/autonomous-systems", "asn", want.asns))
            used = {_id(o.get("autonomous_system")) for o in found["BGP instance"].values()} - set(found["ASN"])
            if used:
                found["ASN"].update((o["id"], o) for o in rest.many("plugins/bgp/autonomous-systems", "id", used))
        owned_addresses = [i for i, o in found["IP address"].items() if self._owned(o)]
        chunks = [owned_addresses[i:i + GRAPHQL_IDS] for i in range(0, len(owned_addresses), GRAPHQL_IDS)]
        with ThreadPoolExecutor(max(1, min(self.workers, len(chunks)))) as pool:
            assignments = pool.map(lambda c: rest.graphql_all(GRAPHQL["IP assignment"][0], {"ip_address": c},
                                                              _selection(kinds["IP assignment"])), chunks)
            found["IP assignment"] = {o["id"]: o for part in assignments for o in part}
        for cls, by_field in enums.items():
            for o in found.get(cls, {}).values():
                for f, names in by_field.items():
                    if isinstance(o.get(f), str):
                        o[f] = names.get(o[f], o[f])
        return self._parse(found)

    def _choices(self, kind: Kind) -> dict[str, dict[str, str]]:
        """For each field of `kind` with choices: GraphQL's enum name of each choice -> its value (Nautobot's GraphQL
        answers a choice as the enum name graphene-django makes of its value), from the REST API's OPTIONS."""
        if not kind.fields:
            return {}
        answer = self.rest.request("OPTIONS", kind.path, f"reading the choices of {kind.path}")
        post = answer.get("actions", {}).get("POST", {}) if isinstance(answer, dict) else {}
        out: dict[str, dict[str, str]] = {}
        for f in kind.fields:
            choices = post.get(f.api, {}).get("choices") if isinstance(post.get(f.api), dict) else None
            if isinstance(choices, list):
                out[f.api] = _enum_names([c.get("value") for c in choices if isinstance(c, dict)])
        return out

    def _owned(self, o: dict) -> bool:
        return any(_id(t) == self.tag_id for t in o.get("tags") or [])

    def _parse(self, found: dict[str, dict[Any, dict]]) -> State:
        names = {i: o["name"] for i, o in found.get("device", {}).items()}
        port_of = {i: (names.get(_id(o["device"])), o["name"]) for i, o in found.get("interface", {}).items()}
        address_of = {i: str(o["address"]) for i, o in found.get("IP address", {}).items()}
        owned_address = {i for i, o in found.get("IP address", {}).items() if self._owned(o)}
        keys = {
            "location type": lambda o: o["name"], "location": lambda o: o["name"],
            "manufacturer": lambda o: o["name"], "role": lambda o: o["name"], "device type": lambda o: o["model"],
            "namespace": lambda o: o["name"], "rack": lambda o: o["name"], "device": lambda o: o["name"],
            "interface": lambda o: port_of[o["id"]], "cable": lambda o: o["label"] or f"#{o['id']}",
            "prefix": lambda o: str(o["prefix"]), "IP address": lambda o: str(o["address"]),
            "IP assignment": lambda o: (*(port_of.get(_id(o.get("interface"))) or (None, None)),
                                        address_of.get(_id(o.get("ip_address")))),
            "VLAN": lambda o: o["vid"], "ASN": lambda o: o["asn"],
            "BGP instance": lambda o: names.get(_id(o.get("device")), f"#{o['id']}")}
        key_of = {cls: {i: keys[cls](o) for i, o in objs.items()} for cls, objs in found.items()}
        special = {
            ("cable", "terminations"): lambda o: (port_of.get(o.get("termination_a_id")),
                                                   port_of.get(o.get("termination_b_id"))),
        }
        st = State()
        for kind in self.kinds():
            have = st.of(kind.cls)
            for i, o in found.get(kind.cls, {}).items():
                values = {}
                for f in kind.fields:
                    raw = o.get(f.api)
                    if (kind.cls, f.api) in special:
                        values[f.api] = special[(kind.cls, f.api)](o)
                    elif f.api == "status":
                        values[f.api] = self.status_name.get(_id(raw))
                    elif f.ref is not None:
                        values[f.api] = key_of.get(f.ref, {}).get(_id(raw)) if raw else None
                    else:
                        values[f.api] = _value(raw)
                owned = _id(o.get("ip_address")) in owned_address if kind.cls == "IP assignment" else self._owned(o)
                have[key_of[kind.cls][i]] = Live(i, owned, values)
        return st


def _selection(kind: Kind) -> str:
    """The GraphQL fields to ask for `kind`: its id, tags (an IP assignment has none: it is owned with its
    address), key and compared fields (a reference or a status as its id; a cable's terminations as its ends'
    interfaces)."""
    fields = [f"{f.api} {{ id }}" if f.ref is not None or f.api == "status" else f.api
              for f in kind.fields if (kind.cls, f.api) != ("cable", "terminations")]
    tags = [] if kind.cls == "IP assignment" else ["tags { id }"]
    return " ".join(dict.fromkeys(["id", *tags, *GRAPHQL[kind.cls][1], *fields]))


def _from_graphql(o: dict) -> dict:
    """A GraphQL record as the REST record `_parse` reads: a cable's ends as `termination_a_id`/`_b_id`."""
    ends = o.pop("terminations", None)
    for end in ends or []:
        if isinstance(end, dict):
            o.setdefault(f"termination_{str(end.get('cable_end', '')).lower()}_id", _id(end.get("interface")))
    return o


def _enum_names(values: list) -> dict[str, str]:
    """graphene-django's enum name for each choice value -> the value (`convert_choice_name` and the duplicate
    suffix of `get_choices`, graphene-django 3)."""
    out: dict[str, str] = {}
    for value in values:
        name = re.sub(r"[\W|^]+", "_", str(value)).upper()
        if not re.fullmatch(r"[_A-Za-z][_0-9A-Za-z]*", name):
            name = f"A_{name}"
        while name in out:
            name += f"_{len(out)}"
        out[name] = value
    return out


def _prefixes(want: Desired) -> list[Prefix]:
    """The plan's pools, and the network of each planned address that no pool is (Nautobot needs a parent prefix
    for every address)."""
    pools = {p.prefix for p in want.prefixes}
    covering = sorted({str(ip_interface(a.address).network) for a in want.addresses} - pools)
    return [*want.prefixes, *(Prefix(n, "covers planned addresses", ACTIVE) for n in covering)]


def _addresses(want: Desired) -> list:
    """One IP address per planned address (an anycast gateway is one address on many interfaces)."""
    first: dict = {}
    for a in want.addresses:
        first.setdefault(a.address, a)
    return list(first.values())
