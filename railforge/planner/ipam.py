"""Address and ASN allocation by structural index: the same index always gets the same address,
so growing a cluster appends and never renumbers."""

from __future__ import annotations

from dataclasses import dataclass, field
from socket import inet_ntoa

import netaddr

from railforge.plan.model import AsnPool, Pool


def int_to_ip(value: int) -> str:
    return inet_ntoa(value.to_bytes(4, "big"))


class PoolExhausted(Exception):
    def __init__(self, pool: str, prefix: str, needed: str):
        super().__init__(f"pool {pool} ({prefix}) is too small: {needed}")
        self.pool = pool
        self.prefix = prefix
        self.needed = needed


@dataclass
class PrefixPool:
    """A spec pool carved into equal blocks of `block_len` bits by index."""

    name: str
    prefix: str
    purpose: str
    fabric: str
    spec_field: str
    used: int = 0
    _net: netaddr.IPNetwork = field(init=False, repr=False)
    first: int = field(init=False)
    size: int = field(init=False)

    def __post_init__(self) -> None:
        self._net = netaddr.IPNetwork(self.prefix)
        self.first = int(self._net.first)
        self.size = int(self._net.size)

    def require(self, blocks: int, block_len: int, what: str) -> None:
        """Fail early when `blocks` blocks of /block_len (sized for the design maximum) do not fit."""
        need = blocks << (32 - block_len)
        if need > self.size:
            smallest = 32 - max(0, (need - 1).bit_length())
            raise PoolExhausted(self.name, self.prefix,
                                f"{what} need {blocks} x /{block_len} = {need} addresses; use at least a /{smallest}")

    def block(self, index: int, block_len: int) -> tuple[int, int]:
        """(first address, length) of block `index` of size /block_len."""
        size = 1 << (32 - block_len)
        start = self.first + index * size
        if start + size > self.first + self.size:
            raise PoolExhausted(self.name, self.prefix, f"block {index} of /{block_len} is past its end")
        return start, block_len

    def take(self, count: int) -> None:
        self.used += count

    def record(self) -> Pool:
        return Pool(self.name, self.prefix, self.purpose, self.fabric, self.size, self.used)


def block_len_for(addresses: int) -> int:
    """Smallest prefix length holding `addresses` addresses."""
    return 32 - max(0, (addresses - 1).bit_length())


def check_overlaps(pools: list[PrefixPool]) -> list[tuple[PrefixPool, PrefixPool]]:
    clashes = []
    for i, a in enumerate(pools):
        for b in pools[i + 1:]:
            if a._net.first <= b._net.last and b._net.first <= a._net.last:
                clashes.append((a, b))
    return clashes


@dataclass
class AsnRange:
    name: str
    first: int
    count: int
    purpose: str
    used: int = 0

    @property
    def last(self) -> int:
        return self.first + self.count - 1

    def record(self) -> AsnPool:
        return AsnPool(self.name, self.first, self.last, self.purpose, self.used)
