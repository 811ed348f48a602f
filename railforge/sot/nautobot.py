"""Push a plan into Nautobot and read it back, with pynautobot over Nautobot's REST API (the rules are in
sync.py).

Nautobot models what NetBox calls a site as a Location (of a location type railforge creates), gives every
object a Status object, needs a parent prefix for every IP address and assigns addresses to interfaces through
its own IP-to-interface objects. Its core has no ASN model: ASNs go to the Nautobot app `nautobot-bgp-models`
(Network to Code's, on PyPI) where it is installed, as AutonomousSystem objects and one BGP routing instance per
switch (its ASN, its loopback as router ID). Without the app ASNs are left out and the push says so (the devices'
comments still carry them).
"""

from __future__ import annotations

import pynautobot

from railforge.render.netbox import slug
from railforge.sot.desired import Desired
from railforge.sot.sync import Client, PushResult, SotError, State

BGP_APP = "nautobot-bgp-models"
BGP_TYPES = ["nautobot_bgp_models.autonomoussystem", "nautobot_bgp_models.bgproutinginstance"]
CONTENT_TYPES = ["dcim.location", "dcim.devicetype", "dcim.rack", "dcim.device", "dcim.interface", "dcim.cable",
                 "ipam.prefix", "ipam.ipaddress", "ipam.vlan"]
TAGGABLE = {"locations", "device-types", "racks", "devices", "interfaces", "cables", "prefixes", "ip-addresses",
            "vlans", "autonomous-systems", "routing-instances"}
"""Endpoints whose objects carry tags; manufacturers, roles, location types and IP-to-interface links do not, and
are matched by name (or by the tagged objects they join) instead."""


def _id(ref) -> str | None:
    """The UUID of a related object, as Nautobot answers it at depth 0 (a record or an id)."""
    if ref is None:
        return None
    return getattr(ref, "id", ref)


class Nautobot(Client):
    product = "Nautobot"
    RequestError = pynautobot.RequestError

    def connect(self, url: str, token: str):
        return pynautobot.api(url, token=token)

    def check(self) -> str:
        import requests

        try:
            status = self.api.status()
            count = self.api.dcim.locations.count()
        except pynautobot.RequestError as e:
            raise SotError(self._api_error(e)) from None
        except requests.RequestException as e:
            raise SotError(f"cannot reach Nautobot at {self.api.base_url}: {e.__class__.__name__}") from None
        if type(count) is not int:
            raise TypeError(f"a count of {count!r:.40}, not a number")
        return str(status.get("nautobot-version", "unknown"))

    def _owned(self, rec) -> bool:
        return any(_id(t) == self.tag_id for t in (rec.tags or []))

    def has_site(self, want: Desired) -> bool:
        return self.api.dcim.locations.get(name=want.site) is not None

    def _has_bgp_app(self) -> bool:
        try:
            self.api.plugins.bgp.autonomous_systems.count()
        except pynautobot.RequestError as e:
            if getattr(getattr(e, "req", None), "status_code", None) == 404:
                return False
            raise SotError(self._api_error(e)) from None
        return True

    def _ensure_tag(self) -> None:
        self.bgp_app = self._has_bgp_app()
        if not self.bgp_app:
            self.notes = [f"Nautobot has no {BGP_APP} app (its core has no ASN model): ASNs and BGP routing "
                          f"instances are not pushed or compared"]
        types = CONTENT_TYPES + (BGP_TYPES if self.bgp_app else [])
        tag = self.api.extras.tags.get(name=self.tag)
        try:
            if tag is None:
                tag = self.api.extras.tags.create(name=self.tag, color="76b900", content_types=types,
                                                  description="created and owned by railforge")
            elif not set(types) <= set(tag.content_types):  # made by a push before the app was installed
                tag.content_types = sorted(set(tag.content_types) | set(types))
                tag.save()
        except pynautobot.RequestError as e:
            raise SotError(self._api_error(e)) from None
        self.tag_id = tag.id
        self.status = {s.name: s.id for s in self.api.extras.statuses.all()}
        self.namespace = self.api.ipam.namespaces.get(name="Global").id

    def _create(self, endpoint, cls: str, payloads: list[dict], result: PushResult) -> list:
        taggable = endpoint.name.replace("_", "-") in TAGGABLE
        for p in payloads:
            p.setdefault("tags", [self.tag_id] if taggable else [])
        made = super()._create(endpoint, cls, payloads, result)
        if endpoint.name == "cables" and made:  # Nautobot 3.2 drops `tags` when it creates cables (its answer still
            # shows them): tag them in the same push
            self._update(endpoint, cls, [{"id": r.id, "tags": [self.tag_id]} for r in made], PushResult())
        return made

    def read_state(self, want: Desired) -> State:
        api = self.api
        self._ensure_tag()
        site = api.dcim.locations.get(name=want.site)
        st = State(site, owned=self._owned)
        st.manufacturers = {r.name: r for r in self._all(api.dcim.manufacturers) if r.name in set(want.manufacturers)}
        st.roles = {r.name: r for r in self._all(api.extras.roles) if r.name in want.roles}
        models = {t.model for t in want.device_types}
        st.device_types = {r.model: r for r in self._all(api.dcim.device_types) if r.model in models}
        # device names are unique per location only: every railforge cluster has an su001-gpu01
        devices = self._all(api.dcim.devices, location=site.id) if site is not None else []
        names = {d.name for d in want.devices}
        st.devices = {r.name: r for r in devices if r.name in names}
        device_name = {r.id: r.name for r in devices}
        racks = self._all(api.dcim.racks, location=site.id) if site is not None else []
        st.racks = {r.name: r for r in racks}
        rack_name = {r.id: r.name for r in racks}
        for r in st.devices.values():
            r.rack_name = rack_name.get(_id(r.rack))
        interfaces = self._all(api.dcim.interfaces, tags=self.tag)
        st.interfaces = {(device_name.get(_id(r.device)), r.name): r for r in interfaces}
        iface_key = {r.id: (device_name.get(_id(r.device)), r.name) for r in interfaces}
        st.cables = {r.label: r for r in self._all(api.dcim.cables, tags=self.tag) if r.label}

        def ends(rec) -> tuple:
            return tuple(((iface_key[t],) if t in iface_key else ()) for t in (rec.termination_a_id,
                                                                              rec.termination_b_id))

        st.cable_ends = ends
        st.prefixes = {r.prefix: r for r in self._all(api.ipam.prefixes, tags=self.tag)}
        st.vlans = {r.vid: r for r in self._all(api.ipam.vlans, tags=self.tag)}
        addresses = {r.id: r for r in self._all(api.ipam.ip_addresses, tags=self.tag)}
        self.address_ids = {str(r.address): r.id for r in addresses.values()}
        self._read_bgp(want, st, device_name, {r.id: str(r.address) for r in addresses.values()})
        ids = sorted(addresses)
        links = [x for i in range(0, len(ids), 100)
                 for x in self._all(api.ipam.ip_address_to_interface, ip_address=ids[i:i + 100])]
        for link in links:
            ip = addresses.get(_id(link.ip_address))
            key = iface_key.get(_id(link.interface))
            if ip is not None and key is not None:
                st.addresses[(key[0], key[1], str(ip.address))] = link
        return st

    def _read_bgp(self, want: Desired, st: State, device_name: dict, address_of: dict) -> None:
        """The ASes railforge owns or plans (a planned number that exists unowned, say another cluster's private
        ASN, is used, never changed) and the routing instance railforge owns on each device."""
        if not self.bgp_app:
            st.asns = dict.fromkeys(want.asns)
            return
        bgp = self.api.plugins.bgp
        planned = [r for i in range(0, len(want.asns), 100)
                   for r in self._all(bgp.autonomous_systems, asn=want.asns[i:i + 100])]
        st.asns = {r.asn: r for r in [*planned, *self._all(bgp.autonomous_systems, tags=self.tag)]}
        instances = self._all(bgp.routing_instances, tags=self.tag)
        asn_of = {r.id: r.asn for r in st.asns.values()}
        other = sorted({_id(r.autonomous_system) for r in instances} - set(asn_of))
        asn_of.update({r.id: r.asn for i in range(0, len(other), 100)
                       for r in self._all(bgp.autonomous_systems, id=other[i:i + 100])})
        st.bgp = {device_name.get(_id(r.device)): (r, asn_of.get(_id(r.autonomous_system)),
                                                   address_of.get(_id(r.router_id)))
                  for r in sorted(instances, key=lambda r: str(r.id))}

    def _bgp_body(self, b, st: State) -> dict:
        return {"autonomous_system": st.asns[b.asn].id, "router_id": self.address_ids.get(b.router_id)}

    def _push_bgp(self, want: Desired, st: State, result: PushResult) -> None:
        if not self.bgp_app:
            return
        bgp = self.api.plugins.bgp
        st.asns.update({r.asn: r for r in self._create(
            bgp.autonomous_systems, "ASNs", [{"asn": n, "status": self.status["Active"], "description": self.cluster}
                                              for n in want.asns if n not in st.asns], result)})
        new = [b for b in want.bgp if b.device not in st.bgp]
        made = self._create(bgp.routing_instances, "BGP instances",
                            [{"device": st.devices[b.device].id, "status": self.status["Planned"],
                              **self._bgp_body(b, st)} for b in new], result)
        st.bgp.update({b.device: (r, b.asn, b.router_id) for r, b in zip(made, new, strict=True)})

    def _update_bgp(self, want: Desired, st: State, result: PushResult) -> None:
        if not self.bgp_app:
            return
        self._update(self.api.plugins.bgp.routing_instances, "BGP instances",
                     [{"id": st.bgp[b.device][0].id, **self._bgp_body(b, st)} for b in want.bgp
                      if b.device in st.bgp and st.bgp[b.device][1:] != (b.asn, b.router_id)], result)

    def _apply(self, want: Desired, st: State, result: PushResult, apply_changes: bool) -> None:
        api, planned, active = self.api, self.status["Planned"], self.status["Active"]
        if st.site is None:
            ltype = api.dcim.location_types.get(name="railforge site")
            if ltype is None:
                ltype = self._create(api.dcim.location_types, "location types",
                                     [{"name": "railforge site", "content_types": ["dcim.device", "dcim.rack",
                                                                                   "ipam.prefix", "ipam.vlan"]}],
                                     result)[0]
            st.site = self._create(api.dcim.locations, "locations",
                                   [{"name": want.site, "location_type": ltype.id, "status": planned,
                                     "description": want.site_description}], result)[0]
        site_id = st.site.id
        st.manufacturers.update({r.name: r for r in self._create(
            api.dcim.manufacturers, "manufacturers",
            [{"name": m} for m in want.manufacturers if m not in st.manufacturers], result)})
        st.roles.update({r.name: r for r in self._create(
            api.extras.roles, "roles", [{"name": r, "color": c, "content_types": ["dcim.device"]}
                                        for r, c in want.roles.items() if r not in st.roles], result)})
        st.device_types.update({r.model: r for r in self._create(
            api.dcim.device_types, "device types",
            [{"manufacturer": st.manufacturers[t.manufacturer].id, "model": t.model, "u_height": t.u_height,
              "is_full_depth": True} for t in want.device_types if t.model not in st.device_types], result)})
        st.racks.update({r.name: r for r in self._create(
            api.dcim.racks, "racks", [{"name": r.name, "location": site_id, "status": planned, "width": 19,
                                       "u_height": r.u_height, "comments": r.description}
                                      for r in want.racks if r.name not in st.racks], result)})
        st.devices.update({r.name: r for r in self._create(
            api.dcim.devices, "devices",
            [{"name": d.name, "role": st.roles[d.role].id, "device_type": st.device_types[d.model].id,
              "location": site_id, "rack": st.racks[d.rack].id, "position": d.position, "face": "front",
              "status": planned, "comments": d.description}
             for d in want.devices if d.name not in st.devices], result)})
        for wave in (lambda i: i.type == "lag", lambda i: i.type != "lag" and not i.lag and not i.parent,
                     lambda i: bool(i.lag or i.parent)):
            made = self._create(api.dcim.interfaces, "interfaces",
                                [self._interface(i, st, planned) for i in want.interfaces
                                 if wave(i) and (i.device, i.name) not in st.interfaces], result)
            by_id = {st.devices[d].id: d for d in st.devices}
            st.interfaces.update({(by_id.get(_id(r.device)), r.name): r for r in made})
        self._create(api.dcim.cables, "cables",
                     [{"termination_a_type": "dcim.interface",
                       "termination_a_id": st.interfaces[(c.a_device, c.a_port)].id,
                       "termination_b_type": "dcim.interface",
                       "termination_b_id": st.interfaces[(c.b_device, c.b_port)].id,
                       "type": c.type or None, "status": planned, "label": c.label, "color": c.colour,
                       "length": round(c.length_m), "length_unit": "m"}
                      for c in want.cables if c.label not in st.cables], result)
        covering = [*(p.prefix for p in want.prefixes), *sorted({_network(a.address) for a in want.addresses})]
        self._create(api.ipam.prefixes, "prefixes",
                     [{"prefix": p, "namespace": self.namespace, "status": active, "type": "network"}
                      for p in dict.fromkeys(covering) if p not in st.prefixes], result)
        made = self._create(api.ipam.ip_addresses, "IP addresses",
                            [{"address": a, "namespace": self.namespace, "status": active}
                             for a in dict.fromkeys(a.address for a in want.addresses)
                             if a not in self.address_ids], result)
        self.address_ids.update({str(r.address): r.id for r in made})
        self._create(api.ipam.ip_address_to_interface, "IP assignments",
                     [{"ip_address": self.address_ids[a.address],
                       "interface": st.interfaces[(a.device, a.interface)].id}
                      for a in want.addresses if (a.device, a.interface, a.address) not in st.addresses], result)
        self._create(api.ipam.vlans, "VLANs", [{"vid": v.vid, "name": v.name, "status": active,
                                                "location": site_id} for v in want.vlans if v.vid not in st.vlans],
                     result)
        self._push_bgp(want, st, result)
        if apply_changes:
            self._apply_updates(want, st, result)

    def _interface(self, i, st: State, status: str) -> dict:
        body = {"device": st.devices[i.device].id, "name": i.name, "type": i.type, "status": status,
                "mgmt_only": i.mgmt_only, "label": i.label, "description": i.description}
        if i.lag:
            body["lag"] = st.interfaces[(i.device, i.lag)].id
        if i.parent:
            body["parent_interface"] = st.interfaces[(i.device, i.parent)].id
        return body


def _network(cidr: str) -> str:
    from ipaddress import ip_interface

    return str(ip_interface(cidr).network)


__all__ = ["Nautobot", "slug"]
