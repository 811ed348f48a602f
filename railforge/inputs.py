"""The one strict reader for every file a tool takes besides the spec: plan.json, LLDP tables, ibnetdiscover
output, FRR dumps, MAC lists, the configs of a build folder.

Why hand-written: no library reads "a bounded regular file, without blocking, then bounded JSON, then a model"
and reports every failure as one line naming the file and the place. The pieces are libraries (orjson, pydantic);
this module only puts limits around them and turns their failures into `InputError`.

Every refusal is an `InputError`, rendered `FILE: message` or `FILE:LINE: message`; nothing else escapes a reader:
- the path is opened with O_NONBLOCK and checked with fstat: a folder, FIFO, socket or device (`/dev/zero`) is
  refused before a byte is read, so nothing blocks or grows without bound;
- at most `max_bytes` (+1, to tell) are read, whatever the file claims;
- text is strict UTF-8; a bad byte is named with its offset and line;
- JSON goes through orjson (a syntax error is named by line and column; integers beyond 64 bits, NaN and invalid
  UTF-8 are refused), then the depth (MAX_DEPTH), the number of values (MAX_VALUES) and integer size
  (MAX_INT_DIGITS digits) are checked iteratively;
- the data is validated by a pydantic model; errors name the dotted path of the value, the value (cut short)
  and what was wanted.
"""

from __future__ import annotations

import os
import stat
import unicodedata
from pathlib import Path
from typing import Annotated, TypeVar

import orjson
from pydantic import AfterValidator, StringConstraints, TypeAdapter, ValidationError

MAX_DEPTH = 32
MAX_VALUES = 50_000_000
MAX_INT_DIGITS = 30
MAX_ERRORS = 20
MAX_LINE_CHARS = 4096
MAX_NAME_CHARS = 256

KiB, MiB = 1 << 10, 1 << 20

T = TypeVar("T")


class InputError(ValueError):
    """A file a tool was given cannot be used; `str()` is the one line to print."""

    def __init__(self, source: object, message: str, line: int | None = None):
        self.source = str(source)
        self.message = message
        self.line = line
        where = f"{self.source}:{line}" if line else self.source
        super().__init__(f"{where}: {message}")


def shown(value: object, limit: int = 60) -> str:
    """A value as an error echoes it: its repr (control characters escaped), cut short."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def read_bytes(path: Path | str, max_bytes: int, what: str = "", hint: str = "") -> bytes:
    """The bytes of the regular file `path`, read without blocking and never more than `max_bytes` + 1.
    `what` names the file in the message ("the spec"); `hint` says what to give instead of a folder or device."""
    label = f"cannot read {what}" if what else "cannot read"
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except (OSError, ValueError) as exc:
        raise InputError(path, f"{label}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise InputError(path, f"{label}: it is a directory" + (f"; {hint}" if hint else ""))
        if not stat.S_ISREG(st.st_mode):
            raise InputError(path, f"{label}: it is not a regular file (a FIFO, device or socket)"
                             + (f"; {hint}" if hint else ""))
        name = f"{what} is" if what else "the file is"
        if st.st_size > max_bytes:
            raise InputError(path, f"{name} {st.st_size:,} bytes; at most {max_bytes:,} are read")
        chunks, total = [], 0
        while total <= max_bytes:
            chunk = os.read(fd, min(max_bytes + 1 - total, 16 * MiB))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > max_bytes:
            raise InputError(path, f"{name} over {max_bytes:,} bytes; at most {max_bytes:,} are read")
    except OSError as exc:
        raise InputError(path, f"{label}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    return b"".join(chunks)


def decode(raw: bytes, source: object, bom: bool = False) -> str:
    """Strict UTF-8 (a leading BOM dropped when `bom`); a bad byte is named with its offset and line."""
    try:
        return raw.decode("utf-8-sig" if bom else "utf-8")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise InputError(source, f"not UTF-8 text: byte 0x{raw[exc.start]:02x} at offset {exc.start:,} "
                                 "cannot be decoded", line=line) from None


def read_text(path: Path | str, max_bytes: int, what: str = "", hint: str = "", bom: bool = False) -> str:
    return decode(read_bytes(path, max_bytes, what, hint), path, bom=bom)


def parse_json(raw: bytes | str, source: object, check: bool = True) -> object:
    """JSON data within the depth, size and integer limits above; `check=False` leaves the walk over every value
    to a caller whose model bounds the shape itself (plan.json, validated field by field)."""
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogatepass")
    else:
        decode(raw, source)
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        line, col = exc.lineno, exc.colno
        reason = exc.msg
        if "depth" in reason or "recursion" in reason:
            reason = f"nested deeper than {MAX_DEPTH} levels"
        elif "infinity" in reason or "range" in reason:
            reason = "a number too large (integers are read up to 64 bits, numbers up to 1.8e308)"
        raise InputError(source, f"not valid JSON at column {col}: {reason}", line=line) from None
    if check:
        check_json(data, source)
    return data


def check_json(data: object, source: object) -> None:
    """Depth, number of values and integer size of parsed JSON, checked without recursion."""
    stack: list[tuple[object, int]] = [(data, 1)]
    count = 0
    while stack:
        value, depth = stack.pop()
        count += 1
        if depth > MAX_DEPTH:
            raise InputError(source, f"JSON nested deeper than {MAX_DEPTH} levels")
        if count > MAX_VALUES:
            raise InputError(source, f"JSON with more than {MAX_VALUES:,} values")
        if isinstance(value, dict):
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value)
        elif isinstance(value, int) and not isinstance(value, bool) and len(str(abs(value))) > MAX_INT_DIGITS:
            raise InputError(source, f"an integer of more than {MAX_INT_DIGITS} digits")


def dotted(loc: tuple[str | int, ...]) -> str:
    out = ""
    for part in loc:
        if part == "[key]":
            out += " (the key)"
        elif isinstance(part, int):
            out += f"[{part}]"
        else:
            text = str(part)
            text = text if text.isidentifier() or text.replace("-", "_").isidentifier() else shown(text, 40)
            out += f".{text}" if out else text
    return out or "(top level)"


def _error_line(err: dict) -> str:
    loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith(("function-", "lax-"))))
    msg = err["msg"]
    for prefix in ("Value error, ", "Assertion failed, "):
        msg = msg.removeprefix(prefix)
    if err["type"] == "missing":
        return f"{dotted(loc)} is required but missing"
    if err["type"] in ("extra_forbidden", "unexpected_keyword_argument"):
        return f"{dotted(loc)} is not a known field"
    return f"{dotted(loc)}: {shown(err.get('input'))}: {msg[:1].lower() + msg[1:]}"


def validation_errors(exc: ValidationError, source: object, what: str) -> InputError:
    errors = exc.errors()
    lines = [_error_line(e) for e in errors[:MAX_ERRORS]]
    more = f"; and {len(errors) - MAX_ERRORS:,} more" if len(errors) > MAX_ERRORS else ""
    return InputError(source, f"not {what}: " + "; ".join(lines) + more)


def validate(adapter: TypeAdapter[T], data: object, source: object, what: str) -> T:
    """`data` as the model of `adapter`, or an InputError naming every bad value (the first MAX_ERRORS)."""
    try:
        return adapter.validate_python(data)
    except ValidationError as exc:
        raise validation_errors(exc, source, what) from None
    except RecursionError:
        raise InputError(source, f"not {what}: nested too deeply") from None


def load_json(path: Path | str, adapter: TypeAdapter[T], what: str, max_bytes: int) -> T:
    """read_bytes + parse_json + validate: the whole front door for a JSON input."""
    return validate(adapter, parse_json(read_bytes(path, max_bytes), path), path, what)


def control_char(text: str) -> str | None:
    """The first control, format, separator or surrogate character of `text` (one that moves a terminal's
    cursor, hides text or reorders it), else None."""
    return next((ch for ch in text if is_control(ch)), None)


def is_control(ch: str) -> bool:
    return ch < " " or unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp", "Cs", "Co")


def plain(value: object, newlines: bool = False) -> str:
    """`value` as text with every control, format and separator character written as its escape (`\\x1b`,
    `\\u202e`); `newlines` keeps line breaks (a message of several lines of our own)."""
    text = str(value)
    if text.isprintable() and text.isascii():
        return text
    out = []
    for ch in text:
        if (ch == "\n" and newlines) or not is_control(ch):
            out.append(ch)
        else:
            out.append(repr(ch)[1:-1] if ch not in "\\'\"" else ch)
    return "".join(out)


def _plain(text: str) -> str:
    if (ch := control_char(text)) is not None:
        raise ValueError(f"holds the control character {ch!r}; a name is one line of printable text")
    return text


Name = Annotated[str, StringConstraints(max_length=MAX_NAME_CHARS), AfterValidator(_plain)]
"""A device, port, peer or cable name read from a file: printable, one line, at most MAX_NAME_CHARS."""
