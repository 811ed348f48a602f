"""The generated spec reference (docs/spec/reference.md) against the spec models it is generated from."""

from __future__ import annotations

import inspect
from pathlib import Path

from pydantic import BaseModel

from railforge.spec import models
from railforge.spec.reference import EXAMPLE_SPECS, render, rows

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "spec" / "reference.md"


def _spec_models() -> list[type[BaseModel]]:
    return [c for c in vars(models).values()
            if inspect.isclass(c) and issubclass(c, models.Strict) and c is not models.Strict]


def test_committed_page_is_current(monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    assert PAGE.read_text() == render(EXAMPLE_SPECS), (
        "docs/spec/reference.md is stale: run `python -m railforge.spec.reference > docs/spec/reference.md`")


def test_every_field_of_every_model_has_a_description() -> None:
    missing = [f"{m.__name__}.{name}" for m in _spec_models()
               for name, info in m.model_fields.items() if not (info.description or "").strip()]
    assert missing == []


def test_every_field_is_a_row_once() -> None:
    paths = [r.path for r in rows()]
    assert len(paths) == len(set(paths))
    leaves = {p.rsplit(".", 1)[-1].removesuffix("[]") for p in paths}
    for m in _spec_models():
        assert set(m.model_fields) <= leaves, m.__name__
    for expected in ("scalable_units.max", "compute.oversubscription", "tenants[].pkey",
                     "catalog.switches.<key>.groups[].modes[].split", "cabling.media.<key>[].parts",
                     "addressing.asn.compute", "qos.ecn_probability"):
        assert expected in paths


def test_rows_carry_type_default_range_and_example(monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    from railforge.spec.reference import examples_from
    by_path = {r.path: r for r in rows(examples=examples_from(EXAMPLE_SPECS))}
    vlan = by_path["storage.storage_vlan"]
    assert (vlan.type, vlan.default, vlan.range) == ("integer or null", "none", "≥ 2; ≤ 4,094")
    speed = by_path["node.compute.speed"]
    assert speed.type.startswith("speed") and speed.default == "**required**" and speed.example == "`400G`"
    assert by_path["layout.nodes_per_rack"].default == "`4`"
    assert by_path["compute.fabric"].type == "one of `roce`, `infiniband`"
    assert by_path["nos_release.cumulus"].example == "`'5.14'`"
    assert by_path["reliability.job_gpus"].range == "at most 32 entries; each ≥ 1; each ≤ 10,000,000"
    assert "|" not in by_path["scalable_units.max"].description.replace("\\|", "")
