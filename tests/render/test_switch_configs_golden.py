"""Golden tests for the switch-config renderers on the small fabrics in tests/specs/configs-*.yaml.

The golden files under tests/golden/<renderer>/<spec>/ were reviewed by eye once and are frozen.
After a deliberate change, regenerate them with `UPDATE_GOLDEN=1 pytest tests/render/test_switch_configs_golden.py`
and review the diff before committing.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli

GOLDEN = ROOT / "tests" / "golden"
SPECS = ROOT / "tests" / "specs"
CASES = {
    ("sonic", "configs-sonic"): [f"{d}/{f}" for d in ("su001-leaf-r0", "spine01", "su001-stor-leaf1a",
                                                      "stor-spine01", "core-oob01", "oob-spine01")
                                 for f in ("config_db.json", "frr.conf")],
    ("nvue", "configs-cumulus"): [f"{d}/startup.yaml" for d in ("su001-leaf-r0", "spine01", "su001-stor-leaf1a",
                                                                "su001-stor-leaf1b", "stor-spine01", "su001-oob1")],
    ("eos", "configs-eos"): [f"{d}/{f}" for d in ("su001-leaf-r0", "spine01", "su001-stor-leaf1a", "stor-spine01",
                                                  "su001-oob1", "oob-spine01")
                             for f in ("structured_config.yaml", "startup-config")],
    ("eos", "configs-eos-mlag"): [f"{d}/{f}" for d in ("su001-leaf-r0", "su001-stor-leaf1a", "su001-stor-leaf1b")
                                  for f in ("structured_config.yaml", "startup-config")],
    ("opensm", "configs-ib"): [f"opensm/{f}" for f in ("opensm.conf", "root-switches.txt", "partitions.conf",
                                                        "partition-members.txt", "make-partitions",
                                                        "expected-topology.txt", "make-root-guids")],
}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    cache: dict[tuple[str, str], Path] = {}

    def get(family: str, spec: str) -> Path:
        if (family, spec) not in cache:
            out = tmp_path_factory.mktemp(spec) / "out"
            run_cli("build", str(SPECS / f"{spec}.yaml"), "--out", str(out), "--only", family)
            cache[(family, spec)] = out / "configs"
        return cache[(family, spec)]

    return get


@pytest.mark.parametrize(("family", "spec"), sorted(CASES))
def test_golden(rendered, family, spec):
    configs = rendered(family, spec)
    golden_dir = GOLDEN / family / spec
    update = os.environ.get("UPDATE_GOLDEN") == "1"
    problems = []
    for rel in CASES[(family, spec)]:
        actual = (configs / rel).read_text(encoding="utf-8")
        golden = golden_dir / rel
        if update:
            golden.parent.mkdir(parents=True, exist_ok=True)
            golden.write_text(actual, encoding="utf-8")
            continue
        if not golden.exists():
            problems.append(f"{golden} is missing (run with UPDATE_GOLDEN=1 and review it)")
            continue
        expected = golden.read_text(encoding="utf-8")
        if actual != expected:
            diff = difflib.unified_diff(expected.splitlines(), actual.splitlines(), f"golden/{rel}", f"rendered/{rel}",
                                        lineterm="", n=2)
            problems.append("\n".join(list(diff)[:40]))
    assert not problems, "\n\n".join(problems)


def test_golden_folders_hold_only_the_cases():
    """A stale golden file (a device renamed or dropped) must not linger unnoticed."""
    for (family, spec), rels in CASES.items():
        folder = GOLDEN / family / spec
        on_disk = {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}
        assert on_disk == set(rels), f"{folder}: unexpected {sorted(on_disk - set(rels))}, " \
                                     f"missing {sorted(set(rels) - on_disk)}"
