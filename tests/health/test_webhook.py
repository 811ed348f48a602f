"""The webhook reader: real Alertmanager bodies pass; anything else is refused with the place named."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from railforge.health.webhook import MAX_BODY, WebhookError, parse_webhook
from tests.health.alerts import alert, body, webhook


def test_a_real_shaped_body_parses() -> None:
    hook = parse_webhook(body(alert("RailforgeNodeRailDown", cable="CMP-000001", device="su001-gpu01")))
    assert hook.alerts[0].name == "RailforgeNodeRailDown" and hook.alerts[0].labels["cable"] == "CMP-000001"


@pytest.mark.parametrize("mutate, place", [
    (lambda w: w.update(version="3"), "version"),
    (lambda w: w["alerts"][0].update(status="pending"), "alerts[0].status"),
    (lambda w: w["alerts"][0]["labels"].update({"bad-name": "x"}), "alerts[0].labels.bad-name (the label name)"),
    (lambda w: w["alerts"][0]["labels"].update(cable="x" * 2000), "alerts[0].labels.cable"),
    (lambda w: w["alerts"][0].update(fingerprint="NOTHEX"), "alerts[0].fingerprint"),
    (lambda w: w["alerts"][0].update(extra={"deep": [1]}), "alerts[0].extra"),
    (lambda w: w.pop("alerts"), "alerts"),
    (lambda w: w["alerts"][0].update(startsAt="yesterday"), "alerts[0].startsAt"),
])
def test_bad_fields_are_named(mutate, place: str) -> None:
    w = webhook(alert("RailforgeNodeRailDown", cable="CMP-000001"))
    mutate(w)
    with pytest.raises(WebhookError, match="^hook: " + re.escape(place) + ": "):
        parse_webhook(json.dumps(w).encode(), "hook")


def test_size_depth_and_type_limits() -> None:
    with pytest.raises(WebhookError, match="at most"):
        parse_webhook(b" " * (MAX_BODY + 1))
    with pytest.raises(WebhookError, match="nested too deeply|not JSON"):
        parse_webhook(b"[" * 100_000 + b"]" * 100_000)
    with pytest.raises(WebhookError, match="must be a JSON object, not list"):
        parse_webhook(b"[]")
    with pytest.raises(WebhookError, match="not JSON"):
        parse_webhook(b"\xff\xfe")


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                         max_size=4), max_leaves=30)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=2048) | json_values.map(lambda v: json.dumps(v).encode()))
def test_fuzz_any_bytes_parse_or_raise_webhook_error(data: bytes) -> None:
    try:
        parse_webhook(data, "fuzz")
    except WebhookError as exc:
        assert str(exc).startswith("fuzz: ")


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(["status", "labels", "fingerprint", "startsAt", "endsAt", "annotations"]),
                       json_values, max_size=6))
def test_fuzz_alert_fields(fields: dict) -> None:
    w = webhook(alert("RailforgeNodeRailDown", cable="CMP-000001"))
    w["alerts"][0].update(fields)
    try:
        hook = parse_webhook(json.dumps(w).encode(), "fuzz")
    except WebhookError as exc:
        assert "fuzz: " in str(exc)
    else:
        assert hook.alerts[0].status in ("firing", "resolved")
