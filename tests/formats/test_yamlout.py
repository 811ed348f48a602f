"""The fast YAML writer must read back (with PyYAML) as exactly the data it was given."""

from __future__ import annotations

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from railforge.formats.yamlout import dumps

scalars = st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.text(max_size=12) | st.floats(
    allow_nan=False, allow_infinity=False, width=32)
keys = st.text(min_size=1, max_size=8)
data = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
                    max_leaves=25)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(keys, data, max_size=5))
def test_round_trip(value: dict) -> None:
    assert yaml.safe_load(dumps(value)) == (value or None)


def test_strings_that_look_like_other_types_stay_strings() -> None:
    value = {"a": "yes", "b": "null", "c": "0x10", "d": "1e3", "e": "- x", "f": "a: b", "yes": ["on", "#x"]}
    assert yaml.safe_load(dumps(value)) == value
