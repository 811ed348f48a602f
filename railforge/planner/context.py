"""Shared state of one build: the spec, the catalog, pools, and the devices and links made so far."""

from __future__ import annotations

from dataclasses import dataclass, field

from railforge import nos as nos_registry
from railforge.nos.profile import PlatformError
from railforge.plan.model import Device, Endpoint, Link, Port
from railforge.planner.ipam import AsnRange, PrefixPool
from railforge.planner.ports import PortLayout, RadixError
from railforge.spec.errors import SpecError
from railforge.spec.loader import LineMap, dotted
from railforge.spec.models import Catalog, CatalogSwitch, ClusterSpec
from railforge.units import format_speed


@dataclass
class BuildContext:
    spec: ClusterSpec
    catalog: Catalog
    lines: LineMap
    source: str | None
    pools: dict[str, PrefixPool] = field(default_factory=dict)
    asns: dict[str, AsnRange] = field(default_factory=dict)
    devices: list[Device] = field(default_factory=list)
    links: list[Link] = field(default_factory=list)
    layouts: dict[tuple, PortLayout] = field(default_factory=dict)
    claimed: dict[str, int] = field(default_factory=dict)
    """Blocks of each pool the fabrics have claimed so far, in claim order (compute, storage, OOB)."""

    def claim_asns(self, fabric: str, count: int, purpose: str) -> AsnRange:
        """The fabric's ASN range: `count` ASNs from its base in the spec (`addressing.asn.<fabric>`)."""
        asns = self.asns[fabric] = AsnRange(fabric, getattr(self.spec.addressing.asn, fabric), count, purpose)
        return asns

    def claim(self, pool: str, blocks: int, block_len: int, what: str) -> int:
        """Claim the next `blocks` blocks of /`block_len` of a pool shared by the fabrics (loopbacks, p2p), failing
        when the pool cannot hold every claim so far (`what` names them); the address offset of the first."""
        first = self.claimed.get(pool, 0)
        self.pools[pool].require(first + blocks, block_len, what)
        self.claimed[pool] = first + blocks
        return first << (32 - block_len)

    def fail(self, field_path: str, message: str) -> SpecError:
        key: tuple = tuple(int(p) if p.isdigit() else p for p in field_path.split(".")) if field_path else ()
        line = None
        for end in range(len(key), -1, -1):
            if key[:end] in self.lines:
                line = self.lines[key[:end]]
                break
        return SpecError(dotted(key), message, line=line, source=self.source)

    def switch_model(self, field_path: str, model: str, kind: str | None = None) -> CatalogSwitch:
        sw = self.catalog.switches.get(model)
        if sw is None:
            known = ", ".join(sorted(self.catalog.switches))
            raise self.fail(field_path, f"{model!r} is not in the switch catalog; known models: {known} "
                                        "(add your own under catalog.switches)")
        if kind and sw.kind != kind:
            raise self.fail(field_path, f"{model} is an {sw.kind} switch; this fabric needs an {kind} switch")
        return sw

    def layout(self, field_path: str, model: str, nos: str, needs: list[tuple[str, int, int]]) -> PortLayout:
        key = (model, nos, tuple(needs))
        found = self.layouts.get(key)
        if found is None:
            sw = self.switch_model(field_path, model)
            if nos not in sw.nos:
                able = sorted(m for m, s in self.catalog.switches.items() if nos in s.nos and s.kind == sw.kind)
                raise self.fail(field_path, f"{model} does not run {nos}; it runs {', '.join(sw.nos)}. "
                                            f"Models that run {nos}: {', '.join(able) or 'none in the catalog'}")
            try:
                found = PortLayout(model, sw, nos, needs)
            except RadixError as exc:
                total = " + ".join(f"{c} {p} at {format_speed(s)}" for p, s, c in needs)
                raise self.fail(field_path, f"radix exceeded: {exc} (needs {total})") from None
            except PlatformError as exc:
                raise self.fail(field_path, f"{model} with {nos_registry.profile(nos).title}: {exc}") from None
            self.layouts[key] = found
        return found

    def add(self, device: Device) -> Device:
        self.devices.append(device)
        return device

    def connect(self, link_id: str, fabric: str, tier: str, a: tuple[Device, Port], b: tuple[Device, Port],
                su: int | None = None, rail: int | None = None) -> Link:
        (da, pa), (db, pb) = a, b
        pa.link = link_id
        pb.link = link_id
        link = Link(link_id, fabric, tier, min(pa.speed_mbps, pb.speed_mbps), Endpoint(da.name, pa.name),
                    Endpoint(db.name, pb.name), 0.0, "", su, rail)
        self.links.append(link)
        return link
