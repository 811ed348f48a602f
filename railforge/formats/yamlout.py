"""A small, fast YAML writer for plain data (dicts, lists, str, int, float, bool, None).

Strings are written as JSON strings, which YAML reads back unchanged; keys are plain when safe.
Used for the tens of thousands of host_vars files a large cluster has, where a general YAML
emitter dominates the build time."""

from __future__ import annotations

import json
import re

_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SURROGATES = re.compile(r"\\ud([89ab][0-9a-f]{2})\\ud([c-f][0-9a-f]{2})")


def _quote(s: str) -> str:
    """A YAML double-quoted scalar: JSON's escapes, with astral characters as YAML's \\U escapes."""
    text = json.dumps(s)
    if "\\ud" not in text:
        return text
    return _SURROGATES.sub(_astral, text)


def _astral(m: re.Match) -> str:
    high, low = int("d" + m.group(1), 16), int("d" + m.group(2), 16)
    return "\\U%08x" % (0x10000 + ((high - 0xD800) << 10) + low - 0xDC00)


def _scalar(v: object) -> str:
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int | float):
        return repr(v)
    return _quote(str(v))


def _key(k: object) -> str:
    k = str(k)
    plain = _PLAIN_KEY.fullmatch(k) and k.lower() not in ("null", "true", "false", "yes", "no", "on", "off", "y", "n")
    return k if plain else _quote(k)


def _emit(v: object, indent: str, out: list[str]) -> None:
    if isinstance(v, dict):
        for k, item in v.items():
            if isinstance(item, dict) and item:
                out.append(f"{indent}{_key(k)}:\n")
                _emit(item, indent + "  ", out)
            elif isinstance(item, list) and item:
                out.append(f"{indent}{_key(k)}:\n")
                _emit(item, indent, out)
            else:
                out.append(f"{indent}{_key(k)}: {_empty(item)}\n")
    elif isinstance(v, list):
        for item in v:
            if isinstance(item, dict) and item:
                first = True
                for k, sub in item.items():
                    lead = f"{indent}- " if first else f"{indent}  "
                    first = False
                    if isinstance(sub, dict | list) and sub:
                        out.append(f"{lead}{_key(k)}:\n")
                        _emit(sub, indent + ("    " if isinstance(sub, dict) else "  "), out)
                    else:
                        out.append(f"{lead}{_key(k)}: {_empty(sub)}\n")
            else:
                out.append(f"{indent}- {_empty(item)}\n")


def _empty(v: object) -> str:
    """A value on one line: scalars, and containers in flow style."""
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_quote(str(k))}: {_empty(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(_empty(x) for x in v) + "]"
    return _scalar(v)


def dumps(data: dict) -> str:
    out = ["---\n"]
    _emit(data, "", out)
    return "".join(out)
