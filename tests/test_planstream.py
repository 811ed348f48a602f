"""plan.json read item by item (`plan/stream.py`): on every bundled example and test spec it reads the same plan
as the full reader, without falling back to it; it drops only the switches' ports (unless asked to keep them);
and on hostile bytes it accepts exactly what the full reader accepts, with the same plan or the same message."""

from __future__ import annotations

import io
import json
import os
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from railforge.inputs import InputError
from railforge.plan import io as planio
from railforge.plan.io import read_plan, write_plan
from railforge.plan.model import SWITCH_ROLES
from railforge.plan.stream import read_plan_lean
from railforge.planner import build_plan
from railforge.spec import load_spec
from tests.conftest import ROOT
from tests.helpers.hostile import mutated

SPECS = sorted([*ROOT.glob("inventory/*/cluster.yaml"), *ROOT.glob("tests/specs/*.yaml")])
EXAMPLES = int(os.environ.get("RAILFORGE_FUZZ_EXAMPLES", "150"))


def written(spec_path: Path, folder: Path) -> Path:
    spec, lines = load_spec(spec_path)
    out = folder / f"{spec_path.parent.name}-{spec_path.stem}.json"
    with out.open("wb") as fh:
        write_plan(build_plan(spec, lines, str(spec_path)), fh)
    return out


def no_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(path):
        raise AssertionError(f"the stream fell back to the full reader on {path}")

    monkeypatch.setattr(planio, "read_plan", refuse)


@pytest.mark.parametrize("spec", SPECS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_same_plan_as_the_full_reader(spec: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = written(spec, tmp_path)
    full = read_plan(path)
    with monkeypatch.context() as m:
        no_fallback(m)
        assert read_plan_lean(path, switch_ports=True) == full
        lean = read_plan_lean(path)
    for a, b in zip(full.devices, lean.devices, strict=True):
        if a.role in SWITCH_ROLES:
            assert b.ports == [] and a.ports
            a.ports = []
        assert a == b
    assert lean.links == full.links and lean.cluster == full.cluster


@pytest.fixture(scope="module")
def seed(tmp_path_factory) -> bytes:
    """tiny-roce's plan.json as railforge writes it (one device or link per line), cut to a few devices."""
    spec, lines = load_spec(ROOT / "tests" / "specs" / "tiny-roce.yaml")
    plan = build_plan(spec, lines, "tiny-roce.yaml")
    keep = {"su001-leaf-r0", "spine01", "su001-gpu01", "su001-gpu02"}
    plan.devices = [d for d in plan.devices if d.name in keep]
    plan.links = [lk for lk in plan.links if lk.a.device in keep and lk.b.device in keep]
    out = io.BytesIO()
    write_plan(plan, out)
    return out.getvalue()


def outcome(read, path: Path) -> tuple[str, object]:
    try:
        return "plan", read(path)
    except InputError as exc:
        return "refused", str(exc)


def test_hostile_bytes_read_as_the_full_reader_reads_them(seed: bytes, tmp_path: Path) -> None:
    """Mutated bytes, lines swapped and items reformatted: the stream reads exactly what the full reader reads
    (the switches' ports kept, so the plans compare whole), or refuses with its message."""
    path = tmp_path / "plan.json"

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.one_of(mutated(seed), st.sampled_from([
        seed.replace(b"\n", b""), seed.replace(b",\n", b",\n\n", 3), seed.replace(b'"links":[', b'"links": [', 1),
        json.dumps(json.loads(seed), indent=1).encode(), re.sub(rb'"speed_mbps":\d+', b'"speed_mbps":' + b"9" * 31,
                                                                seed, count=1),
        seed.replace(b'"length_m":', b'"length_m":NaN,"length_m":', 1), seed[:-3], seed + b"{}\n"])))
    def case(raw: bytes) -> None:
        path.write_bytes(raw)
        assert outcome(lambda p: read_plan_lean(p, switch_ports=True), path) == outcome(read_plan, path)

    case()


def test_a_plan_in_another_layout_is_read_by_the_full_reader(seed: bytes, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "plan.json"
    path.write_bytes(json.dumps(json.loads(seed), indent=2).encode())
    calls = []
    real = planio.read_plan
    monkeypatch.setattr(planio, "read_plan", lambda p: calls.append(p) or real(p))
    assert read_plan_lean(path, switch_ports=True) == real(path) and calls == [path]
