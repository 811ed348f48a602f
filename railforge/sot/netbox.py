"""Push a plan into NetBox and read it back, with pynetbox over NetBox's REST API (the rules are in sync.py)."""

from __future__ import annotations

import pynetbox
import requests

from railforge.render.netbox import slug
from railforge.sot.desired import Desired
from railforge.sot.sync import Client, PushResult, SotError, State


class NetBox(Client):
    product = "NetBox"
    RequestError = pynetbox.RequestError

    def connect(self, url: str, token: str):
        return pynetbox.api(url, token=token)

    def check(self) -> str:
        """NetBox's version; a clear error for a wrong URL or token."""
        try:
            status = self.api.status()
            count = self.api.dcim.sites.count()
        except pynetbox.RequestError as e:
            raise SotError(self._api_error(e)) from None
        except requests.RequestException as e:
            raise SotError(f"cannot reach NetBox at {self.api.base_url}: {e.__class__.__name__}") from None
        if type(count) is not int:
            raise TypeError(f"a count of {count!r:.40}, not a number")
        return str(status.get("netbox-version", "unknown"))

    def has_site(self, want: Desired) -> bool:
        return self.api.dcim.sites.get(slug=slug(want.site)) is not None

    def read_state(self, want: Desired) -> State:
        nb = self
        api = nb.api
        site = api.dcim.sites.get(slug=slug(want.site))
        st = State(site, owned=nb._owned, cable_ends=_cable_ends)
        st.manufacturers = {r.name: r for r in nb._all(api.dcim.manufacturers)
                            if r.name in set(want.manufacturers)}
        st.roles = {r.name: r for r in nb._all(api.dcim.device_roles) if r.name in want.roles}
        models = {t.model for t in want.device_types}
        st.device_types = {r.model: r for r in nb._all(api.dcim.device_types) if r.model in models}
        st.rir = api.ipam.rirs.get(slug=nb.tag)
        wanted_devices = {d.name for d in want.devices}
        # device names are unique per site only: every railforge cluster has an su001-gpu01
        st.devices = ({r.name: r for r in nb._all(api.dcim.devices, site_id=site.id) if r.name in wanted_devices}
                      if site is not None else {})
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


    def _ensure_tag(self) -> None:
        if not self.api.extras.tags.get(slug=self.tag):
            try:
                self.api.extras.tags.create(name=f"railforge:{self.cluster}"[:100], slug=self.tag,
                                            color="76b900", description="created and owned by railforge")
            except pynetbox.RequestError as e:
                raise SotError(self._api_error(e)) from None

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



def _cable_ends(rec) -> tuple:
    def end(terms):
        return tuple(sorted((t.object.device.name, t.object.name) for t in terms
                            if getattr(t, "object", None) is not None and hasattr(t.object, "device")))
    return end(rec.a_terminations or []), end(rec.b_terminations or [])


