"""The EOS profile and catalog against the vendors' facts: interface names as EOS and NetBox's Arista device types
name them, speeds AVD's schema knows for every breakout the catalog offers, and the refusals."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyavd
import pytest
import yaml

from railforge import nos
from railforge.hardware.catalog import builtin_catalog, ports_at
from railforge.nos.eos.structured import speed
from railforge.plan.switch_model import Interface
from tests.conftest import ROOT, run_cli

EOS_MODELS = ("7060X6-64PE", "7060DX5-64S", "7050SX3-48YC8", "7010TX-48")


def _names(model: str, speed_mbps: int) -> list[str]:
    sw = builtin_catalog().switches[model]
    name = nos.profile("eos").port_name
    return [name(s.index, s.sub, s.split, len(s.lanes) * s.split) for s in ports_at(sw, speed_mbps)]


def test_catalog_models_run_eos_only():
    catalog = builtin_catalog().switches
    assert {m for m, s in catalog.items() if "eos" in s.nos} == set(EOS_MODELS)
    assert all(catalog[m].nos == ["eos"] and catalog[m].vendor == "Arista" for m in EOS_MODELS)


def test_interface_names_as_eos_names_them():
    """NetBox's device types (DCS-7060X6-64PE-F, DCS-7060DX5-64S-F, DCS-7050SX3-48YC8, DCS-7010TX-48) list the
    unbroken ports; the EOS manual numbers the lanes of an octal port 1-8."""
    assert _names("7060X6-64PE", 800_000) == [f"Ethernet{c}/1" for c in range(1, 65)]
    assert _names("7060X6-64PE", 400_000)[:4] == ["Ethernet1/1", "Ethernet1/5", "Ethernet2/1", "Ethernet2/5"]
    assert _names("7060X6-64PE", 200_000)[:4] == ["Ethernet1/1", "Ethernet1/3", "Ethernet1/5", "Ethernet1/7"]
    assert _names("7060X6-64PE", 100_000)[:8] == [f"Ethernet1/{lane}" for lane in range(1, 9)]
    assert _names("7060X6-64PE", 10_000) == ["Ethernet65", "Ethernet66"]
    assert _names("7060DX5-64S", 400_000) == [f"Ethernet{c}/1" for c in range(1, 65)]
    assert _names("7060DX5-64S", 10_000) == ["Ethernet65", "Ethernet66"]
    assert _names("7050SX3-48YC8", 100_000) == [f"Ethernet{c}/1" for c in range(49, 57)]
    assert _names("7050SX3-48YC8", 25_000)[:49] == [f"Ethernet{c}" for c in range(1, 49)] + ["Ethernet49/1"]
    assert _names("7010TX-48", 1000) == [f"Ethernet{c}" for c in range(1, 49)]
    assert _names("7010TX-48", 25_000) == [f"Ethernet{c}" for c in range(49, 53)]


def test_every_breakout_has_a_speed_eos_takes():
    """Each mode of each EOS catalog switch, as the renderer writes its speed, passes AVD's schema."""
    interfaces, seen = [], set()
    for model in EOS_MODELS:
        sw = builtin_catalog().switches[model]
        for group in sw.groups:
            for mode in group.modes:
                slot = next(s for s in ports_at(sw, mode.speed) if s.split == mode.split)
                name = nos.profile("eos").port_name(slot.index, slot.sub, slot.split, group.lanes)
                i = Interface(name, "", "host", slot.speed_mbps, 9214, list(slot.lanes), "", slot.index, 0, None)
                s = speed(i)
                seen.add((model, mode.split, s))
                if s is not None:
                    interfaces.append({"name": f"Ethernet{len(interfaces) + 1}/1", "speed": s, "description": name})
    result = pyavd.validate_structured_config({"ethernet_interfaces": interfaces})
    assert not result.validation_result.violations, [v.message for v in result.validation_result.violations]
    assert {("7060X6-64PE", 2, "400g-4"), ("7060X6-64PE", 8, "100g-1"), ("7060DX5-64S", 1, "400g-8"),
            ("7060DX5-64S", 4, "100g-2"), ("7050SX3-48YC8", 4, "25g"), ("7050SX3-48YC8", 1, "100g-4"),
            ("7010TX-48", 1, None)} <= seen


def _spec(tmp_path: Path, **qos: int) -> Path:
    spec = yaml.safe_load((ROOT / "tests" / "specs" / "configs-eos.yaml").read_text())
    spec["qos"] = qos
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_an_mtu_eos_cannot_take_is_refused_by_validate_at_its_field(tmp_path):
    path = _spec(tmp_path, switch_mtu=9216)
    line = next(n for n, text in enumerate(path.read_text().splitlines(), 1) if "switch_mtu" in text)
    proc = run_cli("validate", str(path), check=False)
    assert proc.returncode == 2, proc.stderr
    errors = [x for x in proc.stderr.splitlines() if x.startswith("error")]
    assert errors == [f"error {path}:{line}: qos.switch_mtu: 9216 is above the 9214 bytes Arista EOS takes on an "
                      "interface (`mtu` 68-9214), and 19 switches run EOS (compute, oob, storage; e.g. su001-leaf-r0); "
                      "set qos.switch_mtu to 9214 or less (qos.host_mtu at most that too)"], proc.stderr
    out = tmp_path / "out"
    proc = run_cli("build", str(path), "--out", str(out), check=False)
    assert proc.returncode == 2 and "qos.switch_mtu: 9216" in proc.stderr and "Traceback" not in proc.stderr
    assert not out.exists()
    assert run_cli("validate", str(_spec(tmp_path, switch_mtu=9214, host_mtu=9000)), check=False).returncode == 0


@pytest.mark.parametrize(("oob_nos", "refused"), [("eos", True), ("cumulus", False)])
def test_one_eos_fabric_bounds_the_mtu(tmp_path, oob_nos, refused):
    """A Cumulus fabric whose OOB switches alone run EOS is refused at 9216; the same spec all Cumulus is not."""
    spec = yaml.safe_load((ROOT / "tests" / "specs" / "configs-cumulus.yaml").read_text())
    spec["qos"] = {"switch_mtu": 9216}
    spec["oob"]["nos"] = oob_nos
    for model in spec["catalog"]["switches"].values():
        model["nos"].append("eos")
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(spec))
    proc = run_cli("validate", str(path), check=False)
    assert proc.returncode == (2 if refused else 0), proc.stderr
    assert ("qos.switch_mtu: 9216 is above the 9214 bytes Arista EOS" in proc.stderr) == refused
    assert ("switches run EOS (oob; " in proc.stderr) == refused


def test_without_pyavd_the_build_says_how_to_get_it(tmp_path):
    fake = tmp_path / "site"
    (fake / "pyavd").mkdir(parents=True)
    (fake / "pyavd" / "__init__.py").write_text("raise ImportError('not installed here')\n")
    out = tmp_path / "out"
    proc = run_cli("build", str(ROOT / "tests" / "specs" / "configs-eos.yaml"), "--out", str(out), "--only", "eos",
                   env={"PYTHONPATH": str(fake)}, check=False)
    assert proc.returncode == 1
    assert "pip install 'railforge[eos]'" in proc.stderr and "Traceback" not in proc.stderr
    assert not (out / "configs").exists()


def test_without_pyavd_the_pyavd_tests_fail_and_never_skip(tmp_path):
    """CI installs pyavd with the dev extra (./tasks test); were it missing, these tests must fail, not skip."""
    fake = tmp_path / "site"
    (fake / "pyavd").mkdir(parents=True)
    (fake / "pyavd" / "__init__.py").write_text("raise ImportError('not installed here')\n")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--collect-only",
                           "tests/nos/eos/test_pyavd.py", "tests/nos/eos/test_vs_sonic.py"], cwd=ROOT,
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(fake), "CI": "true"})
    assert proc.returncode != 0 and "not installed here" in proc.stdout, proc.stdout[-2000:]
    assert "2 errors" in proc.stdout and "skipped" not in proc.stdout


@pytest.mark.parametrize("field", ["mgmt_port", "boot_config"])
def test_profile_facts(field):
    p = nos.profile("eos")
    assert {"mgmt_port": "Management1", "boot_config": "structured_config.yaml"}[field] == getattr(p, field)
    assert p.fabrics == ("compute", "storage", "oob") and p.kind == "ethernet" and p.default_for == ()
