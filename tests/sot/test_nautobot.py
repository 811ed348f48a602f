"""`railforge sot push` / `sot diff --nautobot` against a real Nautobot 3.2 (PostgreSQL 15 + Redis on loopback)."""

from __future__ import annotations

import json
import re

import pytest

from tests.conftest import require_tool
from tests.sot.test_netbox import plans, rf, writes  # noqa: F401 - the module fixture `plans` is shared

pytestmark = [pytest.mark.root, pytest.mark.slow]


@pytest.fixture(scope="module")
def nautobot(tmp_path_factory):
    require_tool("root", "psql", "pg_dump", "redis-server")
    from tests.helpers import sot_servers

    server = sot_servers.start_nautobot(tmp_path_factory.mktemp("nautobot"))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def token_file(nautobot, tmp_path_factory):
    f = tmp_path_factory.mktemp("token") / "token"
    f.write_text(nautobot.token + "\n")
    return f


def push(nautobot, token_file, folder, *extra):
    from tests.sot.test_netbox import wide_env

    # wide: push prints the differences it refuses as a table, whose names wrap at 80 columns
    return rf("sot", "push", str(folder), "--nautobot", nautobot.url, "--token-file", str(token_file), *extra,
              env=wide_env())


def sot_diff(nautobot, token_file, folder):
    from tests.sot.test_netbox import wide_env

    return rf("sot", "diff", str(folder), "--nautobot", nautobot.url, "--token-file", str(token_file),
              env=wide_env())


def api(nautobot):
    import pynautobot

    return pynautobot.api(nautobot.url, token=nautobot.token)


def test_push_reads_back_as_planned(nautobot, token_file, plans):  # noqa: F811
    two, _ = plans
    proc = push(nautobot, token_file, two)
    assert proc.returncode == 0, proc.stderr
    plan = json.loads((two / "plan.json").read_text())
    nb = api(nautobot)
    location = nb.dcim.locations.get(name="tiny-roce")
    racks = {r.id: r.name for r in nb.dcim.racks.filter(location=location.id)}
    devices = {d.name: d for d in nb.dcim.devices.filter(location=location.id)}
    assert set(devices) == {d["name"] for d in plan["devices"]}
    types = {t.id: t for t in nb.dcim.device_types.all()}
    for d in plan["devices"]:
        got = devices[d["name"]]
        assert (racks[got.rack.id], got.position) == (d["rack"], d["u"])
        assert types[got.device_type.id].u_height == d["height_u"]
    names = {d.id: d.name for d in devices.values()}
    interfaces = {i.id: (names[i.device.id], i.name) for i in nb.dcim.interfaces.filter(location=location.id)}
    assert {(d["name"], p["name"]) for d in plan["devices"] for p in d["ports"]} <= set(interfaces.values())
    cables = {c.label: c for c in nb.dcim.cables.filter(tags="railforge-tiny-roce")}
    assert set(cables) == {link["id"] for link in plan["links"]}
    for link in plan["links"]:
        c = cables[link["id"]]
        assert {interfaces[c.termination_a_id], interfaces[c.termination_b_id]} == \
            {(link["a"]["device"], link["a"]["port"]), (link["b"]["device"], link["b"]["port"])}
    addresses = {a.id: str(a.address) for a in nb.ipam.ip_addresses.filter(tags="railforge-tiny-roce")}
    loopbacks = {d["loopback"] for d in plan["devices"] if d.get("loopback")}
    assert loopbacks <= set(addresses.values())
    assert bgp_read_back(nb, names, addresses) == planned_bgp(plan)


def planned_bgp(plan: dict) -> tuple[set, dict]:
    """The plan's ASNs, and each switch's (ASN, loopback) that its BGP routing instance should carry."""
    return ({d["asn"] for d in plan["devices"] if d.get("asn") is not None},
            {d["name"]: (d["asn"], d["loopback"]) for d in plan["devices"] if d.get("asn") is not None})


def bgp_read_back(nb, device_names: dict, addresses: dict) -> tuple[set, dict]:
    """The owned AutonomousSystem numbers and, per device, its owned routing instance's (ASN, router ID), read
    from nautobot-bgp-models' own API."""
    systems = {a.id: a.asn for a in nb.plugins.bgp.autonomous_systems.filter(tags="railforge-tiny-roce")}
    instances = list(nb.plugins.bgp.routing_instances.filter(tags="railforge-tiny-roce"))
    every = {a.id: a.asn for a in nb.plugins.bgp.autonomous_systems.all()}
    return set(systems.values()), {device_names[i.device.id]: (every[i.autonomous_system.id],
                                                               addresses[i.router_id.id]) for i in instances}


def test_noop_growth_and_drift(nautobot, token_file, plans):  # noqa: F811
    two, three = plans
    assert writes(push(nautobot, token_file, two)) == 0
    grown = push(nautobot, token_file, three)
    assert grown.returncode == 0 and writes(grown) > 0, grown.stderr
    assert writes(push(nautobot, token_file, three)) == 0
    assert sot_diff(nautobot, token_file, three).returncode == 0
    nb = api(nautobot)
    cable = next(iter(nb.dcim.cables.filter(tags="railforge-tiny-roce", limit=1)))
    label = cable.label
    cable.delete()
    device = next(iter(nb.dcim.devices.filter(tags="railforge-tiny-roce", role="node", limit=1)))
    device.position = device.position + 40 if device.position < 10 else 1
    device.save()
    proc = sot_diff(nautobot, token_file, three)
    assert proc.returncode == 1 and re.search(rf"missing\s.*cable\s.*{re.escape(label)}", proc.stdout), proc.stdout
    assert device.name in proc.stdout
    refused = push(nautobot, token_file, three)
    assert refused.returncode == 1 and device.name in refused.stderr
    assert push(nautobot, token_file, three, "--apply-changes").returncode == 0
    assert sot_diff(nautobot, token_file, three).returncode == 0


def test_asn_changed_by_hand_shows_in_diff(nautobot, token_file, plans):  # noqa: F811
    """An owned AutonomousSystem renumbered in Nautobot's UI/API: `sot diff` names the missing ASN and the switch
    whose routing instance now carries another one; push refuses; --apply-changes puts the plan back."""
    _, three = plans  # pushed, and in step, by the test above
    plan = json.loads((three / "plan.json").read_text())
    users: dict[int, list[str]] = {}
    for d in plan["devices"]:
        if d.get("asn") is not None:
            users.setdefault(d["asn"], []).append(d["name"])
    asn, (switch,) = next((n, names) for n, names in sorted(users.items()) if len(names) == 1)
    edited = max(users) + 7
    nb = api(nautobot)
    system = nb.plugins.bgp.autonomous_systems.get(asn=asn)
    system.asn = edited
    system.save()
    proc = sot_diff(nautobot, token_file, three)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert re.search(rf"missing\s.*ASN\s.*{asn}", proc.stdout), proc.stdout
    assert switch in proc.stdout and str(edited) in proc.stdout
    refused = push(nautobot, token_file, three)
    assert refused.returncode == 1 and switch in refused.stderr
    fixed = push(nautobot, token_file, three, "--apply-changes")
    assert fixed.returncode == 0, fixed.stderr
    assert sot_diff(nautobot, token_file, three).returncode == 0
    assert nb.plugins.bgp.autonomous_systems.get(asn=edited) is None
    location = nb.dcim.locations.get(name="tiny-roce")
    names = {d.id: d.name for d in nb.dcim.devices.filter(location=location.id)}
    addresses = {a.id: str(a.address) for a in nb.ipam.ip_addresses.filter(tags="railforge-tiny-roce")}
    assert bgp_read_back(nb, names, addresses) == planned_bgp(plan)
    assert writes(push(nautobot, token_file, three)) == 0


def test_graphql_pages_read_every_object_once(nautobot, token_file, plans):  # noqa: F811
    """The GraphQL read pages by offset over parallel streams, each stopping at its first short page: with pages of
    7, the location's interfaces read so are exactly the ones Nautobot's REST API lists, each once."""
    import requests

    from railforge.sot.rest import Rest

    nb = api(nautobot)
    location = nb.dcim.locations.get(name="tiny-roce")
    listed = sorted(str(i.id) for i in nb.dcim.interfaces.filter(location=location.id))
    session = requests.Session()
    session.headers.update({"Authorization": f"Token {nautobot.token}"})
    rest = Rest(session, nautobot.url, "Nautobot", workers=4, cursor=False)
    paged = sorted(o["id"] for o in rest.graphql_all("interfaces", {"location": location.id}, "id", page=7))
    assert len(listed) > 4 * 7 * 2 and paged == listed


def test_choice_edits_by_hand_read_back_as_values(nautobot, token_file, plans):  # noqa: F811
    """Nautobot's GraphQL answers a choice as an enum name (`A_10GBASE_T`); the read path maps it back to the value
    the REST API takes: an interface's type and a cable's type edited by hand show in `sot diff` as values, and
    `--apply-changes` restores them."""
    from tests.sot.test_netbox import diff_rows

    _, three = plans
    nb = api(nautobot)
    cable = next(c for c in nb.dcim.cables.filter(tags="railforge-tiny-roce") if c.type and c.type.value != "cat6")
    cable_type = cable.type.value
    cable.update({"type": "cat6"})
    device = next(iter(nb.dcim.devices.filter(tags="railforge-tiny-roce", role="node", limit=1)))
    port = next(i for i in nb.dcim.interfaces.filter(device=device.id) if i.type.value not in ("lag", "10gbase-t"))
    port_type = port.type.value
    port.update({"type": "10gbase-t"})
    proc = sot_diff(nautobot, token_file, three)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert diff_rows(proc) == {
        ("update", "cable", cable.label, "type", "cat6", cable_type),
        ("update", "interface", f"{device.name}:{port.name}", "type", "10gbase-t", port_type),
    }, proc.stdout
    assert push(nautobot, token_file, three, "--apply-changes").returncode == 0
    assert nb.dcim.cables.get(cable.id).type.value == cable_type
    assert nb.dcim.interfaces.get(port.id).type.value == port_type
    assert sot_diff(nautobot, token_file, three).returncode == 0


NOT_EDITED = {
    ("interface", "device"): "part of an interface's key: one moved to another device reads as missing + unexpected",
    ("location", "location_type"): "Nautobot refuses to change an existing location's type (HTTP 400), so it cannot "
                                    "drift",
    ("cable", "terminations"): "Nautobot 3.2 keeps a cable's ends on a PATCH of termination_b_id (seen: the cable kept "
                               "them); its own re-termination path (`terminations`) is not exercised here",
    ("prefix", "namespace"): "Nautobot keeps a prefix's addresses in the prefix's namespace: not moved by hand here",
}
"""Owned fields the hand-edit test does not edit in place, and why."""


def edit_every_owned_field(nb, tag: str) -> tuple[set, dict]:
    """One hand edit of every field railforge owns in Nautobot, through its API: the rows `sot diff` must show
    (planned values as railforge wrote them, read before the edit) and the (class, field) each row proves."""
    from tests.sot.test_netbox import HandEdits, free_u

    edits = HandEdits()
    row, edit = edits.row, edits.edit

    def status(obj, cls, name, to: str):
        was = nb.extras.statuses.get(obj.status.id).name
        assert obj.update({"status": {"name": to}})
        row(cls, name, "status", to.lower(), was.lower())

    location = nb.dcim.locations.get(name="tiny-roce")
    status(location, "location", "tiny-roce", "Active")
    types = {t.id: t for t in nb.dcim.device_types.all()}
    roles = {r.id: r.name for r in nb.extras.roles.all()}
    racks = {r.id: r for r in nb.dcim.racks.filter(location=location.id)}
    node, other = list(nb.dcim.devices.filter(tags=tag, role="node", limit=2))[:2]
    leaf = next(iter(nb.dcim.devices.filter(tags=tag, role="leaf", limit=1)))
    node_type, leaf_type = types[node.device_type.id], types[leaf.device_type.id]
    spare_rack = next(r for r in racks.values() if r.id != leaf.rack.id)
    heights = {i: int(t.u_height) for i, t in types.items()}  # before any height changes
    u = free_u(nb.dcim.devices.filter(rack=spare_rack.id), heights, int(spare_rack.u_height), heights[leaf_type.id])
    makers = {m.id: m.name for m in nb.dcim.manufacturers.all()}
    vendor = nb.dcim.manufacturers.create(name="By Hand Vendor")
    edit(node_type, "device type", node_type.model,
         {"manufacturer": vendor.id, "u_height": int(node_type.u_height) - 1, "is_full_depth": False},
         {"manufacturer": (vendor.name, makers[node_type.manufacturer.id]),
          "u_height": (int(node_type.u_height) - 1, int(node_type.u_height))})
    namespace = nb.ipam.namespaces.get(name=tag)
    edit(namespace, "namespace", tag, {"description": "by hand"})
    rack = racks[node.rack.id]
    edit(rack, "rack", rack.name, {"u_height": int(rack.u_height) + 2, "comments": "by hand", "width": 23})
    status(rack, "rack", rack.name, "Deprecated")
    edit(leaf, "device", leaf.name, {"rack": spare_rack.id, "position": u},
         {"rack": (spare_rack.name, racks[leaf.rack.id].name), "position": (u, int(leaf.position))})
    edit(node, "device", node.name, {"role": leaf.role.id, "device_type": leaf_type.id, "face": "rear",
                                     "comments": "by hand"},
         {"role": (roles[leaf.role.id], roles[node.role.id]), "device_type": (leaf_type.model, node_type.model)})
    status(node, "device", node.name, "Active")
    ports = list(nb.dcim.interfaces.filter(device=other.id))
    names = {i.id: i.name for i in ports}
    port = next(i for i in ports if i.speed and i.cable and not i.lag and i.type.value != "1000base-t")
    edit(port, "interface", f"{other.name}:{port.name}",
         {"type": "1000base-t", "speed": 1000, "mtu": 1234, "mgmt_only": not port.mgmt_only,
          "label": "by hand", "description": "by hand"})
    status(port, "interface", f"{other.name}:{port.name}", "Maintenance")
    member = next(i for i in ports if i.lag)
    edit(member, "interface", f"{other.name}:{member.name}", {"lag": None},
         {"lag": (None, f"{other.name}:{names[member.lag.id]}")})
    leaf_ports = list(nb.dcim.interfaces.filter(device=leaf.id))  # only a virtual interface takes a parent
    child = next(i for i in leaf_ports if i.type.value == "virtual")
    phys = next(i for i in leaf_ports if i.type.value not in ("virtual", "lag"))
    edit(child, "interface", f"{leaf.name}:{child.name}", {"parent_interface": phys.id},
         {"parent_interface": (f"{leaf.name}:{phys.name}", None)})

    cables = list(nb.dcim.cables.filter(tags=tag, limit=1000))
    cable = next(c for c in cables if c.type)
    edit(cable, "cable", cable.label, {"type": "cat8", "color": "000000", "length": int(cable.length) + 7,
                                       "length_unit": "ft"})
    status(cable, "cable", cable.label, "Connected")

    prefix = next(p for p in nb.ipam.prefixes.filter(tags=tag, limit=1000)
                  if p.description == "covers planned addresses")
    edit(prefix, "prefix", str(prefix.prefix), {"type": "pool", "description": "by hand"})
    status(prefix, "prefix", str(prefix.prefix), "Deprecated")
    address = next(iter(nb.ipam.ip_addresses.filter(tags=tag, limit=1)))
    edit(address, "IP address", str(address.address), {"description": "by hand"})
    status(address, "IP address", str(address.address), "Deprecated")
    vlan = next(iter(nb.ipam.vlans.filter(tags=tag, limit=1)))
    edit(vlan, "VLAN", vlan.vid, {"name": "by-hand"})
    status(vlan, "VLAN", vlan.vid, "Deprecated")
    system = next(iter(nb.plugins.bgp.autonomous_systems.filter(tags=tag, limit=1)))
    edit(system, "ASN", system.asn, {"description": "by hand"})
    status(system, "ASN", system.asn, "Planned")
    instance = next(iter(nb.plugins.bgp.routing_instances.filter(tags=tag, limit=1)))
    by_hand_as = nb.plugins.bgp.autonomous_systems.create(asn=4200009999, status={"name": "Active"})
    loopbacks = {a.id: str(a.address) for a in nb.ipam.ip_addresses.filter(tags=tag, limit=5000)
                 if str(a.address).endswith("/32")}
    elsewhere = next(i for i in loopbacks if i != instance.router_id.id)
    every_as = {x.id: x.asn for x in nb.plugins.bgp.autonomous_systems.all()}
    device_of = {d.id: d.name for d in nb.dcim.devices.filter(location=location.id)}
    edit(instance, "BGP instance", device_of[instance.device.id],
         {"autonomous_system": by_hand_as.id, "router_id": elsewhere},
         {"autonomous_system": (4200009999, every_as[instance.autonomous_system.id]),
          "router_id": (loopbacks[elsewhere], loopbacks[instance.router_id.id])})
    status(instance, "BGP instance", device_of[instance.device.id], "Active")
    return edits.rows, edits.proves


def add_unexpected(nb, tag: str) -> tuple[set, list]:
    """An owned VLAN the plan does not know, and untagged objects added by hand in the plan's location: a rack, a
    device with two interfaces and a cable between them, an interface on a planned switch."""
    from tests.sot.test_netbox import unexpected_rows

    location = nb.dcim.locations.get(name="tiny-roce")
    tag_id = nb.extras.tags.get(name=tag).id
    nb.ipam.vlans.create(vid=3999, name="by-hand", status={"name": "Active"}, location=location.id, tags=[tag_id])
    leaf = next(iter(nb.dcim.devices.filter(tags=tag, role="leaf", limit=1)))
    rack = nb.dcim.racks.create(name="by-hand-rack", location=location.id, status={"name": "Active"})
    spare = nb.dcim.devices.create(name="by-hand-spare", location=location.id, role=leaf.role.id,
                                   device_type=leaf.device_type.id, status={"name": "Active"})
    ends = [nb.dcim.interfaces.create(device=spare.id, name=n, type="1000base-t", status={"name": "Active"})
            for n in ("eth0", "eth1")]
    cable = nb.dcim.cables.create(label="by-hand-cable", termination_a_type="dcim.interface",
                                  termination_a_id=ends[0].id, termination_b_type="dcim.interface",
                                  termination_b_id=ends[1].id, status={"name": "Connected"})
    stray = nb.dcim.interfaces.create(device=leaf.id, name="by-hand0", type="virtual", status={"name": "Active"})
    return unexpected_rows(leaf.name), [stray, cable, spare, rack]


def test_every_owned_field_edited_by_hand_is_seen_refused_and_restored(nautobot, token_file, plans):  # noqa: F811
    """Every field railforge owns on every class it writes in Nautobot (the `Kind` tables; four left out, said why
    in NOT_EDITED) edited by hand through Nautobot's API, and objects added by hand in the plan's location: one
    `sot diff` shows each edit as one row with its live and planned value and each added object as `unexpected`
    (and the AS a routing instance was pointed at by hand); `push` refuses; `--apply-changes` restores every owned
    field, deletes the owned stray and leaves the foreign objects alone; then `diff` lists only those."""
    from railforge.sot.nautobot import Nautobot
    from tests.sot.test_netbox import diff_rows, owned_fields

    _, three = plans
    assert push(nautobot, token_file, three).returncode == 0  # in step (a no-op after the tests above)
    assert sot_diff(nautobot, token_file, three).returncode == 0
    nb = api(nautobot)
    tag = "railforge-tiny-roce"
    rows, proves = edit_every_owned_field(nb, tag)
    assert set(proves) | set(NOT_EDITED) == owned_fields(Nautobot), owned_fields(Nautobot) - set(proves)
    unexpected, foreign = add_unexpected(nb, tag)

    proc = sot_diff(nautobot, token_file, three)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    got = diff_rows(proc)
    unexpected.add(("unexpected", "ASN", "4200009999", "", "in the plan's scope, not in the plan (not railforge's)",
                    ""))  # in scope while an owned routing instance points at it
    assert got == rows | unexpected, (sorted(got - (rows | unexpected)), sorted((rows | unexpected) - got))
    refused = push(nautobot, token_file, three)
    assert refused.returncode == 1 and f"{len(rows) + 1} difference(s)" in refused.stderr, refused.stderr
    fixed = push(nautobot, token_file, three, "--apply-changes")
    assert fixed.returncode == 0, fixed.stderr
    assert f"{len(unexpected) - 1} object(s) in the plan's scope that railforge does not own" in fixed.stderr
    assert diff_rows(sot_diff(nautobot, token_file, three)) == {r for r in unexpected if r[1] not in ("VLAN", "ASN")}
    for obj in foreign:
        obj.delete()
    nb.dcim.manufacturers.get(name="By Hand Vendor").delete()
    nb.plugins.bgp.autonomous_systems.get(asn=4200009999).delete()
    assert sot_diff(nautobot, token_file, three).returncode == 0
    assert writes(push(nautobot, token_file, three)) == 0
