"""The plan: every device, port, link, address and ASN of a cluster.

A plain, typed, vendor-neutral model built once by `railforge.planner` and only read afterwards.
Its JSON form (`plan.json`) is the contract every renderer, Ansible role and the Pulumi program reads.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

SCHEMA_VERSION = 1
T = TypeVar("T")

FABRICS = ("compute", "storage", "oob")
SWITCH_ROLES = ("leaf", "spine", "superspine", "storage-leaf", "storage-spine", "storage-superspine",
                "oob-leaf", "oob-spine", "oob-superspine")
HOST_ROLES = ("node", "ufm", "mgmt")


@dataclass(slots=True)
class Port:
    name: str
    label: str
    index: int
    sub: int
    speed_mbps: int
    breakout: str
    lanes: list[int]
    address: str | None = None
    link: str | None = None


@dataclass(slots=True)
class Endpoint:
    device: str
    port: str


@dataclass(slots=True)
class Link:
    id: str
    fabric: str
    tier: str
    speed_mbps: int
    a: Endpoint
    b: Endpoint
    length_m: float
    media: str
    su: int | None = None
    rail: int | None = None
    part: str | None = None
    fibre: str | None = None
    transceivers: int = 0


@dataclass(slots=True)
class RailInterface:
    rail: int
    ifname: str
    hca: str
    pci: str | None
    mac: str | None
    speed_mbps: int
    address: str
    gateway: str | None
    table: int
    leaf: str
    leaf_port: str
    cable: str
    pod_first: str | None = None  # this node's own pod (RDMA) addresses on this rail, inside the rail subnet
    pod_last: str | None = None


@dataclass(slots=True)
class BondMember:
    ifname: str
    pci: str | None
    mac: str | None
    speed_mbps: int
    switch: str
    switch_port: str
    cable: str


@dataclass(slots=True)
class VlanInterface:
    id: int
    address: str


@dataclass(slots=True)
class Bond:
    name: str
    mode: str
    lacp_rate: str
    hash_policy: str
    mtu: int
    address: str
    gateway: str
    storage_vlan: VlanInterface | None
    members: list[BondMember]


@dataclass(slots=True)
class Bmc:
    address: str
    switch: str
    switch_port: str
    cable: str


@dataclass(slots=True)
class NodeTopology:
    su: int
    rack: str
    leaf_group: str
    spine_group: str
    rail_plane: str | None


@dataclass(slots=True)
class HostSubnet:
    """A routed subnet a switch serves to hosts: the switch holds `gateway` on `ports` (an SVI / bridge)."""

    vlan: int
    prefix: str
    gateway: str
    ports: list[str]
    address: str | None = None


@dataclass(slots=True)
class Device:
    name: str
    role: str
    fabric: str
    model: str
    nos: str | None
    rack: str
    u: int
    su: int | None = None
    slot: int | None = None
    height_u: int = 1
    rail: int | None = None
    group: str | None = None
    plane: str | None = None
    asn: int | None = None
    loopback: str | None = None
    mgmt_address: str | None = None
    mlag_peer: str | None = None
    host_subnets: list[HostSubnet] = field(default_factory=list)
    ports: list[Port] = field(default_factory=list)
    rails: list[RailInterface] = field(default_factory=list)
    bond: Bond | None = None
    bmc: Bmc | None = None
    topology: NodeTopology | None = None
    sonic_platform: str | None = None  # SONiC switches: the platform and hwsku whose port map the ports follow
    sonic_hwsku: str | None = None


@dataclass(slots=True)
class Pool:
    name: str
    prefix: str
    purpose: str
    fabric: str
    size: int
    used: int


@dataclass(slots=True)
class AsnPool:
    name: str
    first: int
    last: int
    purpose: str
    used: int


@dataclass(slots=True)
class PodNetwork:
    rail: int
    ifname: str
    hca: str
    leaf: str | None
    subnet: str
    gateway: str | None
    range_start: str
    range_end: str
    scope: str


@dataclass(slots=True)
class Qos:
    lossless_priority: int
    roce_dscp: int
    cnp_dscp: int
    cnp_priority: int
    traffic_class: int
    ecn_min_threshold_bytes: int
    ecn_max_threshold_bytes: int
    ecn_probability: int
    host_mtu: int
    switch_mtu: int


@dataclass(slots=True)
class Rack:
    name: str
    row: int
    position: int
    kind: str
    height_u: int
    x_m: float
    y_m: float


@dataclass(slots=True)
class TierSummary:
    """One switching tier of one fabric: what goes down, what goes up, and the ratio between them."""

    fabric: str
    role: str
    switches: int
    downlink_ports: int
    uplink_ports: int
    downlink_gbps: int
    uplink_gbps: int
    oversubscription: str


@dataclass(slots=True)
class ClusterSummary:
    name: str
    fabric: str
    tiers: int
    mode: str
    uplinks: str
    host_addressing: str
    gpus: int
    gpus_per_node: int
    nodes: int
    rails: int
    sus: int
    max_sus: int
    nodes_per_su: int
    node_model: str
    nvswitch: bool
    tier_summaries: list[TierSummary] = field(default_factory=list)
    nos_release: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class Reliability:
    optics_mtbf_hours: float
    gpu_monthly_availability: float
    job_gpus: list[int]


@dataclass(slots=True)
class Tenant:
    name: str
    pkey: int
    members: list[str] = field(default_factory=list)  # hosts whose compute HCA ports join the partition


@dataclass(slots=True)
class SlurmQos:
    """One QOS level: `preempts` lists the lower levels its jobs requeue."""

    name: str
    priority: int
    preempts: list[str]


@dataclass(slots=True)
class SlurmPartition:
    name: str
    nodes: list[str]
    default: bool
    max_nodes: int | None = None


@dataclass(slots=True)
class SlurmNodeHardware:
    """Every GPU node as Slurm declares it (one server model per cluster). `gpu_cores[i]` / `nic_cores[r]` are
    the core ranges local to GPU i / rail NIC r (empty when the catalog does not say)."""

    model: str
    sockets: int
    cores_per_socket: int
    threads_per_core: int
    real_memory_mib: int
    gpus: int
    gpu_type: str
    gpu_cores: list[str] = field(default_factory=list)
    nic_cores: list[str] = field(default_factory=list)


@dataclass(slots=True)
class SlurmSettings:
    """The Slurm cluster of this plan: site settings from the spec's `slurm:` and node hardware from the catalog."""

    deploy: bool
    cluster_name: str
    controller: str
    accounting_host: str
    slurmctld_port: int
    slurmd_port: int
    slurmdbd_port: int
    default_time: str
    max_time: str
    default_qos: str
    qos: list[SlurmQos]
    partitions: list[SlurmPartition]
    node: SlurmNodeHardware
    health_check_program: str | None
    health_check_interval: int
    bf_interval: int
    bf_window: int
    bf_resolution: int
    bf_max_job_test: int


@dataclass(slots=True)
class Plan:
    cluster: ClusterSummary
    qos: Qos
    pools: list[Pool]
    asn_pools: list[AsnPool]
    racks: list[Rack]
    devices: list[Device]
    links: list[Link]
    pod_networks: list[PodNetwork]
    reliability: Reliability
    tenants: list[Tenant]
    schema_version: int = SCHEMA_VERSION
    views: dict = field(default_factory=dict, repr=False, compare=False)
    """Read-only tables derived from this plan by renderers (e.g. the address table), computed once per process
    and shared by the families that need them; never written to plan.json."""
    slurm: SlurmSettings | None = None

    def view(self, name: str, make: Callable[[Plan], T]) -> T:
        """The view `name`, made by `make(self)` on first use and kept in `views` for the families that share it."""
        hit = self.views.get(name)
        if hit is None:
            hit = self.views[name] = make(self)
        return hit

    def device_index(self) -> dict[str, Device]:
        return {d.name: d for d in self.devices}

    def link_index(self) -> dict[str, Link]:
        return {link.id: link for link in self.links}

    def devices_by_role(self, *roles: str) -> list[Device]:
        return [d for d in self.devices if d.role in roles]

    def switches(self) -> list[Device]:
        return [d for d in self.devices if d.role in SWITCH_ROLES]
