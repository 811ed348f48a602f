"""The cabling verifier on hand-written fabric reports with seeded miswires.

ibnetdiscover text is written here in the tool's real format (infiniband-diags: Switch/Ca blocks, tab
separated port lines with the peer's GUID, port, LID and width x rate) from the plan's cabling, with
the port numbering of a QM9700 (cage c carries IB ports 2c+1 and 2c+2). The lab test checks the
verifier on real lldpd output.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from railforge.nos.sonic.lldp import parse_table as parse_sonic_lldp_table
from railforge.plan.model import Endpoint, Link, Plan
from railforge.verify.cabling import compare
from railforge.verify.ibnet import IbnetFormatError, device_of, ib_port_number, parse_ibnetdiscover, parse_nodes
from railforge.verify.lldp import LldpFormatError, mau_speed_mbps, parse_lldpcli_json
from railforge.verify.names import PlanNames
from tests.conftest import plan_of, run_cli

IB = "dgx-h100-4su"
ROCE = "roce-a800-4nic"

HAND_WRITTEN = """#
# Topology file: generated on Sat Nov 21 10:00:00 2026
#
# Initiated from node b8cef60300f00010 port b8cef60300f00010

vendid=0x2c9
devid=0xd2f0
sysimgguid=0xb8cef60300a00001
switchguid=0xb8cef60300a00000(b8cef60300a00000)
Switch\t65 "S-b8cef60300a00000"\t\t# "MF0;su001-leaf-r0:MQM9700/U1" enhanced port 0 lid 12 lmc 0
[1]\t"H-b8cef60300f00010"[1](b8cef60300f00010) \t\t# "su001-gpu01 mlx5_0" lid 20 4xNDR
[2]\t"H-b8cef60300f00020"[1](b8cef60300f00020) \t\t# "su001-gpu02 mlx5_0" lid 21 2xNDR

vendid=0x2c9
devid=0x1021
sysimgguid=0xb8cef60300f00013
caguid=0xb8cef60300f00010
Ca\t1 "H-b8cef60300f00010"\t\t# "su001-gpu01 mlx5_0"
[1](b8cef60300f00010) \t"S-b8cef60300a00000"[1]\t\t# lid 20 lmc 0 "MF0;su001-leaf-r0:MQM9700/U1" lid 12 4xNDR

vendid=0x2c9
devid=0x1021
sysimgguid=0xb8cef60300f00023
caguid=0xb8cef60300f00020
Ca\t1 "H-b8cef60300f00020"\t\t# "su001-gpu02 mlx5_0"
[1](b8cef60300f00020) \t"S-b8cef60300a00000"[2]\t\t# lid 21 lmc 0 "MF0;su001-leaf-r0:MQM9700/U1" lid 12 2xNDR
"""


@pytest.fixture(scope="module")
def ib_plan() -> Plan:
    return plan_of(IB)


@pytest.fixture(scope="module")
def roce_plan() -> Plan:
    return plan_of(ROCE)


def test_hand_written_blocks_resolve_to_plan_names(ib_plan: Plan) -> None:
    fabric = parse_nodes(HAND_WRITTEN)
    assert {n.kind for n in fabric.nodes.values()} == {"Switch", "Ca"}
    assert len(fabric.cables) == 2, "each cable once, though both of its ends list it"
    obs = parse_ibnetdiscover(HAND_WRITTEN, ib_plan)
    assert obs.devices == {"su001-leaf-r0", "su001-gpu01", "su001-gpu02"}
    seen = {(frozenset((a.local, a.remote)), a.speed_mbps) for a in obs.adjacencies}
    assert seen == {(frozenset({("su001-leaf-r0", "1/1"), ("su001-gpu01", "ib0")}), 400000),
                    (frozenset({("su001-gpu02", "ib0"), ("su001-leaf-r0", "1/2")}), 200000)}
    links = [lk for lk in ib_plan.links if lk.id in ("CMP-000001", "CMP-000002")]
    assert {(lk.a.device, lk.a.port, lk.b.device, lk.b.port) for lk in links} == {
        ("su001-gpu01", "ib0", "su001-leaf-r0", "1/1"), ("su001-gpu02", "ib0", "su001-leaf-r0", "1/2")}
    report = compare(links, obs)
    assert [(f.kind, f.cables) for f in report.findings] == [("wrong-speed", ["CMP-000002"])]


def test_garbage_is_refused(ib_plan: Plan) -> None:
    with pytest.raises(IbnetFormatError, match="not ibnetdiscover output"):
        parse_ibnetdiscover("Switch ports are fine\n", ib_plan)
    with pytest.raises(IbnetFormatError, match="no Switch or Ca blocks"):
        parse_ibnetdiscover("# only a comment\n", ib_plan)


def _guid(n: int, kind: str) -> str:
    return f"b8cef603{0xa0 if kind == 'S' else 0xf0:02x}{n:06x}"


def ibnetdiscover_text(plan: Plan, links: list[Link], speeds: dict[str, str]) -> str:
    """Render `links` (device, port pairs as cabled) as ibnetdiscover prints them."""
    dev = plan.device_index()
    switch_guid: dict[str, str] = {}
    hca_guid: dict[tuple[str, str], tuple[str, str]] = {}  # (device, port) -> (guid, description)
    for i, d in enumerate(x for x in plan.devices if x.fabric == "compute"):
        if d.role in ("leaf", "spine"):
            switch_guid[d.name] = _guid(i, "S")
        else:
            for j, p in enumerate(q for q in d.ports if q.name.startswith("ib")):
                hca = next((r.hca for r in d.rails if r.ifname == p.name), f"mlx5_{p.index}")
                hca_guid[(d.name, p.name)] = (_guid(i * 16 + j, "H"), f"{d.name} {hca}")

    def ib_port(device: str, port: str) -> int:
        p = next(x for x in dev[device].ports if x.name == port)
        return p.index * 2 + p.sub + 1

    def describe(device: str) -> str:
        return f"MF0;{device}:MQM9700/U1"

    lines_of: dict[str, list[tuple[int, str]]] = {}
    ca_lines: dict[tuple[str, str], str] = {}
    for link in links:
        width_rate = speeds.get(link.id, "4xNDR")
        for here, there in ((link.a, link.b), (link.b, link.a)):
            if here.device in switch_guid:
                if there.device in switch_guid:
                    peer = f'"S-{switch_guid[there.device]}"[{ib_port(there.device, there.port)}]'
                    desc = describe(there.device)
                else:
                    g, desc = hca_guid[(there.device, there.port)]
                    peer = f'"H-{g}"[1]({g})'
                lines_of.setdefault(here.device, []).append(
                    (ib_port(here.device, here.port), f'{peer} \t\t# "{desc}" lid 7 {width_rate}'))
            else:
                g, _ = hca_guid[(here.device, here.port)]
                ca_lines[(here.device, here.port)] = (
                    f'[1]({g}) \t"S-{switch_guid[there.device]}"[{ib_port(there.device, there.port)}]\t\t'
                    f'# lid 9 lmc 0 "{describe(there.device)}" lid 7 {width_rate}')
    out = ["#", "# Topology file: generated by the railforge tests", "#", ""]
    for name, guid in switch_guid.items():
        out += ["vendid=0x2c9", "devid=0xd2f0", f"sysimgguid=0x{guid}", f"switchguid=0x{guid}({guid})",
                f'Switch\t65 "S-{guid}"\t\t# "{describe(name)}" enhanced port 0 lid 7 lmc 0']
        out += [f"[{n}]\t{rest}" for n, rest in sorted(lines_of.get(name, []))] + [""]
    for key, (guid, desc) in hca_guid.items():
        out += ["vendid=0x2c9", "devid=0x1021", f"sysimgguid=0x{guid}", f"caguid=0x{guid}",
                f'Ca\t1 "H-{guid}"\t\t# "{desc}"']
        out += [ca_lines[key]] if key in ca_lines else []
        out += [""]
    return "\n".join(out)


def _relink(link: Link, a: tuple[str, str] | None = None, b: tuple[str, str] | None = None) -> Link:
    return Link(link.id, link.fabric, link.tier, link.speed_mbps,
                Endpoint(*a) if a else link.a, Endpoint(*b) if b else link.b, link.length_m, link.media)


def test_clean_fabric_matches(ib_plan: Plan) -> None:
    compute = [lk for lk in ib_plan.links if lk.fabric == "compute"]
    report = compare(compute, parse_ibnetdiscover(ibnetdiscover_text(ib_plan, compute, {}), ib_plan))
    assert report.findings == []
    assert report.matched == report.checked == len(compute) == 2044


def test_seeded_ib_miswires_are_named(ib_plan: Plan, built, tmp_path: Path) -> None:
    by_id = ib_plan.link_index()
    compute = [lk for lk in ib_plan.links if lk.fabric == "compute"]
    cabled = {lk.id: lk for lk in compute}
    # swap: the leaf ends of two node cables change places
    s1, s2 = by_id["CMP-000001"], by_id["CMP-000002"]
    cabled[s1.id] = _relink(s1, b=(s2.b.device, s2.b.port))
    cabled[s2.id] = _relink(s2, b=(s1.b.device, s1.b.port))
    # missing: a leaf-spine cable nobody reports
    uplinks = [lk for lk in compute if lk.tier == "leaf-spine"]
    missing, wrong, gone = uplinks[5], uplinks[40], uplinks[300]
    del cabled[missing.id]
    # wrong switch: a cable's spine end lands on another spine's port (whose own cable is unplugged)
    assert wrong.b.device != gone.b.device
    del cabled[gone.id]
    cabled[wrong.id] = _relink(wrong, b=(gone.b.device, gone.b.port))
    # wrong speed: one uplink trained at 2x NDR
    slow = uplinks[77]
    text = ibnetdiscover_text(ib_plan, list(cabled.values()), {slow.id: "2xNDR"})
    report = compare(compute, parse_ibnetdiscover(text, ib_plan))
    kinds = {(f.kind, tuple(f.cables)) for f in report.findings}
    assert ("swapped", ("CMP-000001", "CMP-000002")) in kinds
    assert ("missing", (missing.id,)) in kinds
    assert ("wrong-switch", (wrong.id,)) in kinds
    assert ("wrong-speed", (slow.id,)) in kinds
    swapped = next(f for f in report.findings if f.kind == "swapped")
    assert "CMP-000001" in swapped.message and "CMP-000002" in swapped.message
    blamed = {c for f in report.findings for c in f.cables}
    assert blamed == {"CMP-000001", "CMP-000002", missing.id, wrong.id, gone.id, slow.id}
    # the same through the CLI, which must fail
    out = built(IB)
    path = tmp_path / "ibnetdiscover.out"
    path.write_text(text)
    proc = run_cli("verify", "cabling", "inventory/dgx-h100-4su", "--out", str(out), "--ibnetdiscover", str(path),
                   check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "swapped" in proc.stdout and "CMP-000001" in proc.stdout and "CMP-000002" in proc.stdout
    clean = tmp_path / "clean.out"
    clean.write_text(ibnetdiscover_text(ib_plan, compute, {}))
    proc = run_cli("verify", "cabling", "inventory/dgx-h100-4su", "--out", str(out), "--ibnetdiscover", str(clean),
                   check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def sonic_table(rows: list[tuple[str, str, str, str]]) -> str:
    """`show lldp table` as sonic-utilities prints it (tabulate 'simple' columns)."""
    header = ("LocalPort", "RemoteDevice", "RemotePortID", "Capability", "RemotePortDescr")
    full = [(a, b, c, "BR", d) for a, b, c, d in rows]
    widths = [max(len(str(r[i])) for r in [header, *full]) for i in range(5)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    lines = ["Capability codes: (R) Router, (B) Bridge, (O) Other", fmt.format(*header).rstrip(),
             "  ".join("-" * w for w in widths)]
    lines += [fmt.format(*r).rstrip() for r in full]
    return "\n".join([*lines, "-" * 50, f"Total entries displayed:  {len(full)}", ""])


def test_sonic_lldp_table_miswires(roce_plan: Plan) -> None:
    leaf = "su001-leaf-r0"
    names = PlanNames(roce_plan)
    mine = [lk for lk in roce_plan.links if leaf in (lk.a.device, lk.b.device)]
    far = {}
    for lk in mine:
        here, there = (lk.a, lk.b) if lk.a.device == leaf else (lk.b, lk.a)
        far[here.port] = (there.device, there.port, lk.id)
    rows = {}
    for port, (device, peer_port, _) in far.items():
        is_host = device.startswith("su")
        rows[port] = (port, device, "0c:42:a1:00:00:01" if is_host else peer_port, peer_port)
    rows["Ethernet64"], rows["Ethernet68"] = (  # swapped
        ("Ethernet64", *rows["Ethernet68"][1:]), ("Ethernet68", *rows["Ethernet64"][1:]))
    del rows["Ethernet72"]  # missing
    free = next(p.name for d in roce_plan.devices if d.name == "spine03" for p in d.ports if p.link is None)
    rows["Ethernet80"] = ("Ethernet80", "spine03.fabric.example", free, "")  # wrong switch, FQDN system name
    rows["Ethernet128"] = ("Ethernet128", "su001-gpu09", "0c:42:a1:00:00:09", "rail0")  # unexpected extra
    obs = parse_sonic_lldp_table(sonic_table(list(rows.values())), leaf, names)
    assert len(obs.adjacencies) == len(rows)
    report = compare(roce_plan.links, obs)
    kinds = sorted((f.kind, tuple(f.cables)) for f in report.findings)
    assert kinds == sorted([
        ("swapped", (far["Ethernet64"][2], far["Ethernet68"][2])),
        ("missing", (far["Ethernet72"][2],)),
        ("wrong-switch", (far["Ethernet80"][2],)),
        ("unexpected", ()),
    ])
    assert report.matched == len(mine) - 4


def test_lldp_inputs_are_checked(roce_plan: Plan) -> None:
    names = PlanNames(roce_plan)
    with pytest.raises(LldpFormatError, match="LocalPort RemoteDevice"):
        parse_sonic_lldp_table("nothing here\n", "spine01", names)
    with pytest.raises(LldpFormatError, match="not lldpcli JSON"):
        parse_lldpcli_json("{oops", "spine01", names)
    assert mau_speed_mbps("100GbaseCR4 - 100GBASE-R PCS/PMA over 4 lane shielded copper") == 100000
    assert mau_speed_mbps("1000BaseTFD - Four-pair Category 5 UTP, full duplex mode") == 1000
    assert mau_speed_mbps("unknown") is None


def test_port_numbers_agree_with_the_rendered_expected_topology(ib_plan: Plan, built) -> None:
    """configs/opensm/expected-topology.txt (the configs renderer) and this verifier number IB ports and
    name nodes the same way, so their reports about one fabric can be read side by side."""
    rows = [line.split("\t") for line in (built(IB) / "configs/opensm/expected-topology.txt").read_text().splitlines()
            if line and not line.startswith("#")]
    ports = {(d.name, p.name): p for d in ib_plan.devices for p in d.ports}
    devices = {d.name: d for d in ib_plan.devices if d.fabric == "compute"}
    assert len(rows) == sum(1 for lk in ib_plan.links if lk.fabric == "compute")
    for cable, a_node, a_port, b_node, b_port, _, a_name, b_name in rows:
        for node, number, name in ((a_node, a_port, a_name), (b_node, b_port, b_name)):
            device, port = name.split(":", 1)
            dev = device_of(node, devices)
            assert dev is not None and dev.name == device, (cable, node)
            if dev.role in ("leaf", "spine"):
                assert ib_port_number(ports[(device, port)]) == int(number), (cable, name, number)


@pytest.mark.parametrize("garbage", ["not json at all\n", "", "[1, 2]\n", '{"interfaces": []}\n'])
def test_a_garbage_json_lldp_file_is_reported_as_bad_json(roce_plan: Plan, tmp_path: Path, garbage: str) -> None:
    """A `.json` file is lldpcli JSON or an error saying so (it was read as a SONiC table and reported as
    a missing 'LocalPort RemoteDevice' header)."""
    from railforge.verify.lldp import parse_lldp_file

    f = tmp_path / "spine01.json"
    f.write_text(garbage)
    with pytest.raises(LldpFormatError, match=r"spine01\.json: not lldpcli JSON") as exc:
        parse_lldp_file(f, PlanNames(roce_plan))
    assert "LocalPort" not in str(exc.value)
