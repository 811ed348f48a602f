"""Push a plan into NetBox and read it back over NetBox's REST API (the rules are in sync.py).

Each class railforge writes is a `Kind`: its endpoint, natural key and the fields it sets. Reads ask NetBox for
exactly those fields (`?fields=`), page by id (`?start=`, no count) and run in parallel; a cable's two ends are
read from its interfaces' `cable`/`cable_end`, so no termination is serialized twice.

Two clusters in one NetBox: every cluster has its own site (device and rack names repeat between clusters), its
own VRF `railforge-<cluster>` holding its prefixes and addresses (private address plans repeat between clusters;
NetBox enforces unique addresses inside a VRF, not across VRFs), its own private RIR for the ASNs it creates, and
its own tag. ASN numbers are unique in all of NetBox, so a private ASN another cluster (or a person) already holds
is used as it is: never changed, never deleted, never tagged by this cluster.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pynetbox
import requests

from railforge.render.netbox import slug
from railforge.sot.desired import Desired
from railforge.sot.rest import Rest, SotError
from railforge.sot.sync import Client, Field, Kind, Live, State

READS = {
    "site": "id,name,slug,status,description,tags",
    "manufacturer": "id,name,slug,tags",
    "device role": "id,name,slug,color,tags",
    "device type": "id,model,slug,manufacturer,u_height,is_full_depth,tags",
    "VRF": "id,name,enforce_unique,description,tags",
    "RIR": "id,name,slug,is_private,tags",
    "rack": "id,name,u_height,description,status,width,tags",
    "device": "id,name,role,device_type,rack,position,face,status,description,tags",
    "interface": "id,device,name,type,speed,mtu,mgmt_only,lag,parent,label,description,cable,cable_end,tags",
    "cable": "id,label,type,status,color,length,length_unit,description,tags",
    "prefix": "id,prefix,vrf,status,description,tags",
    "IP address": "id,address,vrf,assigned_object_type,assigned_object_id,role,status,description,tags",
    "ASN": "id,asn,rir,description,tags",
    "VLAN": "id,vid,name,status,site,tags",
}
"""The fields each read asks for: what the kinds compare, plus ids and tags."""


def _value(raw: Any) -> Any:
    """A choice's value (`{"value": "planned", "label": "Planned"}`), else the scalar as it is."""
    return raw.get("value") if isinstance(raw, dict) and "value" in raw else raw


def _id(raw: Any) -> Any:
    return raw.get("id") if isinstance(raw, dict) else raw


class NetBox(Client):
    product = "NetBox"

    def connect(self, url: str, token: str):
        self.url, self.token = url, token
        return pynetbox.api(url, token=token)

    def make_rest(self) -> Rest:
        session = requests.Session()
        scheme = "Bearer" if self.token.startswith("nbt_") and "." in self.token else "Token"
        session.headers.update({"Authorization": f"{scheme} {self.token}", "Accept": "application/json"})
        return Rest(session, self.url, self.product, self.workers, cursor=True, timeout_s=self.timeout_s)

    def check(self) -> str:
        """NetBox's version; a clear error for a wrong URL or token."""
        try:
            status = self.api.status()
        except pynetbox.RequestError as e:
            raise SotError(self.rest.answer_error(e.req)) from None
        except requests.RequestException as e:
            raise SotError(f"cannot reach NetBox at {self.api.base_url}: {e.__class__.__name__}") from None
        self.rest.page("dcim/sites", limit=1)
        return str(status.get("netbox-version", "unknown"))

    def has_site(self, want: Desired) -> bool:
        return bool(self.rest.page("dcim/sites", slug=slug(want.site), limit=1)["results"])

    def prepare(self) -> None:
        if not self.rest.page("extras/tags", slug=self.tag)["results"]:
            self.rest.request("POST", "extras/tags", "creating the owner tag",
                              body={"name": f"railforge:{self.cluster}"[:100], "slug": self.tag, "color": "76b900",
                                    "description": "created and owned by railforge"})

    # -- the classes railforge writes ------------------------------------------------------------------------------

    def kinds(self) -> list[Kind]:
        site, tag, space = self.cluster, [{"slug": self.tag}], self.tag

        def tagged(rec, st):
            return {"tags": tag}

        def at_site(rec, st):
            return {"tags": tag, "site": st.id("site", site)}

        def terminations(c, st):
            return {"a_terminations": [{"object_type": "dcim.interface",
                                        "object_id": st.id("interface", (c.a_device, c.a_port))}],
                    "b_terminations": [{"object_type": "dcim.interface",
                                        "object_id": st.id("interface", (c.b_device, c.b_port))}]}

        def assigned(a, st):
            return {"assigned_object_type": "dcim.interface",
                    "assigned_object_id": st.id("interface", (a.device, a.interface))}

        def wave(i) -> int:
            return 0 if i.type == "lag" else 2 if i.lag or i.parent else 1

        return [
            Kind("site", "dcim/sites", lambda w: [w], lambda w: w.site,
                 (Field("slug", lambda w: slug(w.site)), Field("status", lambda w: "planned")),
                 scoped=False, extra=lambda w, st: {"name": w.site, "tags": tag, "description": w.site_description}),
            Kind("manufacturer", "dcim/manufacturers", lambda w: w.manufacturers, lambda m: m,
                 (Field("slug", slug),), scoped=False, shared=True, extra=lambda m, st: {"name": m, "tags": tag}),
            Kind("device role", "dcim/device-roles", lambda w: list(w.roles.items()), lambda r: r[0],
                 (Field("slug", lambda r: slug(r[0])), Field("color", lambda r: r[1])), scoped=False, shared=True,
                 extra=lambda r, st: {"name": r[0], "tags": tag}),
            Kind("device type", "dcim/device-types", lambda w: w.device_types, lambda t: t.model,
                 (Field("manufacturer", lambda t: t.manufacturer, ref="manufacturer"),
                  Field("slug", lambda t: slug(t.model)), Field("u_height", lambda t: t.u_height),
                  Field("is_full_depth", lambda t: True)),
                 scoped=False, shared=True, extra=lambda t, st: {"model": t.model, "tags": tag}),
            Kind("VRF", "ipam/vrfs", lambda w: [space], lambda v: v,
                 (Field("enforce_unique", lambda v: True),
                  Field("description", lambda v: f"railforge cluster {site}: its prefixes and addresses")),
                 scoped=False, extra=lambda v, st: {"name": v, "tags": tag}),
            Kind("RIR", "ipam/rirs", lambda w: [space] if w.asns else [], lambda r: r,
                 (Field("name", lambda r: f"railforge {site}"[:100]), Field("is_private", lambda r: True)),
                 scoped=False, extra=lambda r, st: {"slug": r, "tags": tag}),
            Kind("rack", "dcim/racks", lambda w: w.racks, lambda r: r.name,
                 (Field("u_height", lambda r: r.u_height), Field("description", lambda r: r.description),
                  Field("status", lambda r: r.status), Field("width", lambda r: r.width)),
                 extra=lambda r, st: {**at_site(r, st), "name": r.name}),
            Kind("device", "dcim/devices", lambda w: w.devices, lambda d: d.name,
                 (Field("role", lambda d: d.role, ref="device role"),
                  Field("device_type", lambda d: d.model, ref="device type"),
                  Field("rack", lambda d: d.rack, ref="rack"), Field("position", lambda d: d.position),
                  Field("face", lambda d: d.face), Field("status", lambda d: d.status),
                  Field("description", lambda d: d.description)),
                 extra=lambda d, st: {**at_site(d, st), "name": d.name}),
            Kind("interface", "dcim/interfaces", lambda w: w.interfaces, lambda i: (i.device, i.name),
                 (Field("device", lambda i: i.device, ref="device"), Field("type", lambda i: i.type),
                  Field("speed", lambda i: i.speed_kbps), Field("mtu", lambda i: i.mtu),
                  Field("mgmt_only", lambda i: i.mgmt_only),
                  Field("lag", lambda i: (i.device, i.lag) if i.lag else None, ref="interface"),
                  Field("parent", lambda i: (i.device, i.parent) if i.parent else None, ref="interface"),
                  Field("label", lambda i: i.label), Field("description", lambda i: i.description)),
                 group=lambda i: i.device, wave=wave, extra=lambda i, st: {"tags": tag, "name": i.name}),
            Kind("cable", "dcim/cables", lambda w: w.cables, lambda c: c.label,
                 (Field("terminations", lambda c: c.ends, write=terminations, recreate=True),
                  Field("type", lambda c: c.type), Field("status", lambda c: c.status),
                  Field("color", lambda c: c.colour), Field("length", lambda c: c.length_m),
                  Field("length_unit", lambda c: "m"), Field("description", lambda c: c.description)),
                 extra=lambda c, st: {"tags": tag, "label": c.label}),
            Kind("prefix", "ipam/prefixes", lambda w: w.prefixes, lambda p: p.prefix,
                 (Field("vrf", lambda p: space, ref="VRF"), Field("status", lambda p: p.status),
                  Field("description", lambda p: p.description)),
                 extra=lambda p, st: {"tags": tag, "prefix": p.prefix}),
            Kind("IP address", "ipam/ip-addresses", lambda w: w.addresses, lambda a: (a.device, a.address),
                 (Field("vrf", lambda a: space, ref="VRF"),
                  Field("assigned_object", lambda a: (a.device, a.interface), write=assigned),
                  Field("role", lambda a: a.role or None), Field("status", lambda a: a.status),
                  Field("description", lambda a: f"{a.device} {a.interface} {a.description}")),
                 extra=lambda a, st: {"tags": tag, "address": a.address}),
            Kind("ASN", "ipam/asns", lambda w: w.asns, lambda n: n,
                 (Field("rir", lambda n: space, ref="RIR"), Field("description", lambda n: site)), shared=True,
                 extra=lambda n, st: {"tags": tag, "asn": n}),
            Kind("VLAN", "ipam/vlans", lambda w: w.vlans, lambda v: v.vid,
                 (Field("name", lambda v: v.name), Field("status", lambda v: v.status),
                  Field("site", lambda v: site, ref="site")),
                 extra=lambda v, st: {"tags": tag, "vid": v.vid}),
        ]

    # -- reading back ----------------------------------------------------------------------------------------------

    def read_state(self, want: Desired) -> State:
        """Everything in the plan's scope (its site, its VRF, its tag, its planned ASNs and catalog names), every
        read asking only for the fields compared, all of them at once."""
        rest, tag = self.rest, self.tag
        site = next(iter(rest.page("dcim/sites", slug=slug(want.site), fields=READS["site"])["results"]), None)
        vrf = next(iter(rest.page("ipam/vrfs", name=self.tag, fields=READS["VRF"])["results"]), None)
        site_id, vrf_id = (site or {}).get("id"), (vrf or {}).get("id")
        reads: dict[str, list] = {
            "manufacturer": [("dcim/manufacturers", {})], "device role": [("dcim/device-roles", {})],
            "device type": [("dcim/device-types", {})], "RIR": [("ipam/rirs", {})], "VRF": [("ipam/vrfs", {})],
            "prefix": [("ipam/prefixes", {"tag": tag})], "IP address": [("ipam/ip-addresses", {"tag": tag})],
            "ASN": [("ipam/asns", {"tag": tag})], "VLAN": [("ipam/vlans", {"tag": tag})]}
        if site_id is not None:
            for cls, path in (("rack", "dcim/racks"), ("device", "dcim/devices"), ("interface", "dcim/interfaces"),
                              ("cable", "dcim/cables"), ("VLAN", "ipam/vlans")):
                reads.setdefault(cls, []).append((path, {"site_id": site_id}))
        if vrf_id is not None:
            reads["prefix"].append(("ipam/prefixes", {"vrf_id": vrf_id}))
            reads["IP address"].append(("ipam/ip-addresses", {"vrf_id": vrf_id}))
        jobs = [(cls, path, params) for cls, asks in reads.items() for path, params in asks]
        with ThreadPoolExecutor(min(len(jobs), max(2, self.workers))) as pool:
            answers = list(pool.map(lambda j: rest.all(j[1], fields=READS[j[0]], **j[2]), jobs))
            planned_asns = rest.many("ipam/asns", "asn", want.asns, fields=READS["ASN"]) if want.asns else []
        found: dict[str, dict[Any, dict]] = {}
        for (cls, _, _), objs in zip(jobs, answers, strict=True):
            found.setdefault(cls, {}).update((o["id"], o) for o in objs)
        found.setdefault("ASN", {}).update((o["id"], o) for o in planned_asns)
        found["site"] = {site["id"]: site} if site else {}
        return self._parse(found)

    def _parse(self, found: dict[str, dict[Any, dict]]) -> State:
        """The objects read, keyed by natural key, their fields as the kinds compare them."""
        interfaces = found.get("interface", {})
        names = {o["id"]: o["name"] for o in found.get("device", {}).values()}
        port_of = {i: (names.get(_id(o["device"])), o["name"]) for i, o in interfaces.items()}
        ends: dict[Any, dict[str, list]] = {}
        for i, o in interfaces.items():
            if o.get("cable"):
                ends.setdefault(_id(o["cable"]), {}).setdefault(o.get("cable_end") or "A", []).append(port_of[i])

        def port(o: dict) -> tuple | None:
            return port_of.get(o.get("assigned_object_id")) if o.get("assigned_object_type") == "dcim.interface" \
                else None

        keys = {
            "site": lambda o: o["name"], "manufacturer": lambda o: o["name"], "device role": lambda o: o["name"],
            "device type": lambda o: o["model"], "VRF": lambda o: o["name"], "RIR": lambda o: o["slug"],
            "rack": lambda o: o["name"], "device": lambda o: o["name"], "interface": lambda o: port_of[o["id"]],
            "cable": lambda o: o["label"] or f"#{o['id']}", "prefix": lambda o: o["prefix"],
            "IP address": lambda o: ((port(o) or (None,))[0], o["address"]), "ASN": lambda o: o["asn"],
            "VLAN": lambda o: o["vid"]}
        key_of = {cls: {i: keys[cls](o) for i, o in objs.items()} for cls, objs in found.items()}
        special = {("cable", "terminations"): lambda o: _ends(ends.get(o["id"], {})),
                   ("IP address", "assigned_object"): port}
        st = State()
        for kind in self.kinds():
            have = st.of(kind.cls)
            for i, o in found.get(kind.cls, {}).items():
                values = {}
                for f in kind.fields:
                    if (kind.cls, f.api) in special:
                        values[f.api] = special[(kind.cls, f.api)](o)
                    elif f.ref is not None:
                        values[f.api] = key_of.get(f.ref, {}).get(_id(o.get(f.api)))
                    else:
                        values[f.api] = _scalar(_value(o.get(f.api)))
                owned = any(t.get("slug") == self.tag for t in o.get("tags") or [])
                have[key_of[kind.cls][i]] = Live(i, owned, values)
        return st


def _scalar(value: Any) -> Any:
    """NetBox's decimals (a rack unit height, a cable length) compare as numbers."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _ends(sides: dict[str, list]) -> tuple | None:
    """A cable's ends as the plan writes them: ((device, port), (device, port)); more than one termination on a
    side shows as a tuple of them."""
    if not sides:
        return None
    a, b = (sorted(sides.get(s, [])) for s in ("A", "B"))
    return (a[0] if len(a) == 1 else tuple(a)), (b[0] if len(b) == 1 else tuple(b))
