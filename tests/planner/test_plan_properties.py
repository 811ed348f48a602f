"""Properties every plan must have, over generated specs (hypothesis) and the bundled examples."""

from __future__ import annotations

import hashlib
import io
import json
from collections import Counter
from pathlib import Path

import netaddr
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from railforge.plan import io as planio
from railforge.plan.model import Plan
from railforge.planner import build_plan
from railforge.spec.errors import SpecError
from railforge.spec.loader import validate
from tests.conftest import EXAMPLES, example_spec, plan_of, run_cli

ETHERNET = {"400G": ["SN5600", "TH5-128x400G"], "200G": ["SN5600", "SN4700", "TH5-128x400G"],
            "100G": ["SN4600C", "SN4700"]}


@st.composite
def specs(draw, count: int | None = None) -> dict:
    fabric = draw(st.sampled_from(["roce", "infiniband"]))
    rails = draw(st.sampled_from([2, 4, 8]))
    if fabric == "infiniband":
        speed, leaf, spine, nos = "400G", "QM9700", "QM9700", "mlnx-os"
    else:
        speed = draw(st.sampled_from(sorted(ETHERNET)))
        leaf = draw(st.sampled_from(ETHERNET[speed]))
        spine = draw(st.sampled_from(ETHERNET[speed]))
        nos = draw(st.sampled_from(["sonic"] if "TH5-128x400G" in (leaf, spine) else ["sonic", "cumulus"]))
    sus = count or draw(st.integers(1, 3))
    spec = {
        "name": "prop",
        "node": {"model": "HGX", "gpus": 8, "compute": {"ports": rails, "speed": speed},
                 "storage": {"ports": 2, "speed": draw(st.sampled_from(["100G", "200G"]))}},
        "scalable_units": {"count": sus, "max": sus + draw(st.integers(0, 3)),
                           "nodes_per_su": draw(st.sampled_from([2, 4, 8, 16]))},
        "compute": {"fabric": fabric, "nos": nos, "leaf": {"model": leaf}, "spine": {"model": spine},
                    "uplinks": draw(st.sampled_from(["numbered", "unnumbered"]))},
        "storage": {"leaf": {"model": "SN4700"}, "spine": {"model": "SN4700"},
                    "attach": draw(st.sampled_from(["mlag", "evpn-mh", "single"])),
                    "nos": draw(st.sampled_from(["sonic", "cumulus"]))},
        "oob": {"leaf": {"model": "SN2201"}, "spine": {"model": "SN4600C"}},
        "management": {"servers": draw(st.integers(0, 3))},
    }
    if draw(st.booleans()):
        spec["compute"].update(tiers=3, superspine={"model": spine},
                               mode=draw(st.sampled_from(["clos", "rail-plane"])))
    if draw(st.booleans()):
        spec["scalable_units"]["reserved_slots"] = [
            {"name": "ufm01", "su": 1, "slot": spec["scalable_units"]["nodes_per_su"], "compute_ports": min(4, rails)}
        ]
    return spec


def _build(data: dict) -> Plan | None:
    try:
        return build_plan(validate(data, {}, "prop"))
    except SpecError:
        return None


def check_invariants(plan: Plan) -> None:
    ports = {(d.name, p.name): p for d in plan.devices for p in d.ports}
    assert len(ports) == sum(len(d.ports) for d in plan.devices), "a device has two ports of the same name"
    names = [d.name for d in plan.devices]
    assert len(names) == len(set(names)), "device names must be unique"
    used = Counter()
    for link in plan.links:
        a, b = (link.a.device, link.a.port), (link.b.device, link.b.port)
        assert a != b and link.a.device != link.b.device, f"{link.id} loops back"
        assert a in ports and b in ports, f"{link.id} ends on a port that does not exist"
        assert ports[a].link == link.id and ports[b].link == link.id
        used[a] += 1
        used[b] += 1
    assert max(used.values(), default=1) == 1, "a port is used by two links"
    labels = [link.id for link in plan.links]
    assert len(labels) == len(set(labels)), "cable labels must be unique"
    pools = {p.name: netaddr.IPNetwork(p.prefix) for p in plan.pools}
    tiers = {link.id: link.tier for link in plan.links}
    seen: dict[str, set] = {}

    def claim(fabric: str, cidr: str, pool: str) -> None:
        ip = netaddr.IPNetwork(cidr)
        assert ip.ip in pools[pool], f"{cidr} is outside pool {pool}"
        key = str(ip.ip)
        assert key not in seen.setdefault(fabric, set()), f"{key} assigned twice in {fabric}"
        seen[fabric].add(key)

    for d in plan.devices:
        if d.loopback:
            claim("routing", d.loopback, "loopbacks")
        if d.mgmt_address:
            claim("oob", d.mgmt_address, "oob")
        if d.bmc:
            claim("oob", d.bmc.address, "oob")
        for r in d.rails:
            claim("compute", r.address, "compute_hosts")
        if d.bond:
            claim("inband", d.bond.address, "inband")
        for p in d.ports:
            if p.address and p.link and tiers[p.link].endswith("spine"):
                claim("routing", p.address, "p2p")
    asns = Counter(d.asn for d in plan.devices if d.asn and d.role in ("leaf",))
    assert max(asns.values(), default=1) == 1, "every compute leaf has its own ASN"
    if plan.cluster.tiers == 3:
        roles = {d.name: d.role for d in plan.devices}
        up = Counter(link.a.device for link in plan.links if link.tier == "spine-superspine")
        spines = [d for d in plan.devices if d.role == "spine"]
        assert spines and all(up[s.name] > 0 for s in spines), "every spine has super-spine uplinks"
        assert all(roles[link.b.device] == "superspine" for link in plan.links if link.tier == "spine-superspine")
    for r in plan.devices:
        for p in r.ports:
            assert p.speed_mbps > 0
    check_one_plug_per_cage(plan)


def check_one_plug_per_cage(plan: Plan) -> None:
    """A split switch cage holds one plug: its links share one media, and a cable (no transceivers) between two
    split cages joins two cages cabled only to each other (a straight twin-port cable)."""
    links = {link.id: link for link in plan.links}
    cages: dict[tuple[str, int], set[str]] = {}
    for d in plan.switches():
        for p in d.ports:
            if p.link and p.breakout[:1].isdigit() and int(p.breakout.split("x")[0]) > 1:
                cages.setdefault((d.name, p.index), set()).add(p.link)
    for key, ids in cages.items():
        assert len({links[i].media for i in ids}) == 1, f"cage {key} holds two media"
    of_link: dict[str, list[tuple[str, int]]] = {}
    for key, ids in cages.items():
        for i in ids:
            of_link.setdefault(i, []).append(key)
    for i, keys in of_link.items():
        if len(keys) == 2 and links[i].a_module is None:
            assert cages[keys[0]] == cages[keys[1]], f"cable {i} joins split cages {keys} not cabled only together"


def _device_view(d) -> tuple:
    return (d.role, d.rack, d.u, d.asn, d.loopback, d.mgmt_address, d.su, d.rail, d.group)


def check_growth(small: Plan, large: Plan) -> None:
    big = large.device_index()
    for d in small.devices:
        assert d.name in big, f"{d.name} vanished when the cluster grew"
        g = big[d.name]
        assert _device_view(d) == _device_view(g), f"{d.name} changed when the cluster grew"
        gports = {p.name: p for p in g.ports}
        for p in d.ports:
            q = gports[p.name]
            if p.link or p.address:
                assert (p.address, p.speed_mbps, p.link) == (q.address, q.speed_mbps, q.link), (
                    f"{d.name} {p.name} was renumbered or recabled")
        if d.role == "node":
            assert d.rails == g.rails and d.bond == g.bond and d.bmc == g.bmc
    big_links = large.link_index()
    for link in small.links:
        assert big_links.get(link.id) == link, f"cable {link.id} changed when the cluster grew"


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs())
def test_generated_plans_hold_invariants(data: dict) -> None:
    plan = _build(data)
    if plan is None:
        return
    check_invariants(plan)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs(), st.integers(1, 2))
def test_growth_never_renumbers(data: dict, more: int) -> None:
    data["scalable_units"]["max"] = data["scalable_units"]["count"] + more
    small = _build(data)
    if small is None:
        return
    grown = {**data, "scalable_units": {**data["scalable_units"], "count": data["scalable_units"]["count"] + more}}
    large = _build(grown)
    assert large is not None, "a spec valid at count must stay valid up to its max"
    check_invariants(large)
    check_growth(small, large)
    assert len(large.links) > len(small.links)


@pytest.mark.parametrize("name", EXAMPLES)
def test_examples_hold_invariants(name: str) -> None:
    check_invariants(plan_of(name))


def test_example_growth_from_2_to_4_sus() -> None:
    import yaml

    data = yaml.safe_load(example_spec("roce-a800-4nic").read_text())
    assert data["scalable_units"]["max"] == 4
    small = build_plan(validate(data, {}, "x"))
    data["scalable_units"]["count"] = 4
    large = build_plan(validate(data, {}, "x"))
    check_growth(small, large)


def _tree_digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_deterministic_across_processes_and_hash_seeds(tmp_path: Path) -> None:
    spec = str(example_spec("dgx-h100-4su"))
    run_cli("build", spec, "--out", str(tmp_path / "a"), env={"PYTHONHASHSEED": "1"})
    run_cli("build", spec, "--out", str(tmp_path / "b"), env={"PYTHONHASHSEED": "4242"})
    a, b = _tree_digest(tmp_path / "a"), _tree_digest(tmp_path / "b")
    assert len(a) > 100
    assert a == b


def test_failed_build_leaves_previous_output(tmp_path: Path) -> None:
    out = tmp_path / "out"
    run_cli("build", str(example_spec("roce-a800-4nic")), "--out", str(out))
    before = _tree_digest(out)
    bad = tmp_path / "bad.yaml"
    bad.write_text(example_spec("roce-a800-4nic").read_text().replace("nodes_per_su: 16", "nodes_per_su: 99"))
    proc = run_cli("build", str(bad), "--out", str(out), check=False)
    assert proc.returncode == 2
    assert _tree_digest(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.yaml", "out"]


def test_interrupted_render_leaves_previous_output(tmp_path: Path, monkeypatch) -> None:
    from typer.testing import CliRunner

    import railforge.cli.build as build_command
    import railforge.cli.main as cli
    from railforge.render import Family, families

    out = tmp_path / "out"
    runner = CliRunner()
    assert runner.invoke(cli.app, ["build", str(example_spec("roce-a800-4nic")), "--out", str(out)]).exit_code == 0
    before = _tree_digest(out)

    def explode(plan, output):
        output.write_text("half-written.txt", "partial")
        raise KeyboardInterrupt

    monkeypatch.setattr(build_command, "families", lambda: [*families(), Family("boom", "fails midway", explode)])
    result = runner.invoke(cli.app, ["build", str(example_spec("roce-a800-4nic")), "--out", str(out)])
    assert result.exit_code != 0
    assert _tree_digest(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


@pytest.mark.parametrize("name", EXAMPLES)
def test_plan_checks_pass_on_examples_and_catch_damage(name: str) -> None:
    from fractions import Fraction

    from railforge.planner.checks import check_plan

    plan = plan_of(name)
    capacity = {"leaf": 10**6, "spine": 10**6, "superspine": 10**6}
    assert check_plan(plan, {"leaf": Fraction(1), "spine": Fraction(1)}, capacity) == []
    uplink = next(link for link in plan.links if link.tier == "leaf-spine")
    plan.links.remove(uplink)
    problems = check_plan(plan, {"leaf": Fraction(1), "spine": Fraction(1)}, capacity)
    assert any(uplink.a.device in p and "down:up" in p for p in problems), problems
    assert any("uneven wiring" in p or "same spines" in p for p in problems), problems
    assert check_plan(plan_of(name), {"leaf": Fraction(2), "spine": Fraction(1)}, capacity)
    assert any("radix" in p for p in check_plan(plan_of(name), {"leaf": Fraction(1), "spine": Fraction(1)},
                                                 {"leaf": 3, "spine": 3, "superspine": 3}))


def test_parallel_render_is_byte_identical_to_serial(tmp_path: Path) -> None:
    spec = str(example_spec("roce-16k-railplane"))
    run_cli("build", spec, "--out", str(tmp_path / "serial"), "--jobs", "1", "--timings", str(tmp_path / "s.json"))
    run_cli("build", spec, "--out", str(tmp_path / "parallel"), "--jobs", "2", "--timings", str(tmp_path / "p.json"))
    import json

    stages = {run: json.loads((tmp_path / f"{run[0]}.json").read_text())["stages"] for run in ("serial", "parallel")}
    assert "render" in stages["parallel"], "the 16K build must run in workers"
    assert "render" not in stages["serial"]
    serial, parallel = _tree_digest(tmp_path / "serial"), _tree_digest(tmp_path / "parallel")
    assert len(serial) > 3000
    assert serial == parallel
    for run, figures in stages.items():  # what each family wrote, as the benchmark prints it, adds up to the tree
        files = [p for p in (tmp_path / run).rglob("*") if p.is_file()]
        families = [f for f in figures.values() if "files" in f]
        assert sum(f["files"] for f in families) == len(files), run
        assert sum(f["bytes"] for f in families) == sum(p.stat().st_size for p in files), run
        assert all(f["peak_rss_mib"] > 10 for f in figures.values()), run
    assert {k: (v["files"], v["bytes"]) for k, v in stages["serial"].items() if "files" in v} == {
        k: (v["files"], v["bytes"]) for k, v in stages["parallel"].items() if "files" in v}


def test_plan_json_chunked_writes_are_one_document(tmp_path: Path, monkeypatch) -> None:
    """plan.json goes out WRITE_ITEMS devices or links per write: where the chunks meet must not change a byte,
    and the whole is one JSON document that reads back as the same plan."""
    plan = plan_of("dgx-h100-4su")

    def written(items: int) -> bytes:
        monkeypatch.setattr(planio, "WRITE_ITEMS", items)
        buf = io.BytesIO()
        planio.write_plan(plan, buf)
        return buf.getvalue()

    one = written(1)
    assert len(plan.devices) > 7 and len(plan.links) > 7
    assert written(3) == one
    assert written(7) == one
    assert written(len(plan.links) + 1) == one
    doc = json.loads(one)
    assert [d["name"] for d in doc["devices"]] == [d.name for d in plan.devices]
    assert [x["id"] for x in doc["links"]] == [x.id for x in plan.links]
    (tmp_path / "plan.json").write_bytes(one)
    back = planio.read_plan(tmp_path / "plan.json")
    assert back.devices == plan.devices
    assert back.links == plan.links
