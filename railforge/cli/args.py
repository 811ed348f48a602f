"""Command-line values checked at the door, before any work: paths a tool writes or reads and the URL it writes
into other files (`ztp --server` ends up in Kea's configuration and every ZTP script).

Why hand-written: click's Path type checks existence and permissions, not what a name may hold; urllib parses
almost anything. The rules are few and each refusal names the option, the value (escaped) and what is valid.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

from railforge.inputs import control_char, shown

MAX_PATH_BYTES = 4095
MAX_NAME_BYTES = 255
MAX_URL_CHARS = 2048


class ArgumentError(ValueError):
    """A command-line value that cannot be used; nothing was done."""


def check_path(path: Path | str, option: str) -> Path:
    """A path of at most MAX_PATH_BYTES bytes, each component at most MAX_NAME_BYTES, without NUL or control
    characters (Linux's PATH_MAX and NAME_MAX; a control character in a file name only ever hides it)."""
    text = os.fspath(path)
    if not text:
        raise ArgumentError(f"{option}: an empty path; give a file or folder name")
    raw = os.fsencode(text)
    if (ch := control_char(text)) is not None or b"\0" in raw:
        raise ArgumentError(f"{option} {shown(text)}: holds the control character {ch or chr(0)!r}; a path is "
                            "printable text")
    if len(raw) > MAX_PATH_BYTES:
        raise ArgumentError(f"{option} {shown(text)}: {len(raw):,} bytes long; at most {MAX_PATH_BYTES:,}")
    for part in text.split("/"):
        if len(os.fsencode(part)) > MAX_NAME_BYTES:
            raise ArgumentError(f"{option} {shown(text)}: the name {shown(part, 40)} is {len(os.fsencode(part)):,} "
                                f"bytes; a file or folder name is at most {MAX_NAME_BYTES} bytes")
    return Path(text)


def check_url(value: str, option: str, schemes: tuple[str, ...] = ("http", "https")) -> str:
    """An absolute URL of one of `schemes` with a host, an optional port 1-65535, no user, query or fragment,
    and no whitespace or control character anywhere."""
    want = ("want the HTTP(S) URL, e.g. http://10.250.0.10:8080" if schemes == ("http", "https")
            else f"want a URL of scheme {' or '.join(schemes)}")
    if len(value) > MAX_URL_CHARS:
        raise ArgumentError(f"{option} {shown(value)}: {len(value):,} characters; at most {MAX_URL_CHARS:,}")
    if (ch := control_char(value)) is not None or any(c.isspace() for c in value):
        bad = ch or next(c for c in value if c.isspace())
        raise ArgumentError(f"{option} {shown(value)}: holds {bad!r}; {want}")
    if not value.isascii():
        raise ArgumentError(f"{option} {shown(value)}: holds a non-ASCII character (write an IDN host in its "
                            f"xn-- form); {want}")
    try:
        parts = urlsplit(value)
    except ValueError as exc:
        raise ArgumentError(f"{option} {shown(value)}: {exc}; {want}") from None
    try:
        port = parts.port
    except ValueError:
        raise ArgumentError(f"{option} {shown(value)}: the port is not a number from 1 to 65535; {want}") from None
    if parts.scheme not in schemes or not parts.hostname:
        raise ArgumentError(f"{option} {shown(value)}: {want}")
    if port == 0:
        raise ArgumentError(f"{option} {shown(value)}: port 0; the port is a number from 1 to 65535")
    if parts.username is not None or parts.password is not None or parts.query or parts.fragment:
        raise ArgumentError(f"{option} {shown(value)}: no user, query or fragment; {want}")
    if any(c in value for c in "\"'`$\\<>{}|^"):
        raise ArgumentError(f"{option} {shown(value)}: holds a quote, backslash or shell/template character; {want}")
    return value.rstrip("/")
