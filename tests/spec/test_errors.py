"""Negative tests, netlab style: tests/errors/<case>.yaml must fail `railforge validate` and `build`
with exit code 2, print every line of <case>.txt, print no traceback, and write no output."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from railforge.cli.main import app
from tests.conftest import ROOT

CASES = sorted((ROOT / "tests" / "errors").glob("*.yaml"))


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
def test_error_case(case: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    expected = [line for line in case.with_suffix(".txt").read_text().splitlines() if line]
    result = runner.invoke(app, ["validate", str(case)], env={"COLUMNS": "400"})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 2, result.output
    text = " ".join(result.stderr.split())
    for line in expected:
        assert line in text, f"expected {line!r} in:\n{result.stderr}"
    assert "Traceback" not in result.output
    if case.stem != "bad-yaml":
        assert f"{case}:" in text, "the message must name the spec file and line"
    out = tmp_path / "out"
    result = runner.invoke(app, ["build", str(case), "--out", str(out)])
    assert result.exit_code == 2
    assert list(tmp_path.iterdir()) == [], "a failed build must not leave any output"


def test_there_are_error_cases() -> None:
    assert len(CASES) >= 20
