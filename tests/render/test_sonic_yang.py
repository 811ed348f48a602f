"""Every SONiC config_db.json railforge writes, checked by SONiC's own YANG models (yanglint, libyang 2)
and against the platform's own port map (platform.json), for every example and test spec that runs
SONiC anywhere (compute, storage or OOB); and the checks shown to catch bad files."""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path

import pytest

from railforge.nos.sonic_platform import PlatformError, load_platform
from railforge.planner import build_plan
from railforge.spec import load_spec
from tests.conftest import ROOT, require_tool, run_cli
from tests.helpers.sonic_yang import MODELS, SonicYang, UnknownTable, merged, port_map_findings

PLATFORMS = ROOT / "railforge" / "nos" / "sonic" / "platforms"
BUFFER_DEFAULTS = json.loads((ROOT / "tests" / "sonic" / "platform-buffer-defaults.json").read_text())
SPECS = sorted([*ROOT.glob("inventory/*/cluster.yaml"), *ROOT.glob("tests/specs/*.yaml")])


def _sonic_specs() -> list[Path]:
    out = []
    for path in SPECS:
        spec, _ = load_spec(path)
        if "sonic" in (spec.compute.nos, spec.storage.nos, spec.oob.nos):
            out.append(path)
    return out


SONIC_SPECS = _sonic_specs()


@pytest.fixture(scope="module")
def yang():
    require_tool("yanglint")
    return SonicYang(MODELS)


@pytest.fixture(scope="module")
def configs(tmp_path_factory) -> dict[str, tuple[dict, str]]:
    """'<spec>/<switch>' -> (config_db, platform) for every SONiC switch of every spec."""
    out = {}
    for path in SONIC_SPECS:
        name = path.parent.name if path.name == "cluster.yaml" else path.stem
        folder = tmp_path_factory.mktemp(name) / "out"
        run_cli("build", str(path), "--out", str(folder), "--only", "sonic")
        spec, lines = load_spec(path)
        for dev in build_plan(spec, lines, str(path)).devices:
            if dev.nos == "sonic":
                db = json.loads((folder / "configs" / dev.name / "config_db.json").read_text())
                out[f"{name}/{dev.name}"] = (db, dev.sonic_platform)
    return out


def test_the_sonic_specs_are_found():
    names = {p.parent.name if p.name == "cluster.yaml" else p.stem for p in SONIC_SPECS}
    assert {"roce-a800-4nic", "configs-sonic", "tiny-roce", "sonic-th5"} <= names


def test_every_config_db_validates_against_sonic_yang_merged_with_platform_buffers(yang, configs):
    start = time.monotonic()
    failures = yang.validate({k: merged(BUFFER_DEFAULTS, db) for k, (db, _) in configs.items()})
    elapsed = time.monotonic() - start
    assert not failures, "\n".join(f"{k}: {v[:600]}" for k, v in sorted(failures.items()))
    assert len(configs) >= 60
    print(f"{len(configs)} config_db.json valid in {elapsed:.1f} s")


def test_every_port_follows_the_platform_port_map(configs):
    platforms = {p for _, p in configs.values()}
    assert platforms >= {"x86_64-mlnx_msn4700-r0", "x86_64-mlnx_msn4600c-r0", "x86_64-nvidia_sn2201-r0",
                         "x86_64-nvidia_sn5600-r0", "x86_64-micas_m2-w6940-128qc-r0"}
    findings = {k: f for k, (db, p) in configs.items() if (f := port_map_findings(db, PLATFORMS / p / "platform.json"))}
    assert not findings, json.dumps(findings, indent=1)[:3000]
    assert all(db["PORT"] and db["BREAKOUT_CFG"] for db, _ in configs.values())


def test_buffer_profiles_are_the_platform_defaults_and_nothing_else(yang, configs):
    """railforge references the platform's lossy/lossless profiles by name and defines none; alone a file
    fails exactly on those references, merged with the defaults it validates (the test above)."""
    referenced = {e["profile"] for db, _ in configs.values() for t in ("BUFFER_PG", "BUFFER_QUEUE")
                  for e in db.get(t, {}).values()} - {"NULL"}
    assert referenced == set(BUFFER_DEFAULTS["BUFFER_PROFILE"])
    assert not any("BUFFER_PROFILE" in db or "BUFFER_POOL" in db for db, _ in configs.values())
    leaf = configs["roce-a800-4nic/su001-leaf-r0"][0]
    failures = yang.validate({"alone": leaf})
    assert "Invalid leafref value" in failures["alone"] and "_lossy_profile" in failures["alone"]
    without_refs = {k: v for k, v in leaf.items() if k not in ("BUFFER_PG", "BUFFER_QUEUE")}
    assert yang.validate({"no buffer references": without_refs}) == {}


def test_oob_vlan_comes_from_the_spec_and_defaults_to_100(configs):
    assert set(configs["sonic-th5/su001-oob1"][0]["VLAN"]) == {"Vlan200"}
    assert set(configs["roce-a800-4nic/su001-oob1"][0]["VLAN"]) == {"Vlan100"}
    assert configs["roce-a800-4nic/su001-oob1"][0]["VLAN"]["Vlan100"]["vlanid"] == "100"


def test_a_plan_without_platform_names_is_refused_by_the_renderer():
    from railforge.render.sonic import PlatformMismatch, config_db
    from railforge.render.switch_model import build_models

    spec, lines = load_spec(ROOT / "tests" / "specs" / "tiny-roce.yaml")
    plan = build_plan(spec, lines)
    leaf = next(d for d in plan.devices if d.name == "su001-leaf-r0")
    leaf.sonic_platform = None
    with pytest.raises(PlatformMismatch, match="su001-leaf-r0: the plan names no SONiC platform"):
        config_db(next(m for m in build_models(plan, select=lambda n: n == "su001-leaf-r0")))
    leaf.sonic_platform, leaf.ports[0].lanes = "x86_64-nvidia_sn5600-r0", [9]
    with pytest.raises(PlatformMismatch, match=r"plan port Ethernet0 \(lanes \[9\]\) is Ethernet0"):
        config_db(next(m for m in build_models(plan, select=lambda n: n == "su001-leaf-r0")))


# --- the checks catch bad files ---------------------------------------------------------------------------------

def _broken(configs, key: str) -> dict:
    return copy.deepcopy(merged(BUFFER_DEFAULTS, configs[key][0]))


def test_yang_rejects_vlan_1(yang, configs):
    db = _broken(configs, "roce-a800-4nic/su001-oob1")
    (name, vlan), = db["VLAN"].items()
    assert name != "Vlan1"
    db["VLAN"] = {"Vlan1": {**vlan, "vlanid": "1"}}
    db["VLAN_MEMBER"] = {"Vlan1|" + k.split("|")[1]: v for k, v in db["VLAN_MEMBER"].items()}
    db["VLAN_INTERFACE"] = {"Vlan1" + k.removeprefix(name): v for k, v in db["VLAN_INTERFACE"].items()}
    assert 'Unsatisfied pattern - "Vlan1"' in yang.validate({"x": db})["x"]


def test_an_unknown_table_is_a_failure_not_dropped(yang, configs):
    db = _broken(configs, "configs-sonic/spine01")
    db["RAILFORGE_NOTES"] = {"x": {"a": "b"}}
    with pytest.raises(UnknownTable, match="RAILFORGE_NOTES"):
        yang.to_xml(db)
    assert "RAILFORGE_NOTES" in yang.validate({"x": db})["x"]


def test_yang_rejects_a_reference_to_a_missing_port_and_a_bad_value(yang, configs):
    db = _broken(configs, "configs-sonic/spine01")
    db["INTERFACE"]["Ethernet999"] = {}
    assert 'Invalid leafref value "Ethernet999"' in yang.validate({"x": db})["x"]
    db = _broken(configs, "configs-sonic/spine01")
    next(iter(db["PORT"].values()))["mtu"] = "jumbo"
    assert "jumbo" in yang.validate({"x": db})["x"]
    db = _broken(configs, "configs-sonic/spine01")
    db["DEVICE_METADATA"]["localhost"]["not_a_field"] = "1"
    assert "not_a_field" in yang.validate({"x": db})["x"]


def test_port_map_check_catches_arithmetic_lanes_and_short_mode_names(configs):
    db, platform = configs["roce-a800-4nic/su001-stor-leaf1a"]
    assert platform == "x86_64-mlnx_msn4600c-r0"
    path = PLATFORMS / platform / "platform.json"
    bad = copy.deepcopy(db)
    bad["PORT"]["Ethernet4"]["lanes"] = "4,5,6,7"  # four lanes per cage: what arithmetic gave before
    assert port_map_findings(bad, path) == ["PORT Ethernet4: lanes '4,5,6,7', the platform says '8,9,10,11'"]
    bad = copy.deepcopy(db)
    bad["BREAKOUT_CFG"]["Ethernet0"]["brkout_mode"] = "1x100G"
    assert port_map_findings(bad, path)[0].startswith("BREAKOUT_CFG Ethernet0: mode '1x100G' is not one of")
    bad = copy.deepcopy(db)
    bad["PORT"]["Ethernet2"] = dict(bad["PORT"]["Ethernet0"])
    assert port_map_findings(bad, path) == ["PORT Ethernet2 is not a port of any BREAKOUT_CFG cage"]
    oob, platform = configs["roce-a800-4nic/su001-oob1"]
    bad = copy.deepcopy(oob)
    bad["PORT"]["Ethernet1"]["lanes"] = "1"
    assert port_map_findings(bad, PLATFORMS / platform / "platform.json") == [
        "PORT Ethernet1: lanes '1', the platform says '4'"]


# --- the platform port map, as the pinned upstream files say -----------------------------------------------------

def test_platform_port_facts():
    sn4600c = load_platform("x86_64-mlnx_msn4600c-r0", "ACS-MSN4600C")
    assert sn4600c.port(1, 1, 100_000, 0).lanes == (8, 9, 10, 11)
    p = sn4600c.port(1, 2, 50_000, 1)
    assert (p.name, p.lanes, p.alias, p.index, p.mode) == ("Ethernet6", (10, 11), "etp2b", "2", "2x50G[25G,10G,1G]")
    sn2201 = load_platform("x86_64-nvidia_sn2201-r0", "ACS-SN2201")
    assert [sn2201.port(c, 1, 1000, 0).lanes for c in (0, 1, 47)] == [(0,), (4,), (188,)]
    up = sn2201.port(48, 1, 100_000, 0)
    assert (up.name, up.lanes, up.mode) == ("Ethernet48", (192, 193, 194, 195), "1x100G[50G,40G,25G,10G]")
    assert sn2201.port(0, 1, 1000, 0).mode == "1x1000[100,10]"
    th5 = load_platform("x86_64-micas_m2-w6940-128qc-r0", "M2-W6940-128QC")
    first = th5.port(0, 1, 400_000, 0)
    assert (first.name, first.lanes, first.index, first.alias) == ("Ethernet1", (17, 18, 19, 20), "0", "Eth1")
    half = th5.port(0, 2, 200_000, 1)
    assert (half.name, half.lanes, half.alias, half.mode) == ("Ethernet3", (19, 20), "Eth1/2", "2x200G[100G]")
    sn4700 = load_platform("x86_64-mlnx_msn4700-r0", "ACS-MSN4700")
    assert sn4700.port(0, 2, 200_000, 1).mode == "2x200G[100G,50G,40G,25G,10G,1G]"
    assert sn4700.port(0, 4, 25_000, 3).lanes == (3,)  # 4x25G(4): four of the eight lanes
    with pytest.raises(PlatformError, match=r"offers no 4x100G breakout on Ethernet1 \(its modes: 1x400G, "):
        th5.port(0, 4, 100_000, 0)
    with pytest.raises(PlatformError, match="no hwsku 'NOPE'"):
        load_platform("x86_64-mlnx_msn4700-r0", "NOPE")
    with pytest.raises(PlatformError, match="no SONiC platform data for 'x86_64-none'"):
        load_platform("x86_64-none", "X")
