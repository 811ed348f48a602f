"""plan.json's reader: the one-pass read (pydantic-core parses and validates the bytes) accepts exactly what the
two-pass read (orjson first, for its errors and its number rules, then the model) accepts, with the same plan or
the same message; a plan reads back to the same bytes; the collector is left as it was found."""

from __future__ import annotations

import gc
import io
import json
import os
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from railforge.inputs import InputError
from railforge.plan import io as planio
from railforge.plan.io import parse_plan, write_plan
from railforge.planner import build_plan
from railforge.spec import load_spec
from tests.conftest import ROOT
from tests.helpers.hostile import mutated

EXAMPLES = int(os.environ.get("RAILFORGE_FUZZ_EXAMPLES", "300"))
KEEP = {"su001-leaf-r0", "spine01", "spine02", "su001-gpu01"}
ODD_NUMBERS = [b"NaN", b"Infinity", b"-Infinity", b"1e999", b"1E400", b"-1e+309", b"99999e305", b"1e308", b"1e-400",
               b"18446744073709551616", b"18446744073709551615", b"-9223372036854775809", b"9" * 25, b"9" * 31,
               b"9" * 400, b"1" + b"0" * 18, b"0.5", b"-0", b"1.0", b"true", b'"1"']


def _plan_bytes(plan) -> bytes:
    out = io.BytesIO()
    write_plan(plan, out)
    return out.getvalue()


@pytest.fixture(scope="module")
def seed() -> bytes:
    spec_path = ROOT / "tests" / "specs" / "tiny-roce.yaml"
    spec, lines = load_spec(spec_path)
    full = json.loads(_plan_bytes(build_plan(spec, lines, str(spec_path))))
    full["devices"] = [d for d in full["devices"] if d["name"] in KEEP]
    full["links"] = [lk for lk in full["links"] if lk["a"]["device"] in KEEP and lk["b"]["device"] in KEEP]
    return json.dumps(full, separators=(",", ":")).encode()


def outcome(raw: bytes, one_pass: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[str, object]:
    with monkeypatch.context() as m:
        if not one_pass:
            m.setattr(planio, "_one_pass", lambda raw: False)
        try:
            return "plan", parse_plan(raw, "plan.json")
        except InputError as exc:
            return "refused", str(exc)


@st.composite
def odd_number(draw, seed: bytes) -> bytes:
    """A number of the seed replaced by one the two parsers may read differently, or such a value put before an
    existing key as a duplicate (the later value wins in both parsers, so only the number rules can tell)."""
    spots = [m.end() for m in re.finditer(rb'":', seed)]
    at = draw(st.sampled_from(spots))
    value = draw(st.sampled_from(ODD_NUMBERS))
    if draw(st.booleans()):
        key_start = seed.rindex(b'"', 0, seed.rindex(b'"', 0, at - 1)) if at > 2 else 0
        key = seed[key_start:at]
        return seed[:key_start] + key + value + b"," + seed[key_start:]
    end = at
    while end < len(seed) and seed[end:end + 1] not in b",}]":
        end += 1
    return seed[:at] + value + seed[end:]


settings_ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                     suppress_health_check=list(HealthCheck))


def test_one_pass_and_two_passes_agree(seed: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    @settings_
    @given(st.one_of(mutated(seed), odd_number(seed)))
    def case(raw: bytes) -> None:
        fast, slow = outcome(raw, True, monkeypatch), outcome(raw, False, monkeypatch)
        assert fast == slow, (raw[:300], fast, slow)

    case()


@pytest.mark.parametrize("value", [b"NaN", b"Infinity", b"1e999", b"9" * 400])
def test_a_duplicate_key_does_not_hide_what_orjson_refuses(seed: bytes, value: bytes) -> None:
    """`"length_m":NaN,"length_m":2.0`: the model only sees the later value, so the bytes decide."""
    raw = seed.replace(b'"length_m":', b'"length_m":' + value + b',"length_m":', 1)
    assert raw != seed
    with pytest.raises(InputError, match="not a railforge plan: not valid JSON"):
        parse_plan(raw, "plan.json")


def test_an_integer_beyond_the_bound_is_named(seed: bytes) -> None:
    raw = re.sub(rb'"speed_mbps":\d+', b'"speed_mbps":' + b"9" * 31, seed, count=1)
    with pytest.raises(InputError, match=r"devices\[0\]\.ports\[0\]\.speed_mbps: an integer of more than 30 digits"):
        parse_plan(raw, "plan.json")


def test_a_long_digit_run_in_a_string_is_read_by_the_second_pass(seed: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    raw = seed.replace(b'"label":"', b'"label":"12345678901234567890', 1)
    assert not planio._one_pass(raw)
    kind, plan = outcome(raw, True, monkeypatch)
    assert kind == "plan" and plan.devices[0].ports[0].label.startswith("12345678901234567890")


def test_a_plan_reads_back_to_the_same_bytes(seed: bytes) -> None:
    plan = parse_plan(seed, "plan.json")
    again = _plan_bytes(plan)
    assert parse_plan(again, "plan.json") == plan
    assert _plan_bytes(parse_plan(again, "plan.json")) == again
    assert type(plan.reliability.optics_mtbf_hours) is type(json.loads(seed)["reliability"]["optics_mtbf_hours"])


@pytest.mark.parametrize("enabled", [True, False])
def test_the_collector_is_left_as_it_was(seed: bytes, enabled: bool) -> None:
    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        parse_plan(seed, "plan.json")
        with pytest.raises(InputError):
            parse_plan(seed[:-5], "plan.json")
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()
