"""Warnings for valid specs that real hosts would trip on: NIC groups with no ifnames, pci or macs; compute HCA
names that are a guess (no node.compute.hcas, and no vendor-documented names in the catalog for the model)."""

from __future__ import annotations

from railforge.spec import load_spec
from railforge.spec.advice import spec_warnings
from tests.conftest import ROOT, run_cli

TINY = ROOT / "tests" / "specs" / "tiny-roce.yaml"


def _warnings(path, key: str = "") -> list[str]:
    spec, lines = load_spec(path)
    return [w.render() for w in spec_warnings(spec, lines, str(path)) if w.render().split(": ")[1].startswith(key)]


def _names_warnings(path) -> list[str]:
    return [w for w in _warnings(path) if "no ifnames, pci or macs" in w]


def test_nic_groups_without_names_warn_with_file_line_and_key():
    found = _names_warnings(TINY)
    assert [w.split(": ")[:2] for w in found] == [[f"{TINY}:7", "node.compute"], [f"{TINY}:8", "node.storage"]]
    assert all("no ifnames, pci or macs" in w for w in found)
    assert "rail0, rail1" in found[0] and "stor0, stor1" in found[1]


def test_any_of_ifnames_pci_or_macs_silences_it(tmp_path):
    assert _names_warnings(ROOT / "inventory" / "minimal" / "cluster.yaml") == []
    spec = tmp_path / "c.yaml"
    spec.write_text(TINY.read_text().replace(
        "compute: {ports: 2, speed: 400G}", "compute: {ports: 2, speed: 400G, pci: ['0000:18:00.0', '0000:40:00.0']}")
        .replace("storage: {ports: 2, speed: 100G}",
                 "storage: {ports: 2, speed: 100G, macs: ['02:00:00:00:00:01', '02:00:00:00:00:02']}"))
    assert _names_warnings(spec) == []


def test_validate_prints_the_warning_and_still_succeeds():
    proc = run_cli("validate", str(TINY), env={"COLUMNS": "400"})
    text = " ".join(proc.stderr.split())
    assert proc.returncode == 0
    assert f"warning {TINY}:7: node.compute: no ifnames, pci or macs" in text


DGX_H100_RAILS = "mlx5_0,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_9,mlx5_10,mlx5_11"


def test_a_model_without_vendor_hca_names_warns_that_mlx5_0_to_7_is_a_guess():
    found = _warnings(TINY, "node.compute.hcas")
    assert len(found) == 1 and found[0].startswith(f"{TINY}:7: node.compute.hcas: no hcas, and catalog model "
                                                   "'HGX-H100' names no compute HCAs, so the plan uses mlx5_0,mlx5_1")
    assert "give node.compute.hcas in rail order" in found[0]


def test_a_dgx_h100_with_eight_rails_takes_the_user_guide_names_without_a_warning():
    assert _warnings(ROOT / "inventory" / "dgx-h100-4su" / "cluster.yaml", "node.compute.hcas") == []


def test_names_in_the_spec_silence_it_and_other_guesses_warn(tmp_path):
    spec = tmp_path / "c.yaml"
    spec.write_text(TINY.read_text().replace("compute: {ports: 2, speed: 400G}",
                                             "compute: {ports: 2, speed: 400G, hcas: [mlx5_2, mlx5_7]}"))
    assert _warnings(spec, "node.compute.hcas") == []
    b200 = tmp_path / "b200.yaml"
    b200.write_text(TINY.read_text().replace("model: HGX-H100", "model: DGX-B200").replace(
        "compute: {ports: 2, speed: 400G}", "compute: {ports: 8, speed: 400G}"))
    assert "catalog model 'DGX-B200' names mlx5_0,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_9,mlx5_10,mlx5_11 without a " \
           "vendor document (no hcas_source)" in _warnings(b200, "node.compute.hcas")[0]
    lab = _warnings(ROOT / "tests" / "specs" / "slurm-lab.yaml", "node.compute.hcas")
    assert f"catalog model 'DGX-H100' names 8 compute HCAs ({DGX_H100_RAILS}) but node.compute.ports is 2" in lab[0]
