"""NetBox device types come from the plan: a server model or a switch from the spec's own catalog gets its
real U height and vendor (before, both came from the built-in catalog, so an 8U HGX-H100 was imported as 1U)."""

from __future__ import annotations

import csv
import io

import orjson
import yaml

from railforge.formats.output import Output
from railforge.plan.io import read_plan, write_plan
from railforge.render import netbox
from tests.conftest import ROOT, run_cli

SPEC = ROOT / "tests" / "specs" / "configs-cumulus.yaml"


def _rows(path) -> dict[str, dict[str, str]]:
    return {r["model"]: r for r in csv.DictReader(io.StringIO(path.read_text(encoding="utf-8")))}


def test_device_types_take_height_and_vendor_from_the_spec(tmp_path):
    spec = yaml.safe_load(SPEC.read_text(encoding="utf-8"))
    run_cli("build", str(SPEC), "--out", str(tmp_path), "--only", "netbox,plan")
    types = _rows(tmp_path / "netbox" / "04-device-types.csv")
    node = spec["node"]["model"]
    assert types[node]["u_height"] == str(spec["node"]["height_u"]) == "8"
    assert types[node]["manufacturer"] == netbox.GENERIC_VENDOR
    for model, entry in spec["catalog"]["switches"].items():
        assert (types[model]["manufacturer"], types[model]["u_height"]) == (entry["vendor"], str(entry["height_u"]))
    makers = (tmp_path / "netbox" / "02-manufacturers.csv").read_text(encoding="utf-8")
    makers = {r["name"] for r in csv.DictReader(io.StringIO(makers))}
    assert {e["vendor"] for e in spec["catalog"]["switches"].values()} <= makers


def test_device_types_round_trip_and_old_plans_fall_back_to_device_heights(tmp_path):
    run_cli("build", str(SPEC), "--out", str(tmp_path / "new"), "--only", "plan")
    plan = read_plan(tmp_path / "new" / "plan.json")
    assert {t.model for t in plan.device_types} == {d.model for d in plan.devices}
    buf = io.BytesIO()
    write_plan(plan, buf)
    assert buf.getvalue() == (tmp_path / "new" / "plan.json").read_bytes()

    raw = orjson.loads(buf.getvalue())
    del raw["device_types"]
    (tmp_path / "old.json").write_bytes(orjson.dumps(raw))
    old = read_plan(tmp_path / "old.json")
    assert old.device_types == []
    out = Output(tmp_path / "old-out")
    netbox.render(old, out)
    out.commit()
    types = _rows(tmp_path / "old-out" / "netbox" / "04-device-types.csv")
    assert types["HGX-H100"]["u_height"] == "8" and types["HGX-H100"]["manufacturer"] == netbox.GENERIC_VENDOR
