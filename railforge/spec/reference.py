"""The spec reference page (docs/spec/reference.md), generated from the spec models.

Every field's description is its attribute docstring in `models.py`; type, default and range come from the
pydantic field itself, and the example from the bundled specs, so the page cannot drift from what the loader
accepts (tests/spec/test_reference.py fails when the committed page is stale). Hand-written because the
MkDocs plugins that render pydantic models need the model importable inside MkDocs' own environment at build
time and print Python types, not the YAML a user writes.

    python -m railforge.spec.reference > docs/spec/reference.md
"""

from __future__ import annotations

import sys
import types
import typing
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import annotated_types
import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from railforge.spec import models

VALIDATED_TYPES = {
    models.parse_speed: "speed ('400G', '100M')",
    models.check_model: "model name",
    models.check_device_name: "name (a-z, 0-9, '-')",
    models.check_label: "label",
    models.check_text: "text (one line)",
    models.check_pci: "PCI address ('0000:18:00.0')",
    models.check_mac: "MAC address",
    models.parse_ratio: "ratio ('down:up', e.g. '2:1')",
    models.parse_prefix: "IPv4 prefix ('10.0.0.0/16')",
    models.check_release: "release (quoted)",
    models.check_oob_vlan: "VLAN ID",
}


def _validated(metadata: Sequence[object]) -> str | None:
    for m in metadata:
        name = VALIDATED_TYPES.get(getattr(m, "func", None))  # type: ignore[arg-type]
        if name is not None:
            return name
    return None


@dataclass(frozen=True)
class Row:
    path: str
    type: str
    default: str
    range: str
    example: str
    description: str


def _model_of(annotation: object) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_of(arg)
        if found is not None:
            return found
    return None


def _type_name(annotation: object) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if annotation == models.Metres:
        return "metres"
    if origin is typing.Annotated:
        return _validated(args[1:]) or _type_name(args[0])
    if origin is typing.Literal:
        return "one of " + ", ".join(f"`{a}`" if isinstance(a, str) else str(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        shown = [_type_name(a) for a in args if a is not type(None)]
        return " or ".join(shown) + (" or null" if type(None) in args else "")
    if origin is list:
        return f"list of {_type_name(args[0])}"
    if origin is dict:
        return f"map of {_type_name(args[0])} to {_type_name(args[1])}"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "mapping"
    return {int: "integer", float: "number", str: "string", bool: "boolean", Fraction: "ratio"}.get(
        annotation, str(annotation))  # type: ignore[call-overload]


def _bounds(metadata: Sequence[object]) -> list[str]:
    out = []
    for m in metadata:
        if isinstance(m, FieldInfo):
            out += _bounds(m.metadata)
        for attr, word in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<")):
            if isinstance(m, getattr(annotated_types, attr.capitalize())):
                out.append(f"{word} {getattr(m, attr):,}")
        if isinstance(m, annotated_types.MinLen):
            out.append(f"at least {m.min_length} entries")
        if isinstance(m, annotated_types.MaxLen):
            out.append(f"at most {m.max_length:,} entries")
    return out


def _range(info: FieldInfo) -> str:
    bounds = _bounds(info.metadata)
    inner = info.annotation
    while typing.get_origin(inner) in (typing.Union, types.UnionType, list):
        inner = next(a for a in typing.get_args(inner) if a is not type(None))
        if typing.get_origin(inner) is typing.Annotated:
            bounds += [f"each {b}" for b in _bounds(typing.get_args(inner)[1:])]
    return "; ".join(bounds)


def _shown(value: object) -> str:
    if isinstance(value, BaseModel):
        return ""
    if isinstance(value, Fraction):
        return f"`'{value.numerator}:{value.denominator}'`"
    if value in ({}, []):
        return "empty"
    if value is None:
        return "none"
    text = yaml.safe_dump(value, default_flow_style=True, width=10_000).strip()
    if text.endswith("\n..."):
        text = text[: -len("\n...")]
    return f"`{text.removesuffix('...').strip()}`"


def _default(info: FieldInfo) -> str:
    if info.is_required():
        return "**required**"
    if info.default_factory is not None:
        return _shown(info.default_factory())  # type: ignore[call-arg]
    return _shown(info.default)


def _description(info: FieldInfo) -> str:
    return " ".join((info.description or "").split()).replace("|", "\\|")


def rows(model: type[BaseModel] = models.ClusterSpec, prefix: str = "",
         examples: dict[str, object] | None = None) -> Iterator[Row]:
    """One row per field, depth first, in declaration order; nested models follow their parent field."""
    examples = examples or {}
    for name, info in model.model_fields.items():
        path = f"{prefix}{name}"
        annotation = info.annotation
        sub = _model_of(annotation)
        if typing.get_origin(annotation) is dict or (sub is not None and typing.get_origin(annotation) is list):
            child = f"{path}.<key>." if typing.get_origin(annotation) is dict else f"{path}[]."
        else:
            child = f"{path}."
        if typing.get_origin(annotation) is dict and typing.get_origin(typing.get_args(annotation)[1]) is list:
            child = f"{path}.<key>[]."
        example = examples.get(path)
        shown_type = _validated(info.metadata) or _type_name(annotation)
        if shown_type != _type_name(annotation) and typing.get_origin(annotation) in (typing.Union, types.UnionType):
            shown_type += " or null"
        yield Row(path, shown_type, _default(info), _range(info),
                  _shown(example) if example is not None and sub is None else "", _description(info))
        if sub is not None:
            yield from rows(sub, child, examples)


def _flatten(value: object, prefix: str, out: dict[str, object]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _flatten(v, f"{prefix}{k}.", out)
            out.setdefault(f"{prefix}{k}", v)
            out.setdefault(f"{prefix}<key>", v)
            if isinstance(v, dict | list):
                _flatten(v, f"{prefix}<key>.", out)
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, dict):
                _flatten(item, prefix[:-1] + "[].", out)


def examples_from(specs: Sequence[Path]) -> dict[str, object]:
    """The first value each field path takes in the given specs (in the order given)."""
    out: dict[str, object] = {}
    for spec in specs:
        _flatten(yaml.safe_load(spec.read_text()), "", out)
    return out


EXAMPLE_SPECS = tuple(Path(f"inventory/{name}/cluster.yaml")
                      for name in ("minimal", "dgx-h100-4su", "roce-a800-4nic", "roce-16k-railplane"))

HEADER = """\
# Spec reference

Every key `cluster.yaml` accepts, generated from the spec models (`railforge/spec/models.py`) by
`python -m railforge.spec.reference > docs/spec/reference.md`; `tests/spec/test_reference.py`
fails when this page is stale. An unknown or misspelt key is an error naming the file, line and key.
*Example* is the first value the bundled specs ({specs}) give the key; keys they leave out show none.
`<key>` stands for a map key, `[]` for each entry of a list. How the keys fit together is on
[The spec, the plan and railforge build](build.md); a complete small spec is `inventory/minimal/cluster.yaml`.

| key | type | default | range | example | meaning |
|---|---|---|---|---|---|
"""


def render(specs: Sequence[Path]) -> str:
    ex = examples_from(specs)
    body = "".join(f"| `{r.path}` | {r.type} | {r.default} | {r.range} | {r.example} | {r.description} |\n"
                   for r in rows(examples=ex))
    return HEADER.format(specs=", ".join(f"`{s.as_posix()}`" for s in specs)) + body


def main(argv: Sequence[str]) -> int:
    """Run from the repository root; with no arguments the examples are the bundled specs."""
    sys.stdout.write(render([Path(a) for a in argv] or EXAMPLE_SPECS))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
