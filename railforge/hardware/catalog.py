"""The switch, media and GPU server catalog shipped with railforge, merged with the spec's own `catalog:`; and
the compute HCA names a spec's nodes get (`compute_hcas`), the one place that chooses them."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

import yaml

from railforge.spec.models import Catalog, CatalogSwitch, ClusterSpec, MediaRule
from railforge.units import format_speed


@dataclass(frozen=True, slots=True)
class PortSlot:
    """One logical port of a switch at one speed: cage `index`, breakout sub-port `sub`."""

    index: int
    sub: int
    speed_mbps: int
    split: int
    lanes: tuple[int, ...]
    group: int


def builtin_catalog() -> Catalog:
    text = resources.files("railforge.hardware").joinpath("catalog.yaml").read_text(encoding="utf-8")
    return Catalog.model_validate(yaml.safe_load(text))


def merged_catalog(spec: ClusterSpec) -> Catalog:
    base = builtin_catalog()
    media = {k: list(v) for k, v in base.media.items()}
    media.update(spec.catalog.media)
    media.update(spec.cabling.media)
    return Catalog(
        switches={**base.switches, **spec.catalog.switches},
        media=media,
        orderable_lengths_m=spec.catalog.orderable_lengths_m or base.orderable_lengths_m,
        nodes={**base.nodes, **spec.catalog.nodes},
    )


@dataclass(frozen=True, slots=True)
class HcaChoice:
    """The compute (rail) RDMA device names of the spec's nodes, in rail order; `guess` says why they are a guess
    (None: the spec names them, or the catalog cites the vendor's document)."""

    names: list[str]
    guess: str | None


def compute_hcas(spec: ClusterSpec, catalog: Catalog) -> HcaChoice:
    """node.compute.hcas; else the catalog model's `hcas` when it has one per rail; else mlx5_0... (a guess)."""
    nic = spec.node.compute
    if nic.hcas:
        return HcaChoice(list(nic.hcas), None)
    model = spec.node.model
    hw = catalog.nodes.get(model)
    fallback = [f"mlx5_{k}" for k in range(nic.ports)]
    if hw is None or not hw.hcas:
        where = "names no compute HCAs" if hw else "is not in the catalog"
        return HcaChoice(fallback, f"catalog model {model!r} {where}, so the plan uses {_names(fallback)}")
    if len(hw.hcas) != nic.ports:
        return HcaChoice(fallback, f"catalog model {model!r} names {len(hw.hcas)} compute HCAs "
                                   f"({_names(hw.hcas)}) but node.compute.ports is {nic.ports}, so the plan uses "
                                   f"{_names(fallback)}")
    if hw.hcas_source is None:
        return HcaChoice(list(hw.hcas), f"catalog model {model!r} names {_names(hw.hcas)} without a vendor "
                                        "document (no hcas_source)")
    return HcaChoice(list(hw.hcas), None)


def _names(names: list[str]) -> str:
    return ",".join(names)


def media_rules(catalog: Catalog, speed_mbps: int) -> list[MediaRule]:
    return catalog.media.get(format_speed(speed_mbps), [])


def ports_at(switch: CatalogSwitch, speed_mbps: int) -> list[PortSlot]:
    """Every logical port the switch offers at `speed_mbps`, cage by cage, in front-panel order."""
    out: list[PortSlot] = []
    first_cage = 0
    first_lane = 0
    for g, group in enumerate(switch.groups):
        mode = next((m for m in group.modes if m.speed == speed_mbps), None)
        if mode is not None:
            width = group.lanes // mode.split
            for cage in range(group.cages):
                base = first_lane + cage * group.lanes
                for sub in range(mode.split):
                    lanes = tuple(range(base + sub * width, base + (sub + 1) * width))
                    out.append(PortSlot(first_cage + cage, sub, speed_mbps, mode.split, lanes, g))
        first_cage += group.cages
        first_lane += group.cages * group.lanes
    return out


def speeds(switch: CatalogSwitch) -> list[int]:
    return sorted({m.speed for g in switch.groups for m in g.modes}, reverse=True)


def twin_parts(catalog: Catalog, links: list) -> dict[str, str]:
    """Transceiver part -> twin-port module, for the per-end parts `links` use whose media rule names one."""
    used = {link.part for link in links if link.transceivers and link.part}
    out: dict[str, str] = {}
    for rules in catalog.media.values():
        for rule in rules:
            if rule.twin_part and rule.per_end:
                for part in (rule.part, *rule.parts.values()):
                    if part in used:
                        out[part] = rule.twin_part
    return dict(sorted(out.items()))


def splitter_parts(catalog: Catalog, links: list) -> dict[str, dict[str, str]]:
    """Cable part -> {ports per split cage: copper splitter}, for the cable parts `links` use whose media rule
    names splitters (keys are strings: plan.json is JSON)."""
    used = {link.part for link in links if not link.transceivers and link.part}
    out: dict[str, dict[str, str]] = {}
    for rules in catalog.media.values():
        for rule in rules:
            if rule.splitters and not rule.per_end:
                for part in (rule.part, *rule.parts.values()):
                    if part in used:
                        out[part] = {str(ways): rule.splitters[ways] for ways in sorted(rule.splitters)}
    return dict(sorted(out.items()))
