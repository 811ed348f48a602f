"""Hostile-input helpers shared by the day-2 regression and fuzz tests: a seeded mutator (bytes and JSON shapes)
for hypothesis, an in-process CLI run with a hang guard, and the output check (no traceback, no unescaped
control character, an exit status from the documented set)."""

from __future__ import annotations

import json
import re
import signal
from contextlib import contextmanager
from pathlib import Path

from hypothesis import strategies as st
from typer.testing import CliRunner

from railforge.cli.main import app
from railforge.inputs import control_char

HANG_S = 20

TOKENS = [b"[/x]", b"[bold red]", b"[/]", b"\x1b[31m", b"\x1b]0;title\x07", b"\r", b"\n", b"\x00", b"\x7f",
          b"\xff", b"\xc3", b"\xe2\x80\xae", b"\xef\xbb\xbf", b"{", b"}", b"[", b"]", b'"', b",", b":", b"null",
          b"true", b"-1", b"1e999", b"9" * 5000, b"[" * 3000, b'{"a":' * 64, b"\t", b"#", b"x" * 5000, b"0x",
          b" ", b"/", b"..", b"%s", b"{{ x }}", b"\\", b"'", b"\xf0\x9f\x92\xa9"]

MARKUP = ["[/x]", "[bold]x[/bold]", "[/]", "\x1b[31m", "\r", "\u202e", "[link=x]"]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False)
    | st.text(alphabet=st.characters(codec="utf-8"), max_size=12) | st.sampled_from(["[/x]", "\x1b[2J", "a\u202eb"]),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=6), kids, max_size=3),
    max_leaves=8)


@st.composite
def byte_mutation(draw, seed: bytes) -> bytes:
    data = bytearray(seed)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["insert", "insert", "delete", "replace", "truncate", "duplicate"]))
        pos = draw(st.integers(0, len(data)))
        if op == "insert":
            data[pos:pos] = draw(st.sampled_from(TOKENS) | st.binary(max_size=8))
        elif op == "delete":
            del data[pos:pos + draw(st.integers(1, 64))]
        elif op == "replace":
            data[pos:pos + 1] = draw(st.binary(min_size=1, max_size=1))
        elif op == "truncate":
            del data[pos:]
        else:
            data[pos:pos] = data[max(0, pos - 200):pos]
    return bytes(data)


def _paths(value: object, here: tuple = ()) -> list[tuple]:
    out = [here]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*here, k))
    elif isinstance(value, list):
        for i, v in enumerate(value[:6]):
            out += _paths(v, (*here, i))
    return out


@st.composite
def json_mutation(draw, seed: object) -> bytes:
    """The seed with one to three values (anywhere, keys included) replaced by arbitrary JSON."""
    doc = json.loads(json.dumps(seed))
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(doc)
        path = draw(st.sampled_from(paths))
        new = draw(json_values)
        if not path:
            doc = new
            continue
        parent = doc
        for p in path[:-1]:
            parent = parent[p]
        if isinstance(parent, dict) and draw(st.booleans()):
            parent[draw(st.text(max_size=6) | st.sampled_from(["[/x]", "\x1b[31m"]))] = parent.pop(path[-1])
        else:
            parent[path[-1]] = new
    return json.dumps(doc, ensure_ascii=draw(st.booleans())).encode("utf-8", "surrogatepass")


def _same_kind(value: object) -> st.SearchStrategy:
    if isinstance(value, bool):
        return st.booleans()
    if isinstance(value, int):
        return st.integers(-(2**63), 2**63 - 1) | st.sampled_from([0, -1, 1, 2**31, 65536])
    if isinstance(value, float):
        return st.floats(allow_nan=False, allow_infinity=False)
    if isinstance(value, str):  # a third of the time the value itself with markup or an escape added
        return st.one_of(st.text(max_size=20),
                         st.sampled_from(["", "[/x]", "x\x1b[31m", "10.0.0.1/33", "::/200", "../x", value.upper()]),
                         st.sampled_from(MARKUP).map(lambda tail: value + tail))
    return st.just(value)


@st.composite
def typed_mutation(draw, seed: object) -> bytes:
    """The seed with one to three scalars replaced by another of the same JSON type: it passes a type check and
    reaches the code after it (references, addresses, names)."""
    doc = json.loads(json.dumps(seed))
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in _paths(doc) if p]
        path = draw(st.sampled_from(paths))
        parent = doc
        for p in path[:-1]:
            parent = parent[p]
        parent[path[-1]] = draw(_same_kind(parent[path[-1]]))
    return json.dumps(doc).encode("utf-8", "surrogatepass")


def _strings(value: object, here: tuple = ()) -> list[tuple]:
    return [p for p in _paths(value, here) if p and isinstance(_at(value, p), str)]


def _at(doc: object, path: tuple) -> object:
    for p in path:
        doc = doc[p]
    return doc


@st.composite
def markup_mutation(draw, seed: object) -> bytes:
    """One or two string values of the seed with markup or an escape written into them: the cases that reach a
    printer most directly."""
    doc = json.loads(json.dumps(seed))
    strings = _strings(doc)
    for _ in range(draw(st.integers(1, 2)) if strings else 0):
        path = draw(st.sampled_from(strings))
        parent = _at(doc, path[:-1])
        text = parent[path[-1]]
        cut = draw(st.integers(0, len(text)))
        token = draw(st.sampled_from(["[/x]", "[/]", "[bold]", "\x1b[2J", "\u202e"]))
        parent[path[-1]] = text[:cut] + token + text[cut:]
    return json.dumps(doc).encode("utf-8", "surrogatepass")


def mutated(seed: bytes) -> st.SearchStrategy[bytes]:
    try:
        doc = json.loads(seed)
    except ValueError:
        return byte_mutation(seed)
    return st.one_of(byte_mutation(seed), json_mutation(doc), typed_mutation(doc), markup_mutation(doc))


@contextmanager
def no_hang(seconds: int | None = None):
    seconds = seconds or HANG_S

    def fail(*_):
        raise TimeoutError(f"hung for more than {seconds} s")

    old = signal.signal(signal.SIGALRM, fail)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def check_output(text: str) -> None:
    """No traceback and no control character (escape, CR, bidi override...) other than line breaks."""
    assert "Traceback" not in text, text[-2000:]
    for line in text.split("\n"):
        assert control_char(line) is None, f"unescaped {control_char(line)!r} in {line[:200]!r}"


def invoke(*args: str, codes: tuple[int, ...] = (0, 1, 2)) -> tuple[int, str]:
    """Run the CLI in this process; fail on an internal error (any exception but SystemExit), an exit status
    outside `codes`, a hang or an unescaped control character. Returns (exit status, stdout + stderr)."""
    with no_hang():
        result = CliRunner().invoke(app, list(args), env={"COLUMNS": "4000"})
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        import traceback

        raise AssertionError("internal error: " + "".join(traceback.format_exception(result.exception))[-3000:])
    text = result.stdout + result.stderr
    assert result.exit_code in codes, (result.exit_code, text[-2000:])
    check_output(text)
    return result.exit_code, text


def one_line(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path
