"""The Slurm configuration family (slurm.conf, gres.conf, cgroup.conf, qos.sh) on the small spec
tests/specs/slurm-lab.yaml: golden files (reviewed by eye, frozen; regenerate with UPDATE_GOLDEN=1 and review the
diff), determinism, the plan.json round trip of the Slurm section, and the two-level hostlists, expanded by
Slurm's own `scontrol show hostnames`. What Slurm makes of these files is proven live in tests/slurm."""

from __future__ import annotations

import io
import os
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from railforge.plan.io import read_plan, write_plan
from railforge.planner import build_plan
from railforge.render.slurm import compress2, gres_conf, slurm_conf
from railforge.spec import load_spec
from tests.conftest import ROOT, require_tool, run_cli

SPEC = ROOT / "tests" / "specs" / "slurm-lab.yaml"
GOLDEN = ROOT / "tests" / "golden" / "slurm" / "slurm-lab"
FILES = ("slurm.conf", "gres.conf", "cgroup.conf", "qos.sh", "topology.conf")


def lab_plan():
    spec, lines = load_spec(SPEC)
    return build_plan(spec, lines, str(SPEC))


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("slurm") / "out"
    run_cli("build", str(SPEC), "--out", str(out), "--only", "slurm")
    return out / "slurm"


@pytest.mark.parametrize("name", FILES)
def test_golden(built, name):
    actual = (built / name).read_text()
    golden = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN") == "1":
        golden.write_text(actual)
    assert golden.exists(), f"{golden} is missing (run with UPDATE_GOLDEN=1 and review it)"
    assert actual == golden.read_text(), f"{name} differs from {golden}"


def test_same_plan_same_bytes():
    a, b = lab_plan(), lab_plan()
    assert slurm_conf(a, a.slurm) == slurm_conf(b, b.slurm)
    assert gres_conf(a, a.slurm) == gres_conf(b, b.slurm)


def test_plan_json_carries_the_slurm_section():
    plan = lab_plan()
    buf = io.BytesIO()
    write_plan(plan, buf)
    path = ROOT / "tests" / ".slurm-plan.json"
    try:
        path.write_bytes(buf.getvalue())
        again = read_plan(path)
    finally:
        path.unlink(missing_ok=True)
    assert again.slurm == plan.slurm
    assert slurm_conf(again, again.slurm) == slurm_conf(plan, plan.slurm)


def test_a_spec_without_slurm_writes_only_the_topology(tmp_path):
    out = tmp_path / "out"
    run_cli("build", str(ROOT / "tests" / "specs" / "configs-ib.yaml"), "--out", str(out), "--only", "slurm")
    assert sorted(p.name for p in (out / "slurm").iterdir()) == ["topology-block.conf", "topology.conf"]


def test_qos_levels_preempt_every_lower_level():
    qos = lab_plan().slurm.qos
    names = [q.name for q in qos]
    assert names == ["p0", "p1", "p2", "p3", "p4", "p5"]
    for i, q in enumerate(qos):
        assert q.preempts == names[i + 1:]
        assert all(q.priority > lower.priority for lower in qos[i + 1:])


def expand(expr: str) -> list[str]:
    conf = ROOT / "tests" / "golden" / "slurm" / "slurm-lab" / "slurm.conf"
    proc = subprocess.run(["scontrol", "show", "hostnames", expr], capture_output=True, text=True,
                          env={**os.environ, "SLURM_CONF": str(conf)}, check=True)
    return proc.stdout.split()


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 40), st.integers(1, 12)), min_size=1, max_size=40, unique=True))
def test_compress2_is_what_slurm_expands(pairs):
    require_tool("scontrol")
    names = [f"su{su:03d}-gpu{n:02d}" for su, n in sorted(pairs)]
    expr = compress2(names)
    assert expand(expr) == names
    assert len(expr) <= sum(len(n) + 1 for n in names)
