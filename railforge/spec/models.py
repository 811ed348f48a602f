"""Pydantic models of cluster.yaml. Field names are the YAML keys; errors name them."""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Annotated, Literal

import netaddr
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from railforge import nos as nos_registry
from railforge.spec.slurm import CatalogNode, SlurmSpec

AnyNos = Literal[nos_registry.names()]  # type: ignore[valid-type]
StorageNos = Literal[nos_registry.names("storage")]  # type: ignore[valid-type]
OobNos = Literal[nos_registry.names("oob")]  # type: ignore[valid-type]

NAME_RE = re.compile(r"[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?")
IFNAME_RE = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,14}")
MODEL_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")
PCI_RE = re.compile(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]")
MAC_RE = re.compile(r"[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}")
LABEL_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9 ._+/()-]{0,62}[A-Za-z0-9)]?")
TEXT_MAX = 200
MAX_SPEED_MBPS = 1_600_000
ASN_PRIVATE_4B = (4200000000, 4294967294)


def parse_speed(value: object) -> int:
    """'400G' / '400g' / '1G' / '100M' -> Mb/s. A bare number has no unit and is refused."""
    if isinstance(value, int) and not isinstance(value, bool):
        raise ValueError(f"{_shown(value)} has no unit; write it like '{value}G' (gigabit) or '{value}M' (megabit)")
    if isinstance(value, str):
        m = re.fullmatch(r"\s*(\d{1,7})\s*([GgMm])\s*", value)
        if m:
            n = int(m.group(1))
            mbps = n * 1000 if m.group(2) in "Gg" else n
            if 1 <= mbps <= MAX_SPEED_MBPS:
                return mbps
    raise ValueError(f"{_shown(value)} is not a link speed; write it like '400G', '200G', '25G' or '1G' "
                     f"(1M to {MAX_SPEED_MBPS // 1000}G)")


def _shown(value: object, limit: int = 48) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def parse_ratio(value: object) -> Fraction:
    if isinstance(value, str):
        m = re.fullmatch(r"\s*(\d{1,4}(?:\.\d{1,3})?)\s*:\s*(\d{1,4}(?:\.\d{1,3})?)\s*", value)
        if m and Fraction(m.group(2)) > 0:
            r = Fraction(m.group(1)) / Fraction(m.group(2))
            if 1 <= r <= 64:
                return r
    raise ValueError(f"{_shown(value)} is not an oversubscription ratio; write it like '1:1', '2:1' or '3:1' "
                     "(down:up, from 1:1 to 64:1)")


def parse_prefix(value: object) -> str:
    try:
        net = netaddr.IPNetwork(str(value))
    except (netaddr.AddrFormatError, ValueError, TypeError):
        raise ValueError(f"{value!r} is not an IP prefix; write it like '10.0.0.0/16'") from None
    if net.ip != net.network:
        raise ValueError(f"{value!r} has host bits set; did you mean '{net.cidr}'?")
    if net.version != 4:
        raise ValueError(f"{value!r}: only IPv4 pools are supported (IPv6 link-local is used for unnumbered uplinks)")
    return str(net.cidr)


def check_model(value: object) -> str:
    if not isinstance(value, str) or not MODEL_RE.fullmatch(value):
        raise ValueError(f"{_shown(value)} is not a valid model name: letters, digits and '._+-', at most 64, "
                         "no '/' or spaces (it becomes part of file names)")
    return value


def check_device_name(value: str) -> str:
    if not NAME_RE.fullmatch(value):
        raise ValueError(
            f"{_shown(value)} is not a valid name: use 1-32 lowercase letters, digits and '-', "
            "starting and ending with a letter or digit (it becomes part of file and host names)"
        )
    return value


def check_label(value: str) -> str:
    if not LABEL_RE.fullmatch(value):
        raise ValueError(f"{_shown(value)} is not a valid label: 1-64 letters, digits, spaces and '._+/()-', "
                         "starting with a letter or digit (it is written into the BOM and cabling sheets)")
    return value


def check_text(value: str) -> str:
    if len(value) > TEXT_MAX or any(not ch.isprintable() for ch in value):
        raise ValueError(f"{_shown(value)} is not one line of printable text of at most {TEXT_MAX} characters")
    return value


def check_pci(value: str) -> str:
    if not PCI_RE.fullmatch(value):
        raise ValueError(f"{_shown(value)} is not a PCI address; write it like '0000:18:00.0'")
    return value


def check_mac(value: str) -> str:
    if not MAC_RE.fullmatch(value):
        raise ValueError(f"{_shown(value)} is not a MAC address; write it like '02:00:00:00:00:01'")
    return value


Speed = Annotated[int, BeforeValidator(parse_speed), WithJsonSchema(
    {"type": "string", "pattern": r"^\s*\d{1,7}\s*[GgMm]\s*$",
     "description": "link speed with its unit: '400G', '100M'"})]
ModelName = Annotated[str, BeforeValidator(check_model)]
DeviceName = Annotated[str, AfterValidator(check_device_name)]
Label = Annotated[str, AfterValidator(check_label)]
Text = Annotated[str, AfterValidator(check_text)]
PciAddress = Annotated[str, AfterValidator(check_pci)]
MacAddress = Annotated[str, AfterValidator(check_mac)]
Metres = Annotated[float, Field(gt=0, le=100_000)]
Ratio = Annotated[Fraction, BeforeValidator(parse_ratio), WithJsonSchema(
    {"type": "string", "pattern": r"^\s*\d{1,4}(\.\d{1,3})?\s*:\s*\d{1,4}(\.\d{1,3})?\s*$",
     "description": "down:up ratio from '1:1' to '64:1'"})]
Prefix = Annotated[str, BeforeValidator(parse_prefix)]


OOB_VLAN = 100  # not 1: SONiC's models allow Vlan2..Vlan4094


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True, allow_inf_nan=False,
                              use_attribute_docstrings=True)


class CatalogMode(Strict):
    speed: Speed
    """Port speed of this breakout mode, e.g. '400G'."""
    split: int = Field(ge=1, le=8)
    """Ports one cage is split into at this speed (1 = no breakout)."""


class CatalogGroup(Strict):
    cages: int = Field(ge=1, le=512)
    """Number of physical cages (faceplate ports) in this group."""
    lanes: int = Field(ge=1, le=8)
    """Electrical lanes per cage."""
    modes: list[CatalogMode] = Field(min_length=1, max_length=8)
    """Breakout modes the cages support, each a speed and a split."""


class SonicPlatformRef(Strict):
    platform: ModelName
    """SONiC platform name, e.g. 'x86_64-nvidia_sn5600-r0'."""
    hwsku: ModelName
    """SONiC hardware SKU whose port map the configs use."""


class CatalogSwitch(Strict):
    vendor: Label
    """Manufacturer, written into the BOM and NetBox files."""
    description: Text = ""
    """Free text for the BOM."""
    kind: Literal["ethernet", "infiniband"]
    """'ethernet' or 'infiniband'."""
    height_u: int = Field(ge=1, le=8)
    """Rack units the switch takes."""
    nos: list[AnyNos] = Field(min_length=1, max_length=3)
    """Network operating systems that really run on this model; an impossible pair is refused."""
    groups: list[CatalogGroup] = Field(min_length=1, max_length=16)
    """Port groups (cages with the same breakout modes)."""
    sonic: SonicPlatformRef | None = None
    """SONiC platform and HwSKU, needed to write SONiC configs for this model."""


class MediaRule(Strict):
    media: Label
    """Media name, e.g. 'DAC', 'AOC' or 'SR4 MMF'."""
    max_m: Metres
    """Longest cable this rule covers, in metres; the first rule whose reach covers a cable wins."""
    part: ModelName | None = None
    """Part number ordered when no entry of `parts` fits."""
    parts: dict[Metres, ModelName] = Field(default_factory=dict, max_length=64)
    """Part number per orderable length in metres: each cable is ordered at the shortest length that reaches."""
    per_end: bool = False
    """True when the part is a transceiver ordered per cable end (fibre between them), false for a cable."""
    fibre: Label | None = None
    """Patch cord between the two transceivers, e.g. 'OM4 MPO-12'."""
    twin_part: ModelName | None = None
    """Twin-port module (NVIDIA's twin-port OSFP, e.g. MMA4Z00-NS) that serves every port of one split switch
    cage: at a switch end on a split cage the BOM orders one per cage instead of `part` per port."""
    splitters: dict[Annotated[int, Field(ge=2, le=8)], ModelName] = Field(default_factory=dict, max_length=4)
    """Copper splitter (breakout) cable per split of a switch cage, e.g. {2: MCP7Y00-N003} (one 800G twin-port
    plug, two 400G legs): a split switch cage whose links all take this (cable) rule is served by one splitter,
    ordered at its longest leg, instead of one cable per link."""

    @model_validator(mode="after")
    def _splitters_are_cables(self) -> MediaRule:
        if self.splitters and self.per_end:
            raise ValueError(f"splitters {dict(self.splitters)} name cables, but this rule orders transceivers "
                             "(per_end: true); put them on a cable rule (DAC, ACC) or use twin_part")
        return self

    def fitting(self, length_m: float) -> tuple[float, str | None]:
        """(length to order, part number): the shortest part of `parts` that reaches `length_m`, else `part`."""
        fits = [m for m in self.parts if m >= length_m - 1e-9]
        if not fits:
            return length_m, self.part
        m = min(fits)
        return m, self.parts[m]


class Catalog(Strict):
    switches: dict[ModelName, CatalogSwitch] = Field(default_factory=dict)
    """Switch models to add or override, by model name (the built-in ones: `railforge/hardware/catalog.yaml`)."""
    media: dict[Label, list[MediaRule]] = Field(default_factory=dict)
    """Media rules per speed, overriding the catalog's."""
    orderable_lengths_m: list[Metres] = Field(default_factory=list, max_length=256)
    """Cable lengths that can be ordered, in metres; estimates are rounded up to one of them."""
    nodes: dict[ModelName, CatalogNode] = Field(default_factory=dict, max_length=256)
    """GPU server models to add or override, by model name: the CPUs, sockets, memory and GPUs Slurm is told
    about."""


class NicGroup(Strict):
    ports: int = Field(ge=1, le=16)
    """Number of NIC ports in this group (compute: one per rail, e.g. 8 on DGX/HGX H100, 4 on 4 x 200G A800 designs;
    storage: 2 for a bond, 1 without)."""
    speed: Speed
    """Port speed, e.g. '400G'."""
    ifnames: list[str] | None = Field(None, max_length=16)
    """Linux interface names, one per port in rail order, e.g. [rail0, rail1, ...]. Without them the host roles
    cannot name the rails: give ifnames, pci or macs."""
    hcas: list[str] | None = Field(None, max_length=16)
    """RDMA device names, one per port in rail order, e.g. [mlx5_0, ...] (NCCL_IB_HCA)."""
    pci: list[PciAddress] | None = Field(None, max_length=16)
    """PCI addresses, one per port in rail order, e.g. '0000:18:00.0' (the host roles pin names by PCI path)."""
    macs: list[MacAddress] | None = Field(None, max_length=16)
    """MAC addresses, one per port in rail order (the host roles pin names by MAC)."""

    @field_validator("ifnames", "hcas")
    @classmethod
    def _names(cls, v: list[str] | None) -> list[str] | None:
        for name in v or []:
            if not IFNAME_RE.fullmatch(name):
                raise ValueError(f"{name!r} is not a valid interface name (letters, digits, '_.-', at most 15)")
        if v is not None and len(set(v)) != len(v):
            raise ValueError("names must be unique")
        return v

    @model_validator(mode="after")
    def _lengths(self) -> NicGroup:
        for key in ("ifnames", "hcas", "pci", "macs"):
            v = getattr(self, key)
            if v is not None and len(v) != self.ports:
                raise ValueError(f"{key} lists {len(v)} entries but ports is {self.ports}; give one per port")
        return self


class NodeProfile(Strict):
    model: ModelName = "DGX-H100"
    """GPU server model name."""
    gpus: int = Field(8, ge=1, le=16)
    """GPUs per node."""
    nvswitch: bool = True
    """The node has NVSwitch (Fabric Manager is installed)."""
    height_u: int = Field(8, ge=1, le=10)
    """Rack units per node."""
    compute: NicGroup
    """The compute (rail) NICs."""
    storage: NicGroup
    """The storage/in-band NICs, bonded 802.3ad when there are 2."""
    bmc: bool = True
    """The node has a BMC on the out-of-band network."""

    @field_validator("storage")
    @classmethod
    def _two_bonded(cls, v: NicGroup) -> NicGroup:
        if v.ports not in (1, 2):
            raise ValueError(f"ports is {v.ports}; the storage/in-band bond takes 2 ports (or 1 for no bond)")
        return v


class ReservedSlot(Strict):
    name: DeviceName
    """Host name of the endpoint in the slot, e.g. 'ufm01'."""
    role: Literal["ufm"] = "ufm"
    """What the endpoint is (only 'ufm', the SuperPOD's UFM appliance, today)."""
    model: ModelName = "UFM-3.0"
    """Model name of the endpoint."""
    su: int = Field(ge=1, le=4096)
    """SU whose slot the endpoint takes."""
    slot: int = Field(ge=1, le=512)
    """Node slot (1-based) in that SU."""
    compute_ports: int = Field(ge=1, le=16)
    """Compute ports the endpoint has (connected to rails 1..n)."""


class ScalableUnits(Strict):
    count: int = Field(ge=1, le=4096)
    """SUs built now."""
    max: int | None = Field(None, ge=1, le=4096)
    """Design capacity in SUs (default: count). Spines, super-spines, pools and ASN ranges are sized for it, so
    growing up to max never renumbers anything; growing past it renumbers and re-cables spines, and the build
    refuses it unless asked."""
    nodes_per_su: int = Field(ge=1, le=512)
    """Node slots per SU (a leaf per rail serves them all)."""
    reserved_slots: list[ReservedSlot] = Field(default_factory=list, max_length=4096)
    """Slots given to other endpoints, e.g. {name: ufm01, role: ufm, su: 4, slot: 32, compute_ports: 4}."""

    @property
    def design_max(self) -> int:
        return self.max if self.max is not None else self.count


class SwitchChoice(Strict):
    model: ModelName
    """Switch model from the catalog, e.g. 'SN5600' or 'QM9700'."""


class ComputeFabric(Strict):
    fabric: Literal["roce", "infiniband"]
    """'roce' or 'infiniband'."""
    tiers: Literal["auto", 2, 3] = "auto"
    """'auto' picks 2 tiers while the spine radix allows, else 3; 2 or 3 forces."""
    mode: Literal["clos", "rail-plane"] = "clos"
    """3-tier shape: 'clos' (pods of SUs) or 'rail-plane' (one spine plane per rail, super-spines join the planes)."""
    nos: AnyNos | None = None
    """Switch OS: an Ethernet OS for RoCE (default 'sonic'), 'mlnx-os' for InfiniBand (the default there)."""
    leaf: SwitchChoice
    """Leaf switch model."""
    spine: SwitchChoice
    """Spine switch model."""
    superspine: SwitchChoice | None = None
    """Super-spine switch model (3-tier fabrics; default: the spine model)."""
    oversubscription: dict[Literal["leaf", "spine"], Ratio] = Field(default_factory=dict)
    """Down:up bandwidth per tier, e.g. {leaf: '1:1', spine: '2:1'}; must divide the port counts exactly."""
    uplinks: Literal["numbered", "unnumbered"] = "numbered"
    """'numbered' (a /31 per uplink) or 'unnumbered' (BGP over IPv6 link-local)."""
    sus_per_pod: int | None = Field(None, ge=1, le=4096)
    """3-tier clos pod size (default: as many SUs as a spine's downlinks allow)."""


class StorageFabric(Strict):
    nos: StorageNos = nos_registry.default("storage").name
    """Switch OS of the storage fabric (an Ethernet OS)."""
    leaf: SwitchChoice
    """Storage leaf switch model."""
    spine: SwitchChoice
    """Storage spine switch model."""
    attach: Literal["mlag", "evpn-mh", "single"] = "mlag"
    """How a node's bond attaches: 'mlag' or 'evpn-mh' (a leaf pair) or 'single'."""
    uplink_speed: Speed | None = None
    """Storage leaf uplink speed (default: the fastest the leaf has)."""
    oversubscription: Ratio = Fraction(1)
    """Down:up bandwidth of the storage leaves, e.g. '2:1'."""
    nodes_per_leaf: int | None = Field(None, ge=1, le=512)
    """Nodes per storage leaf (pair); default: as many as the ports allow."""
    storage_vlan: int | None = Field(None, ge=2, le=4094)
    """A storage VLAN on the bond, addressed from addressing.storage (2..4094)."""
    uplinks: Literal["numbered", "unnumbered"] = "unnumbered"
    """'numbered' or 'unnumbered' storage uplinks."""


def check_oob_vlan(v: int) -> int:
    if not 2 <= v <= 4094:
        raise ValueError(f"VLAN {v} is outside 2..4094 (1 is the default VLAN, which SONiC's models reject; "
                         "4095 is reserved)")
    return v


class OobFabric(Strict):
    nos: OobNos = nos_registry.default("oob").name
    """Switch OS of the out-of-band fabric (an Ethernet OS)."""
    leaf: SwitchChoice
    """OOB leaf model (every BMC and switch management port goes to an OOB leaf in its row)."""
    spine: SwitchChoice
    """OOB spine model."""
    uplinks_per_leaf: int = Field(2, ge=1, le=8)
    """Uplinks from each OOB leaf."""
    vlan: Annotated[int, AfterValidator(check_oob_vlan)] = OOB_VLAN
    """Untagged OOB VLAN (2..4094; not 1, which SONiC's models reject)."""


class Management(Strict):
    servers: int = Field(3, ge=0, le=64)
    """Management / Kubernetes control-plane servers, on the service storage leaf pair."""
    model: ModelName = "mgmt-server"
    """Management server model name."""
    height_u: int = Field(1, ge=1, le=4)
    """Rack units per management server."""


class Layout(Strict):
    nodes_per_rack: int = Field(4, ge=1, le=64)
    """GPU nodes per rack."""
    rack_height_u: int = Field(48, ge=20, le=60)
    """Rack height in U."""
    rack_width_m: float = Field(0.6, gt=0, le=5)
    """Rack width in metres (cable length estimates)."""
    row_pitch_m: float = Field(3.0, gt=0, le=100)
    """Distance between rows in metres."""
    rows_per_column: int = Field(16, ge=1, le=1024)
    """Rows per column of the hall before the next column starts."""
    column_gap_m: float = Field(3.0, ge=0, le=1000)
    """Aisle between columns in metres."""
    slack_m: float = Field(1.5, ge=0, le=100)
    """Slack added to every cable estimate in metres."""
    network_rack_position: Literal["middle", "end"] = "middle"
    """Where an SU's network rack stands in its row: 'middle' or 'end'."""


class AsnBases(Strict):
    compute: int = 4200000000
    """First ASN of the compute fabric (4-byte private, RFC 6996: 4200000000-4294967294)."""
    storage: int = 4210000000
    """First ASN of the storage fabric."""
    oob: int = 4220000000
    """First ASN of the OOB fabric."""

    @field_validator("compute", "storage", "oob")
    @classmethod
    def _private(cls, v: int) -> int:
        lo, hi = ASN_PRIVATE_4B
        if not lo <= v <= hi:
            raise ValueError(f"{v} is outside the 4-byte private ASN range {lo}-{hi} (RFC 6996)")
        return v


class Addressing(Strict):
    loopbacks: Prefix = "10.0.0.0/16"
    """IPv4 pool of switch loopbacks."""
    p2p: Prefix = "10.1.0.0/16"
    """IPv4 pool of numbered point-to-point links (/31s)."""
    compute_hosts: Prefix = "100.64.0.0/12"
    """IPv4 pool of the rail host subnets."""
    inband: Prefix = "10.20.0.0/16"
    """IPv4 pool of the in-band (bond) network."""
    storage: Prefix = "10.30.0.0/16"
    """IPv4 pool of the storage VLAN."""
    oob: Prefix = "10.250.0.0/16"
    """IPv4 pool of the out-of-band network."""
    k8s_pods: Prefix = "10.96.0.0/12"
    """Kubernetes pod CIDR (kept disjoint from the fabric pools)."""
    k8s_services: Prefix = "10.112.0.0/16"
    """Kubernetes service CIDR."""
    pod_addresses_per_node: int = Field(8, ge=0, le=256)
    """Secondary (RDMA) pod addresses reserved per node and rail, inside the rail host subnets."""
    asn: AsnBases = Field(default_factory=AsnBases)
    """Bases of the private ASN ranges per fabric."""


class Qos(Strict):
    lossless_priority: int = Field(3, ge=0, le=7)
    """802.1p priority of the lossless RoCE class (PFC on it)."""
    roce_dscp: int = Field(26, ge=0, le=63)
    """DSCP that RoCE traffic is marked with."""
    cnp_dscp: int = Field(48, ge=0, le=63)
    """DSCP of congestion notification packets."""
    cnp_priority: int = Field(6, ge=0, le=7)
    """Priority of CNPs (must differ from the lossless one)."""
    ecn_min_threshold_bytes: int = Field(153600, ge=1, le=1 << 30)
    """ECN marking starts at this queue depth."""
    ecn_max_threshold_bytes: int = Field(1536000, ge=1, le=1 << 30)
    """ECN marking reaches ecn_probability at this depth."""
    ecn_probability: int = Field(100, ge=1, le=100)
    """Marking probability at the max threshold, in percent."""
    host_mtu: int = Field(9000, ge=1500, le=9216)
    """MTU of the host rails (at most switch_mtu)."""
    switch_mtu: int = Field(9216, ge=1500, le=9216)
    """MTU of the switch ports."""

    @model_validator(mode="after")
    def _consistent(self) -> Qos:
        if self.cnp_priority == self.lossless_priority:
            raise ValueError(f"cnp_priority {self.cnp_priority} equals lossless_priority; CNPs need their own priority")
        if self.cnp_dscp == self.roce_dscp:
            raise ValueError(f"cnp_dscp {self.cnp_dscp} equals roce_dscp; CNPs need their own DSCP")
        if self.ecn_min_threshold_bytes >= self.ecn_max_threshold_bytes:
            raise ValueError("ecn_min_threshold_bytes must be below ecn_max_threshold_bytes")
        if self.host_mtu > self.switch_mtu:
            raise ValueError(f"host_mtu {self.host_mtu} exceeds switch_mtu {self.switch_mtu}")
        return self


class Cabling(Strict):
    media: dict[Label, list[MediaRule]] = Field(default_factory=dict)
    """Per-speed media rules overriding the catalog, e.g. allow copper only to 2 m."""


class Reliability(Strict):
    optics_mtbf_hours: float = Field(10_000_000, gt=0, le=1e12)
    """MTBF of one optical module in hours (the report's failure arithmetic)."""
    gpu_monthly_availability: float = Field(0.999, gt=0, lt=1)
    """Probability that one GPU runs a month without failure."""
    job_gpus: list[Annotated[int, Field(ge=1, le=10_000_000)]] = Field(default_factory=lambda: [1000], max_length=32)
    """Job sizes (GPUs) the report computes interruption odds for; sizes above the cluster's GPUs are left out."""


class Tenant(Strict):
    name: DeviceName
    """Partition name."""
    pkey: int = Field(ge=1, le=0x7FFE)
    """InfiniBand partition key (1..0x7ffe)."""
    sus: list[Annotated[int, Field(ge=1, le=999)]] = Field(default_factory=list, max_length=999)
    """SUs whose GPU nodes' compute HCAs join the partition as full members."""
    nodes: list[DeviceName] = Field(default_factory=list, max_length=100_000)
    """Hosts (GPU nodes or appliances such as ufm01) that join the partition."""


CUMULUS_RELEASES = ("5.11", "5.12", "5.13", "5.14", "5.15", "5.16", "5.17", "5.18")
DEFAULT_CUMULUS_RELEASE = "5.18"


def check_release(value: object) -> object:
    if isinstance(value, float | int) and not isinstance(value, bool):
        raise ValueError(f"{value!r} is a number; quote the release, e.g. '5.14' (YAML reads 5.10 as 5.1)")
    if value not in CUMULUS_RELEASES:
        raise ValueError(f"{value!r} is not a supported Cumulus Linux release; use one of "
                         f"{', '.join(CUMULUS_RELEASES)} (releases before 5.15 write `enable: on`, "
                         "5.15 and later `state: enabled`)")
    return value


class NosRelease(Strict):
    cumulus: Annotated[str, BeforeValidator(check_release)] = DEFAULT_CUMULUS_RELEASE
    """Cumulus Linux release the NVUE files are written for: '5.11' ... '5.18' (quote it: YAML reads 5.10 as 5.1)."""


class ClusterSpec(Strict):
    name: DeviceName
    """Cluster name: lowercase letters, digits and '-' (it becomes part of file and host names)."""
    description: Text = ""
    """One line of free text."""
    node: NodeProfile
    """The GPU server every SU is built from."""
    scalable_units: ScalableUnits
    """How many SUs, of how many nodes, and the design maximum."""
    compute: ComputeFabric
    """The compute (rail) fabric."""
    storage: StorageFabric
    """The storage / in-band fabric."""
    oob: OobFabric
    """The out-of-band management fabric."""
    management: Management = Field(default_factory=Management)
    """Management servers."""
    layout: Layout = Field(default_factory=Layout)
    """Physical layout (rows, racks, cable estimates)."""
    addressing: Addressing = Field(default_factory=Addressing)
    """IPv4 pools and ASN ranges; pools must not overlap."""
    qos: Qos = Field(default_factory=Qos)
    """The RoCE QoS profile; switch configs and host roles both read it from the plan."""
    cabling: Cabling = Field(default_factory=Cabling)
    """Cabling overrides."""
    reliability: Reliability = Field(default_factory=Reliability)
    """Inputs of the report's failure arithmetic."""
    tenants: list[Tenant] = Field(default_factory=list, max_length=4096)
    """InfiniBand partitions (P_Keys)."""
    nos_release: NosRelease = Field(default_factory=NosRelease)
    """Switch OS releases the configs are written for."""
    catalog: Catalog = Field(default_factory=Catalog)
    """Extend or override the built-in hardware catalog."""
    slurm: SlurmSpec | None = None
    """The Slurm cluster: controller, accounting, partitions, QOS levels and scheduler settings; absent, only
    `slurm/topology.conf` is written."""
