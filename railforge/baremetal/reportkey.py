"""The report-in key and the per-host tokens derived from it.

`railforge boot files` renders each host's token into that host's iPXE kernel command line (`railforge.token`) and,
for installer hosts, into its preseed; `railforge boot report-in` recomputes it from the planned host and its
recorded boot MAC and accepts a report only with that token (`Authorization: Bearer <token>`), from the host's
planned address. token = HMAC-SHA256(key, "railforge-report-in" NUL host NUL boot MAC), 128 bits in hex: a token
is good for one host only and needs no per-host storage; a new key (a new file) voids every token at once.

The key file holds 64 hexadecimal digits (32 random bytes) and a newline, is owned by the user and readable by
nobody else (0600): `boot files` creates it when it does not exist, `report-in` only reads it.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
import stat
from pathlib import Path

MAX_BYTES = 4096
_KEY = re.compile(r"[0-9a-f]{64}")


class ReportKeyError(ValueError):
    """A key file that cannot be used, phrased for the user."""


def create_key(path: Path) -> bool:
    """Write a new key to `path` (0600) unless a file is there already; True when it wrote one."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    except OSError as exc:
        raise ReportKeyError(f"--report-key {path}: cannot create ({exc.strerror})") from None
    with os.fdopen(fd, "w", encoding="ascii") as fh:
        fh.write(secrets.token_hex(32) + "\n")
    return True


def load_key(path: Path) -> bytes:
    """The key in `path`: a regular file of at most MAX_BYTES, mode without group/other bits, 64 hex digits."""
    where = f"--report-key {path}"
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            raise ReportKeyError(f"{where}: not a regular file")
        if st.st_mode & 0o077:
            raise ReportKeyError(f"{where}: readable by others (mode {stat.S_IMODE(st.st_mode):04o}); chmod 0600 it")
        if st.st_size > MAX_BYTES:
            raise ReportKeyError(f"{where}: over {MAX_BYTES} bytes")
        text = Path(path).read_text(encoding="ascii").strip()
    except FileNotFoundError:
        raise ReportKeyError(f"{where}: no such file (`railforge boot files --report-key` creates it)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ReportKeyError(f"{where}: cannot read ({exc.__class__.__name__})") from None
    if not _KEY.fullmatch(text):
        raise ReportKeyError(f"{where}: want 64 hexadecimal digits (32 random bytes), as `boot files` writes")
    return bytes.fromhex(text)


def host_token(key: bytes, host: str, mac: str) -> str:
    return hmac.new(key, f"railforge-report-in\0{host}\0{mac}".encode(), hashlib.sha256).hexdigest()[:32]


def same(given: str, wanted: str) -> bool:
    return hmac.compare_digest(given.encode(), wanted.encode())
