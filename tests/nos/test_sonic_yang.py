"""Every SONiC config_db.json railforge writes, checked by SONiC's own YANG models (yanglint, libyang 2)
merged with the buffer and QoS tables its SKU's own templates write for its device type (rendered by
sonic-cfggen, railforge/nos/sonic/buffers), and against the platform's own port map (platform.json), for
every example and test spec that runs SONiC anywhere (compute, storage or OOB); the file as `config qos
reload` + `config load` leave it (types whose templates exist, the buffer model the SKU runs, no
overlapping BUFFER_PG/BUFFER_QUEUE keys); and the checks shown to catch bad files."""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path

import pytest

from railforge.nos.profile import PlatformError
from railforge.nos.sonic.buffer_defaults import BufferTemplateMissing, load_buffers, priorities
from railforge.nos.sonic.portmap import load_platform
from railforge.planner import build_plan
from railforge.spec import load_spec
from tests.conftest import ROOT, require_tool, run_cli
from tests.helpers.sonic_buffers import as_applied, buffermgrd_pg_keys, overlapping_keys, platform_defaults
from tests.helpers.sonic_yang import MODELS, SonicYang, UnknownTable, merged, port_map_findings

PLATFORMS = ROOT / "railforge" / "nos" / "sonic" / "platforms"
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
def configs(tmp_path_factory) -> dict[str, tuple[dict, str, str]]:
    """'<spec>/<switch>' -> (config_db, platform, hwsku) for every SONiC switch of every spec."""
    out = {}
    for path in SONIC_SPECS:
        name = path.parent.name if path.name == "cluster.yaml" else path.stem
        folder = tmp_path_factory.mktemp(name) / "out"
        run_cli("build", str(path), "--out", str(folder), "--only", "sonic")
        spec, lines = load_spec(path)
        for dev in build_plan(spec, lines, str(path)).devices:
            if dev.nos == "sonic":
                db = json.loads((folder / "configs" / dev.name / "config_db.json").read_text())
                out[f"{name}/{dev.name}"] = (db, dev.platform, dev.hwsku)
    return out


def test_the_sonic_specs_are_found():
    names = {p.parent.name if p.name == "cluster.yaml" else p.stem for p in SONIC_SPECS}
    assert {"roce-a800-4nic", "configs-sonic", "tiny-roce", "sonic-th5"} <= names


def _applied(configs) -> tuple[dict[str, dict], dict[str, str]]:
    applied, missing = {}, {}
    for k, (db, _, hwsku) in configs.items():
        try:
            applied[k] = as_applied(db, hwsku)
        except BufferTemplateMissing as e:
            missing[k] = str(e)
    return applied, missing


def test_every_config_db_validates_against_sonic_yang_merged_with_its_platforms_real_defaults(yang, configs):
    start = time.monotonic()
    applied, missing = _applied(configs)
    assert not missing, "\n".join(f"{k}: {v}" for k, v in sorted(missing.items()))
    failures = yang.validate(applied)
    elapsed = time.monotonic() - start
    assert not failures, "\n".join(f"{k}: {v[:600]}" for k, v in sorted(failures.items()))
    assert len(configs) >= 60
    assert {h for _, _, h in configs.values()} == {"ACS-SN5600", "M2-W6940-128QC", "ACS-MSN4700", "ACS-MSN4600C",
                                                    "ACS-SN2201"}
    print(f"{len(configs)} config_db.json valid with their platforms' rendered defaults in {elapsed:.1f} s")


# --- the three findings of issue 31: what `config qos reload` does with these files -------------------------------

def test_every_device_type_has_buffer_templates_on_its_sku(configs):
    """`config qos reload` renders buffers_defaults_<t>.j2 for DEVICE_METADATA.type; a SKU without it (SN5600:
    no t2) fails the reload after it has cleared every buffer table. Failed on railforge's output before issue 31:
    tiny-clos' SN5600 super-spines were SpineRouter."""
    types = {k: db["DEVICE_METADATA"]["localhost"]["type"] for k, (db, _, _) in configs.items()}
    assert {"LeafRouter", "BackEndToRRouter", "BackEndLeafRouter", "MgmtToRRouter"} <= set(types.values())
    missing = [f"{k}: {types[k]} on {h}" for k, (_, _, h) in sorted(configs.items())
               if not load_buffers(h).renders(types[k])]
    assert not missing, "\n".join(missing)
    for ss in ("tiny-clos/superspine-p01-01", "tiny-clos/superspine-p02-01"):
        assert (types[ss], configs[ss][2]) == ("LeafRouter", "ACS-SN5600")


def test_neighbour_metadata_names_the_type_each_sonic_peer_runs(configs):
    """A super-spine that runs LeafRouter is LeafRouter in its pod spines' DEVICE_NEIGHBOR_METADATA too."""
    own = {k: db["DEVICE_METADATA"]["localhost"]["type"] for k, (db, _, _) in configs.items()}
    checked = 0
    for k, (db, _, _) in configs.items():
        spec = k.split("/")[0]
        for peer, meta in db.get("DEVICE_NEIGHBOR_METADATA", {}).items():
            if f"{spec}/{peer}" in own:
                assert meta["type"] == own[f"{spec}/{peer}"], (k, peer, meta["type"])
                checked += 1
    assert checked >= 200
    up = [m["type"] for k, (db, _, _) in configs.items() if k.startswith("tiny-clos/pod")
          for peer, m in db["DEVICE_NEIGHBOR_METADATA"].items() if peer.startswith("superspine")]
    assert len(up) == 4 and set(up) == {"LeafRouter"}


def test_buffer_keys_do_not_overlap_the_templates_keys_after_config_qos_reload(configs):
    """After `config qos reload` (the templates write Ethernet0|3-4, |0-2, |5-6; on the traditional model
    buffermgrd adds BUFFER_PG|<port>|<pfc_enable> for the reload's pfc_enable and the file's) and `config load`
    of the file, no two BUFFER_PG/BUFFER_QUEUE keys of a port may cover the same priority. Failed on railforge's
    output before issue 31 (per-priority keys Ethernet0|3, |0 ... |7)."""
    applied, missing = _applied(configs)
    for k, db in applied.items():  # the traditional buffermgrd's own lossless PGs (TH5)
        db["BUFFER_PG"] = {**db.get("BUFFER_PG", {}), **buffermgrd_pg_keys(db, configs[k][2])}
    found = {k: f for k, db in applied.items() if (f := overlapping_keys(db))}
    assert not found, "\n".join(f"{k}: {v[:3]}" for k, v in sorted(found.items())[:10])
    assert not missing
    lossless = [db for db, _, _ in configs.values() if "BUFFER_QUEUE" in db]
    assert len(lossless) >= 20


def test_buffer_model_is_the_one_config_qos_reload_selects_for_the_sku(configs):
    """sonic-utilities' `config qos reload` renders buffers_dynamic.json.j2 and sets buffer_model dynamic on
    Mellanox/Barefoot only; the Tomahawk-5 SKU ships no dynamic template (and Broadcom no asic_table.j2), so it
    runs traditional. Failed on railforge's output before issue 31 (dynamic everywhere)."""
    wrong = [f"{k}: {db['DEVICE_METADATA']['localhost'].get('buffer_model')} on {h}, the SKU runs "
             f"{load_buffers(h).buffer_model}" for k, (db, _, h) in sorted(configs.items())
             if db["DEVICE_METADATA"]["localhost"].get("buffer_model") != load_buffers(h).buffer_model]
    assert not wrong, "\n".join(wrong[:10])
    models = {h: db["DEVICE_METADATA"]["localhost"]["buffer_model"] for db, _, h in configs.values()}
    assert models["M2-W6940-128QC"] == "traditional" and models["ACS-SN5600"] == "dynamic"


def test_lossless_priority_stays_lossless_in_the_applied_buffers(configs):
    """The plan's lossless priority is a lossless PG (dynamic: NULL headroom; traditional: none written, buffermgrd
    derives it from pfc_enable) and a lossless queue on every active port, after the merge."""
    checked = 0
    for k, (db, _, hwsku) in configs.items():
        if "PORT_QOS_MAP" not in db:
            continue
        applied, model = as_applied(db, hwsku), load_buffers(hwsku).buffer_model
        lossless = next(int(tc) for tc, pg in db["TC_TO_PRIORITY_GROUP_MAP"]["RAILFORGE"].items() if pg != "0")
        for port in db["PORT_QOS_MAP"]:
            if port == "global":
                continue
            assert str(lossless) in applied["PORT_QOS_MAP"][port]["pfc_enable"].split(","), (k, port)
            pg = {ids: e["profile"] for key, e in applied["BUFFER_PG"].items()
                  for p, _, ids in [key.partition("|")] if p == port and lossless in priorities(ids)}
            queue = [e["profile"] for key, e in applied["BUFFER_QUEUE"].items()
                     if key.partition("|")[0] == port and lossless in priorities(key.partition("|")[2])]
            assert pg == ({"3-4": "NULL"} if model == "dynamic" else {}), (k, port, pg)
            assert queue == ["egress_lossless_profile"], (k, port, queue)
            checked += 1
    assert checked >= 100


def test_traditional_cable_lengths_are_ones_buffermgrd_has_a_profile_for(configs):
    """Traditional buffermgrd looks up pg_lossless_<speed>_<length>_profile in pg_profile_lookup.ini and creates
    no lossless PG for a pair missing there."""
    checked = 0
    for k, (db, _, hwsku) in configs.items():
        sku = load_buffers(hwsku)
        if sku.buffer_model != "traditional" or "CABLE_LENGTH" not in db:
            continue
        for port, length in db["CABLE_LENGTH"]["AZURE"].items():
            assert length in sku.pg_profile_lookup[db["PORT"][port]["speed"]], (k, port, length)
            checked += 1
    assert checked >= 10


def test_every_port_follows_the_platform_port_map(configs):
    platforms = {p for _, p, _ in configs.values()}
    assert platforms >= {"x86_64-mlnx_msn4700-r0", "x86_64-mlnx_msn4600c-r0", "x86_64-nvidia_sn2201-r0",
                         "x86_64-nvidia_sn5600-r0", "x86_64-micas_m2-w6940-128qc-r0"}
    findings = {k: f for k, (db, p, _) in configs.items()
                if (f := port_map_findings(db, PLATFORMS / p / "platform.json"))}
    assert not findings, json.dumps(findings, indent=1)[:3000]
    assert all(db["PORT"] and db["BREAKOUT_CFG"] for db, _, _ in configs.values())


def test_buffer_profiles_are_the_platform_defaults_and_nothing_else(yang, configs):
    """railforge references its SKU's rendered profiles by name and defines none; alone a file fails exactly on
    those references, merged with its SKU's defaults it validates (the test above)."""
    for k, (db, _, hwsku) in configs.items():
        profiles = platform_defaults(db, hwsku)["BUFFER_PROFILE"]
        referenced = {e["profile"] for t in ("BUFFER_PG", "BUFFER_QUEUE") for e in db.get(t, {}).values()} - {"NULL"}
        assert referenced <= set(profiles), (k, referenced - set(profiles))
    assert not any("BUFFER_PROFILE" in db or "BUFFER_POOL" in db for db, _, _ in configs.values())
    leaf = configs["roce-a800-4nic/su001-leaf-r0"][0]
    failures = yang.validate({"alone": leaf})
    assert "Invalid leafref value" in failures["alone"] and "_lossy_profile" in failures["alone"]
    without_refs = {k: v for k, v in leaf.items() if k not in ("BUFFER_PG", "BUFFER_QUEUE")}
    assert yang.validate({"no buffer references": without_refs}) == {}


def test_a_profile_missing_from_the_platforms_defaults_fails(yang, configs):
    """A Spectrum file names q_lossy_profile, which the Tomahawk-5 SKU's templates do not define: merged with
    that SKU's real defaults it fails; a missing template is a clear error, not an empty merge."""
    db, _, hwsku = configs["roce-a800-4nic/su001-leaf-r0"]
    assert hwsku.startswith("ACS-") and "q_lossy_profile" in {e["profile"] for e in db["BUFFER_QUEUE"].values()}
    th5 = merged(platform_defaults(db, "M2-W6940-128QC"), db)
    assert 'Invalid leafref value "q_lossy_profile"' in yang.validate({"x": th5})["x"]
    spine = copy.deepcopy(db)
    spine["DEVICE_METADATA"]["localhost"]["type"] = "SpineRouter"
    with pytest.raises(BufferTemplateMissing, match=r"ACS-MSN4700: buffers_dynamic\.json\.j2 does not render for "
                                                    r"SpineRouter: .*'buffers_defaults_t2\.j2' not found"):
        platform_defaults(spine, hwsku)


def test_oob_vlan_comes_from_the_spec_and_defaults_to_100(configs):
    assert set(configs["sonic-th5/su001-oob1"][0]["VLAN"]) == {"Vlan200"}
    assert set(configs["roce-a800-4nic/su001-oob1"][0]["VLAN"]) == {"Vlan100"}
    assert configs["roce-a800-4nic/su001-oob1"][0]["VLAN"]["Vlan100"]["vlanid"] == "100"


def test_a_plan_without_platform_names_is_refused_by_the_renderer():
    from railforge.nos.sonic.render import PlatformMismatch, config_db
    from railforge.plan.switch_model import build_models

    spec, lines = load_spec(ROOT / "tests" / "specs" / "tiny-roce.yaml")
    plan = build_plan(spec, lines)
    leaf = next(d for d in plan.devices if d.name == "su001-leaf-r0")
    leaf.platform = None
    with pytest.raises(PlatformMismatch, match="su001-leaf-r0: the plan names no SONiC platform"):
        config_db(next(m for m in build_models(plan, select=lambda n: n == "su001-leaf-r0")))
    leaf.platform, leaf.ports[0].lanes = "x86_64-nvidia_sn5600-r0", [9]
    with pytest.raises(PlatformMismatch, match=r"plan port Ethernet0 \(lanes \[9\]\) is Ethernet0"):
        config_db(next(m for m in build_models(plan, select=lambda n: n == "su001-leaf-r0")))


# --- the checks catch bad files ---------------------------------------------------------------------------------

def _broken(configs, key: str) -> dict:
    db, _, hwsku = configs[key]
    return copy.deepcopy(as_applied(db, hwsku))


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
    db, platform, _ = configs["roce-a800-4nic/su001-stor-leaf1a"]
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
    oob, platform, _ = configs["roce-a800-4nic/su001-oob1"]
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
