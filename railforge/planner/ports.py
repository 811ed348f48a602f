"""Switch port allocation by cage; port names follow the switch OS's profile (railforge/nos/)."""

from __future__ import annotations

from railforge.hardware.catalog import PortSlot, ports_at
from railforge.nos import profile as nos_profile
from railforge.nos.profile import NosProfile, PortMap, front_label
from railforge.plan.model import Port
from railforge.spec.models import CatalogSwitch
from railforge.units import format_speed


def _front(slot: PortSlot) -> str:
    return front_label(slot.index, slot.sub, slot.split)


def _port_args(nos: NosProfile, platform: PortMap | None, slot: PortSlot) -> tuple:
    if platform is not None:
        p = platform.port(slot.index, slot.split, slot.speed_mbps, slot.sub)
        return p.name, _front(slot), slot.index, slot.sub, slot.speed_mbps, p.mode, list(p.lanes)
    name = nos.port_name(slot.index, slot.sub, slot.split, len(slot.lanes) * slot.split)
    return (name, _front(slot), slot.index, slot.sub, slot.speed_mbps, f"{slot.split}x{format_speed(slot.speed_mbps)}",
            list(slot.lanes))


class RadixError(Exception):
    pass


class PortLayout:
    """Which cages of one switch model serve which purpose, worked out once per (model, nos, needs)."""

    def __init__(self, model: str, switch: CatalogSwitch, nos: str, needs: list[tuple[str, int, int]]):
        self.model = model
        self.nos = nos
        profile = nos_profile(nos)
        platform = profile.platform(*profile.platform_ref(model, switch)) if profile.platform is not None else None
        self.slots: dict[str, list[PortSlot]] = {}
        self.unused: list[PortSlot] = []  # sub-ports left over in broken-out cages first, then whole free cages
        used_cages: set[int] = set()
        for purpose, speed, count in needs:
            free = [s for s in ports_at(switch, speed) if s.index not in used_cages]
            cages: list[int] = []
            chosen: list[PortSlot] = []
            for s in free:
                if len(chosen) == count:
                    break
                if not cages or cages[-1] != s.index:
                    cages.append(s.index)
                chosen.append(s)
            if len(chosen) < count:
                raise RadixError(f"{model} has {len(chosen)} free ports at {format_speed(speed)} for {purpose}; "
                                 f"{count} are needed")
            used_cages.update(cages)
            self.slots[purpose] = chosen
            if chosen:
                self.unused += [s for s in free[len(chosen):] if s.index == cages[-1]]
        for g, group in enumerate(switch.groups):
            mode = group.modes[0]
            for s in ports_at(switch, mode.speed):
                if s.group == g and s.index not in used_cages:
                    self.unused.append(s)

        self._args = {purpose: [_port_args(profile, platform, s) for s in entries]
                      for purpose, entries in (*self.slots.items(), ("unused", self.unused))}

    def ports(self) -> dict[str, list[Port]]:
        """Fresh Port objects (lanes lists are shared and never mutated): one list per purpose plus 'unused'."""
        return {purpose: [Port(*a) for a in args] for purpose, args in self._args.items()}


def capacity(switch: CatalogSwitch, speed: int) -> int:
    return len(ports_at(switch, speed))
