"""`railforge sot push` / `sot diff` against a real NetBox 4.7 (PostgreSQL 15 + Redis on loopback), and the
NetBox import CSVs loaded through NetBox's own bulk-import views."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
import yaml

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


def test_every_field_class_edited_by_hand_is_seen_refused_and_restored(netbox, token_file, plans):
    """One hand edit per field class railforge owns (a cable's colour and length, a device's status and face, an
    interface's speed and description, a rack's status, an address's status), an owned object the plan does not
    know and a foreign one in the plan's site: `sot diff` shows each with its live and planned value, `push`
    refuses, `--apply-changes` restores every owned one and leaves the foreign object alone."""
    _, three = plans
    assert sot_diff(netbox, token_file, three).returncode == 0
    nb = api(netbox)
    site = nb.dcim.sites.get(slug="tiny-roce")
    cable = next(iter(nb.dcim.cables.filter(site_id=site.id, limit=1)))
    colour, length = cable.color, float(cable.length)
    cable.update({"color": "000000", "length": length + 7})
    device = next(iter(nb.dcim.devices.filter(site_id=site.id, role="node", limit=1)))
    device.update({"status": "active"})
    port = next(i for i in nb.dcim.interfaces.filter(device_id=device.id) if i.speed)
    speed, port_description = port.speed, port.description
    port.update({"speed": 1000, "description": "moved by hand"})
    rack = nb.dcim.racks.get(device.rack.id)
    rack.update({"status": "deprecated"})
    address = next(iter(nb.ipam.ip_addresses.filter(tag="railforge-tiny-roce", limit=1)))
    address.update({"status": "deprecated"})
    owned_vlan = nb.ipam.vlans.create(vid=3999, name="by-hand", status="active", site=site.id,
                                      tags=[{"slug": "railforge-tiny-roce"}])
    role = nb.dcim.device_roles.get(name=device.role.name)
    foreign = nb.dcim.devices.create(name="by-hand-spare", site=site.id, role=role.id,
                                     device_type=device.device_type.id, status="offline")

    proc = sot_diff(netbox, token_file, three)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    rows = diff_rows(proc)
    expected = {
        ("update", "cable", cable.label, "color", "000000", colour),
        ("update", "device", device.name, "status", "active", "planned"),
        ("update", "interface", f"{device.name}:{port.name}", "speed", "1000", str(speed)),
        ("update", "interface", f"{device.name}:{port.name}", "description", "moved by hand",
         port_description or "(none)"),
        ("update", "rack", rack.name, "status", "deprecated", "planned"),
        ("update", "IP address", f"{address.assigned_object.device.name}:{address.address}", "status", "deprecated",
         "active"),
        ("unexpected", "VLAN", "3999", "", "railforge's tag, not in the plan", ""),
        ("unexpected", "device", "by-hand-spare", "", "in the plan's scope, not in the plan (not railforge's)", ""),
    }
    lengths = [(float(live), float(planned)) for kind, cls, name, fld, live, planned in rows
               if (cls, name, fld) == ("cable", cable.label, "length")]
    assert lengths == [(length + 7, length)], sorted(rows)
    assert expected <= rows, sorted(rows)
    assert len(rows) == len(expected) + 1, sorted(rows - expected)

    refused = push(netbox, token_file, three)
    assert refused.returncode == 1 and "difference(s)" in refused.stderr, refused.stderr
    assert nb.dcim.cables.get(cable.id).color == "000000"
    fixed = push(netbox, token_file, three, "--apply-changes")
    assert fixed.returncode == 0, fixed.stderr
    assert "1 object(s) in the plan's scope that railforge does not own" in fixed.stderr
    assert (nb.dcim.cables.get(cable.id).color, float(nb.dcim.cables.get(cable.id).length)) == (colour, length)
    assert nb.dcim.devices.get(device.id).status.value == "planned"
    assert nb.dcim.interfaces.get(port.id).speed == speed
    assert nb.ipam.vlans.get(owned_vlan.id) is None
    assert nb.dcim.devices.get(foreign.id) is not None
    left = diff_rows(sot_diff(netbox, token_file, three))
    assert left == {("unexpected", "device", "by-hand-spare", "", "in the plan's scope, not in the plan "
                     "(not railforge's)", "")}
    foreign.delete()
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
