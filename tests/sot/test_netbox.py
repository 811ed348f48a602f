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
