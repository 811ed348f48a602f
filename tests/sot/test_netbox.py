"""`railforge sot push` / `sot diff` against a real NetBox 4.7 (PostgreSQL 15 + Redis on loopback), and the
NetBox import CSVs loaded through NetBox's own bulk-import views."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
import yaml

from railforge.sot.netbox import NetBox
from tests.conftest import ROOT, require_tool

pytestmark = [pytest.mark.root, pytest.mark.slow]
SPEC = ROOT / "tests" / "specs" / "tiny-roce.yaml"


@pytest.fixture(scope="module")
def netbox(tmp_path_factory):
    require_tool("root", "psql", "pg_dump", "redis-server")
    from tests.helpers import sot_servers

    server = sot_servers.start_netbox(tmp_path_factory.mktemp("netbox"))
    yield server
    server.stop()


def rf(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "railforge", *args], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=1200)


def build(tmp_path, spec_text: str, name: str):
    spec = tmp_path / f"{name}.yaml"
    spec.write_text(spec_text)
    out = tmp_path / name
    proc = rf("build", str(spec), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.fixture(scope="module")
def plans(tmp_path_factory):
    """The tiny RoCE spec at 2 SUs and grown to 3 (its `max` is 4, so nothing is renumbered)."""
    tmp = tmp_path_factory.mktemp("plans")
    text = SPEC.read_text()
    two = build(tmp, text, "two")
    three = build(tmp, re.sub(r"(scalable_units:\n  count:) 2", r"\1 3", text), "three")
    return two, three


@pytest.fixture(scope="module")
def token_file(netbox, tmp_path_factory):
    f = tmp_path_factory.mktemp("token") / "token"
    f.write_text(netbox.token + "\n")
    return f


def api(netbox):
    import pynetbox

    return pynetbox.api(netbox.url, token=netbox.token)


def push(netbox, token_file, folder, *extra):
    return rf("sot", "push", str(folder), "--netbox", netbox.url, "--token-file", str(token_file), *extra)


def writes(proc) -> int:
    m = re.search(r"wrote (\d+) objects", proc.stdout)
    assert m, proc.stdout + proc.stderr
    return int(m.group(1))


def test_first_push_holds_every_planned_object(netbox, token_file, plans):
    import json

    two, _ = plans
    proc = push(netbox, token_file, two)
    assert proc.returncode == 0, proc.stderr
    plan = json.loads((two / "plan.json").read_text())
    nb = api(netbox)
    site = nb.dcim.sites.get(slug="tiny-roce")
    assert site is not None and "railforge-tiny-roce" in [t.slug for t in site.tags]
    devices = {d.name: d for d in nb.dcim.devices.filter(site_id=site.id, limit=1000)}
    assert set(devices) == {d["name"] for d in plan["devices"]}
    for d in plan["devices"]:
        got = devices[d["name"]]
        assert (got.rack.name, got.position, got.role.name, got.device_type.model) == \
            (d["rack"], d["u"], d["role"], d["model"])
        assert got.device_type.u_height == d["height_u"]
    cables = {c.label: c for c in nb.dcim.cables.filter(site_id=site.id, limit=1000)}
    assert set(cables) == {link["id"] for link in plan["links"]}
    for link in plan["links"]:
        c = cables[link["id"]]
        ends = {(t.object.device.name, t.object.name) for t in [*c.a_terminations, *c.b_terminations]}
        assert ends == {(link["a"]["device"], link["a"]["port"]), (link["b"]["device"], link["b"]["port"])}
        assert float(c.length) == link["length_m"] and c.length_unit.value == "m"
    planned_ports = {(d["name"], p["name"]) for d in plan["devices"] for p in d["ports"]}
    interfaces = {(i.device.name, i.name) for i in nb.dcim.interfaces.filter(site_id=site.id, limit=5000)}
    assert planned_ports <= interfaces
    addresses = {a.address for a in nb.ipam.ip_addresses.filter(tag="railforge-tiny-roce", limit=5000)}
    assert {d["loopback"] for d in plan["devices"] if d.get("loopback")} <= addresses
    asns = {a.asn for a in nb.ipam.asns.filter(tag="railforge-tiny-roce")}
    assert asns == {d["asn"] for d in plan["devices"] if d.get("asn") is not None}
    prefixes = {p.prefix for p in nb.ipam.prefixes.filter(tag="railforge-tiny-roce")}
    assert prefixes == {p["prefix"] for p in plan["pools"]}


def test_second_push_writes_nothing_and_growth_only_adds(netbox, token_file, plans):
    two, three = plans
    again = push(netbox, token_file, two)
    assert again.returncode == 0, again.stderr
    assert writes(again) == 0
    nb = api(netbox)
    site = nb.dcim.sites.get(slug="tiny-roce")
    before = {d.name: (d.id, d.rack.name, d.position) for d in nb.dcim.devices.filter(site_id=site.id, limit=1000)}
    grown = push(netbox, token_file, three)
    assert grown.returncode == 0, grown.stderr
    assert writes(grown) > 0 and "updated" not in grown.stdout
    after = {d.name: (d.id, d.rack.name, d.position) for d in nb.dcim.devices.filter(site_id=site.id, limit=1000)}
    assert {k: after[k] for k in before} == before
    assert any(name.startswith("su003") for name in set(after) - set(before))
    assert writes(push(netbox, token_file, three)) == 0


def test_hand_edits_show_in_diff_and_block_push(netbox, token_file, plans):
    _, three = plans
    nb = api(netbox)
    clean = rf("sot", "diff", str(three), "--netbox", netbox.url, "--token-file", str(token_file))
    assert clean.returncode == 0, clean.stdout + clean.stderr
    site = nb.dcim.sites.get(slug="tiny-roce")
    cable = next(iter(nb.dcim.cables.filter(site_id=site.id, limit=1)))
    label = cable.label
    cable.delete()
    device = next(d for d in nb.dcim.devices.filter(site_id=site.id, role="node", limit=1000))
    device.position = device.position + 40 if device.position < 10 else 1
    device.save()
    proc = rf("sot", "diff", str(three), "--netbox", netbox.url, "--token-file", str(token_file))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert label in proc.stdout and device.name in proc.stdout
    refused = push(netbox, token_file, three)
    assert refused.returncode == 1 and device.name in refused.stderr
    fixed = push(netbox, token_file, three, "--apply-changes")
    assert fixed.returncode == 0, fixed.stderr
    final = rf("sot", "diff", str(three), "--netbox", netbox.url, "--token-file", str(token_file))
    assert final.returncode == 0, final.stdout + final.stderr


def wide_env() -> dict:
    import os

    return dict(os.environ, COLUMNS="300")


def sot_diff(netbox, token_file, folder):
    return rf("sot", "diff", str(folder), "--netbox", netbox.url, "--token-file", str(token_file), env=wide_env())


def diff_rows(proc) -> set[tuple[str, ...]]:
    """(change, object, name, field, live, planned) of every row `sot diff` printed."""
    rows = set()
    for line in proc.stdout.splitlines():
        cells = [c.strip() for c in line.strip().strip("│┃").split("│")]
        if len(cells) == 6 and cells[0] in ("update", "missing", "unexpected", "conflict"):
            rows.add(tuple(cells))
    return rows


NOT_EDITED = {
    ("site", "slug"): "the site is found by its slug: a changed slug reads as the site missing",
    ("interface", "device"): "part of an interface's key: one moved to another device reads as missing + unexpected",
}
"""Owned fields the hand-edit test does not edit in place, and why."""


def owned_fields(product) -> set[tuple[str, str]]:
    from tests.sot.test_sot_compare import adapter

    return {(k.cls, f.api) for k in adapter(product).kinds() for f in k.fields}


def free_u(devices, heights: dict, rack_height: int, height: int) -> int:
    """The lowest U of a rack holding `devices` (each with `position` and `device_type.id`) where `height` units
    are free on both faces."""
    taken = set()
    for d in devices:
        if d.position:
            taken |= {int(d.position) + n for n in range(heights[d.device_type.id] or 1)}
    return next(u for u in range(1, rack_height - height + 2) if not taken & set(range(u, u + height)))


class HandEdits:
    """Hand edits made through a product's API, the `sot diff` row each must give (change, class, name, field, live,
    planned; planned as railforge wrote it, read before the edit) and the (class, field) each row proves."""

    def __init__(self) -> None:
        self.rows: set[tuple[str, ...]] = set()
        self.proves: dict[tuple[str, str], tuple[str, ...]] = {}

    def row(self, cls: str, name, fld: str, live, planned) -> None:
        r = ("update", cls, str(name), fld, "(none)" if live in (None, "") else str(live),
             "(none)" if planned in (None, "") else str(planned))
        self.rows.add(r)
        self.proves[(cls, fld)] = r

    def edit(self, obj, cls: str, name, changes: dict, shown: dict | None = None) -> None:
        before = {k: getattr(obj, k) for k in changes}
        assert obj.update(changes), (cls, name, changes)
        for k, v in changes.items():
            live, planned = (shown or {}).get(k, (v, before[k]))
            self.row(cls, name, k, live, getattr(planned, "value", planned))


def edit_every_owned_field(nb, site) -> tuple[set, dict]:
    """One hand edit of every field railforge owns, through NetBox's API: the rows `sot diff` must show
    (change, class, name, field, live, planned; planned as railforge wrote it, read before the edit), and the
    (class, field) each row proves."""
    tag = "railforge-tiny-roce"
    edits = HandEdits()
    row, edit = edits.row, edits.edit

    site.update({"status": "active"})
    row("site", "tiny-roce", "status", "active", "planned")
    nodes = list(nb.dcim.devices.filter(site_id=site.id, role="node", tag=tag, limit=1000))
    node, other = nodes[0], nodes[1]
    node_type = nb.dcim.device_types.get(node.device_type.id)
    leaf = next(iter(nb.dcim.devices.filter(site_id=site.id, role="leaf", tag=tag, limit=1)))
    leaf_type = nb.dcim.device_types.get(leaf.device_type.id)
    spare_rack = next(r for r in nb.dcim.racks.filter(site_id=site.id, tag=tag) if r.id != leaf.rack.id)
    heights = {t.id: int(t.u_height) for t in nb.dcim.device_types.all()}  # before any height changes
    u = free_u(nb.dcim.devices.filter(rack_id=spare_rack.id, limit=1000), heights, int(spare_rack.u_height),
               heights[leaf_type.id])
    maker = nb.dcim.manufacturers.get(node_type.manufacturer.id)
    edit(maker, "manufacturer", maker.name, {"slug": "by-hand-maker"})
    role = nb.dcim.device_roles.get(node.role.id)
    edit(role, "device role", role.name, {"slug": "by-hand-role", "color": "000000"})
    vendor = nb.dcim.manufacturers.create(name="By Hand Vendor", slug="by-hand-vendor")
    edit(node_type, "device type", node_type.model,
         {"manufacturer": vendor.id, "slug": "by-hand-type", "u_height": int(node_type.u_height) - 1,
          "is_full_depth": False},
         {"manufacturer": (vendor.name, maker.name), "u_height": (int(node_type.u_height) - 1,
                                                                  int(node_type.u_height))})
    vrf = nb.ipam.vrfs.get(name=tag)
    edit(vrf, "VRF", vrf.name, {"enforce_unique": False, "description": "by hand"})
    rir = nb.ipam.rirs.get(slug=tag)
    edit(rir, "RIR", rir.slug, {"name": "by hand", "is_private": False})
    rack = nb.dcim.racks.get(node.rack.id)
    edit(rack, "rack", rack.name, {"u_height": int(rack.u_height) + 2, "description": "by hand",
                                   "status": "deprecated", "width": 23})
    edit(leaf, "device", leaf.name, {"rack": spare_rack.id, "position": u},
         {"rack": (spare_rack.name, leaf.rack.name), "position": (u, int(leaf.position))})
    edit(node, "device", node.name, {"role": leaf.role.id, "device_type": leaf_type.id, "face": "rear",
                                     "status": "active", "description": "by hand"},
         {"role": (leaf.role.name, node.role.name), "device_type": (leaf_type.model, node_type.model)})
    port = next(i for i in nb.dcim.interfaces.filter(device_id=other.id) if i.speed and i.cable and not i.lag
                and i.type.value != "1000base-t")
    edit(port, "interface", f"{other.name}:{port.name}",
         {"type": "1000base-t", "speed": 1000, "mtu": 1234, "mgmt_only": not port.mgmt_only,
          "label": "by hand", "description": "by hand"})
    member = next(i for i in nb.dcim.interfaces.filter(device_id=other.id) if i.lag)
    edit(member, "interface", f"{other.name}:{member.name}", {"lag": None},
         {"lag": (None, f"{other.name}:{member.lag.name}")})
    leaf_ports = list(nb.dcim.interfaces.filter(device_id=leaf.id))  # only a virtual interface takes a parent
    child = next(i for i in leaf_ports if i.type.value == "virtual")
    phys = next(i for i in leaf_ports if i.type.value not in ("virtual", "lag"))
    edit(child, "interface", f"{leaf.name}:{child.name}", {"parent": phys.id},
         {"parent": (f"{leaf.name}:{phys.name}", None)})

    cables = list(nb.dcim.cables.filter(site_id=site.id, tag=tag, limit=1000))
    cable = next(c for c in cables if c.type)
    length = float(cable.length)
    edit(cable, "cable", cable.label, {"type": "cat8", "status": "connected", "color": "000000",
                                       "length": length + 7, "length_unit": "ft", "description": "by hand"},
         {"length": (length + 7, length)})
    moved = next(c for c in cables if c.id != cable.id)
    (a,), (b,) = moved.a_terminations, moved.b_terminations
    free = next(i for i in nb.dcim.interfaces.filter(device_id=b.object.device.id) if not i.cable
                and i.type.value not in ("virtual", "lag"))
    planned_ends = f"{a.object.device.name}:{a.object.name} - {b.object.device.name}:{b.object.name}"
    assert moved.update({"b_terminations": [{"object_type": "dcim.interface", "object_id": free.id}]})
    row("cable", moved.label, "terminations", f"{a.object.device.name}:{a.object.name} - "
        f"{b.object.device.name}:{free.name}", planned_ends)

    prefix = next(iter(nb.ipam.prefixes.filter(tag=tag, limit=1)))
    edit(prefix, "prefix", str(prefix.prefix), {"vrf": None, "status": "deprecated", "description": "by hand"},
         {"vrf": (None, tag)})
    addresses = list(nb.ipam.ip_addresses.filter(tag=tag, role="loopback", limit=100))
    address = addresses[0]
    key = f"{address.assigned_object.device.name}:{address.address}"
    edit(address, "IP address", key, {"vrf": None, "role": "secondary", "status": "deprecated",
                                      "description": "by hand"}, {"vrf": (None, tag)})
    other_address = addresses[1]
    owner = other_address.assigned_object
    elsewhere = next(i for i in nb.dcim.interfaces.filter(device_id=owner.device.id) if i.id != owner.id)
    assert other_address.update({"assigned_object_type": "dcim.interface", "assigned_object_id": elsewhere.id})
    row("IP address", f"{owner.device.name}:{other_address.address}", "assigned_object",
        f"{owner.device.name}:{elsewhere.name}", f"{owner.device.name}:{owner.name}")
    asn = next(iter(nb.ipam.asns.filter(tag=tag, limit=1)))
    by_hand_rir = nb.ipam.rirs.create(name="By hand RIR", slug="by-hand-rir", is_private=True)
    edit(asn, "ASN", str(asn.asn), {"rir": by_hand_rir.id, "description": "by hand"},
         {"rir": (by_hand_rir.slug, tag)})
    vlan = next(iter(nb.ipam.vlans.filter(tag=tag, limit=1)))
    edit(vlan, "VLAN", str(vlan.vid), {"name": "by-hand", "status": "deprecated", "site": None},
         {"site": (None, "tiny-roce")})
    return edits.rows, edits.proves


def unexpected_rows(leaf: str) -> set[tuple[str, ...]]:
    """The `sot diff` rows of what add_unexpected makes by hand, on either product: an owned VLAN the plan does not
    know, and six untagged objects in the plan's scope (a rack, a device, its two interfaces, a cable between them,
    an interface on the planned switch `leaf`)."""
    foreign = "in the plan's scope, not in the plan (not railforge's)"
    return {("unexpected", "VLAN", "3999", "", "railforge's tag, not in the plan", ""),
            ("unexpected", "rack", "by-hand-rack", "", foreign, ""),
            ("unexpected", "device", "by-hand-spare", "", foreign, ""),
            ("unexpected", "interface", "by-hand-spare:eth0", "", foreign, ""),
            ("unexpected", "interface", "by-hand-spare:eth1", "", foreign, ""),
            ("unexpected", "cable", "by-hand-cable", "", foreign, ""),
            ("unexpected", "interface", f"{leaf}:by-hand0", "", foreign, "")}


def add_unexpected(nb, site, tag: str) -> tuple[set, list]:
    """An owned VLAN the plan does not know, and untagged objects added by hand in the plan's site: a rack, a
    device with two interfaces and a cable between them, an interface on a planned switch."""
    nb.ipam.vlans.create(vid=3999, name="by-hand", status="active", site=site.id, tags=[{"slug": tag}])
    leaf = next(iter(nb.dcim.devices.filter(site_id=site.id, role="leaf", tag=tag, limit=1)))
    rack = nb.dcim.racks.create(name="by-hand-rack", site=site.id, status="active")
    spare = nb.dcim.devices.create(name="by-hand-spare", site=site.id, role=leaf.role.id,
                                   device_type=leaf.device_type.id, status="offline")
    ends = [nb.dcim.interfaces.create(device=spare.id, name=n, type="1000base-t") for n in ("eth0", "eth1")]
    cable = nb.dcim.cables.create(label="by-hand-cable", a_terminations=[{"object_type": "dcim.interface",
                                                                         "object_id": ends[0].id}],
                                  b_terminations=[{"object_type": "dcim.interface", "object_id": ends[1].id}])
    stray = nb.dcim.interfaces.create(device=leaf.id, name="by-hand0", type="virtual")
    return unexpected_rows(leaf.name), [stray, cable, spare, rack]


def test_every_owned_field_edited_by_hand_is_seen_refused_and_restored(netbox, token_file, plans):
    """Every field railforge owns on every class it writes (the `Kind` tables; two left out, said why in
    NOT_EDITED) edited by hand through NetBox's API, and objects added by hand in the plan's site: one `sot diff`
    shows each edit as one row with its live and planned value side by side and each added object as
    `unexpected`; `push` refuses and writes nothing; `--apply-changes` restores every owned field, re-terminates
    the moved cable, deletes the owned stray and leaves the foreign objects alone; then `diff` lists only those."""
    _, three = plans
    assert push(netbox, token_file, three).returncode == 0  # in step (a no-op after the tests above)
    assert sot_diff(netbox, token_file, three).returncode == 0
    nb = api(netbox)
    site = nb.dcim.sites.get(slug="tiny-roce")
    rows, proves = edit_every_owned_field(nb, site)
    assert set(proves) | set(NOT_EDITED) == owned_fields(NetBox), owned_fields(NetBox) - set(proves)
    unexpected, foreign = add_unexpected(nb, site, "railforge-tiny-roce")

    proc = sot_diff(netbox, token_file, three)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    got = diff_rows(proc)

    def numeric(rs):
        return {r[:4] + (float(r[4]), float(r[5])) if r[3] == "length" else r for r in rs}

    assert numeric(got) == numeric(rows | unexpected), (sorted(numeric(got) - numeric(rows | unexpected)),
                                                        sorted(numeric(rows | unexpected) - numeric(got)))

    refused = push(netbox, token_file, three)
    assert refused.returncode == 1 and f"{len(rows) + 1} difference(s)" in refused.stderr, refused.stderr
    assert numeric(diff_rows(sot_diff(netbox, token_file, three))) == numeric(got)
    fixed = push(netbox, token_file, three, "--apply-changes")
    assert fixed.returncode == 0, fixed.stderr
    assert f"{len(unexpected) - 1} object(s) in the plan's scope that railforge does not own" in fixed.stderr
    assert nb.ipam.vlans.get(vid=3999) is None
    assert diff_rows(sot_diff(netbox, token_file, three)) == {r for r in unexpected if r[1] != "VLAN"}
    for obj in foreign:
        obj.delete()
    nb.dcim.manufacturers.get(slug="by-hand-vendor").delete()
    nb.ipam.rirs.get(slug="by-hand-rir").delete()
    assert sot_diff(netbox, token_file, three).returncode == 0
    assert writes(push(netbox, token_file, three)) == 0


def test_a_second_cluster_with_the_same_asns_and_addresses(netbox, token_file, plans, tmp_path):
    """Two railforge clusters in one NetBox, built from the same spec under two names: the same private ASNs and
    the same addresses. The second push succeeds (each cluster's prefixes and addresses in its own VRF; the ASNs,
    unique in NetBox, held by the first cluster's RIR and used as they are), both diffs are clean, and neither
    push changes the other's objects."""
    two, _ = plans
    twin = yaml.safe_load(SPEC.read_text())
    twin["name"] = "tiny-roce-twin"
    other = build(tmp_path, yaml.safe_dump(twin), "twin")
    nb = api(netbox)
    asns_before = {a.asn: (a.id, a.rir.id, [t.slug for t in a.tags]) for a in nb.ipam.asns.all()}
    first = push(netbox, token_file, other)
    assert first.returncode == 0, first.stderr
    assert writes(first) > 0
    assert {a.asn: (a.id, a.rir.id, [t.slug for t in a.tags]) for a in nb.ipam.asns.all()} == asns_before
    vrf = nb.ipam.vrfs.get(name="railforge-tiny-roce-twin")
    theirs = {str(a.address) for a in nb.ipam.ip_addresses.filter(vrf_id=vrf.id, limit=5000)}
    ours = {str(a.address) for a in nb.ipam.ip_addresses.filter(tag="railforge-tiny-roce", limit=5000)}
    assert theirs and theirs <= ours
    assert sot_diff(netbox, token_file, other).returncode == 0
    assert writes(push(netbox, token_file, other)) == 0
    proc = rf("sot", "diff", str(plans[1]), "--netbox", netbox.url, "--token-file", str(token_file))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_bad_token_url_and_foreign_objects(netbox, token_file, plans, tmp_path):
    two, _ = plans
    bad = tmp_path / "bad-token"
    bad.write_text("0" * 40)
    proc = rf("sot", "push", str(two), "--netbox", netbox.url, "--token-file", str(bad))
    assert proc.returncode == 2 and "refused the token" in proc.stderr and "Traceback" not in proc.stderr
    proc = rf("sot", "push", str(two), "--netbox", "http://127.0.0.1:1", "--token-file", str(token_file))
    assert proc.returncode == 2 and "cannot reach NetBox" in proc.stderr
    proc = rf("sot", "push", str(two), "--netbox", "http://bad host/", "--token-file", str(token_file))
    assert proc.returncode == 2 and "expected an http" in proc.stderr
    assert netbox.token not in proc.stdout + proc.stderr
    foreign = yaml.safe_load(SPEC.read_text())
    foreign["name"] = "someone-else"
    other = build(tmp_path, yaml.safe_dump(foreign), "other")
    nb = api(netbox)
    nb.dcim.sites.create(name="someone-else", slug="someone-else", status="active")
    proc = push(netbox, token_file, other)
    assert proc.returncode == 2 and "does not own" in proc.stderr and "site someone-else" in proc.stderr
