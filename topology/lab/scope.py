"""Which part of the plan the lab emulates: a few SUs, some spines, a few hosts per SU."""

from __future__ import annotations

from dataclasses import dataclass

from topology.plan import Device, Link, Plan

LAB_TIERS = ("node-leaf", "leaf-spine")


class ScopeError(ValueError):
    pass


@dataclass(slots=True)
class LabTopology:
    cluster: str
    prefix: str
    switches: list[Device]
    hosts: list[Device]
    links: list[Link]
    mtu_switch: int
    mtu_host: int

    def ns(self, device: str) -> str:
        return f"{self.prefix}{device}"

    def devices(self) -> list[Device]:
        return self.switches + self.hosts

    def namespaces(self) -> list[str]:
        return [self.ns(d.name) for d in self.devices()]

    def leaves(self) -> list[Device]:
        return [d for d in self.switches if d.role == "leaf"]

    def spines(self) -> list[Device]:
        return [d for d in self.switches if d.role == "spine"]

    def ports_of(self, device: str) -> list[str]:
        out = [link.a.port for link in self.links if link.a.device == device]
        out += [link.b.port for link in self.links if link.b.device == device]
        return out

    def uplinks(self, leaf: str) -> list[Link]:
        return [link for link in self.links if link.tier == "leaf-spine" and leaf in (link.a.device, link.b.device)]

    def link(self, cable: str) -> Link:
        for link in self.links:
            if link.id == cable:
                return link
        raise ScopeError(f"cable {cable} is not part of the lab")


def _pick_spines(spines: list[Device], spec: str) -> list[Device]:
    if spec == "all":
        return spines
    if not spec.isdigit() or not 1 <= int(spec) <= len(spines):
        raise ScopeError(f"--spines must be 'all' or 1..{len(spines)}, not {spec!r}")
    return spines[: int(spec)]


def lab_topology(plan: Plan, sus: int = 2, spines: str = "all", hosts_per_su: int = 2,
                 prefix: str = "rf-") -> LabTopology:
    """The compute fabric of the first `sus` SUs with `hosts_per_su` GPU nodes each and the chosen spines."""
    c = plan.cluster
    if c.fabric != "roce":
        raise ScopeError(f"the lab emulates Ethernet (RoCE) fabrics; {c.name} is {c.fabric}")
    if c.tiers != 2:
        raise ScopeError(f"the lab emulates 2-tier leaf/spine fabrics; {c.name} has {c.tiers} tiers")
    if not 1 <= sus <= c.sus:
        raise ScopeError(f"--sus must be 1..{c.sus}, not {sus}")
    if hosts_per_su < 1:
        raise ScopeError(f"--hosts-per-su must be at least 1, not {hosts_per_su}")
    compute = [d for d in plan.devices if d.fabric == "compute"]
    leaves = [d for d in compute if d.role == "leaf" and d.su is not None and d.su <= sus]
    chosen_spines = _pick_spines([d for d in compute if d.role == "spine"], spines)
    hosts: list[Device] = []
    for su in range(1, sus + 1):
        hosts += [d for d in compute if d.role == "node" and d.su == su][:hosts_per_su]
    keep = {d.name for d in leaves + chosen_spines + hosts}
    links = [link for link in plan.links if link.fabric == "compute" and link.tier in LAB_TIERS
             and link.a.device in keep and link.b.device in keep]
    return LabTopology(cluster=c.name, prefix=prefix, switches=leaves + chosen_spines, hosts=hosts,
                       links=links, mtu_switch=plan.qos.switch_mtu, mtu_host=plan.qos.host_mtu)
