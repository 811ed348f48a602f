"""MAC addresses as recorded in the switch and host MAC files: one canonical form."""

from __future__ import annotations

import re

_MAC = re.compile(r"[0-9a-f]{2}([:-])[0-9a-f]{2}(\1[0-9a-f]{2}){4}|[0-9a-f]{4}\.[0-9a-f]{4}\.[0-9a-f]{4}|[0-9a-f]{12}")


def normalise_mac(text: str) -> str | None:
    """`0C:42:A1:00:00:01`, `0c-42-a1-00-00-01`, `0c42.a100.0001` or `0c42a1000001` -> `0c:42:a1:00:00:01`;
    None when it is not a unicast MAC."""
    text = text.strip().lower()
    if not _MAC.fullmatch(text):
        return None
    digits = re.sub(r"[:.\-]", "", text)
    if int(digits[:2], 16) & 1 or digits == "0" * 12:
        return None
    return ":".join(digits[i:i + 2] for i in range(0, 12, 2))
