"""Warnings for valid specs that real hosts would trip on: NIC groups with no ifnames, pci or macs."""

from __future__ import annotations

from railforge.spec import load_spec
from railforge.spec.advice import spec_warnings
from tests.conftest import ROOT, run_cli

TINY = ROOT / "tests" / "specs" / "tiny-roce.yaml"


def _warnings(path) -> list[str]:
    spec, lines = load_spec(path)
    return [w.render() for w in spec_warnings(spec, lines, str(path))]


def test_nic_groups_without_names_warn_with_file_line_and_key():
    found = _warnings(TINY)
    assert [w.split(": ")[:2] for w in found] == [[f"{TINY}:7", "node.compute"], [f"{TINY}:8", "node.storage"]]
    assert all("no ifnames, pci or macs" in w for w in found)
    assert "rail0, rail1" in found[0] and "stor0, stor1" in found[1]


def test_any_of_ifnames_pci_or_macs_silences_it(tmp_path):
    assert _warnings(ROOT / "inventory" / "minimal" / "cluster.yaml") == []
    spec = tmp_path / "c.yaml"
    spec.write_text(TINY.read_text().replace(
        "compute: {ports: 2, speed: 400G}", "compute: {ports: 2, speed: 400G, pci: ['0000:18:00.0', '0000:40:00.0']}")
        .replace("storage: {ports: 2, speed: 100G}",
                 "storage: {ports: 2, speed: 100G, macs: ['02:00:00:00:00:01', '02:00:00:00:00:02']}"))
    assert _warnings(spec) == []


def test_validate_prints_the_warning_and_still_succeeds():
    proc = run_cli("validate", str(TINY), env={"COLUMNS": "400"})
    text = " ".join(proc.stderr.split())
    assert proc.returncode == 0
    assert f"warning {TINY}:7: node.compute: no ifnames, pci or macs" in text
