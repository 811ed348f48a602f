"""The NetBox import CSVs (`generated/netbox/*.csv`) loaded through NetBox 4.7's own bulk-import views, as a person
pastes them, into a NetBox of their own."""

from __future__ import annotations

import re

import pytest
import requests

from tests.conftest import ROOT
from tests.sot.test_netbox import api, build, netbox  # noqa: F401 - `netbox` is a module fixture: one server here

pytestmark = [pytest.mark.root, pytest.mark.slow]


def _import_csv(session: requests.Session, url: str, path: str, text: str) -> list[str]:
    """POST one CSV to NetBox's bulk-import view (as a person pastes it); the error texts it shows, if any."""
    page = session.get(f"{url}/{path}/import/")
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    resp = session.post(f"{url}/{path}/import/", data={"csrfmiddlewaretoken": csrf, "data": text,
                                                        "format": "csv", "csv_delimiter": ","},
                        headers={"Referer": f"{url}/{path}/import/"})
    errors = re.findall(r'class="[^"]*(?:errorlist|alert-danger|invalid-feedback)[^"]*"[^>]*>(.*?)</', resp.text,
                        re.S)
    return [re.sub(r"<[^>]+>", "", e).strip() for e in errors if e.strip()] + (
        [f"HTTP {resp.status_code}"] if resp.status_code >= 400 else [])


def test_csv_import_files_load_with_zero_errors(netbox, tmp_path):  # noqa: F811
    """In a NetBox of its own: the CSV forms name a device by its name alone, which another cluster's
    su001-gpu01 would make ambiguous, and NetBox's global table refuses a second cluster's identical addresses
    (limits of the import format; the API push is tested in test_netbox.py)."""
    from tests.helpers.sot_servers import ADMIN, PASSWORD

    out = build(tmp_path, (ROOT / "inventory" / "roce-a800-4nic" / "cluster.yaml").read_text(), "a800")
    session = requests.Session()
    login = session.get(f"{netbox.url}/login/")
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login.text).group(1)
    session.post(f"{netbox.url}/login/", data={"csrfmiddlewaretoken": csrf, "username": ADMIN,
                                                "password": PASSWORD}, headers={"Referer": f"{netbox.url}/login/"})
    views = {"01-sites.csv": "dcim/sites", "02-manufacturers.csv": "dcim/manufacturers",
             "03-device-roles.csv": "dcim/device-roles", "04-device-types.csv": "dcim/device-types",
             "05-racks.csv": "dcim/racks", "06-devices.csv": "dcim/devices", "07-interfaces.csv": "dcim/interfaces",
             "08-cables.csv": "dcim/cables", "09-ip-addresses.csv": "ipam/ip-addresses"}
    nb = api(netbox)
    existing = {m.name for m in nb.dcim.manufacturers.all()}
    existing_roles = {r.name for r in nb.dcim.device_roles.all()}
    existing_types = {t.model for t in nb.dcim.device_types.all()}
    for name, view in views.items():
        text = (out / "netbox" / name).read_text()
        lines = text.splitlines()
        if name == "02-manufacturers.csv":  # a NetBox of its own: nothing is there before
            lines = [lines[0], *[x for x in lines[1:] if x.split(",")[0] not in existing]]
        if name == "03-device-roles.csv":
            lines = [lines[0], *[x for x in lines[1:] if x.split(",")[0] not in existing_roles]]
        if name == "04-device-types.csv":
            lines = [lines[0], *[x for x in lines[1:] if x.split(",")[1] not in existing_types]]
        if len(lines) == 1:
            continue
        assert _import_csv(session, netbox.url, view, "\n".join(lines)) == [], name
    site = nb.dcim.sites.get(name="roce-a800-4nic")
    assert site is not None
    plan_links = (out / "cabling.csv").read_text().count("\n") - 1
    assert nb.dcim.cables.count(site_id=site.id) == plan_links
    a800 = nb.dcim.device_types.get(model="HGX-A800")
    assert a800.u_height == 6
