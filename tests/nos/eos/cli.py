"""Reading rendered EOS CLI back for the tests: top-level blocks and the lines under them."""

from __future__ import annotations


def blocks(cli: str) -> dict[str, list[str]]:
    """Top-level line -> the stripped lines indented under it (a repeated top-level line keeps the first)."""
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in cli.splitlines():
        if not line.strip() or line.strip() == "!":
            continue
        if line.startswith(" "):
            if current is not None:
                current.append(line.strip())
            continue
        current = out.setdefault(line.strip(), []) if line.strip() not in out else None
    return out


def section(cli: str, head: str) -> list[str]:
    """The stripped lines under the top-level line starting with `head`."""
    for top, lines in blocks(cli).items():
        if top.startswith(head):
            return lines
    return []


def top_lines(cli: str) -> list[str]:
    return [line.strip() for line in cli.splitlines() if line.strip() and not line.startswith(" ")]


def nested(cli: str, top: str, sub: str) -> list[str]:
    """The stripped lines indented under the line `sub` of the top-level block starting with `top` (EOS indents by
    three spaces, FRR by one: depth is read from the indentation)."""
    out: list[str] = []
    in_top, depth = False, None
    for line in cli.splitlines():
        if not line.strip() or line.strip() in ("!", "exit", "exit-address-family"):
            continue
        indent = len(line) - len(line.lstrip())
        if indent == 0:
            in_top, depth = line.startswith(top), None
        elif in_top and depth is not None and indent > depth:
            out.append(line.strip())
        elif in_top:
            depth = indent if line.strip() == sub else None
    return out
