"""Golden plans (netlab-style input -> expected transformation): for a few small specs in tests/specs/, an
excerpt of plan.json that a reader can check by eye -- the cluster summary, the first device of every role with
its cabled ports, and the first two cables of every fabric tier -- compared byte for byte.

The files under tests/golden/plans/ were reviewed by eye once. After a deliberate planner change, regenerate
them with `UPDATE_GOLDEN=1 pytest tests/planner/test_golden_plans.py` and review the diff before committing.
"""

from __future__ import annotations

import difflib
import json
import os

import orjson
import pytest

from tests.conftest import ROOT, run_cli

GOLDEN = ROOT / "tests" / "golden" / "plans"
SPECS = ("tiny-clos", "tiny-roce", "configs-ib", "ztp-mixed")
CLUSTER_KEYS = ("name", "fabric", "tiers", "mode", "uplinks", "host_addressing", "gpus", "nodes", "rails", "sus",
                "max_sus", "nodes_per_su")
DEVICE_KEYS = ("name", "role", "fabric", "model", "nos", "rack", "u", "height_u", "su", "rail", "asn", "loopback",
               "mgmt_address")
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


@pytest.mark.parametrize("spec", SPECS)
def test_golden_plan(spec, tmp_path):
    run_cli("build", str(ROOT / "tests" / "specs" / f"{spec}.yaml"), "--out", str(tmp_path), "--only", "plan")
    actual = text(excerpt(orjson.loads((tmp_path / "plan.json").read_bytes())))
    assert json.loads(actual)["counts"]["devices"] > 0
    golden = GOLDEN / f"{spec}.json"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(actual, encoding="utf-8")
        return
    assert golden.exists(), f"{golden} is missing (run with UPDATE_GOLDEN=1 and review it)"
    expected = golden.read_text(encoding="utf-8")
    diff = "\n".join(list(difflib.unified_diff(expected.splitlines(), actual.splitlines(), f"golden/{spec}.json",
                                               "built", lineterm="", n=2))[:60])
    assert actual == expected, diff


def test_golden_folder_holds_only_the_cases():
    assert sorted(p.name for p in GOLDEN.iterdir()) == sorted(f"{s}.json" for s in SPECS)
