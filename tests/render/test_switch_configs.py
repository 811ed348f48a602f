"""Structural checks of the switch configurations on the example fabrics, and FRR's own parser."""

from __future__ import annotations

import ipaddress
import json
import re
import shutil
import subprocess
from pathlib import Path

import orjson
import pytest
import yaml

from railforge.nos.cumulus.render import release_of, syntax
from railforge.nos.sonic import render as sonic
from railforge.nos.sonic.buffer_defaults import priorities
from railforge.plan.switch_model import IncompletePlan, PlanIndex, build_models, build_switch
from railforge.planner import build_plan
from railforge.spec import load_spec
from tests.conftest import ROOT, plan_of, require_tool, run_cli
from tests.helpers.nvue_schema import NvueLoader

SPECS = ROOT / "tests" / "specs"
ETHERNET = ("sonic", "cumulus")


def _load_yaml(path: Path):
    return yaml.load(path.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


@pytest.fixture(scope="module")
def spec_build(tmp_path_factory):
    cache: dict[str, Path] = {}

    def get(spec: str) -> Path:
        if spec not in cache:
            out = tmp_path_factory.mktemp(spec) / "out"
            run_cli("build", str(SPECS / f"{spec}.yaml"), "--out", str(out))
            cache[spec] = out
        return cache[spec]

    return get


# --- the model: every session has a matching other end --------------------------------------------------------

@pytest.mark.parametrize("example", ["roce-a800-4nic", "roce-16k-railplane", "dgx-h100-4su"])
def test_every_bgp_neighbour_has_a_matching_other_end(example):
    plan = plan_of(example)
    models = {m.hostname: m for m in build_models(plan) if m.nos in ETHERNET}
    devices = plan.device_index()
    sessions = 0
    for m in models.values():
        for n in m.neighbors:
            other = models[n.peer_name]
            if n.peer_group == "PEER":
                back = [x for x in other.neighbors if x.peer_group == "PEER" and x.peer_name == m.hostname]
            else:
                back = [x for x in other.neighbors if x.interface == n.peer_port and x.peer_name == m.hostname]
            assert len(back) == 1, f"{m.hostname} {n.key} -> {n.peer_name}: {len(back)} matching neighbours back"
            b = back[0]
            assert b.remote_asn == m.asn == devices[m.hostname].asn, f"{n.peer_name} expects AS{b.remote_asn} " \
                                                                     f"from {m.hostname} (AS{m.asn})"
            assert n.remote_asn == other.asn == devices[n.peer_name].asn
            assert (n.address, n.local_address) == (b.local_address, b.address), f"{m.hostname} {n.key}"
            assert b.peer_group == ("PEER" if n.peer_group == "PEER" else
                                    {1: "LEAF", 2: "SPINE", 3: "SUPERSPINE"}[m.tier])
            if n.address:
                net = ipaddress.ip_interface(f"{n.local_address}/31").network
                assert ipaddress.ip_address(n.address) in net, f"{m.hostname} {n.key} not on its /31"
            sessions += 1
    fabric_links = [lk for lk in plan.links if lk.tier.endswith(("leaf-spine", "spine-superspine"))
                    and devices[lk.a.device].nos in ETHERNET]
    peer_pairs = sum(1 for m in models.values() if m.pair and m.pair.mode == "mlag")
    assert sessions == 2 * len(fabric_links) + peer_pairs, "one session per fabric cable, seen from both ends"


@pytest.mark.parametrize(("example", "numbered"), [("roce-a800-4nic", True), ("roce-16k-railplane", False)])
def test_compute_uplinks_numbered_or_unnumbered_as_planned(example, numbered):
    plan = plan_of(example)
    assert (plan.cluster.uplinks == "numbered") is numbered
    neighbors = [n for m in build_models(plan) if m.fabric == "compute" for n in m.neighbors]
    assert neighbors
    assert all((n.address is not None) is numbered for n in neighbors)


def test_unused_ports_are_down_and_known_ports_carry_their_cable():
    plan = plan_of("roce-a800-4nic")
    links = plan.link_index()
    for m in build_models(plan):
        for i in m.interfaces:
            if i.cable is None:
                assert not i.enabled
            else:
                link = links[i.cable]
                ends = {(link.a.device, link.a.port), (link.b.device, link.b.port)}
                assert ends == {(m.hostname, i.name), (i.peer_device, i.peer_port)}


# --- SONiC --------------------------------------------------------------------------------------------------------

_NEIGH = re.compile(r"^ neighbor (\S+) remote-as (\d+)$", re.M)


def _frr_neighbors(text: str) -> dict[str, int]:
    return {k: int(v) for k, v in _NEIGH.findall(text)}


@pytest.mark.parametrize("source", ["roce-a800-4nic", "configs-sonic"])
def test_sonic_config_db_and_frr_agree_across_each_cable(built, spec_build, source):
    out = built(source) if (ROOT / "inventory" / source).exists() else spec_build(source)
    plan = json.loads((out / "plan.json").read_text())
    sonic = [d for d in plan["devices"] if d.get("nos") == "sonic"]
    assert sonic
    dbs = {d["name"]: json.loads((out / "configs" / d["name"] / "config_db.json").read_text()) for d in sonic}
    frr = {d["name"]: (out / "configs" / d["name"] / "frr.conf").read_text() for d in sonic if d.get("asn")}
    for d in sonic:
        db = dbs[d["name"]]
        meta = db["DEVICE_METADATA"]["localhost"]
        assert meta["hostname"] == d["name"] and meta["docker_routing_config_mode"] == "split-unified"
        assert meta.get("bgp_asn") == (str(d["asn"]) if d.get("asn") else None)
        lanes = [lane for p in db["PORT"].values() for lane in p["lanes"].split(",")]
        assert len(lanes) == len(set(lanes)), f"{d['name']}: a lane is used twice"
        assert set(db.get("BREAKOUT_CFG", {})) <= set(db["PORT"])
        for key in db.get("INTERFACE", {}):
            assert key.split("|")[0] in db["PORT"]
        for key in db.get("VLAN_MEMBER", {}):
            member = key.split("|")[1]
            assert member in db["PORT"] or member in db.get("PORTCHANNEL", {}), key
        for key in db.get("PORT_QOS_MAP", {}):
            assert key == "global" or key in db["PORT"]
        if d.get("loopback"):
            assert f"Loopback0|{d['loopback']}" in db["LOOPBACK_INTERFACE"]
        for port, nb in db["DEVICE_NEIGHBOR"].items():
            far = [lk for lk in plan["links"] if {(lk["a"]["device"], lk["a"]["port"]),
                                                  (lk["b"]["device"], lk["b"]["port"])} ==
                   {(d["name"], port), (nb["name"], nb["port"])}]
            assert len(far) == 1, f"{d['name']}:{port} -> {nb} is not a planned cable"
    asn = {d["name"]: d.get("asn") for d in plan["devices"]}
    for name, text in frr.items():
        neighbors = _frr_neighbors(text)
        assert neighbors, name
        for key, remote in neighbors.items():
            if key.startswith("Ethernet"):
                peer = dbs[name]["DEVICE_NEIGHBOR"][key]
                assert dbs[name]["INTERFACE"][key] == {"ipv6_use_link_local_only": "enable"}
                back = _frr_neighbors(frr[peer["name"]])
                assert back[peer["port"]] == asn[name] and remote == asn[peer["name"]]
            else:
                bgp = dbs[name]["BGP_NEIGHBOR"][key]
                assert int(bgp["asn"]) == remote == asn[bgp["name"]]
                assert _frr_neighbors(frr[bgp["name"]])[bgp["local_addr"]] == asn[name]
                assert any(k.endswith(f"|{bgp['local_addr']}/31") for k in dbs[name]["INTERFACE"])


def test_sonic_qos_comes_from_the_plan_profile_the_hosts_apply(built):
    out = built("roce-a800-4nic")
    qos = _load_yaml(out / "ansible" / "group_vars" / "all" / "qos.yml")["railforge_qos"]
    db = json.loads((out / "configs" / "su001-leaf-r0" / "config_db.json").read_text())
    lossless = str(qos["lossless_priority"])
    assert db["DSCP_TO_TC_MAP"]["RAILFORGE"][str(qos["roce_dscp"])] == lossless
    assert db["DSCP_TO_TC_MAP"]["RAILFORGE"][str(qos["cnp_dscp"])] == str(qos["cnp_priority"])
    assert qos["traffic_class"] == qos["roce_dscp"] << 2
    wred = db["WRED_PROFILE"]["RAILFORGE_LOSSLESS"]
    assert wred["ecn"] == "ecn_all"
    assert int(wred["green_min_threshold"]) == qos["ecn_min_threshold_bytes"]
    assert int(wred["green_max_threshold"]) == qos["ecn_max_threshold_bytes"]
    assert int(wred["green_drop_probability"]) == qos["ecn_probability"]
    used = {k for k, p in db["PORT"].items() if p["admin_status"] == "up"}
    assert set(db["PORT_QOS_MAP"]) - {"global"} == used
    assert all(m["pfc_enable"] == lossless for k, m in db["PORT_QOS_MAP"].items() if k != "global")
    null = [k.split("|") for k, v in db["BUFFER_PG"].items() if v["profile"] == "NULL"]
    assert sorted(p for p, _ in null) == sorted(used)
    assert all(int(lossless) in priorities(ids) for _, ids in null)  # the SKU's range key, e.g. |3-4
    assert db["QUEUE"][f"Ethernet0|{lossless}"]["wred_profile"] == "RAILFORGE_LOSSLESS"
    assert all(int(p["mtu"]) == qos["switch_mtu"] for p in db["PORT"].values())
    storage = json.loads((out / "configs" / "su001-stor-leaf1a" / "config_db.json").read_text())
    assert "PORT_QOS_MAP" not in storage, "lossless RoCE QoS belongs to the compute fabric only"


def test_sonic_qos_fragments_serialise_like_the_tables_themselves():
    """Pre-serialised QoS tables and PORT entries built once per port shape (each shared by every switch with the
    same ports) give the same config_db.json bytes as building and serialising each switch's tables whole, and
    switches with other ports get their own."""
    plan = plan_of("roce-a800-4nic")
    fragments, shapes = sonic.QosFragments(), sonic.PortShapes()
    switches = list(build_models(plan, nos="sonic"))
    compute = [sw for sw in switches if sw.qos is not None]
    assert len(compute) > 2
    for sw in switches:
        whole = orjson.dumps(sonic.config_db(sw), option=sonic.JSON_OPTIONS)
        assert orjson.dumps(sonic.config_db(sw, fragments, shapes), option=sonic.JSON_OPTIONS) == whole
    assert 1 <= len(fragments.cache) < len(compute)
    assert 2 <= len(shapes.cache) < len(switches)
    leaf = next(sw for sw in switches if sw.role == "leaf")
    unused = next(i for i in leaf.interfaces if i.role == "unused" and i.lanes)
    unused.role = "downlink"
    assert sonic.config_db(leaf, fragments, shapes)["PORT"][unused.name]["admin_status"] == "up"
    sw = compute[0]
    sw.interfaces = [i for i in sw.interfaces if i.role != "host"]
    db = json.loads(orjson.dumps(sonic.config_db(sw, fragments), option=sonic.JSON_OPTIONS))
    assert set(db["PORT_QOS_MAP"]) - {"global"} == {i.name for i in sw.interfaces if i.role in ("uplink", "downlink")}


def test_frr_accepts_every_generated_frr_conf(built, spec_build, tmp_path):
    require_tool("vtysh")
    files = sorted((built("roce-a800-4nic") / "configs").glob("*/frr.conf"))
    files += sorted((spec_build("configs-sonic") / "configs").glob("*/frr.conf"))
    assert len(files) > 40
    failures = []
    for f in files:
        proc = subprocess.run(["vtysh", "--dryrun", "-f", str(f)], capture_output=True, text=True)
        if proc.returncode != 0:
            failures.append(f"{f.parent.name}: {(proc.stdout + proc.stderr).strip()[:300]}")
    assert not failures, "\n".join(failures)
    broken = tmp_path / "frr.conf"
    shutil.copyfile(files[0], broken)
    broken.write_text(broken.read_text().replace("bgp bestpath as-path multipath-relax", "bgp bestpath as-path relax"))
    proc = subprocess.run(["vtysh", "--dryrun", "-f", str(broken)], capture_output=True, text=True)
    assert proc.returncode != 0, "vtysh --dryrun must reject a line FRR does not know"


# --- NVUE ---------------------------------------------------------------------------------------------------------

def _nvue_set(path: Path) -> dict:
    doc = yaml.load(path.read_text(encoding="utf-8"), Loader=NvueLoader)
    assert isinstance(doc, list) and doc[0]["header"]["nvue-api-version"] == "nvue_v1"
    return doc[1]["set"]


def _check_nvue(configs: Path, models, release: str) -> int:
    checked = 0
    for m in models:
        s = _nvue_set(configs / m.hostname / "startup.yaml")
        assert s["system"]["hostname"] == m.hostname
        for i in m.interfaces:
            if i.enabled and i.role != "mgmt":
                assert s["interface"][i.name]["link"]["mtu"] == m.mtu
                assert s["interface"][i.name]["link"]["speed"] == f"{i.speed_mbps // 1000}G"
        if m.asn is None:
            continue
        assert s["router"]["bgp"]["autonomous-system"] == m.asn
        bgp = s["vrf"]["default"]["router"]["bgp"]
        neighbors = bgp["neighbor"]
        assert set(neighbors) == {n.key for n in m.neighbors}
        for n in m.neighbors:
            assert neighbors[n.key]["type"] == ("numbered" if n.address else "unnumbered")
            assert neighbors[n.key]["peer-group"] in bgp["peer-group"]
            if n.peer_group != "PEER":
                assert neighbors[n.key]["remote-as"] == n.remote_asn
        assert set(bgp["address-family"]["ipv4-unicast"].get("network", {})) == set(m.announce)
        assert bgp["path-selection"]["multipath"]["aspath-ignore"] == syntax(release).on
        checked += 1
    return checked


def test_nvue_startup_yaml_parses_and_matches_the_model_small_fabrics(spec_build, built):
    for out, plan in ((spec_build("configs-cumulus"), None), (built("dgx-h100-4su"), plan_of("dgx-h100-4su"))):
        if plan is None:
            spec, lines = load_spec(SPECS / "configs-cumulus.yaml")
            plan = build_plan(spec, lines, "configs-cumulus.yaml")
        models = list(build_models(plan, nos="cumulus"))
        assert models
        assert _check_nvue(out / "configs", models, release_of(plan)) > 0


def test_nvue_on_the_16k_example_sampled_per_role(built):
    plan = plan_of("roce-16k-railplane")
    models = list(build_models(plan, nos="cumulus"))
    sample = {}
    for m in models:
        sample.setdefault(m.role, []).append(m)
    picked = [m for ms in sample.values() for m in (ms[0], ms[len(ms) // 2], ms[-1])]
    configs = built("roce-16k-railplane") / "configs"
    assert _check_nvue(configs, picked, release_of(plan)) >= 6
    files = sorted(configs.glob("*/startup.yaml"))
    assert len(files) == len(models)
    for f in files:
        assert _load_yaml(f)[1]["set"]["system"]["hostname"] == f.parent.name
    leaf = _nvue_set(built("roce-16k-railplane") / "configs" / "su001-leaf-r0" / "startup.yaml")
    q = plan.qos
    assert leaf["qos"]["roce"]["mode"] == "lossless"
    dscp = leaf["qos"]["mapping"]["default-global"]["dscp"]
    assert dscp[str(q.roce_dscp)]["switch-priority"] == q.lossless_priority
    assert dscp[str(q.cnp_dscp)]["switch-priority"] == q.cnp_priority
    assert set(leaf["qos"]["pfc"]["default-global"]["switch-priority"]) == {str(q.lossless_priority)}
    cc = leaf["qos"]["congestion-control"]["default-global"]["traffic-class"][str(q.lossless_priority)]
    assert (cc["min-threshold"], cc["max-threshold"]) == (q.ecn_min_threshold_bytes, q.ecn_max_threshold_bytes)


def test_mlag_pairs_agree_on_bonds_and_system_mac(spec_build):
    configs = spec_build("configs-cumulus") / "configs"
    a, b = (_nvue_set(configs / f"su001-stor-leaf1{s}" / "startup.yaml") for s in "ab")
    assert a["mlag"]["mac-address"] == b["mlag"]["mac-address"]
    assert {a["mlag"]["priority"], b["mlag"]["priority"]} == {1000, 2000}
    bonds_a = {k: v["description"].split(":")[0] for k, v in a["interface"].items() if v.get("type") == "bond"}
    bonds_b = {k: v["description"].split(":")[0] for k, v in b["interface"].items() if v.get("type") == "bond"}
    assert bonds_a == bonds_b and bonds_a, "the same host must sit on the same bond (MLAG id) on both leaves"
    assert all(a["interface"][k]["bond"]["mlag"]["id"] == b["interface"][k]["bond"]["mlag"]["id"] for k in bonds_a)
    spec, lines = load_spec(SPECS / "configs-cumulus.yaml")
    ip = "ipv4" if syntax(spec.nos_release.cumulus).split_ip else "ip"
    vrr_a = a["interface"]["vlan10"][ip]["vrr"]["address"]
    assert vrr_a == b["interface"]["vlan10"][ip]["vrr"]["address"]
    assert set(a["interface"]["vlan10"][ip]["address"]) != set(b["interface"]["vlan10"][ip]["address"])


def test_pair_system_mac_needs_no_peer_so_limited_builds_agree():
    plan = plan_of("roce-a800-4nic")
    full = {m.hostname: m.pair.sys_mac for m in build_models(plan) if m.pair}
    assert full and len(set(full.values())) == len(full) // 2, "one system MAC per pair, distinct between pairs"
    for name, mac in full.items():
        assert full[next(m.pair.peer for m in build_models(plan) if m.hostname == name)] == mac
    plan.devices = [d for d in plan.devices if d.name == "su001-stor-leaf1b" or d.role == "storage-spine"]
    alone = build_switch(plan.device_index()["su001-stor-leaf1b"], PlanIndex(plan))
    assert alone.pair.sys_mac == full["su001-stor-leaf1b"] == full["su001-stor-leaf1a"]


def test_a_switch_whose_cable_peer_is_missing_is_refused_not_rendered_without_neighbours():
    plan = plan_of("roce-a800-4nic")
    plan.devices = [d for d in plan.devices if d.name.startswith("su001-leaf")]
    with pytest.raises(IncompletePlan, match=r"su001-leaf-r0:Ethernet\d+ is cabled to spine0\d, which is not in"):
        list(build_models(plan))


def test_growth_leaves_existing_leaf_configs_byte_identical(tmp_path):
    """Adding an SU must not touch a configured leaf; spines only gain the new sessions."""
    spec = (ROOT / "inventory" / "roce-a800-4nic" / "cluster.yaml").read_text()
    assert "count: 2" in spec
    grown = tmp_path / "grown.yaml"
    grown.write_text(spec.replace("count: 2", "count: 3"))
    run_cli("build", str(ROOT / "inventory" / "roce-a800-4nic" / "cluster.yaml"), "--out", str(tmp_path / "a"),
            "--only", "sonic")
    run_cli("build", str(grown), "--out", str(tmp_path / "b"), "--only", "sonic")
    before, after = tmp_path / "a" / "configs", tmp_path / "b" / "configs"
    assert {p.name for p in before.iterdir()} < {p.name for p in after.iterdir()}
    for sw in before.iterdir():
        db = json.loads((sw / "config_db.json").read_text())
        if db["DEVICE_METADATA"]["localhost"]["type"].endswith(("ToRRouter", "MgmtToRRouter")):
            for f in ("config_db.json", "frr.conf"):
                assert (sw / f).read_bytes() == (after / sw.name / f).read_bytes(), f"{sw.name}/{f} changed"
        else:
            old = set((sw / "frr.conf").read_text().splitlines())
            new = set((after / sw.name / "frr.conf").read_text().splitlines())
            assert old <= new, f"{sw.name} lost {sorted(old - new)[:3]}"
