"""Check an NVUE `startup.yaml` against NVIDIA's NVUE object model for one Cumulus Linux release.

The models come from the `nvueschema` package (pydantic classes generated from NVIDIA's OpenAPI
specs for Cumulus Linux 5.0-5.18). Validating through those classes directly would hide errors:
they ignore unknown keys and coerce values. So this walks the document along the models' type
annotations: every mapping key must be a field of the model at that path (by its NVUE name), every
leaf value must have the schema's JSON type and pass its constraints (strict, no coercion).
Collections that the generator reduced to `Dict[str, Any]` (free-form in the models) are reported
as `unchecked` so callers can say what was not proven.
"""

from __future__ import annotations

import importlib
import json
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Union

import yaml
from pydantic import BaseModel, TypeAdapter
from pydantic import ValidationError as PydanticError


class NvueLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """YAML as NVUE reads it: `on`/`off`/`yes`/`no` are strings (YAML 1.2 booleans only)."""


NvueLoader.yaml_implicit_resolvers = {
    k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:bool"]
    for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
NvueLoader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))


@dataclass
class Report:
    release: str
    errors: list[str] = field(default_factory=list)
    unchecked: set[str] = field(default_factory=set)
    checked_leaves: int = 0


def models_for(release: str) -> types.ModuleType:
    """The nvueschema module for `release` ('5.14' -> nvueschema.models.v5_14)."""
    try:
        from nvueschema.models._versions import VERSIONS
    except ImportError as exc:
        raise RuntimeError("the NVUE object models need the `nvueschema` package (pip install nvueschema)") from exc
    if release not in VERSIONS:
        raise ValueError(f"nvueschema has no model for Cumulus Linux {release}; it has {', '.join(VERSIONS)}")
    return importlib.import_module(f"nvueschema.models.v{release.replace('.', '_')}")


def _strip(annotation: Any) -> tuple[Any, bool]:
    """(annotation without Optional/None, whether None is allowed)."""
    origin = typing.get_origin(annotation)
    if origin in (Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        nullable = len(args) < len(typing.get_args(annotation))
        if len(args) == 1:
            inner, n = _strip(args[0])
            return inner, nullable or n
        return Union[tuple(args)], nullable  # noqa: UP007
    return annotation, False


def _structural(annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _structural(typing.get_args(annotation)[0])
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return True
    return origin in (dict, list)


_FIELDS: dict[type[BaseModel], dict[str, Any]] = {}
_SHAPES: dict[int, tuple[Any, tuple[str, bool, Any]]] = {}


def _shape(annotation: Any) -> tuple[str, bool, Any]:
    """(kind, nullable, what to recurse into) of an annotation, worked out once per annotation object."""
    hit = _SHAPES.get(id(annotation))
    if hit is not None and hit[0] is annotation:
        return hit[1]
    inner, nullable = _strip(annotation)
    origin = typing.get_origin(inner)
    if inner is Any:
        shape = ("any", nullable, None)
    elif origin is Union:
        shape = ("union", nullable, inner)
    elif isinstance(inner, type) and issubclass(inner, BaseModel):
        shape = ("model", nullable, inner)
    elif origin is dict:
        shape = ("dict", nullable, typing.get_args(inner)[1])
    elif origin is list:
        shape = ("list", nullable, typing.get_args(inner)[0])
    else:
        shape = ("leaf", nullable, inner)
    _SHAPES[id(annotation)] = (annotation, shape)
    return shape
_LEAVES: dict[tuple[int, str, Any], str | None] = {}
_ADAPTERS: dict[int, tuple[Any, TypeAdapter]] = {}


def _fields(model: type[BaseModel]) -> dict[str, Any]:
    if model not in _FIELDS:
        _FIELDS[model] = {(f.alias or name): f.annotation for name, f in model.model_fields.items()}
    return _FIELDS[model]


def _leaf_problem(annotation: Any, value: Any) -> str | None:
    """Why `value` does not fit the leaf type `annotation` (strict, as JSON), or None; memoized."""
    key = (id(annotation), type(value).__name__, value)
    if key not in _LEAVES:
        text = json.dumps(value)
        if id(annotation) not in _ADAPTERS:
            _ADAPTERS[id(annotation)] = (annotation, TypeAdapter(annotation))
        try:
            _ADAPTERS[id(annotation)][1].validate_json(text, strict=True)
            _LEAVES[key] = None
        except PydanticError as exc:
            _LEAVES[key] = exc.errors()[0]["msg"]
    return _LEAVES[key]


class _Walker:
    def __init__(self, report: Report):
        self.report = report

    def error(self, path: str, msg: str) -> None:
        self.report.errors.append(f"{path or '/'}: {msg}")

    def walk(self, value: Any, annotation: Any, path: str) -> bool:
        """True when `value` fits `annotation`; errors are recorded as they are found."""
        kind, nullable, inner = _shape(annotation)
        if value is None:
            if nullable or kind == "any":
                return True
            self.error(path, "null is not allowed here")
            return False
        if kind == "any":
            self.report.unchecked.add(path)
            return True
        if kind == "union":
            return self._union(value, inner, path)
        if kind == "model":
            return self._model(value, inner, path)
        if kind == "dict":
            return self._dict(value, inner, path)
        if kind == "list":
            if not isinstance(value, list):
                self.error(path, f"expected a list, found {_kind(value)}")
                return False
            return all([self.walk(v, inner, f"{path}/{i}") for i, v in enumerate(value)])
        return self._leaf(value, inner, path)

    def _union(self, value: Any, annotation: Any, path: str) -> bool:
        for option in typing.get_args(annotation):
            trial = _Walker(Report(self.report.release))
            if trial.walk(value, option, path):
                self.report.unchecked |= trial.report.unchecked
                self.report.checked_leaves += trial.report.checked_leaves
                return True
        self.error(path, f"{value!r} matches none of {_describe(annotation)}")
        return False

    def _model(self, value: Any, model: type[BaseModel], path: str) -> bool:
        if not isinstance(value, dict):
            self.error(path, f"expected a mapping ({_doc_path(model)}), found {_kind(value)} {value!r}")
            return False
        fields = _fields(model)
        ok = True
        for key, item in value.items():
            sub = f"{path}/{key}"
            if key not in fields:
                valid = ", ".join(sorted(fields)) or "none"
                self.error(sub, f"no such key in the Cumulus Linux {self.report.release} object model "
                                f"at {_doc_path(model)} (valid: {valid})")
                ok = False
                continue
            ok = self.walk(item, fields[key], sub) and ok
        return ok

    def _dict(self, value: Any, item_type: Any, path: str) -> bool:
        if not isinstance(value, dict):
            self.error(path, f"expected a mapping of entries, found {_kind(value)} {value!r}")
            return False
        ok = True
        for key, item in value.items():
            if not isinstance(key, str):
                self.error(f"{path}/{key}", f"entry key {key!r} must be a string (quote it)")
                ok = False
                continue
            ok = self.walk(item, item_type, f"{path}/{key}") and ok
        return ok

    def _leaf(self, value: Any, annotation: Any, path: str) -> bool:
        if isinstance(value, dict | list):
            self.error(path, f"expected {_describe(annotation)}, found {_kind(value)}")
            return False
        reason = _leaf_problem(annotation, value)
        if reason is not None:
            self.error(path, f"{value!r} is not valid: {reason} (expected {_describe(annotation)})")
            return False
        self.report.checked_leaves += 1
        return True


def _kind(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean", int: "an integer",
            float: "a number"}.get(type(value), type(value).__name__)


def _doc_path(model: type[BaseModel]) -> str:
    for line in (model.__doc__ or "").splitlines():
        if line.strip().startswith("Path:"):
            return line.split("Path:", 1)[1].strip()
    return model.__name__


def _describe(annotation: Any) -> str:
    annotation, _ = _strip(annotation)
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _describe(typing.get_args(annotation)[0])
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(annotation))
    if origin is Union:
        return " or ".join(_describe(a) for a in typing.get_args(annotation))
    return getattr(annotation, "__name__", str(annotation))


def validate_document(doc: Any, release: str) -> Report:
    """Check a parsed startup.yaml (a list of `header`/`set` operations) against one release's model."""
    models = models_for(release)
    report = Report(release)
    walker = _Walker(report)
    if not isinstance(doc, list) or not doc:
        walker.error("", "startup.yaml must be a list of operations (- header: ..., - set: ...)")
        return report
    sets = 0
    for i, op in enumerate(doc):
        if not isinstance(op, dict) or len(op) != 1:
            walker.error(f"/{i}", "each operation is a mapping with one key: header, set or unset")
            continue
        (verb, body), = op.items()
        if verb == "header":
            walker.walk(body, models.NvueConfigHeader, f"/{i}/header")
        elif verb in ("set", "unset"):
            sets += verb == "set"
            walker.walk(body, models.NvueConfig, f"/{i}/{verb}")
        else:
            walker.error(f"/{i}/{verb}", "unknown operation (valid: header, set, unset)")
    if not sets:
        walker.error("", "no `set` operation: the file configures nothing")
    return report


def validate_file(path: Path, release: str) -> Report:
    try:
        doc = yaml.load(path.read_text(encoding="utf-8"), Loader=NvueLoader)  # noqa: S506 (safe subclass)
    except yaml.YAMLError as exc:
        report = Report(release)
        report.errors.append(f"/: not YAML: {exc}")
        return report
    return validate_document(doc, release)
