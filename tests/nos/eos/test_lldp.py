"""`railforge verify cabling` on EOS's own LLDP table, `show lldp neighbors | json` (the eAPI shape: the table's
counters and `lldpNeighbors` rows of port, neighborDevice, neighborPort, ttl), written here from the plan's cables
with seeded miswires; the hosts' port IDs are interface names, as the host roles configure lldpd."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from railforge.plan.model import Plan
from railforge.plan.outdir import read as read_plan
from tests.conftest import ROOT, run_cli

SPEC = ROOT / "tests" / "specs" / "configs-eos.yaml"
LEAF = "su001-leaf-r0"


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("eoslldp") / "generated"
    run_cli("build", str(SPEC), "--out", str(out), "--only", "plan")
    return out


def eos_table(rows: list[tuple[str, str, str]]) -> str:
    """`show lldp neighbors | json` as EOS prints it, rows of (port, neighborDevice, neighborPort)."""
    return json.dumps({
        "tablesLastChangeTime": 1716200000.25, "tablesAgeOuts": 0, "tablesInserts": len(rows),
        "lldpNeighbors": [{"ttl": 120, "neighborDevice": d, "neighborPort": p, "port": port} for port, d, p in rows],
        "tablesDeletes": 0, "tablesDrops": 0}, indent=4) + "\n"


def far_ends(plan: Plan, device: str) -> dict[str, tuple[str, str, str]]:
    """port -> (peer device, peer port, cable id) of every planned cable of `device`."""
    out = {}
    for lk in plan.links:
        for here, there in ((lk.a, lk.b), (lk.b, lk.a)):
            if here.device == device:
                out[here.port] = (there.device, there.port, lk.id)
    return out


def verify(generated: Path, folder: Path) -> tuple[int, str]:
    proc = run_cli("verify", "cabling", str(SPEC), "--out", str(generated), "--lldp", str(folder), check=False)
    return proc.returncode, proc.stdout + proc.stderr


def test_a_clean_table_matches_every_cable(generated, tmp_path):
    plan = read_plan(generated / "plan.json")
    far = far_ends(plan, LEAF)
    (tmp_path / f"{LEAF}.json").write_text(eos_table([(p, d, pp) for p, (d, pp, _) in far.items()]))
    code, text = verify(generated, tmp_path)
    assert code == 0, text
    assert f"1 devices observed, {len(far)} planned cables in view, {len(far)} match, 0 findings" in text


def test_miswires_on_an_eos_switch_are_named(generated, tmp_path):
    plan = read_plan(generated / "plan.json")
    far = far_ends(plan, LEAF)
    uplinks = sorted(p for p, (d, _, _) in far.items() if d.startswith("spine"))
    a, b, gone = uplinks[:3]
    rows = {p: (p, d, pp) for p, (d, pp, _) in far.items()}
    rows[a], rows[b] = (a, *rows[b][1:]), (b, *rows[a][1:])
    del rows[gone]
    host_port = next(p for p, (d, _, _) in far.items() if not d.startswith("spine"))
    rows[host_port] = (host_port, f"{far[host_port][0]}.cluster.example", far[host_port][1])  # FQDN: same system
    (tmp_path / f"{LEAF}.json").write_text(eos_table(list(rows.values())))
    code, text = verify(generated, tmp_path)
    assert code == 1, text
    assert "swapped" in text and far[a][2] in text and far[b][2] in text
    assert "missing" in text and far[gone][2] in text
    assert f"{len(far)} planned cables in view, {len(far) - 3} match, 2 findings" in text


def test_an_eos_file_that_is_not_its_table_is_one_clear_error(generated, tmp_path):
    (tmp_path / f"{LEAF}.json").write_text('{"lldpNeighbors": [{"port": "Ethernet1/1", "neighborDevice": "spine01"}]}')
    code, text = verify(generated, tmp_path)
    assert code == 2 and "Traceback" not in text
    assert f"{LEAF}.json" in text and "neighborPort" in text and "show lldp neighbors | json" in text
    (tmp_path / f"{LEAF}.json").write_text("Port  Neighbor Device ID\n")
    code, text = verify(generated, tmp_path)
    assert code == 2 and "show lldp neighbors | json" in text and "Traceback" not in text


def test_lldpd_json_still_reads_for_an_eos_switch(generated, tmp_path):
    """A JSON file with lldpd's top-level `lldp` is lldpd's, whatever the device's OS."""
    plan = read_plan(generated / "plan.json")
    port, (peer, peer_port, _) = next(iter(far_ends(plan, LEAF).items()))
    doc = {"lldp": {"interface": [{port: {"chassis": {peer: {"id": {"type": "mac", "value": "00:00:00:00:00:01"}}},
                                          "port": {"id": {"type": "ifname", "value": peer_port}}}}]}}
    (tmp_path / f"{LEAF}.json").write_text(json.dumps(doc))
    code, text = verify(generated, tmp_path)
    assert "1 devices observed" in text and "Traceback" not in text, text
    assert "show lldp neighbors" not in text
