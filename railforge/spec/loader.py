"""Read cluster.yaml, keep the line of every key, and turn validation failures into SpecErrors."""

from __future__ import annotations

import difflib
import re
import typing
from pathlib import Path

import yaml
from pydantic import BaseModel, ValidationError

from railforge.inputs import shown
from railforge.spec import yamlsafe
from railforge.spec.errors import SpecError, SpecErrors
from railforge.spec.models import ClusterSpec

LineMap = dict[tuple[str | int, ...], int]
PLAIN_KEY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+/-]*")


def _lines(node: yaml.Node, path: tuple[str | int, ...], out: LineMap) -> None:
    out[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            sub = (*path, key.value)
            out[sub] = key.start_mark.line + 1
            _lines(value, sub, out)
            out[sub] = key.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _lines(item, (*path, i), out)


def read_yaml(path: Path) -> tuple[object, LineMap]:
    source = str(path)
    text = ""
    try:
        text = yamlsafe.read_text(path)
        data, node = yamlsafe.load(text)
    except yamlsafe.SpecFileError as exc:
        raise SpecErrors([SpecError("", exc.message, line=exc.line, source=source)]) from None
    except yaml.reader.ReaderError as exc:
        line = text.encode("utf-8", "surrogateescape")[:exc.position].count(b"\n") + 1
        char = chr(exc.character) if isinstance(exc.character, int) else exc.character
        raise SpecErrors([SpecError("", f"not valid YAML: the character {char!r} is not allowed ({exc.reason}); "
                                        "a spec is printable text", line=line, source=source)]) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark else None
        problem = getattr(exc, "problem", None) or str(exc)
        raise SpecErrors([SpecError("", f"not valid YAML: {problem}", line=line, source=source)]) from None
    except (RecursionError, MemoryError):
        raise SpecErrors([SpecError("", "not valid YAML: too deeply nested or too large to read",
                                    source=source)]) from None
    lines: LineMap = {}
    if node is not None:
        _lines(node, (), lines)
    return data, lines


def _line_for(loc: tuple[str | int, ...], lines: LineMap) -> int | None:
    for end in range(len(loc), -1, -1):
        if loc[:end] in lines:
            return lines[loc[:end]]
    return None


def dotted(loc: tuple[str | int, ...]) -> str:
    out = ""
    for part in loc:
        if part == "[key]":
            out += " (the key)"
        elif isinstance(part, int):
            out += f"[{part}]"
        else:
            text = part if PLAIN_KEY.fullmatch(part) else shown(part, 40)
            out += f".{text}" if out else text
    return out


def _model_in(annotation: object) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return next((m for a in typing.get_args(annotation) if (m := _model_in(a)) is not None), None)


def fields_at(loc: tuple[str | int, ...]) -> list[str]:
    """The field names the spec model takes at `loc` (a list index passes through), or [] where none is known."""
    model: type[BaseModel] | None = ClusterSpec
    for part in loc:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part) if model else None
        model = _model_in(field.annotation) if field else None
        if model is None:
            return []
    return [f.alias or name for name, f in model.model_fields.items()]


def _unknown_field(loc: tuple[str | int, ...], err: dict, missing: set[tuple]) -> tuple[str, tuple | None]:
    """An unknown key's message with its likely meaning, and the `missing` error it explains (then not shown):
    `leef:` is one error, "did you mean leaf", not two."""
    key, parent = loc[-1], loc[:-1]
    value = err.get("input")
    said = "" if isinstance(value, (dict, list)) else f" (value {shown(value)})"
    if not isinstance(key, str):
        return f"is not a known field{said}", None
    siblings = [m[-1] for m in missing if m[:-1] == parent and isinstance(m[-1], str)]
    match = difflib.get_close_matches(key, siblings, n=1, cutoff=0.6)
    if match:
        return f"is not a known field{said}; did you mean {match[0]}? ({dotted((*parent, match[0]))} is required)", (
            *parent, match[0])
    known = fields_at(parent)
    match = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    if match:
        return f"is not a known field{said}; did you mean {match[0]}?", None
    if known:
        return f"is not a known field{said}; known here: {', '.join(known)}", None
    return f"is not a known field{said}; check the spelling against docs/spec/reference.md", None


def _message(err: dict) -> str:
    kind = err["type"]
    if kind == "missing":
        return "is required but missing"
    if kind == "extra_forbidden":
        return f"is not a known field (value {shown(err.get('input'))}); check the spelling against the README"
    if kind == "literal_error":
        expected = err.get("ctx", {}).get("expected", "")
        return f"{shown(err.get('input'))} is not valid; expected one of {expected}"
    msg = err["msg"]
    for prefix in ("Value error, ", "Assertion failed, "):
        if msg.startswith(prefix):
            msg = msg[len(prefix):]
    if kind.startswith(("greater", "less", "int_", "float_", "too_", "string_", "bool", "finite")):
        msg = f"{shown(err.get('input'))}: {msg.lower()}"
    return msg


def validate(data: object, lines: LineMap, source: str) -> ClusterSpec:
    if not isinstance(data, dict):
        raise SpecErrors([SpecError("", "the spec must be a YAML mapping (name:, node:, scalable_units:, ...)",
                                    source=source, line=1)])
    try:
        return ClusterSpec.model_validate(data)
    except ValidationError as exc:
        found = [(tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith(("function-", "lax-")))),
                  err) for err in exc.errors()]
        missing = {loc for loc, err in found if err["type"] == "missing"}
        messages, explained = [], set()
        for loc, err in found:
            if err["type"] == "extra_forbidden" and loc:
                message, covers = _unknown_field(loc, err, missing - explained)
                explained.add(covers)
            else:
                message = _message(err)
            messages.append((loc, err, message))
        errors = [SpecError(dotted(loc), message, line=_line_for(loc, lines), source=source)
                  for loc, err, message in messages if not (err["type"] == "missing" and loc in explained)]
        raise SpecErrors(errors) from None


def load_spec(path: str | Path) -> tuple[ClusterSpec, LineMap]:
    path = Path(path)
    data, lines = read_yaml(path)
    return validate(data, lines, str(path)), lines
