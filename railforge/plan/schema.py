"""The published contracts: JSON Schema of plan.json (from the plan dataclasses) and of cluster.yaml (from the
spec models), written to docs/schemas/ by `python -m railforge.plan.schema [DIR]`; a test fails when they are stale.

pydantic's TypeAdapter reads the plan dataclasses as they are; field descriptions are the attribute
docstrings in plan.py (pydantic's `use_attribute_docstrings`, set on a subclass-free copy of the config
for the duration of the call). The plan schema is strict like the reader (`additionalProperties: false`)
and pins `schema_version`; `device_types`, `twin_parts` and `splitter_parts` are optional because plans
written before them still read.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

from pydantic import ConfigDict, TypeAdapter

from railforge.plan import model as plan_model
from railforge.spec.models import ClusterSpec

PLAN_FILE = "plan.schema.json"
CLUSTER_FILE = "cluster.schema.json"
BASE_ID = "https://railforge.invalid/schemas/"
OPTIONAL = {"Plan": {"device_types", "twin_parts", "slurm", "splitter_parts"}}
NOT_WRITTEN = {"Plan": {"views"}}


def _plan_classes() -> list[type]:
    return [c for c in vars(plan_model).values()
            if isinstance(c, type) and dataclasses.is_dataclass(c) and c.__module__ == plan_model.__name__]


def plan_schema() -> dict:
    classes = _plan_classes()
    saved = {c: c.__dict__.get("__pydantic_config__") for c in classes}
    try:
        for c in classes:
            c.__pydantic_config__ = ConfigDict(use_attribute_docstrings=True)
        schema = TypeAdapter(plan_model.Plan).json_schema(mode="serialization")
    finally:
        for c, old in saved.items():
            if old is None:
                del c.__pydantic_config__
            else:
                c.__pydantic_config__ = old
    defs = schema.pop("$defs")
    defs["Plan"] = schema
    for name, d in defs.items():
        for key in NOT_WRITTEN.get(name, ()):
            d["properties"].pop(key)
        d["required"] = [k for k in d["properties"] if k not in OPTIONAL.get(name, ())]
        d["additionalProperties"] = False
        for prop in d["properties"].values():
            prop.pop("title", None)
    root = defs.pop("Plan")
    root["properties"]["schema_version"] = {**root["properties"]["schema_version"],
                                            "const": plan_model.SCHEMA_VERSION}
    root["properties"]["schema_version"].pop("default", None)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": BASE_ID + PLAN_FILE,
            "title": "railforge plan.json", **root, "$defs": defs}


def cluster_schema() -> dict:
    schema = ClusterSpec.model_json_schema(mode="validation")
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": BASE_ID + CLUSTER_FILE,
            "title": "railforge cluster.yaml", **schema}


def rendered() -> dict[str, str]:
    return {name: json.dumps(make(), indent=2, sort_keys=True) + "\n"
            for name, make in ((PLAN_FILE, plan_schema), (CLUSTER_FILE, cluster_schema))}


def main(argv: list[str]) -> int:
    folder = Path(argv[0]) if argv else Path(__file__).resolve().parents[2] / "docs" / "schemas"
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in rendered().items():
        (folder / name).write_text(text, encoding="utf-8")
        print(folder / name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
