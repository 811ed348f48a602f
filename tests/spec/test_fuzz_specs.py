"""Fuzz the spec front door: hypothesis mutates every bundled spec by type, range, structure and text (and the
YAML text itself), then runs the `railforge validate` path in process (read, validate, plan, summary, report).

Every case must end in a result or in SpecErrors whose every line reads `<file>:<line>: ...`; anything else (an
exception, a hang past CASE_SECONDS, an error without its file and line) fails. The budget is fixed and the run
derandomized, so CI sees the same FUZZ_CASES cases every time; FUZZ_CASES=N in the environment runs more."""

from __future__ import annotations

import copy
import io
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from rich.console import Console

from railforge.cli.main import summary_table
from railforge.planner import build_plan
from railforge.render.report import report_markdown
from railforge.spec import load_spec, yamlsafe
from railforge.spec.errors import SpecError, SpecErrors
from tests.conftest import ROOT

FUZZ_CASES = int(os.environ.get("FUZZ_CASES", "2000"))
CASE_SECONDS = 30
BUILD_MAX_NODES = 512
SOURCES = sorted([*ROOT.glob("inventory/*/cluster.yaml"), *ROOT.glob("tests/specs/*.yaml")])


def _base(path: Path) -> dict:
    data, _ = yamlsafe.load(path.read_text())
    su = data["scalable_units"]
    if su["count"] * su["nodes_per_su"] > BUILD_MAX_NODES:
        su["count"], su["max"] = 2, 2
        su.pop("reserved_slots", None)
    return data


BASES = {p.relative_to(ROOT).as_posix(): _base(p) for p in SOURCES}

HOSTILE_TEXT = ["", " ", "tiny\n", "t1\n", "SN5600\n", "[/x]", "[bold red]BIG[/]", ":100:", "a" * 300, "x" * 5000,
                "../../etc/passwd", "a/b", "\x00", "\t", "\u2028", "\ufeff", "é", "名前", "-", "--", "a-", "A",
                "null", "~", "yes", "0x10", "1e999", ".nan", "{a: 1}", "[1, 2", "&a", "*a", "!!python/none", "%",
                "1:0", "0:1", "2:1", "1.5:1", "65:1", "0.5:1", "1:", "400", "400G", "400g", "0G", "400T", "800M",
                "9999999G", "1600G", "1601G", "10.0.0.0/8", "10.0.0.1/16", "::/0", "0.0.0.0/0", "300.1.1.1/8"]
BOUNDARY_NUMBERS = [0, -1, 1, 2, 3, 7, 8, 63, 64, 65, 255, 256, 4094, 4095, 4096, 4097, 2 ** 31, 2 ** 32, 2 ** 63,
                    10 ** 12, 10 ** 29, 10 ** 30, 10 ** 31, 10 ** 400, -(10 ** 30), 0.5, -0.5, 1.5, 1e-300, 1e308,
                    float("inf"), float("-inf"), float("nan"), True, False, None]
YAML_SNIPPETS = ["&a ", "*a", "*nope", "!!timestamp ", "!!python/object:os.system ", "!!binary ", "!local ", "<<: ",
                 "<<: *a", "? ", "- ", ": ", "[", "]", "{", "}", "'", '"', "|", ">", "#", "%YAML 1.1\n", "---\n",
                 "...\n", "\t", "\x00", "\x85", "\ufeff", "\\", "@", "`", ",", "9" * 50, "-" * 3]
MUTATIONS = ["type", "range", "structure", "text", "key"]


def _paths(node: object, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*prefix, i))
    return out


def _get(doc: object, path: tuple) -> object:
    for p in path:
        doc = doc[p]
    return doc


def _set(doc: dict, path: tuple, value: object) -> None:
    _get(doc, path[:-1])[path[-1]] = value


any_value = st.one_of(st.none(), st.booleans(), st.integers(-10 ** 40, 10 ** 40),
                      st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=24),
                      st.lists(st.integers(-3, 3), max_size=3), st.dictionaries(st.text(max_size=6), st.integers(),
                                                                                max_size=2))


def _mutate(doc: dict, data: st.DataObject) -> None:
    paths = [p for p in _paths(doc) if p]
    path = data.draw(st.sampled_from(paths), label="path")
    kind = data.draw(st.sampled_from(MUTATIONS), label="kind")
    value = _get(doc, path)
    parent = _get(doc, path[:-1])
    if kind == "type":
        _set(doc, path, data.draw(any_value, label="value"))
    elif kind == "range":
        if isinstance(value, str):
            new = re.sub(r"\d+", lambda m: str(data.draw(st.sampled_from([0, 1, 3, 10 ** 5, 10 ** 40]))), value)
        else:
            new = data.draw(st.sampled_from(BOUNDARY_NUMBERS), label="number")
        _set(doc, path, new)
    elif kind == "structure":
        op = data.draw(st.sampled_from(["delete", "add", "duplicate", "empty", "wrap", "graft"]), label="op")
        if op == "delete":
            del parent[path[-1]]
        elif op == "add":
            target = value if isinstance(value, dict) else parent
            if isinstance(target, dict):
                target[data.draw(st.sampled_from(["extra", "nmae", "count", "model", "speed"]))] = 1
            elif isinstance(target, list):
                target.append(copy.deepcopy(target[0]) if target else {})
        elif op == "duplicate" and isinstance(parent, list):
            parent.insert(path[-1], copy.deepcopy(value))
        elif op == "empty":
            _set(doc, path, data.draw(st.sampled_from([[], {}, "", None])))
        elif op == "wrap":
            _set(doc, path, data.draw(st.sampled_from([[value], {"value": value}, [value, value]])))
        else:
            other = _get(doc, data.draw(st.sampled_from(paths), label="graft"))
            _set(doc, path, copy.deepcopy(other))
    elif kind == "text":
        if isinstance(value, str) and data.draw(st.booleans()):
            new = value + data.draw(st.sampled_from(["\n", " ", "[/]", ":100:", "\r", "-", "x" * 60]))
        else:
            new = data.draw(st.one_of(st.sampled_from(HOSTILE_TEXT), st.text(max_size=40)), label="text")
        _set(doc, path, new)
    elif isinstance(parent, dict):
        new_key = data.draw(st.one_of(st.sampled_from(HOSTILE_TEXT), st.text(max_size=12)), label="key")
        parent[new_key] = parent.pop(path[-1])


def _mutate_text(text: str, data: st.DataObject) -> str:
    lines = text.split("\n")
    i = data.draw(st.integers(0, len(lines) - 1), label="line")
    op = data.draw(st.sampled_from(["insert", "append", "delete", "duplicate", "truncate", "indent"]), label="top")
    if op == "insert":
        lines[i] = data.draw(st.sampled_from(YAML_SNIPPETS)) + lines[i]
    elif op == "append":
        lines[i] += data.draw(st.sampled_from(YAML_SNIPPETS))
    elif op == "delete":
        del lines[i]
    elif op == "duplicate":
        lines.insert(i, lines[i])
    elif op == "indent":
        lines[i] = " " * data.draw(st.integers(1, 3)) + lines[i]
    else:
        return text[:data.draw(st.integers(0, len(text)))]
    return "\n".join(lines)


class Hang(Exception):
    pass


def _alarm(signum: int, frame: object) -> None:
    raise Hang(f"no answer within {CASE_SECONDS} s")


def validate_path(path: Path) -> list[str]:
    """The `railforge validate` path in process; returns the rendered errors (empty when the spec is accepted)."""
    try:
        spec, lines = load_spec(path)
        su = spec.scalable_units
        if su.design_max * su.nodes_per_su <= BUILD_MAX_NODES:
            plan = build_plan(spec, lines, str(path))
            Console(file=io.StringIO(), width=200).print(summary_table(plan))
            report_markdown(plan)
        return []
    except SpecErrors as exc:
        return [e.render() for e in exc.errors]
    except SpecError as exc:
        return [exc.render()]


def check_case(path: Path, text: str) -> str:
    path.write_text(text, encoding="utf-8", errors="surrogateescape")
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, CASE_SECONDS)
    try:
        errors = validate_path(path)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    where = re.compile(re.escape(str(path)) + r":\d+: \S")
    for line in errors:
        assert where.match(line), f"error without file:line: {line!r}\n--- spec ---\n{text[:2000]}"
        assert "\n" not in line and "Traceback" not in line, line
    return "rejected" if errors else "accepted"


def test_fuzz_the_validate_path(tmp_path: Path) -> None:
    spec_path = tmp_path / "cluster.yaml"
    outcomes: dict[str, int] = {"accepted": 0, "rejected": 0}
    started, cpu = time.monotonic(), time.process_time()

    @settings(max_examples=FUZZ_CASES, derandomize=True, database=None, deadline=None, print_blob=True,
              phases=(Phase.explicit, Phase.generate, Phase.shrink),
              suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def case(data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(BASES)), label="spec")
        doc = copy.deepcopy(BASES[name])
        for _ in range(data.draw(st.sampled_from([1, 1, 2, 3]), label="mutations")):
            _mutate(doc, data)
        text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=120)
        if data.draw(st.integers(0, 3), label="text-level") == 0:
            text = _mutate_text(text, data)
        outcomes[check_case(spec_path, text)] += 1

    case()
    total = sum(outcomes.values())
    seconds = time.monotonic() - started
    print(f"\nfuzz: {total} cases in {seconds:.1f} s ({time.process_time() - cpu:.1f} s CPU): {outcomes}")
    assert total >= FUZZ_CASES, outcomes
    assert outcomes["rejected"] > total // 4 and outcomes["accepted"] > total // 50, outcomes


def test_fuzz_check_catches_a_crash_and_an_unplaced_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The oracle itself: an exception escapes, and an error without a line fails the check."""
    import tests.spec.test_fuzz_specs as me

    def boom(path: Path) -> None:
        raise ZeroDivisionError("ratio")

    monkeypatch.setattr(me, "load_spec", boom)
    with pytest.raises(ZeroDivisionError):
        check_case(tmp_path / "c.yaml", "name: x\n")

    def unplaced(path: Path) -> None:
        raise SpecErrors([SpecError("name", "bad", source=str(path))])

    monkeypatch.setattr(me, "load_spec", unplaced)
    with pytest.raises(AssertionError, match="without file:line"):
        check_case(tmp_path / "c.yaml", "name: x\n")


def test_fuzz_check_catches_a_hang(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tests.spec.test_fuzz_specs as me

    def spin(path: Path) -> None:
        while True:
            time.sleep(0.01)

    monkeypatch.setattr(me, "load_spec", spin)
    monkeypatch.setattr(me, "CASE_SECONDS", 0.2)
    with pytest.raises(Hang):
        check_case(tmp_path / "c.yaml", "name: x\n")


def _seeded_mutants(n: int) -> list[str]:
    rng = random.Random(11)
    out = []
    for _ in range(n):
        doc = copy.deepcopy(BASES[rng.choice(sorted(BASES))])
        path = rng.choice([p for p in _paths(doc) if p])
        _set(doc, path, rng.choice(HOSTILE_TEXT + BOUNDARY_NUMBERS[:-3]))
        out.append(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True))
    return out


@pytest.mark.parametrize("index", range(4))
def test_fuzzed_specs_through_the_real_command(index: int, tmp_path: Path) -> None:
    """A few mutants through `python -m railforge validate` as a user runs it: exit 0 or 2, no traceback."""
    spec = tmp_path / "cluster.yaml"
    spec.write_text(_seeded_mutants(4)[index])
    proc = subprocess.run([sys.executable, "-m", "railforge", "validate", str(spec)], capture_output=True,
                          text=True, cwd=ROOT, timeout=120, env={**os.environ, "COLUMNS": "300"})
    assert proc.returncode in (0, 2), proc.stderr
    assert "Traceback" not in proc.stderr
    if proc.returncode == 2:
        assert all(line.startswith(f"error {spec}:") for line in proc.stderr.splitlines() if line.strip())
