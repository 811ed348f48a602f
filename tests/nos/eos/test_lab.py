"""EOS-planned fabrics in the lab: the structured configuration translated into the frr.conf FRR runs, through the
same FRR model and template as Cumulus, and the unnumbered (RFC 5549) EOS spec brought up on real FRR daemons in
network namespaces, checked by `railforge lab check` (BGP, ECMP in the kernel, pings across SUs, LLDP).

What this cannot prove: no EOS image runs here (no EOS, no cEOS), so EOS's own acceptance of the CLI is proven
only as far as pyavd's schema and templates go, and the QoS, MLAG, VXLAN and management parts are not in the lab
(it emulates the compute fabric's routing)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from railforge import nos
from railforge.lab.ifnames import lab_plan
from railforge.lab.runner import frr_text
from railforge.nos.eos.lab import EosLabError, frr_config
from railforge.nos.profile import TranslationError
from railforge.planner import build_plan
from railforge.spec import load_spec
from tests.conftest import ROOT, require_tool, run_cli

SPEC = ROOT / "tests" / "specs" / "configs-eos-mlag.yaml"
PREFIX = "rfe-"
PREFIX_RUN = Path(f"/run/railforge-lab/{PREFIX}configs-eos-mlag")
TOOLS = ("root", "/usr/lib/frr/zebra", "/usr/lib/frr/bgpd", "/usr/lib/frr/bfdd", "vtysh", "lldpd", "lldpcli",
         "ping", "tc")


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    out = tmp_path_factory.mktemp("eoslab") / "generated"
    run_cli("build", str(SPEC), "--out", str(out), "--only", "plan,eos")
    return out


def kernel_ifname(port: str) -> str:
    return nos.profile("eos").kernel_ifname(port)


def test_kernel_names_through_the_profile_hook():
    assert [kernel_ifname(p) for p in ("Ethernet3/5", "Ethernet65", "Management1", "Vlan10")] == \
        ["et3_5", "et65", "ma1", "Vlan10"]
    assert {p.name for p in nos.profiles() if p.kernel_ifname is not None} == {"eos"}


def _plan():
    spec, lines = load_spec(SPEC)
    return build_plan(spec, lines, str(SPEC))


def test_lab_plan_renames_every_eos_port_and_nothing_else():
    plan = _plan()
    lab = lab_plan(plan)
    assert lab is not plan
    for before, after in zip(plan.devices, lab.devices, strict=True):
        names = [kernel_ifname(p.name) if before.nos == "eos" else p.name for p in before.ports]
        assert [p.name for p in after.ports] == names
        assert all(len(n) <= 15 and "/" not in n for n in names)
    for before, after in zip(plan.links, lab.links, strict=True):
        assert after.id == before.id and "/" not in after.a.port + after.b.port
    host = next(d for d in lab.devices if d.role == "node")
    assert all(r.leaf_port.startswith("et") for r in host.rails)
    plain = build_plan(*load_spec(ROOT / "tests" / "specs" / "tiny-roce.yaml"), None)
    assert lab_plan(plain) is plain


def test_translation_is_the_structured_config(generated):
    leaf = next(d for d in lab_plan(_plan()).devices if d.name == "su001-leaf-r0")
    path = generated / "configs" / leaf.name / "structured_config.yaml"
    sc = yaml.safe_load(path.read_text())
    frr = frr_text(generated / "configs", leaf)
    assert leaf.nos == "eos"
    bgp = sc["router_bgp"]
    assert f"router bgp {bgp['as']}" in frr and f"bgp router-id {bgp['router_id']}" in frr
    for n in bgp["neighbor_interfaces"]:
        name = kernel_ifname(n["name"])
        assert f" neighbor {name} interface peer-group {n['peer_group']}" in frr
        assert f" neighbor {name} remote-as {n['remote_as']}" in frr
    assert [line for line in frr.splitlines() if line.startswith("  network ")] == \
        [f"  network {n['prefix']}" for n in sorted(bgp["address_family_ipv4"]["networks"], key=lambda n: n["prefix"])]
    assert f"  maximum-paths {bgp['maximum_paths']['paths']}" in frr


def test_what_the_lab_cannot_run_is_refused_by_name(generated):
    sc = yaml.safe_load((generated / "configs" / "su001-stor-leaf1a" / "structured_config.yaml").read_text())
    sc["router_bgp"]["address_family_evpn"] = {"peer_groups": [{"name": "SPINE", "activate": True}]}
    assert issubclass(EosLabError, TranslationError)
    with pytest.raises(EosLabError, match="router_bgp: the lab cannot translate address_family_evpn"):
        frr_config(sc)
    sc = yaml.safe_load((generated / "configs" / "spine01" / "structured_config.yaml").read_text())
    sc["router_bgp"]["peer_groups"][0]["ebgp_multihop"] = 3
    with pytest.raises(EosLabError, match="peer_groups LEAF: the lab cannot translate ebgp_multihop"):
        frr_config(sc)


@pytest.mark.root
@pytest.mark.slow
def test_eos_fabric_converges_in_the_lab(generated, tmp_path):
    require_tool(*TOOLS)
    up = run_cli("lab", "up", str(SPEC), "--out", str(generated), "--prefix", PREFIX, "--wait", "90", check=False)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        report = tmp_path / "check.json"
        check = run_cli("lab", "check", str(SPEC), "--out", str(generated), "--prefix", PREFIX, "--json",
                        str(report), check=False)
        rows = json.loads(report.read_text())["rows"]
        assert check.returncode == 0 and rows and all(r["ok"] for r in rows), check.stdout
        kinds = {r["check"] for r in rows}
        assert kinds == {"bgp", "ecmp", "ping", "lldp", "frr.conf"}
        leaves = [r for r in rows if r["check"] == "bgp" and "leaf" in r["subject"]]
        assert len(leaves) == 4 and all(r["observed"] == "4 Established" for r in leaves)
        routes = json.loads(subprocess.run(["ip", "-n", f"{PREFIX}su001-leaf-r0", "-j", "route", "show", "proto",
                                            "bgp"], capture_output=True, text=True, check=True).stdout)
        devices = {h["dev"] for r in routes for h in r.get("nexthops", [r])}
        assert devices == {"et5_1", "et6_1", "et7_1", "et8_1"}
    finally:
        run_cli("lab", "down", str(SPEC), "--out", str(generated), "--prefix", PREFIX, check=False)


@pytest.mark.root
@pytest.mark.slow
def test_eos_lab_grows_by_an_su_without_a_reset(tmp_path):
    """`lab grow` on an EOS fabric (the MLAG spec sized for 3 SUs, 2 running, grown to 3): the running spines get the
    translation of their new structured config through frr-reload.py (no session reset, no ping between the running
    SUs lost), the third SU comes up and is reachable, and `lab check` is green on the grown build."""
    require_tool(*TOOLS, "/usr/lib/frr/frr-reload.py")
    data = yaml.safe_load(SPEC.read_text())
    assert data["scalable_units"] == {"count": 2, "max": 2, "nodes_per_su": 4}
    specs = {}
    for count in (2, 3):
        data["scalable_units"].update(count=count, max=3)
        (tmp_path / f"spec{count}").mkdir()
        specs[count] = tmp_path / f"spec{count}" / "cluster.yaml"
        specs[count].write_text(yaml.safe_dump(data, sort_keys=False))
        run_cli("build", str(specs[count]), "--out", str(tmp_path / f"g{count}"), "--only", "plan,eos")
    two, three = tmp_path / "g2", tmp_path / "g3"
    lab = ("--prefix", PREFIX)
    try:
        run_cli("lab", "up", str(specs[2]), "--out", str(two), *lab, "--wait", "90")
        proc = run_cli("lab", "grow", str(specs[2]), "--to", str(three), "--out", str(two), *lab, "--json",
                       str(tmp_path / "grow.json"), check=False)
        grow = json.loads((tmp_path / "grow.json").read_text())
        print(f"EOS lab grow: {json.dumps(grow)}")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        plan = lab_plan(build_plan(*load_spec(specs[3]), str(specs[3])))
        spines = [d for d in plan.devices if d.role == "spine" and d.fabric == "compute"]
        assert grow["reloaded_switches"] == len(spines) and grow["sessions_reset"] == []
        assert grow["sessions_kept"] == grow["sessions_before"] > 0 and grow["sessions_new"] > 0
        assert grow["pings_sent"] > 0 and grow["pings_lost"] == 0
        assert grow["new_su_pairs"] > 0 and grow["new_su_unreachable"] == []
        running = (PREFIX_RUN / spines[0].name / "frr.conf").read_text()
        assert running == frr_text(three / "configs", spines[0])
        check = run_cli("lab", "check", str(specs[3]), "--out", str(three), *lab, "--json",
                        str(tmp_path / "c.json"), check=False)
        rows = json.loads((tmp_path / "c.json").read_text())["rows"]
        assert check.returncode == 0, [r for r in rows if not r["ok"]][:5]
    finally:
        run_cli("lab", "down", str(specs[3]), "--out", str(three), *lab, check=False)
        run_cli("lab", "down", str(specs[2]), "--out", str(two), *lab, check=False)
