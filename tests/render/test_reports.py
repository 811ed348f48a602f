"""IP plan, pool headroom, bill of materials, NetBox CSVs, design report and fabric.svg, checked against the plan
and against figures worked out by hand."""

from __future__ import annotations

import csv
import ipaddress
import math
import re
import xml.etree.ElementTree as ET
from collections import Counter

import pytest

from railforge.plan.model import SWITCH_ROLES
from railforge.render.report import failure_interval_hours, job_interruption_probability, report_markdown
from tests.conftest import plan_of, run_cli

SVG = "{http://www.w3.org/2000/svg}"


def _csv(path):
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def dgx_plan():
    return plan_of("dgx-h100-4su")


def _pools(out):
    return {r["pool"]: r for r in _csv(out / "ipplan-pools.csv")}


# --- failure arithmetic --------------------------------------------------------------------------------------

def test_optics_failure_interval_matches_the_worked_example():
    hours = failure_interval_hours(100_000, 10_000_000)
    assert hours == pytest.approx(100.0)
    assert hours / 24 == pytest.approx(4.17, abs=0.01)


def test_job_interruption_probability_matches_the_worked_example():
    assert job_interruption_probability(1000, 0.999) == pytest.approx(0.632, abs=0.001)
    assert job_interruption_probability(1, 0.999) == pytest.approx(0.001)
    assert job_interruption_probability(0, 0.999) == 0


def test_report_uses_the_plan_reliability_inputs():
    plan = plan_of("roce-a800-4nic")
    for link in plan.links:
        link.part, link.a_module, link.b_module, link.assembly, link.media = None, "SR4-X", "SR4-X", None, "SR4 MMF"
    plan.reliability.optics_mtbf_hours = 2 * len(plan.links) * 240.0  # so one module fails every 240 h = 10 days
    plan.reliability.gpu_monthly_availability = 0.99
    plan.reliability.job_gpus = [100]
    text = report_markdown(plan)
    assert f"Optical modules: {2 * len(plan.links)} " in text
    assert "one fails every 240.0 h (about 10.0 days)" in text
    assert "| 100 | 99.0000% | 63.4% |" in text  # 1 - 0.99**100 = 0.634


# --- IP plan and pool utilisation ---------------------------------------------------------------------------

def test_pool_utilisation_of_the_superpod_worked_by_hand(built):
    pools = _pools(built("dgx-h100-4su"))
    hosts = pools["compute_hosts"]
    # 8 rails, one IPoIB /21 each; 127 DGX x 8 rails addressed (UFM ports carry no IPoIB address)
    assert (int(hosts["size"]), int(hosts["allocated"]), int(hosts["assigned"])) == (2 ** 20, 8 * 2048, 127 * 8)
    assert int(hosts["free"]) == 2 ** 20 - 8 * 2048
    # InfiniBand switches have no loopback; 18 storage leaves + 8 storage spines and 5 OOB leaves + 2 OOB spines do
    assert int(pools["loopbacks"]["assigned"]) == 18 + 8 + 5 + 2
    # OOB: five /26 (one per OOB leaf); BMCs of 127 DGX + UFM + 3 mgmt, management ports of
    # 32 + 16 compute and 18 + 8 storage switches, and one gateway per OOB leaf
    oob = pools["oob"]
    assert int(oob["allocated"]) == 5 * 64
    assert int(oob["assigned"]) == (127 + 1 + 3) + (32 + 16 + 18 + 8) + 5
    assert float(oob["allocated_pct"]) == pytest.approx(round(100 * 320 / 65536, 2))
    # storage ASNs: one per MLAG leaf pair (9) and one shared by the spines
    assert int(pools["asn-storage"]["assigned"]) == 9 + 1


def test_pool_utilisation_of_the_roce_example_worked_by_hand(built):
    pools = _pools(built("roce-a800-4nic"))
    hosts = pools["compute_hosts"]
    # 8 leaves (4 rails x 2 SUs), a /24 each; 32 nodes x 4 rails plus each leaf's gateway
    assert (int(hosts["allocated"]), int(hosts["assigned"])) == (8 * 256, 32 * 4 + 8)
    p2p = pools["p2p"]
    # numbered leaf-spine links: 8 leaves x 16 uplinks = 128 /31s, both ends addressed
    assert (int(p2p["allocated"]), int(p2p["assigned"])) == (128 * 2, 128 * 2)


@pytest.mark.parametrize("name", ["dgx-h100-4su", "roce-a800-4nic"])
def test_every_address_lies_in_its_pool_and_only_gateways_repeat(built, name):
    out, plan = built(name), plan_of(name)
    pools = {p.name: ipaddress.ip_network(p.prefix) for p in plan.pools}
    devices = {d.name for d in plan.devices}
    rows = _csv(out / "ipplan.csv")
    counts = Counter(r["address"].split("/")[0] for r in rows)
    for r in rows:
        assert r["device"] in devices
        iface = ipaddress.ip_interface(r["address"])
        assert iface.network == ipaddress.ip_network(r["prefix"])
        assert iface.ip in pools[r["pool"]], r
        if counts[str(iface.ip)] > 1:
            assert r["kind"] == "anycast-gateway", r
    node = next(d for d in plan.devices if d.role == "node")
    mine = {r["interface"]: r["address"] for r in rows if r["device"] == node.name}
    assert {r.ifname: r.address for r in node.rails}.items() <= mine.items()
    assert mine[node.bond.name] == node.bond.address and mine["bmc"] == node.bmc.address


# --- bill of materials --------------------------------------------------------------------------------------

def test_bom_counts_switches_hosts_and_optics(built, dgx_plan):
    rows = _csv(built("dgx-h100-4su") / "bom.csv")
    switches = {(r["item"], r["part"]): int(r["quantity"]) for r in rows if r["category"] == "switch"}
    assert switches[("leaf", "QM9700")] == 32 and switches[("spine", "QM9700")] == 16
    assert {r["item"]: int(r["quantity"]) for r in rows if r["category"] == "host"}["node"] == 127
    optical = [link for link in dgx_plan.links if link.a_module]
    single, cages = _expected_modules(dgx_plan)
    xcvr = [r for r in rows if r["category"] == "transceiver"]
    assert sum(int(r["quantity"]) for r in xcvr if "twin-port" not in r["item"]) == single
    assert sum(int(r["quantity"]) for r in xcvr if "twin-port" in r["item"]) == cages
    links = {link.id: link for link in dgx_plan.links}
    splitters = {part for by_ways in dgx_plan.splitter_parts.values() for part in by_ways.values()}
    shared = {p.link for d in dgx_plan.devices if d.role in SWITCH_ROLES for p in d.ports
              if p.link and p.breakout.startswith("2x") and links[p.link].a_module is None
              and links[p.link].part in splitters}  # legs of a 1:2 splitter per cage
    assert sum(int(r["quantity"]) for r in rows if r["category"] in ("cable", "fibre patch cord")
               and "splitter" not in r["item"]) + len(shared) == len(dgx_plan.links)
    assert sum(int(r["quantity"]) for r in rows if "splitter" in r["item"]) == len(
        {(d.name, p.index) for d in dgx_plan.devices if d.role in SWITCH_ROLES for p in d.ports if p.link in shared})
    fibre = sum(float(r["quantity"]) for r in rows if r["category"] == "fibre total")
    assert fibre == pytest.approx(sum(link.length_m for link in optical))
    nic = {(r["item"], r["speed"]): int(r["quantity"]) for r in rows if r["category"] == "nic port"}
    assert nic[("node compute", "400G")] == 127 * 8 and nic[("node storage", "200G")] == 127 * 2


def _expected_modules(plan) -> tuple[int, int]:
    """(single-port transceivers, twin-port modules), counted from the plan's ports: a switch port sharing its
    cage ('2x400G') whose module is a twin-port one takes its share of one module per cage; every other optical end
    one transceiver."""
    optical = {link.id: link for link in plan.links if link.a_module}
    twins = set(plan.twin_parts.values())
    single, cages = 0, set()
    for d in plan.devices:
        for p in d.ports:
            link = optical.get(p.link)
            if link is None:
                continue
            module = link.a_module if (link.a.device, link.a.port) == (d.name, p.name) else link.b_module
            if d.role in SWITCH_ROLES and p.breakout.startswith("2x") and module in twins:
                cages.add((d.name, p.index))
            else:
                single += 1
    return single, len(cages)


def test_bom_orders_twin_port_modules_for_split_400g_cages(built, dgx_plan):
    """QM9700 cages carry 2 x 400G: one twin-port OSFP (MMA4Z00-NS) serves both links of a cage; the single-port
    MMA4Z00-NS400 goes only to ends that are not split cages (the DGX's ConnectX-7 ports, SN4700 storage)."""
    rows = _csv(built("dgx-h100-4su") / "bom.csv")
    by_part = {r["part"]: int(r["quantity"]) for r in rows if r["category"] == "transceiver"}
    assert dgx_plan.twin_parts == {"MMA4Z00-NS400": "MMA4Z00-NS"}
    leaf_spine = sum(1 for link in dgx_plan.links if link.tier == "leaf-spine" and link.a_module)
    node_leaf = sum(1 for link in dgx_plan.links if link.tier == "node-leaf" and link.a_module)
    assert leaf_spine == 1024 and node_leaf > 0
    single, cages = _expected_modules(dgx_plan)
    assert (by_part["MMA4Z00-NS400"], by_part["MMA4Z00-NS"]) == (single, cages)
    # every leaf-spine cage is full (2 links), so those ends need exactly half as many modules as ends
    assert cages >= leaf_spine  # 2 x 1024 ends on full cages = 1024 modules, plus the leaves' node-side cages
    assert single < 2 * (leaf_spine + node_leaf)
    text = (built("dgx-h100-4su") / "report.md").read_text()
    aoc = sum(1 for link in dgx_plan.links if "AOC" in link.media)
    assert f"Optical modules: {single + cages + 2 * aoc} " in text


def test_bom_picks_cable_parts_by_length(built):
    """A 5 m 200G AOC row orders the 5 m part (MFS1S00-V005E), not the catalog's 30 m one; the length suffix of
    every NVIDIA AOC part (V005E = 5 m, C010 = 10 m) matches its row."""
    rows = [r for r in _csv(built("dgx-h100-4su") / "bom.csv") if r["category"] == "cable" and r["item"] == "AOC"]
    assert {(r["speed"], r["part"], r["length_m"]) for r in rows} >= {("200G", "MFS1S00-V005E", "5.0"),
                                                                      ("100G", "MFA1A00-C020", "20.0")}
    for r in rows:
        metres = int(re.search(r"-[VC]0?(\d+)E?$", r["part"]).group(1))
        assert metres == float(r["length_m"]), r


def test_media_rule_without_lengths_keeps_its_one_part():
    from railforge.spec.models import MediaRule

    rule = MediaRule(media="AOC", max_m=30, part="P30", parts={3: "P3", 10: "P10"})
    assert rule.fitting(2.5) == (3, "P3") and rule.fitting(7) == (10, "P10") and rule.fitting(25) == (25, "P30")
    assert MediaRule(media="DAC", max_m=3, part="D3").fitting(2) == (2, "D3")


# --- NetBox ---------------------------------------------------------------------------------------------------

NETBOX_COLUMNS = {  # field names of NetBox 4.4's bulk-import forms
    "06-devices.csv": {"name", "role", "manufacturer", "device_type", "status", "site", "rack", "position", "face",
                       "description"},
    "07-interfaces.csv": {"device", "name", "label", "type", "speed", "mtu", "mgmt_only", "lag", "parent",
                          "enabled", "description"},
    "08-cables.csv": {"side_a_device", "side_a_type", "side_a_name", "side_b_device", "side_b_type",
                      "side_b_name", "type", "status", "label", "length", "length_unit", "description"},
    "09-ip-addresses.csv": {"address", "status", "role", "device", "interface", "is_primary", "description"},
}


def test_netbox_csvs_reference_only_objects_defined_before_them(built, dgx_plan):
    nb = built("dgx-h100-4su") / "netbox"
    for name, cols in NETBOX_COLUMNS.items():
        assert set(_csv(nb / name)[0]) == cols
    types = {r["model"] for r in _csv(nb / "04-device-types.csv")}
    makers = {r["name"] for r in _csv(nb / "02-manufacturers.csv")}
    roles = {r["name"] for r in _csv(nb / "03-device-roles.csv")}
    racks = {r["name"] for r in _csv(nb / "05-racks.csv")}
    devices = _csv(nb / "06-devices.csv")
    assert len(devices) == len(dgx_plan.devices)
    for d in devices:
        assert d["device_type"] in types and d["manufacturer"] in makers and d["role"] in roles
        assert d["rack"] in racks
    ifaces = {(r["device"], r["name"]): r for r in _csv(nb / "07-interfaces.csv")}
    for r in ifaces.values():
        if r["lag"]:
            assert ifaces[(r["device"], r["lag"])]["type"] == "lag"
    cables = _csv(nb / "08-cables.csv")
    assert sorted(c["label"] for c in cables) == sorted(link.id for link in dgx_plan.links)
    for c in cables:
        assert (c["side_a_device"], c["side_a_name"]) in ifaces and (c["side_b_device"], c["side_b_name"]) in ifaces
        assert c["side_a_type"] == c["side_b_type"] == "dcim.interface"
    ib = ifaces[("su001-gpu01", "ib0")]
    assert (ib["type"], ib["speed"]) == ("infiniband-ndr", str(400_000 * 1000))
    ips = _csv(nb / "09-ip-addresses.csv")
    for r in ips:
        assert (r["device"], r["interface"]) in ifaces, r
    primaries = Counter(r["device"] for r in ips if r["is_primary"] == "true")
    assert max(primaries.values()) == 1
    repeated = Counter(r["address"] for r in ips)
    assert all(r["role"] == "anycast" for r in ips if repeated[r["address"]] > 1)


# --- design report --------------------------------------------------------------------------------------------

def test_report_states_the_architects_figures(built, dgx_plan):
    text = (built("dgx-h100-4su") / "report.md").read_text()
    assert "| 1016 | 127 | 8 | 4 (4) |" in text
    assert "| compute | leaf | 32 | 32 | 32 | 32 | 12800 | 12800 | 1:1 |" in text
    # OOB leaves: 48 x 1G down, 2 x 100G up -> 48/200 = 0.24 (not the fraction 6:25)
    assert "| oob | oob-leaf | 5 | 48 | " in text and "| 48 | 200 | 0.24:1 |" in text
    assert "6:25" not in text
    # bisection of a non-blocking fabric = half of 1016 node ports + 4 UFM ports at 400G
    assert f"Compute bisection bandwidth: {(1016 + 4) * 400 // 2:,} Gb/s" in text
    assert "non-blocking" in text
    assert "one switch hop" in text and "spine" in text
    modules = sum(_expected_modules(dgx_plan)) + 2 * sum(1 for link in dgx_plan.links if "AOC" in link.media)
    assert f"Optical modules: {modules} " in text
    assert f"{10_000_000 / modules:,.1f} h" in text
    assert f"| 1000 | 99.9000% | {1 - 0.999 ** 1000:.1%} |" in text


def test_validate_prints_the_report():
    proc = run_cli("validate", "inventory/roce-a800-4nic/cluster.yaml")
    assert "Design report: roce-a800-4nic" in proc.stdout
    assert "Failure arithmetic" in proc.stdout


# --- fabric.svg -----------------------------------------------------------------------------------------------

def _svg_text(path):
    root = ET.parse(path).getroot()
    assert root.tag == f"{SVG}svg"
    return root, " ".join(t.text or "" for t in root.iter(f"{SVG}text"))


def test_svg_of_the_superpod_names_its_tiers_and_bundles(built):
    _, text = _svg_text(built("dgx-h100-4su") / "fabric.svg")
    for word in ("spine: 16 × QM9700", "leaf: 32 × QM9700", "SU 001", "SU 004", "storage fabric",
                 "oob fabric"):
        assert word in text
    # each SU's nodes reach its 8 leaves over 8 x 32 cables (SU 4: 31 DGX + 4 UFM ports)
    assert "256 × 400G" in text and "252 × 400G" in text


def test_svg_of_the_16k_fabric_stays_small_and_names_every_tier(built):
    path = built("roce-16k-railplane") / "fabric.svg"
    root, text = _svg_text(path)
    for word in ("super-spine: 128 × SN5600", "spine: 256 × SN5600", "leaf: 256 × SN5600", "SU / endpoints: 2048"):
        assert word in text
    assert "16384 × 400G" in text
    assert path.stat().st_size < 150_000
    assert sum(1 for _ in root.iter()) < 3000
    assert math.isfinite(float(root.get("width")))


def test_report_tells_design_ports_from_cabled_ones(tmp_path):
    """tiny-roce: 2 of 4 SUs built, 2 leaves per SU, 4 x 400G uplinks per leaf over 2 spines: each spine is laid
    out for 4 SUs x 2 leaves x 2 links = 16 down ports, of which 2 SUs x 2 leaves x 2 links = 8 are cabled."""
    proc = run_cli("validate", "tests/specs/tiny-roce.yaml")
    assert "| compute | spine | 2 | 16 | 8 | 0 | 6400 | 0 | top |" in proc.stdout
    assert "Down ports (design) are what each switch of a tier is laid out for at scalable_units.max (4 SUs" in \
        " ".join(proc.stdout.split())


def test_report_shows_no_job_larger_than_the_cluster(tmp_path):
    """The default job_gpus [1000] on a 256-GPU cluster: the table holds only jobs that fit, and says what it left
    out (it once showed a 1,000-GPU job on a 512-GPU cluster)."""
    out = tmp_path / "out"
    run_cli("build", "inventory/minimal/cluster.yaml", "--out", str(out), "--only", "report")
    text = (out / "report.md").read_text()
    table = text.split("P(interrupted within a month)", 1)[1].split("\n\n", 1)[0]
    sizes = [int(line.split("|")[1]) for line in table.splitlines() if line.startswith("| ") and "---" not in line]
    assert sizes == [256]
    assert "Left out: job sizes larger than this cluster's 256 GPUs (1,000; `reliability.job_gpus`)." in text


def test_report_lists_a_few_rail_views_of_a_large_cluster(built):
    """32 SUs: the first 15 rail views and the last are linked, the 16 between are counted, and every link
    resolves to a drawing the build wrote (a 131K-GPU cluster once listed 512 links on one line)."""
    out = built("roce-16k-railplane")
    line = next(x for x in (out / "report.md").read_text().splitlines() if x.startswith("Rail view"))
    targets = re.findall(r"\]\((rails/su-\d{3}\.svg)\)", line)
    assert targets == [f"rails/su-{s:03d}.svg" for s in [*range(1, 16), 32]]
    assert "… (16 more, one `rails/su-NNN.svg` per SU)" in line
    assert all((out / t).is_file() for t in targets)
    assert len(list((out / "rails").glob("su-*.svg"))) == 32
