"""Switch port allocation by cage, and port names in each NOS's convention."""

from __future__ import annotations

from railforge.hardware.catalog import PortSlot, ports_at
from railforge.nos.sonic_platform import Platform, PlatformError, load_platform
from railforge.plan import Device, Port
from railforge.spec.models import CatalogSwitch, format_speed


def ib_port_number(index: int, sub: int, breakout: str) -> int:
    """InfiniBand port number as ibnetdiscover and OpenSM count it: cage `index` carries ports
    index*split+1 .. index*split+split, split being the cage's breakout (2 on a QM9700 at NDR)."""
    split = int(breakout.split("x", 1)[0]) if breakout[:1].isdigit() else 1
    return index * split + sub + 1


def host_hca(device: Device, port: Port) -> str:
    """The RDMA device behind a host's compute port, as its InfiniBand NodeDescription (`<host> <hca>`) names
    it: the rail's HCA from the plan (spec `node.compute.hcas`), else `mlx5_<port index>`: an appliance such
    as UFM has no rails, and mlx5 devices are numbered in port order."""
    return next((r.hca for r in device.rails if r.ifname == port.name), f"mlx5_{port.index}")


def hca_port(device: Device, hca: str) -> str | None:
    """The compute port behind RDMA device `hca` (the inverse of `host_hca`); None when the host has none.
    A node's compute ports are its rails; an appliance's are its ports other than `bmc`."""
    if device.rails:
        return next((r.ifname for r in device.rails if r.hca == hca), None)
    return next((p.name for p in device.ports if p.name != "bmc" and f"mlx5_{p.index}" == hca), None)


def _front(slot: PortSlot) -> str:
    return f"{slot.index + 1}" if slot.split == 1 else f"{slot.index + 1}/{slot.sub + 1}"


def port_name(nos: str, slot: PortSlot) -> tuple[str, str]:
    """(name the NOS uses, front-panel label) for Cumulus and InfiniBand; SONiC names come from the platform."""
    front = _front(slot)
    if nos == "cumulus":
        name = f"swp{slot.index + 1}" if slot.split == 1 else f"swp{slot.index + 1}s{slot.sub}"
        return name, front
    return front, front


def sonic_platform(model: str, switch: CatalogSwitch) -> Platform:
    if switch.sonic is None:
        raise PlatformError(f"its catalog entry names no SONiC platform (`sonic: {{platform, hwsku}}`), so there is "
                            f"no port map for a SONiC config of a {model}; use a model that has one, or cumulus")
    return load_platform(switch.sonic.platform, switch.sonic.hwsku)


def _port_args(nos: str, platform: Platform | None, slot: PortSlot) -> tuple:
    if platform is not None:
        p = platform.port(slot.index, slot.split, slot.speed_mbps, slot.sub)
        return p.name, _front(slot), slot.index, slot.sub, slot.speed_mbps, p.mode, list(p.lanes)
    name, label = port_name(nos, slot)
    return (name, label, slot.index, slot.sub, slot.speed_mbps, f"{slot.split}x{format_speed(slot.speed_mbps)}",
            list(slot.lanes))


class RadixError(Exception):
    pass


class PortLayout:
    """Which cages of one switch model serve which purpose, worked out once per (model, nos, needs)."""

    def __init__(self, model: str, switch: CatalogSwitch, nos: str, needs: list[tuple[str, int, int]]):
        self.model = model
        self.nos = nos
        platform = sonic_platform(model, switch) if nos == "sonic" else None
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

        self._args = {purpose: [_port_args(nos, platform, s) for s in entries]
                      for purpose, entries in (*self.slots.items(), ("unused", self.unused))}

    def ports(self) -> dict[str, list[Port]]:
        """Fresh Port objects (lanes lists are shared and never mutated): one list per purpose plus 'unused'."""
        return {purpose: [Port(*a) for a in args] for purpose, args in self._args.items()}


def capacity(switch: CatalogSwitch, speed: int) -> int:
    return len(ports_at(switch, speed))
