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
    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True, allow_inf_nan=False)


class CatalogMode(Strict):
    speed: Speed
    split: int = Field(ge=1, le=8)


class CatalogGroup(Strict):
    cages: int = Field(ge=1, le=512)
    lanes: int = Field(ge=1, le=8)
    modes: list[CatalogMode] = Field(min_length=1, max_length=8)


class SonicPlatformRef(Strict):
    platform: ModelName
    hwsku: ModelName


class CatalogSwitch(Strict):
    vendor: Label
    description: Text = ""
    kind: Literal["ethernet", "infiniband"]
    height_u: int = Field(ge=1, le=8)
    nos: list[AnyNos] = Field(min_length=1, max_length=3)
    groups: list[CatalogGroup] = Field(min_length=1, max_length=16)
    sonic: SonicPlatformRef | None = None


class MediaRule(Strict):
    media: Label
    max_m: Metres
    part: ModelName | None = None
    parts: dict[Metres, ModelName] = Field(default_factory=dict, max_length=64)
    per_end: bool = False
    fibre: Label | None = None

    def fitting(self, length_m: float) -> tuple[float, str | None]:
        """(length to order, part number): the shortest part of `parts` that reaches `length_m`, else `part`."""
        fits = [m for m in self.parts if m >= length_m - 1e-9]
        if not fits:
            return length_m, self.part
        m = min(fits)
        return m, self.parts[m]


class Catalog(Strict):
    switches: dict[ModelName, CatalogSwitch] = Field(default_factory=dict)
    media: dict[Label, list[MediaRule]] = Field(default_factory=dict)
    orderable_lengths_m: list[Metres] = Field(default_factory=list, max_length=256)
    nodes: dict[ModelName, CatalogNode] = Field(default_factory=dict, max_length=256)


class NicGroup(Strict):
    ports: int = Field(ge=1, le=16)
    speed: Speed
    ifnames: list[str] | None = Field(None, max_length=16)
    hcas: list[str] | None = Field(None, max_length=16)
    pci: list[PciAddress] | None = Field(None, max_length=16)
    macs: list[MacAddress] | None = Field(None, max_length=16)

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
    gpus: int = Field(8, ge=1, le=16)
    nvswitch: bool = True
    height_u: int = Field(8, ge=1, le=10)
    compute: NicGroup
    storage: NicGroup
    bmc: bool = True

    @field_validator("storage")
    @classmethod
    def _two_bonded(cls, v: NicGroup) -> NicGroup:
        if v.ports not in (1, 2):
            raise ValueError(f"ports is {v.ports}; the storage/in-band bond takes 2 ports (or 1 for no bond)")
        return v


class ReservedSlot(Strict):
    name: DeviceName
    role: Literal["ufm"] = "ufm"
    model: ModelName = "UFM-3.0"
    su: int = Field(ge=1, le=4096)
    slot: int = Field(ge=1, le=512)
    compute_ports: int = Field(ge=1, le=16)


class ScalableUnits(Strict):
    count: int = Field(ge=1, le=4096)
    max: int | None = Field(None, ge=1, le=4096)
    nodes_per_su: int = Field(ge=1, le=512)
    reserved_slots: list[ReservedSlot] = Field(default_factory=list, max_length=4096)

    @property
    def design_max(self) -> int:
        return self.max if self.max is not None else self.count


class SwitchChoice(Strict):
    model: ModelName


class ComputeFabric(Strict):
    fabric: Literal["roce", "infiniband"]
    tiers: Literal["auto", 2, 3] = "auto"
    mode: Literal["clos", "rail-plane"] = "clos"
    nos: AnyNos | None = None
    leaf: SwitchChoice
    spine: SwitchChoice
    superspine: SwitchChoice | None = None
    oversubscription: dict[Literal["leaf", "spine"], Ratio] = Field(default_factory=dict)
    uplinks: Literal["numbered", "unnumbered"] = "numbered"
    sus_per_pod: int | None = Field(None, ge=1, le=4096)


class StorageFabric(Strict):
    nos: StorageNos = nos_registry.default("storage").name
    leaf: SwitchChoice
    spine: SwitchChoice
    attach: Literal["mlag", "evpn-mh", "single"] = "mlag"
    uplink_speed: Speed | None = None
    oversubscription: Ratio = Fraction(1)
    nodes_per_leaf: int | None = Field(None, ge=1, le=512)
    storage_vlan: int | None = Field(None, ge=2, le=4094)
    uplinks: Literal["numbered", "unnumbered"] = "unnumbered"


def check_oob_vlan(v: int) -> int:
    if not 2 <= v <= 4094:
        raise ValueError(f"VLAN {v} is outside 2..4094 (1 is the default VLAN, which SONiC's models reject; "
                         "4095 is reserved)")
    return v


class OobFabric(Strict):
    nos: OobNos = nos_registry.default("oob").name
    leaf: SwitchChoice
    spine: SwitchChoice
    uplinks_per_leaf: int = Field(2, ge=1, le=8)
    vlan: Annotated[int, AfterValidator(check_oob_vlan)] = OOB_VLAN


class Management(Strict):
    servers: int = Field(3, ge=0, le=64)
    model: ModelName = "mgmt-server"
    height_u: int = Field(1, ge=1, le=4)


class Layout(Strict):
    nodes_per_rack: int = Field(4, ge=1, le=64)
    rack_height_u: int = Field(48, ge=20, le=60)
    rack_width_m: float = Field(0.6, gt=0, le=5)
    row_pitch_m: float = Field(3.0, gt=0, le=100)
    rows_per_column: int = Field(16, ge=1, le=1024)
    column_gap_m: float = Field(3.0, ge=0, le=1000)
    slack_m: float = Field(1.5, ge=0, le=100)
    network_rack_position: Literal["middle", "end"] = "middle"


class AsnBases(Strict):
    compute: int = 4200000000
    storage: int = 4210000000
    oob: int = 4220000000

    @field_validator("compute", "storage", "oob")
    @classmethod
    def _private(cls, v: int) -> int:
        lo, hi = ASN_PRIVATE_4B
        if not lo <= v <= hi:
            raise ValueError(f"{v} is outside the 4-byte private ASN range {lo}-{hi} (RFC 6996)")
        return v


class Addressing(Strict):
    loopbacks: Prefix = "10.0.0.0/16"
    p2p: Prefix = "10.1.0.0/16"
    compute_hosts: Prefix = "100.64.0.0/12"
    inband: Prefix = "10.20.0.0/16"
    storage: Prefix = "10.30.0.0/16"
    oob: Prefix = "10.250.0.0/16"
    k8s_pods: Prefix = "10.96.0.0/12"
    k8s_services: Prefix = "10.112.0.0/16"
    pod_addresses_per_node: int = Field(8, ge=0, le=256)
    asn: AsnBases = Field(default_factory=AsnBases)


class Qos(Strict):
    lossless_priority: int = Field(3, ge=0, le=7)
    roce_dscp: int = Field(26, ge=0, le=63)
    cnp_dscp: int = Field(48, ge=0, le=63)
    cnp_priority: int = Field(6, ge=0, le=7)
    ecn_min_threshold_bytes: int = Field(153600, ge=1, le=1 << 30)
    ecn_max_threshold_bytes: int = Field(1536000, ge=1, le=1 << 30)
    ecn_probability: int = Field(100, ge=1, le=100)
    host_mtu: int = Field(9000, ge=1500, le=9216)
    switch_mtu: int = Field(9216, ge=1500, le=9216)

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


class Reliability(Strict):
    optics_mtbf_hours: float = Field(10_000_000, gt=0, le=1e12)
    gpu_monthly_availability: float = Field(0.999, gt=0, lt=1)
    job_gpus: list[Annotated[int, Field(ge=1, le=10_000_000)]] = Field(default_factory=lambda: [1000], max_length=32)


class Tenant(Strict):
    name: DeviceName
    pkey: int = Field(ge=1, le=0x7FFE)
    sus: list[Annotated[int, Field(ge=1, le=999)]] = Field(default_factory=list, max_length=999)
    nodes: list[DeviceName] = Field(default_factory=list, max_length=100_000)


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


class ClusterSpec(Strict):
    name: DeviceName
    description: Text = ""
    node: NodeProfile
    scalable_units: ScalableUnits
    compute: ComputeFabric
    storage: StorageFabric
    oob: OobFabric
    management: Management = Field(default_factory=Management)
    layout: Layout = Field(default_factory=Layout)
    addressing: Addressing = Field(default_factory=Addressing)
    qos: Qos = Field(default_factory=Qos)
    cabling: Cabling = Field(default_factory=Cabling)
    reliability: Reliability = Field(default_factory=Reliability)
    tenants: list[Tenant] = Field(default_factory=list, max_length=4096)
    nos_release: NosRelease = Field(default_factory=NosRelease)
    catalog: Catalog = Field(default_factory=Catalog)
    slurm: SlurmSpec | None = None
