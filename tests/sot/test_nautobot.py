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


def test_field_edits_by_hand_are_seen_refused_and_restored(nautobot, token_file, plans):  # noqa: F811
    """A cable's colour, a device's status, an interface's speed edited in Nautobot and an untagged device added to
    the location: `sot diff` shows each with its live and planned value, `push` refuses, `--apply-changes`
    restores the owned ones and leaves the foreign device alone."""
    from tests.sot.test_netbox import diff_rows

    _, three = plans
    nb = api(nautobot)
    location = nb.dcim.locations.get(name="tiny-roce")
    cable = next(iter(nb.dcim.cables.filter(tags="railforge-tiny-roce", limit=1)))
    colour = cable.color
    cable.update({"color": "000000"})
    device = next(iter(nb.dcim.devices.filter(tags="railforge-tiny-roce", role="node", limit=1)))
    device.update({"status": {"name": "Active"}})
    port = next(i for i in nb.dcim.interfaces.filter(device=device.id) if i.speed)
    speed = port.speed
    port.update({"speed": 1000})
    foreign = nb.dcim.devices.create(name="by-hand-spare", location=location.id, role=device.role.id,
                                     device_type=device.device_type.id, status={"name": "Active"})
    proc = sot_diff(nautobot, token_file, three)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert diff_rows(proc) == {
        ("update", "cable", cable.label, "color", "000000", colour),
        ("update", "device", device.name, "status", "active", "planned"),
        ("update", "interface", f"{device.name}:{port.name}", "speed", "1000", str(speed)),
        ("unexpected", "device", "by-hand-spare", "", "in the plan's scope, not in the plan (not railforge's)", ""),
    }, proc.stdout
    refused = push(nautobot, token_file, three)
    assert refused.returncode == 1 and "difference(s)" in refused.stderr, refused.stderr
    fixed = push(nautobot, token_file, three, "--apply-changes")
    assert fixed.returncode == 0, fixed.stderr
    assert nb.dcim.cables.get(cable.id).color == colour and nb.dcim.interfaces.get(port.id).speed == speed
    assert nb.dcim.devices.get(foreign.id) is not None
    foreign.delete()
    assert sot_diff(nautobot, token_file, three).returncode == 0
