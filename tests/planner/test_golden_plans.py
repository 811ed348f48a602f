"""Golden plans (netlab-style input -> expected transformation): for every spec (each tests/specs/*.yaml and each
example inventory/*/cluster.yaml, found by glob), an excerpt of plan.json that a reader can check by eye -- the
cluster summary, the first device of every role with its cabled ports, and the first two cables of every fabric
tier -- compared byte for byte; and, for every spec small enough to keep, the whole plan.json as railforge wrote
it at schema_version 1 (tests/golden/plans-v1/<spec>.json.gz, written before issue 35 renamed the devices'
`sonic_platform`/`sonic_hwsku` to `platform`/`hwsku`, and before issue 40 replaced each link's rule part and
transceiver count with the parts laid): read back through the migrating reader (1 -> 2 -> 3), it must give this
build's plan.json byte for byte but the power facts an older plan cannot have.

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
from railforge.plan.model import SWITCH_ROLES
from tests.conftest import ROOT, run_cli

GOLDEN = ROOT / "tests" / "golden" / "plans"
GOLDEN_V1 = ROOT / "tests" / "golden" / "plans-v1"
SPEC_FILES = {**{p.stem: p for p in (ROOT / "tests" / "specs").glob("*.yaml")},
              **{p.parent.name: p for p in (ROOT / "inventory").glob("*/cluster.yaml")}}
SPECS = sorted(SPEC_FILES)
V1_MAX_BYTES = 200_000  # compressed; the 16K-GPU example's (1.6 MB) is left out
AFTER_V1 = {"configs-eos", "configs-eos-mlag"}  # Arista EOS came after schema 2: no schema 1 plan of them existed
CLUSTER_KEYS = ("name", "fabric", "tiers", "mode", "uplinks", "host_addressing", "gpus", "nodes", "rails", "sus",
                "max_sus", "nodes_per_su")
DEVICE_KEYS = ("name", "role", "fabric", "model", "nos", "rack", "u", "height_u", "su", "rail", "asn", "loopback",
               "mgmt_address", "platform", "hwsku")
PORT_KEYS = ("name", "label", "speed_mbps", "breakout", "address", "link")
LINK_KEYS = ("id", "fabric", "tier", "speed_mbps", "media", "length_m", "su", "rail", "part", "a_module", "b_module",
             "assembly")


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


def as_schema_2(data: dict) -> dict:
    """A plan as schema_version 2 wrote it: each link's media-rule part and transceiver count instead of the parts
    laid (the twin-port module at a split cage and the splitter back to the rule's part), no power facts."""
    twin_of = {twin: part for part, twin in data["twin_parts"].items()}
    rule_of = {splitter: part for part, by_ways in data["splitter_parts"].items() for splitter in by_ways.values()}
    split = {(d["name"], p["name"]) for d in data["devices"] if d["role"] in SWITCH_ROLES for p in d["ports"]
             if p["breakout"][:1].isdigit() and int(p["breakout"].split("x")[0]) > 1}
    for link in data["links"]:
        modules = [twin_of.get(m, m) if (link[e]["device"], link[e]["port"]) in split else m
                   for e, m in (("a", link.pop("a_module")), ("b", link.pop("b_module")))]
        assembly = link.pop("assembly")
        if modules[0] is not None:
            link.update(part=modules[0], transceivers=2)
        else:
            link.update(part=rule_of.get(link["part"], link["part"]) if assembly else link["part"], transceivers=0)
    data.pop("power", None)
    data["schema_version"] = 2
    return data


def as_schema_1(plan_json: bytes) -> bytes:
    """A plan.json as schema_version 1 wrote it: the renamed device keys under their old names (and the links as
    version 2 had them)."""
    data = as_schema_2(orjson.loads(plan_json))
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
    (tmp_path / "new.json").write_bytes(plan_of(spec))
    built = read_plan(tmp_path / "new.json")
    assert built.power is not None
    built.power = None  # schema 3 added the power facts, which an older plan cannot have
    expected = io.BytesIO()
    write_plan(built, expected)
    assert buf.getvalue() == expected.getvalue()


def test_schema_1_fixtures_cover_every_spec_that_fits():
    left_out = {s for s in SPECS if s not in _v1_fixtures()}
    assert left_out == {"roce-16k-railplane"} | AFTER_V1
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


GOLDEN_V2 = ROOT / "tests" / "golden" / "plans-v2"


@pytest.mark.parametrize("spec", sorted(p.name.removesuffix(".json.gz") for p in GOLDEN_V2.glob("*.json.gz")))
def test_a_plan_railforge_wrote_at_schema_2_reads_with_the_parts_this_build_lays(spec, plan_of, tmp_path):
    """plan.json as railforge wrote it at schema_version 2 (commit fe0f1fa, before the links named the parts laid):
    read through the migrating reader, every link equals this build's (the same cable, splitter and module parts
    the planner lays now), so the renumbering guard and `railforge diff` see no cable changed; devices differ only
    in their loopbacks, which now start at the pool's first host address (issue 40), and in the nodes' HCA names
    (issue 38, from the hardware's documentation)."""
    old = gzip.decompress((GOLDEN_V2 / f"{spec}.json.gz").read_bytes())
    assert orjson.loads(old)["schema_version"] == 2 and b'"transceivers":' in old
    (tmp_path / "plan.json").write_bytes(old)
    migrated = read_plan(tmp_path / "plan.json")
    (tmp_path / "new.json").write_bytes(plan_of(spec))
    built = read_plan(tmp_path / "new.json")
    assert migrated.links == built.links
    assert any(link.assembly for link in built.links) and any(link.a_module for link in built.links)
    renumbered = {d.name for d, e in zip(migrated.devices, built.devices, strict=True) if d.loopback != e.loopback}
    assert renumbered == {d.name for d in built.devices if d.loopback}
    for d, e in zip(migrated.devices, built.devices, strict=True):
        d.loopback = e.loopback
        for r, s in zip(d.rails, e.rails, strict=True):
            r.hca = s.hca  # issue 38 named the HCAs from the DGX user guide (mlx5_0,3,4,...) after fe0f1fa
    assert migrated.devices == built.devices
