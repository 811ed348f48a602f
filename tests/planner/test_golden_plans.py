"""Golden plans (netlab-style input -> expected transformation): for every spec (each tests/specs/*.yaml and each
example inventory/*/cluster.yaml, found by glob), an excerpt of plan.json that a reader can check by eye -- the
cluster summary, the first device of every role with its cabled ports, and the first two cables of every fabric
tier -- compared byte for byte; and, for every spec small enough to keep, the whole plan.json as railforge wrote
it at schema_version 1 (tests/golden/plans-v1/<spec>.json.gz, written before issue 35 renamed the devices'
`sonic_platform`/`sonic_hwsku` to `platform`/`hwsku`): read back through the migrating reader, it must give this
build's plan.json byte for byte, so every field but the renamed two is unchanged.

The excerpts under tests/golden/plans/ were reviewed by eye. After a deliberate planner change, regenerate them
with `UPDATE_GOLDEN=1 pytest tests/planner/test_golden_plans.py` and review the diff before committing; that also
rewrites the schema_version 1 fixtures as version 1 of the new plans (the renamed keys back), so they keep
testing the migration.
"""

from __future__ import annotations

import difflib
import gzip
import io
import json
import os

import orjson
import pytest

from railforge.plan.io import RENAMED_IN_2, read_plan, write_plan
from tests.conftest import ROOT, run_cli

GOLDEN = ROOT / "tests" / "golden" / "plans"
GOLDEN_V1 = ROOT / "tests" / "golden" / "plans-v1"
SPEC_FILES = {**{p.stem: p for p in (ROOT / "tests" / "specs").glob("*.yaml")},
              **{p.parent.name: p for p in (ROOT / "inventory").glob("*/cluster.yaml")}}
SPECS = sorted(SPEC_FILES)
V1_MAX_BYTES = 200_000  # compressed; the 16K-GPU example's (1.6 MB) is left out
CLUSTER_KEYS = ("name", "fabric", "tiers", "mode", "uplinks", "host_addressing", "gpus", "nodes", "rails", "sus",
                "max_sus", "nodes_per_su")
DEVICE_KEYS = ("name", "role", "fabric", "model", "nos", "rack", "u", "height_u", "su", "rail", "asn", "loopback",
               "mgmt_address", "platform", "hwsku")
PORT_KEYS = ("name", "label", "speed_mbps", "breakout", "address", "link")
LINK_KEYS = ("id", "fabric", "tier", "speed_mbps", "media", "length_m", "su", "rail")


def excerpt(plan: dict) -> dict:
    first: dict[str, dict] = {}
    for d in plan["devices"]:
        first.setdefault(d["role"], d)
    devices = [{"device": {k: d[k] for k in DEVICE_KEYS},
                "ports": [{k: p[k] for k in PORT_KEYS} for p in d["ports"] if p["link"]]} for d in first.values()]
    links: dict[tuple[str, str], list[dict]] = {}
    for link in plan["links"]:
        group = links.setdefault((link["fabric"], link["tier"]), [])
        if len(group) < 2:
            group.append({**{k: link[k] for k in LINK_KEYS},
                          "a": f"{link['a']['device']}:{link['a']['port']}",
                          "b": f"{link['b']['device']}:{link['b']['port']}"})
    return {"cluster": {k: plan["cluster"][k] for k in CLUSTER_KEYS},
            "counts": {"devices": len(plan["devices"]), "links": len(plan["links"])},
            "devices": devices, "links": [x for group in links.values() for x in group],
            "device_types": plan["device_types"]}


def text(x: dict) -> str:
    """JSON with one device, port or cable per line, so a reviewer reads it like a table."""
    def one(v: object) -> str:
        return json.dumps(v, separators=(", ", ": "))

    devices = ",\n".join(one(d["device"])[:-1] + ', "ports": [\n  ' + ",\n  ".join(map(one, d["ports"])) + "]}"
                          for d in x["devices"])
    return ("{\n" + f'"cluster": {one(x["cluster"])},\n"counts": {one(x["counts"])},\n'
            + f'"devices": [\n{devices}],\n"links": [\n' + ",\n".join(map(one, x["links"]))
            + '],\n"device_types": [\n' + ",\n".join(map(one, x["device_types"])) + "]\n}\n")


UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"


@pytest.fixture(scope="module")
def plan_of(tmp_path_factory):
    """plan_of(spec) -> the plan.json bytes `railforge build --only plan` writes for it, built once."""
    cache: dict[str, bytes] = {}

    def build(spec: str) -> bytes:
        if spec not in cache:
            out = tmp_path_factory.mktemp(spec)
            run_cli("build", str(SPEC_FILES[spec]), "--out", str(out), "--only", "plan")
            cache[spec] = (out / "plan.json").read_bytes()
        return cache[spec]

    return build


@pytest.mark.parametrize("spec", SPECS)
def test_golden_plan(spec, plan_of):
    actual = text(excerpt(orjson.loads(plan_of(spec))))
    assert json.loads(actual)["counts"]["devices"] > 0
    golden = GOLDEN / f"{spec}.json"
    if UPDATE:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(actual, encoding="utf-8")
        return
    assert golden.exists(), f"{golden} is missing (run with UPDATE_GOLDEN=1 and review it)"
    expected = golden.read_text(encoding="utf-8")
    diff = "\n".join(list(difflib.unified_diff(expected.splitlines(), actual.splitlines(), f"golden/{spec}.json",
                                               "built", lineterm="", n=2))[:60])
    assert actual == expected, diff


def as_schema_1(plan_json: bytes) -> bytes:
    """A plan.json as schema_version 1 wrote it: the renamed device keys under their old names."""
    data = orjson.loads(plan_json)
    back = {new: old for old, new in RENAMED_IN_2.items()}
    data["schema_version"] = 1
    data["devices"] = [{back.get(k, k): v for k, v in d.items()} for d in data["devices"]]
    return orjson.dumps(data, option=orjson.OPT_SORT_KEYS)


def _v1_fixtures() -> list[str]:
    return sorted(p.name.removesuffix(".json.gz") for p in GOLDEN_V1.glob("*.json.gz"))


@pytest.mark.parametrize("spec", _v1_fixtures())
def test_a_schema_1_plan_reads_as_this_build(spec, plan_of, tmp_path):
    fixture = GOLDEN_V1 / f"{spec}.json.gz"
    if UPDATE:
        fixture.write_bytes(gzip.compress(as_schema_1(plan_of(spec)), mtime=0))
        return
    old = gzip.decompress(fixture.read_bytes())
    assert orjson.loads(old)["schema_version"] == 1 and b'"sonic_platform":' in old
    (tmp_path / "plan.json").write_bytes(old)
    buf = io.BytesIO()
    write_plan(read_plan(tmp_path / "plan.json"), buf)
    assert buf.getvalue() == plan_of(spec)


def test_schema_1_fixtures_cover_every_spec_that_fits():
    left_out = {s for s in SPECS if s not in _v1_fixtures()}
    assert left_out == {"roce-16k-railplane"}
    assert all((GOLDEN_V1 / f"{s}.json.gz").stat().st_size <= V1_MAX_BYTES for s in _v1_fixtures())


def test_a_schema_1_plan_with_a_new_key_is_refused(plan_of, tmp_path):
    data = orjson.loads(as_schema_1(plan_of("tiny-roce")))
    data["devices"][-1]["platform"] = "x"
    (tmp_path / "plan.json").write_bytes(orjson.dumps(data))
    with pytest.raises(ValueError, match=r"devices\[\d+\]: 'platform' is not a key of a schema_version 1 plan"):
        read_plan(tmp_path / "plan.json")


def test_golden_folder_holds_only_the_cases():
    assert sorted(p.name for p in GOLDEN.iterdir()) == sorted(f"{s}.json" for s in SPECS)


def test_every_spec_is_a_case():
    assert len(SPECS) == len(list((ROOT / "tests" / "specs").glob("*.yaml"))) + len(list(
        (ROOT / "inventory").glob("*/cluster.yaml"))) and {"tiny-clos", "roce-16k-railplane"} <= set(SPECS)
