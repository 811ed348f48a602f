"""What a fabric reports about its own cabling, independent of the source format."""

from __future__ import annotations

from dataclasses import dataclass, field

End = tuple[str, str]  # (device, port) as the plan names them


@dataclass(slots=True, frozen=True)
class Adjacency:
    local: End
    remote: End
    speed_mbps: int | None = None
    source: str = ""


@dataclass(slots=True)
class Observation:
    devices: set[str] = field(default_factory=set)  # devices whose view we have (even if they saw nothing)
    adjacencies: list[Adjacency] = field(default_factory=list)
    unresolved: list[str] = field(default_factory=list)  # neighbours whose names the plan does not know

    def merge(self, other: Observation) -> None:
        self.devices |= other.devices
        self.adjacencies += other.adjacencies
        self.unresolved += other.unresolved
