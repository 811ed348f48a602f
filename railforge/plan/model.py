"""The plan: every device, port, link, address and ASN of a cluster.

A plain, typed, vendor-neutral model built once by `railforge.planner` and only read afterwards.
Its JSON form (`plan.json`) is the contract every renderer, Ansible role and the Pulumi program reads.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

SCHEMA_VERSION = 2  # 2: devices' sonic_platform/sonic_hwsku became platform/hwsku (plan/io.py reads 1)
T = TypeVar("T")

FABRICS = ("compute", "storage", "oob")
SWITCH_ROLES = ("leaf", "spine", "superspine", "storage-leaf", "storage-spine", "storage-superspine",
                "oob-leaf", "oob-spine", "oob-superspine")
HOST_ROLES = ("node", "ufm", "mgmt")


def ib_port_number(index: int, sub: int, breakout: str) -> int:
    """InfiniBand port number as ibnetdiscover and OpenSM count it: cage `index` carries ports
    index*split+1 .. index*split+split, split being the cage's breakout (2 on a QM9700 at NDR)."""
    split = int(breakout.split("x", 1)[0]) if breakout[:1].isdigit() else 1
    return index * split + sub + 1


@dataclass(slots=True)
class Port:
    name: str
    """The name the switch OS or host uses (`Ethernet8`, `swp3s1`, `1/2`, `ens1f0np0`, `bmc`)."""
    label: str
    """Front-panel label (`cage` or `cage/sub`), as printed on cabling sheets."""
    index: int
    """Cage (physical port) number counted from 0, as in the hardware catalog."""
    sub: int
    """Breakout sub-port within the cage, counted from 0."""
    speed_mbps: int
    """Port speed in Mb/s."""
    breakout: str
    """The cage's breakout mode (`1x400G`, `2x400G`; the platform's own mode name on SONiC)."""
    lanes: list[int]
    """SerDes lanes of this port (SONiC platform lanes or catalog lanes)."""
    address: str | None = None
    """The port's IPv4 address with prefix length, when it has one."""
    link: str | None = None
    """The id of the link cabled to this port, when it is cabled."""

    def ib_number(self) -> int:
        return ib_port_number(self.index, self.sub, self.breakout)


@dataclass(slots=True)
class Endpoint:
    device: str
    """Device name."""
    port: str
    """Port name on that device."""


@dataclass(slots=True)
class Link:
    id: str
    """Cable label, unique in the plan and stable under growth."""
    fabric: str
    """compute, storage or oob."""
    tier: str
    """Which tiers the link joins (e.g. `leaf-spine`, `host-leaf`, `oob-access`)."""
    speed_mbps: int
    a: Endpoint
    """The lower-tier end."""
    b: Endpoint
    """The upper-tier end."""
    length_m: float
    """Planned cable length in metres."""
    media: str
    """Cable media (DAC, AOC, fibre type)."""
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
    """Hostname, unique in the plan and stable under growth."""
    role: str
    """node, ufm, mgmt, or a switch role (leaf, spine, superspine, storage-*, oob-*)."""
    fabric: str
    """The fabric the device belongs to (compute, storage, oob)."""
    model: str
    """Hardware model: a catalog switch, or the spec's node model."""
    nos: str | None
    """Switch OS profile name (`railforge/nos/`); null for hosts."""
    rack: str
    """Rack name."""
    u: int
    """Lowest rack unit the device occupies."""
    su: int | None = None
    slot: int | None = None
    height_u: int = 1
    """Rack units the device takes."""
    rail: int | None = None
    group: str | None = None
    plane: str | None = None
    asn: int | None = None
    """BGP autonomous system number."""
    loopback: str | None = None
    mgmt_address: str | None = None
    """Management (OOB) address with prefix length of a switch."""
    mlag_peer: str | None = None
    host_subnets: list[HostSubnet] = field(default_factory=list)
    ports: list[Port] = field(default_factory=list)
    """Every port, cabled or not."""
    rails: list[RailInterface] = field(default_factory=list)
    bond: Bond | None = None
    bmc: Bmc | None = None
    topology: NodeTopology | None = None
    platform: str | None = None
    """A switch whose ports follow its platform's own port map (its OS profile's `platform_ref`, e.g. SONiC's
    `x86_64-nvidia_sn5600-r0`): that platform; null otherwise."""
    hwsku: str | None = None
    """The hardware SKU of `platform` whose port map the ports follow (e.g. `ACS-SN5600`); null otherwise."""

    def hca(self, port: Port) -> str:
        """The RDMA device behind this host's compute port, as its InfiniBand NodeDescription (`<host> <hca>`)
        names it: the rail's HCA (spec `node.compute.hcas`), else `mlx5_<port index>`: an appliance such as
        UFM has no rails, and mlx5 devices are numbered in port order."""
        return next((r.hca for r in self.rails if r.ifname == port.name), f"mlx5_{port.index}")

    def hca_port(self, hca: str) -> str | None:
        """The compute port behind RDMA device `hca` (the inverse of `hca`); None when the host has none.
        A node's compute ports are its rails; an appliance's are its ports other than `bmc`."""
        if self.rails:
            return next((r.ifname for r in self.rails if r.hca == hca), None)
        return next((p.name for p in self.ports if p.name != "bmc" and f"mlx5_{p.index}" == hca), None)


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
class DeviceType:
    """One hardware model in the plan, as a source of truth (NetBox) records it: the catalog's vendor for a
    switch (None when nobody said, e.g. a server model named only in the spec) and the rack units it takes."""

    model: str
    """Hardware model name."""
    manufacturer: str | None
    """Vendor from the catalog; null when unknown."""
    height_u: int
    """Rack units."""


@dataclass(slots=True)
class Plan:
    cluster: ClusterSummary
    """Cluster-wide facts and per-tier summaries."""
    qos: Qos
    pools: list[Pool]
    asn_pools: list[AsnPool]
    racks: list[Rack]
    devices: list[Device]
    """Every device: hosts first, then switches, in planning order."""
    links: list[Link]
    """Every cable, sorted by fabric and label."""
    pod_networks: list[PodNetwork]
    reliability: Reliability
    tenants: list[Tenant]
    device_types: list[DeviceType] = field(default_factory=list)
    """One entry per hardware model: manufacturer and U height (what NetBox imports)."""
    schema_version: int = SCHEMA_VERSION
    """Version of this contract; readers refuse another."""
    twin_parts: dict[str, str] = field(default_factory=dict)
    """Transceiver part -> the twin-port module that serves a whole split switch cage in its place (from the
    catalog's media rules, only for parts the links use)."""
    splitter_parts: dict[str, dict[str, str]] = field(default_factory=dict)
    """Copper cable part -> {ports of a split switch cage ("2", "4"): the splitter cable that serves the whole cage,
    one leg per link} (from the catalog's media rules `splitters`, only for parts the links use)."""
    slurm: SlurmSettings | None = None
    """The Slurm cluster (spec `slurm:`); absent from plan.json when the spec has no `slurm:` section."""
    views: dict = field(default_factory=dict, repr=False, compare=False)
    """Read-only tables derived from this plan by renderers (e.g. the address table), computed once per process
    and shared by the families that need them; never written to plan.json."""

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
