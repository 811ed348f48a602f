"""Slurm-style hostlist compression: su001-gpu01,su001-gpu02 -> su001-gpu[01-02]."""

from __future__ import annotations

import re
from collections.abc import Iterable

_TAIL = re.compile(r"^(.*?)(\d+)$")


def compress(names: Iterable[str]) -> str:
    """Group names by prefix and digit width, keep the given order of groups, merge consecutive runs."""
    groups: dict[tuple[str, int], list[int]] = {}
    plain: list[str] = []
    order: list[tuple[str, int] | str] = []
    for name in names:
        m = _TAIL.match(name)
        if not m:
            plain.append(name)
            order.append(name)
            continue
        key = (m.group(1), len(m.group(2)))
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(int(m.group(2)))
    parts = []
    for key in order:
        if isinstance(key, str):
            parts.append(key)
            continue
        prefix, width = key
        nums = sorted(set(groups[key]))
        if len(nums) == 1:
            parts.append(f"{prefix}{nums[0]:0{width}d}")
            continue
        runs = []
        start = prev = nums[0]
        for n in nums[1:] + [None]:
            if n is not None and n == prev + 1:
                prev = n
                continue
            runs.append(f"{start:0{width}d}" if start == prev else f"{start:0{width}d}-{prev:0{width}d}")
            if n is not None:
                start = prev = n
        parts.append(f"{prefix}[{','.join(runs)}]")
    return ",".join(parts)
