"""A misspelt key is one error that says what was meant (issue 40 item 9): `leef:` used to give two errors
(`leaf` missing, `leef` unknown, with the value as a Python dict) and no suggestion."""

from __future__ import annotations

from pathlib import Path

import pytest

from railforge.spec import load_spec
from railforge.spec.errors import SpecErrors
from railforge.spec.loader import fields_at
from tests.conftest import ROOT

TINY = ROOT / "tests" / "specs" / "tiny-roce.yaml"


def errors_of(tmp_path: Path, old: str, new: str) -> list[str]:
    text = TINY.read_text()
    assert old in text
    (tmp_path / "cluster.yaml").write_text(text.replace(old, new, 1))
    with pytest.raises(SpecErrors) as exc:
        load_spec(tmp_path / "cluster.yaml")
    return [e.render() for e in exc.value.errors]


def test_a_misspelt_required_key_is_one_error_with_did_you_mean(tmp_path: Path) -> None:
    errors = errors_of(tmp_path, "  leaf: {model: SN5600}", "  leef: {model: SN5600}")
    assert len(errors) == 1, errors
    assert errors[0].endswith(":16: compute.leef: is not a known field; did you mean leaf? (compute.leaf is "
                              "required)"), errors
    assert "{'model'" not in errors[0]


def test_a_misspelt_optional_key_is_offered_the_field(tmp_path: Path) -> None:
    errors = errors_of(tmp_path, "  nodes_per_su: 4", "  nodes_per_su: 4\n  maxx: 8")
    assert errors == [f"{tmp_path / 'cluster.yaml'}:13: scalable_units.maxx: is not a known field (value 8); "
                      "did you mean max?"], errors


def test_an_unknown_key_with_nothing_close_lists_the_known_ones(tmp_path: Path) -> None:
    errors = errors_of(tmp_path, "  nodes_per_su: 4", "  nodes_per_su: 4\n  zzz: 1")
    assert len(errors) == 1 and f"known here: {', '.join(fields_at(('scalable_units',)))}" in errors[0], errors
    assert "count" in fields_at(("scalable_units",)) and fields_at(("no-such",)) == []
