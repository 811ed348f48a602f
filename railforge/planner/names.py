"""The one naming scheme. Numbers come from structural indices sized by the design maximum,
so a name never changes when the cluster grows within its design."""

from __future__ import annotations


def width(count: int, minimum: int = 2) -> int:
    return max(minimum, len(str(count)))


def su_tag(su: int) -> str:
    return f"su{su:03d}"


def node(su: int, slot: int, slots: int) -> str:
    return f"{su_tag(su)}-gpu{slot:0{width(slots)}d}"


def compute_leaf(su: int, rail: int) -> str:
    return f"{su_tag(su)}-leaf-r{rail}"


def spine(group: str | None, index: int, count: int) -> str:
    base = f"spine{index:0{width(count)}d}"
    return f"{group}-{base}" if group else base


def superspine(plane: int, planes: int, index: int, per_plane: int) -> str:
    return f"superspine-p{plane:0{width(planes)}d}-{index:0{width(per_plane)}d}"


def pod(index: int, count: int) -> str:
    return f"pod{index:0{width(count)}d}"


def rail_group(rail: int, block: int, blocks: int) -> str:
    return f"rail{rail}" if blocks == 1 else f"rail{rail}-b{block:0{width(blocks)}d}"


def storage_leaf(su: int | None, pair: int, side: str) -> str:
    owner = su_tag(su) if su else "svc"
    return f"{owner}-stor-leaf{pair}{side}"


def storage_spine(group: str | None, index: int, count: int) -> str:
    return "stor-" + spine(group, index, count)


def storage_superspine(plane: int, planes: int, index: int, per_plane: int) -> str:
    return "stor-" + superspine(plane, planes, index, per_plane)


def oob_leaf(row: int, index: int) -> str:
    return f"{su_tag(row)}-oob{index}" if row else f"core-oob{index:02d}"


def oob_spine(group: str | None, index: int, count: int) -> str:
    return "oob-" + spine(group, index, count)


def oob_superspine(plane: int, planes: int, index: int, per_plane: int) -> str:
    return "oob-" + superspine(plane, planes, index, per_plane)


def mgmt(index: int) -> str:
    return f"mgmt{index:02d}"


def rack(row: int, position: int) -> str:
    return f"R{row:03d}-{position:02d}"


def cable(prefix: str, number: int) -> str:
    return f"{prefix}-{number:06d}"
