"""InfiniBand subnet-manager artifacts: the root GUID script on ibnetdiscover text in its real format,
partitions from the plan's tenants, and the expected topology against the plan's cabling."""

from __future__ import annotations

import subprocess
import sys

import pytest

from railforge.render import ibnetdiscover
from tests.conftest import ROOT, plan_of, run_cli

# Hand-written in ibnetdiscover's format (infiniband-diags): node blocks with a quoted NodeDescription,
# then one `[port]` line per connected port; NVIDIA switches describe themselves as MF0;<hostname>:<model>/U1.
IBNETDISCOVER = """#
# Topology file: generated on Sat Nov 21 12:00:00 2026
#
# Initiated from node 946dae03006d0b2a port 946dae03006d0b2b

vendid=0x2c9
devid=0xd2f2
sysimgguid=0xfc6a1c0300e0a6b0
switchguid=0xfc6a1c0300e0a6b0(fc6a1c0300e0a6b0)
Switch\t65 "S-fc6a1c0300e0a6b0"\t\t# "MF0;spine01:MQM9700/U1" enhanced port 0 lid 1 lmc 0
[1]\t"S-fc6a1c0300e0a7c0"[5]\t\t# "MF0;su001-leaf-r0:MQM9700/U1" lid 3 4xNDR
[3]\t"S-fc6a1c0300e0a8d0"[5]\t\t# "MF0;su001-leaf-r1:MQM9700/U1" lid 4 4xNDR

vendid=0x2c9
devid=0xd2f2
sysimgguid=0xfc6a1c0300e0a6c0
switchguid=0xfc6a1c0300e0a6c0(fc6a1c0300e0a6c0)
Switch\t65 "S-fc6a1c0300e0a6c0"\t\t# "MF0;spine02:MQM9700/U1" enhanced port 0 lid 2 lmc 0
[1]\t"S-fc6a1c0300e0a7c0"[6]\t\t# "MF0;su001-leaf-r0:MQM9700/U1" lid 3 4xHDR

vendid=0x2c9
devid=0xd2f2
sysimgguid=0xfc6a1c0300e0a7c0
switchguid=0xfc6a1c0300e0a7c0(fc6a1c0300e0a7c0)
Switch\t65 "S-fc6a1c0300e0a7c0"\t\t# "MF0;su001-leaf-r0:MQM9700/U1" enhanced port 0 lid 3 lmc 0
[1]\t"H-946dae03006d0b2a"[1](946dae03006d0b2b) \t\t# "su001-gpu01 mlx5_0" lid 5 4xNDR
[5]\t"S-fc6a1c0300e0a6b0"[1]\t\t# "MF0;spine01:MQM9700/U1" lid 1 4xNDR
[6]\t"S-fc6a1c0300e0a6c0"[1]\t\t# "MF0;spine02:MQM9700/U1" lid 2 4xHDR

vendid=0x2c9
devid=0x1021
sysimgguid=0x946dae03006d0b2a
caguid=0x946dae03006d0b2a
Ca\t1 "H-946dae03006d0b2a"\t\t# "su001-gpu01 mlx5_0"
[1](946dae03006d0b2b) \t"S-fc6a1c0300e0a7c0"[1]\t\t# lid 5 lmc 0 "MF0;su001-leaf-r0:MQM9700/U1" lid 3 4xNDR
"""


@pytest.fixture(scope="module")
def ib_out(tmp_path_factory):
    out = tmp_path_factory.mktemp("ib") / "out"
    run_cli("build", str(ROOT / "tests" / "specs" / "configs-ib.yaml"), "--out", str(out), "--only", "opensm")
    return out / "configs" / "opensm"


def test_parse_reads_nodes_names_and_each_cable_once():
    fabric = ibnetdiscover.parse(IBNETDISCOVER)
    names = {n.name: n.kind for n in fabric.nodes.values()}
    assert names == {"spine01": "Switch", "spine02": "Switch", "su001-leaf-r0": "Switch", "su001-gpu01 mlx5_0": "Ca"}
    cables = {(c.a_guid, c.a_port, c.b_guid, c.b_port): c for c in fabric.cables}
    assert len(cables) == 4
    host = cables[("946dae03006d0b2a", 1, "fc6a1c0300e0a7c0", 1)]
    assert (host.rate, host.gbps) == ("4xNDR", 400)
    assert cables[("fc6a1c0300e0a6c0", 1, "fc6a1c0300e0a7c0", 6)].gbps == 200


def _run(script, *args):
    return subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True)


def test_make_root_guids_writes_the_spine_guids_in_order(ib_out, tmp_path):
    dump = tmp_path / "ibnetdiscover.txt"
    dump.write_text(IBNETDISCOVER)
    target = tmp_path / "root-guids.conf"
    proc = _run(ib_out / "make-root-guids", str(ib_out / "root-switches.txt"), str(dump), "-o", str(target))
    assert proc.returncode == 0, proc.stderr
    assert target.read_text() == "0xfc6a1c0300e0a6b0\n0xfc6a1c0300e0a6c0\n"


def test_make_root_guids_names_a_missing_root_and_writes_nothing(ib_out, tmp_path):
    dump = tmp_path / "ibnetdiscover.txt"
    dump.write_text(IBNETDISCOVER.replace("MF0;spine02:", "MF0;spine-x:"))
    target = tmp_path / "root-guids.conf"
    proc = _run(ib_out / "make-root-guids", str(ib_out / "root-switches.txt"), str(dump), "-o", str(target))
    assert proc.returncode == 1
    assert "root switch spine02 is not in the ibnetdiscover output" in proc.stderr
    assert "spine01" not in proc.stderr
    assert not target.exists()


def test_make_root_guids_refuses_a_name_seen_twice(tmp_path):
    roots = tmp_path / "roots.txt"
    roots.write_text("# roots\nspine01\n")
    dump = tmp_path / "ibnetdiscover.txt"
    dump.write_text(IBNETDISCOVER.replace("MF0;spine02:", "MF0;spine01:"))
    proc = _run(ROOT / "railforge" / "render" / "ibnetdiscover.py", str(roots), str(dump))
    assert proc.returncode == 1 and "appears 2 times" in proc.stderr


def test_root_switches_are_the_top_tier(built):
    plan = plan_of("dgx-h100-4su")
    roots = ibnetdiscover.read_names((built("dgx-h100-4su") / "configs" / "opensm" / "root-switches.txt").read_text())
    spines = [d.name for d in plan.devices if d.role == "spine" and d.fabric == "compute"]
    assert roots == spines and len(roots) == 16


def test_partitions_carry_the_default_and_every_tenant_pkey(built):
    plan = plan_of("dgx-h100-4su")
    text = (built("dgx-h100-4su") / "configs" / "opensm" / "partitions.conf").read_text()
    lines = [x for x in text.splitlines() if x and not x.startswith("#")]
    assert lines[0] == "Default=0x7fff, ipoib, defmember=full : ALL=full ;"
    assert len(lines) == 1 + len(plan.tenants) and plan.tenants
    for t in plan.tenants:
        assert f"{t.name}=0x{t.pkey:04x}, ipoib, defmember=full : ALL_SWITCHES=full ;" in lines
    conf = (built("dgx-h100-4su") / "configs" / "opensm" / "opensm.conf").read_text()
    assert "routing_engine ftree,updn" in conf and "root_guid_file /etc/opensm/root-guids.conf" in conf


def test_expected_topology_is_the_planned_ib_cabling(built):
    plan = plan_of("dgx-h100-4su")
    rows = [line.split("\t") for line in (built("dgx-h100-4su") / "configs" / "opensm" / "expected-topology.txt")
            .read_text().splitlines() if not line.startswith("#")]
    compute = {lk.id: lk for lk in plan.links if lk.fabric == "compute"}
    assert len(rows) == len(compute) == 2044
    assert {r[0] for r in rows} == set(compute)
    devices = plan.device_index()
    ports = {(d.name, p.name): p for d in devices.values() for p in d.ports}
    for cable, a_node, a_port, b_node, b_port, gbps, a_name, b_name in rows:
        link = compute[cable]
        assert a_name == f"{link.a.device}:{link.a.port}" and b_name == f"{link.b.device}:{link.b.port}"
        assert int(gbps) * 1000 == link.speed_mbps
        b = ports[(link.b.device, link.b.port)]
        assert b_node == link.b.device and int(b_port) == 2 * b.index + b.sub + 1 and 1 <= int(b_port) <= 64
        if devices[link.a.device].role in ("node", "ufm"):
            assert int(a_port) == 1 and a_node.startswith(f"{link.a.device} ")
        else:
            a = ports[(link.a.device, link.a.port)]
            assert a_node == link.a.device and int(a_port) == 2 * a.index + a.sub + 1
    hca = {(d.name, r.ifname): r.hca for d in devices.values() for r in d.rails}
    hosts = [r for r in rows if (r[6].split(":")[0], r[6].split(":")[1]) in hca]
    assert len(hosts) == 1016
    assert all(r[1] == f"{r[6].split(':')[0]} {hca[tuple(r[6].split(':'))]}" for r in hosts)


def test_no_opensm_files_for_an_ethernet_fabric(built):
    assert not (built("roce-a800-4nic") / "configs" / "opensm").exists()


def test_ufm_hcas_are_named_by_the_shared_hca_rule(built):
    rows = [line.split("\t") for line in (built("dgx-h100-4su") / "configs" / "opensm" / "expected-topology.txt")
            .read_text().splitlines() if not line.startswith("#")]
    ufm = sorted((r[6], r[1]) for r in rows if r[6].startswith("ufm01:"))
    assert ufm == [(f"ufm01:ib{k}", f"ufm01 mlx5_{k}") for k in range(4)]


def test_make_partitions_names_a_member_hca_ibnetdiscover_does_not_show(ib_out, tmp_path):
    dump = tmp_path / "ibnetdiscover.txt"
    dump.write_text(IBNETDISCOVER)
    target = tmp_path / "partitions.conf"
    proc = _run(ib_out / "make-partitions", str(ib_out / "partition-members.txt"), str(dump), "-o", str(target))
    assert proc.returncode == 1 and not target.exists()
    assert "HCA 'su001-gpu01 mlx5_1' is not in the ibnetdiscover output" in proc.stderr
    assert "'su001-gpu01 mlx5_0'" not in proc.stderr


def test_make_partitions_writes_member_port_guids(ib_out, tmp_path):
    members = tmp_path / "members.txt"
    members.write_text("# one member\nresearch\t0x0a01\tsu001-gpu01 mlx5_0\nidle\t0x0a03\n")
    dump = tmp_path / "ibnetdiscover.txt"
    dump.write_text(IBNETDISCOVER)
    proc = _run(ib_out / "make-partitions", str(members), str(dump))
    assert proc.returncode == 0, proc.stderr
    lines = [x for x in proc.stdout.splitlines() if x and not x.startswith("#")]
    assert lines == ["Default=0x7fff, ipoib, defmember=full : ALL=full ;",
                     "research=0x0a01, ipoib, defmember=full : ALL_SWITCHES=full,",
                     "  0x946dae03006d0b2b=full ;",
                     "idle=0x0a03, ipoib, defmember=full : ALL_SWITCHES=full ;"]


def test_make_partitions_names_a_malformed_members_line(ib_out, tmp_path):
    members = tmp_path / "members.txt"
    members.write_text("research\t0x0a01\nresearch 0x0a01 su001-gpu01 mlx5_0\n")
    dump = tmp_path / "ibnetdiscover.txt"
    dump.write_text(IBNETDISCOVER)
    proc = _run(ib_out / "make-partitions", str(members), str(dump))
    assert proc.returncode == 1 and proc.stdout == ""
    assert f"{members}: line 2: expected" in proc.stderr and "Traceback" not in proc.stderr
