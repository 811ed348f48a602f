"""The `slurm:` section of cluster.yaml: what a site sets about its Slurm cluster, and the node hardware
the catalog gives Slurm and the hosts (`catalog.nodes`: CPUs, memory, GPUs, the compute HCAs' names).

Everything here has a documented default, so `slurm: {}` is a working cluster. Names and numbers are checked
here; whether they fit the built cluster (tenants' nodes, partitions with nodes, the controller's host) is checked
by the planner, which knows the devices."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

SLURM_NAME_RE = re.compile(r"[a-z][a-z0-9_]{0,31}")
TIME_RE = re.compile(r"UNLIMITED|(\d{1,3}-)?\d{1,2}:\d{2}:\d{2}")
PATH_RE = re.compile(r"/[A-Za-z0-9_./+-]{1,200}")
GPU_TYPE_RE = re.compile(r"[a-z0-9][a-z0-9_]{0,15}")
HOST_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9.-]{0,62}")
USER_RE = re.compile(r"[a-z_][a-z0-9_-]{0,31}")
HCA_RE = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,63}")
SOURCE_RE = re.compile(r"[^\x00-\x1f\x7f]{1,400}")
QOS_COUNT = 6
# Linux reports less memory than is installed: the kernel's page array (a 64-byte struct page per 4 KiB page,
# 1/64), firmware reservations, the kernel and its crash kernel. Measured on 2 TiB H100 and 384 GiB-1 TiB nodes:
# 98.1-98.4 % of installed (docs/slurm.md, "Memory"). Without a measured figure the planner takes 125/128 (97.66 %).
LINUX_MEMORY_NUM, LINUX_MEMORY_DEN = 125, 128


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def check_slurm_name(value: str) -> str:
    if not SLURM_NAME_RE.fullmatch(value):
        raise ValueError(f"{value[:40]!r} is not a Slurm name here: 1-32 lowercase letters, digits and '_', "
                         "starting with a letter (it names a partition, QOS or account)")
    return value


def check_time(value: str) -> str:
    if not TIME_RE.fullmatch(value):
        raise ValueError(f"{value[:40]!r} is not a Slurm time limit; write 'HH:MM:SS', 'D-HH:MM:SS' or 'UNLIMITED'")
    return value


def check_path(value: str) -> str:
    if not PATH_RE.fullmatch(value) or "/../" in value + "/":
        raise ValueError(f"{value[:40]!r} is not an absolute path of letters, digits and '_./+-'")
    return value


def check_host(value: str) -> str:
    if not HOST_RE.fullmatch(value):
        raise ValueError(f"{value[:40]!r} is not a host name: 1-63 letters, digits, '.' and '-', starting with a "
                         "letter or digit")
    return value


def check_user(value: str) -> str:
    if not USER_RE.fullmatch(value):
        raise ValueError(f"{value[:40]!r} is not a Unix user name: 1-32 lowercase letters, digits, '_' and '-', "
                         "starting with a letter or '_'")
    return value


def check_hca(value: str) -> str:
    if not HCA_RE.fullmatch(value):
        raise ValueError(f"{value[:40]!r} is not an RDMA device name (e.g. mlx5_0): a letter, then letters, digits, "
                         "'_.-', at most 64")
    return value


def check_source(value: str) -> str:
    if not SOURCE_RE.fullmatch(value):
        raise ValueError("a source is 1-400 printable characters on one line (a document's title and address)")
    return value


SlurmName = Annotated[str, AfterValidator(check_slurm_name)]
UserName = Annotated[str, AfterValidator(check_user)]
HcaName = Annotated[str, AfterValidator(check_hca)]
Source = Annotated[str, AfterValidator(check_source)]
HostName = Annotated[str, AfterValidator(check_host)]
SlurmTime = Annotated[str, AfterValidator(check_time)]
AbsPath = Annotated[str, AfterValidator(check_path)]


class CatalogNode(_Strict):
    """A GPU server model as Slurm and the hosts see it. `gpu_sockets[i]` is the CPU socket GPU i hangs off (its
    NUMA node), `nic_sockets[r]` the socket of rail NIC r: they become `Cores=` in gres.conf. Leave them out when
    unknown. `hcas` are the compute (rail) RDMA devices in rail order as the OS names them; names without
    `hcas_source` are a guess, and `validate` says so for a spec that relies on them."""

    sockets: int = Field(ge=1, le=16, description="CPU sockets")
    cores_per_socket: int = Field(ge=1, le=1024, description="physical cores per socket")
    threads_per_core: int = Field(1, ge=1, le=8, description="hardware threads per core")
    memory_mib: int = Field(ge=1024, le=1 << 32, description="installed memory, MiB")
    memtotal_mib: int | None = Field(None, ge=1024, le=1 << 32, description=(
        "memory Linux reports (MemTotal, what `slurmd -C` calls RealMemory), MiB, measured on this model; without "
        f"it {LINUX_MEMORY_NUM}/{LINUX_MEMORY_DEN} of memory_mib is assumed"))
    memtotal_source: Source | None = Field(None, description="where memtotal_mib was measured")
    hcas: list[HcaName] = Field(default_factory=list, max_length=16, description=(
        "the compute (rail) RDMA devices in rail order, e.g. [mlx5_0, mlx5_3, ...]: NCCL_IB_HCA, gres.conf, the "
        "node check and burn-in use them unless the spec gives node.compute.hcas"))
    hcas_source: Source | None = Field(None, description="the vendor document that names hcas; without it the "
                                                         "names are a guess and validate warns")
    gpu_type: Annotated[str, AfterValidator(lambda v: _gpu_type(v))] = Field(
        description="the GRES type jobs ask for, e.g. h100 in --gres=gpu:h100:8")
    gpu_sockets: list[Annotated[int, Field(ge=0, le=15)]] = Field(default_factory=list, max_length=16)
    nic_sockets: list[Annotated[int, Field(ge=0, le=15)]] = Field(default_factory=list, max_length=16)

    @model_validator(mode="after")
    def _sockets(self) -> CatalogNode:
        for key in ("gpu_sockets", "nic_sockets"):
            bad = [s for s in getattr(self, key) if not 0 <= s < self.sockets]
            if bad:
                raise ValueError(f"{key} names socket {bad[0]}, but the node has sockets 0..{self.sockets - 1}")
        if self.memtotal_mib is not None and self.memtotal_mib > self.memory_mib:
            raise ValueError(f"memtotal_mib {self.memtotal_mib} is more than the installed memory_mib "
                             f"{self.memory_mib}; Linux reports less than is installed")
        if len(set(self.hcas)) != len(self.hcas):
            raise ValueError(f"hcas names a device twice: {', '.join(self.hcas)}")
        return self

    def linux_memory_mib(self) -> tuple[int, bool]:
        """(MiB Linux reports, whether that is the 125/128 estimate rather than a measured memtotal_mib)."""
        if self.memtotal_mib is not None:
            return self.memtotal_mib, False
        return self.memory_mib * LINUX_MEMORY_NUM // LINUX_MEMORY_DEN, True


def _gpu_type(value: str) -> str:
    if not GPU_TYPE_RE.fullmatch(value):
        raise ValueError(f"{value[:40]!r} is not a GRES type: 1-16 lowercase letters, digits and '_'")
    return value


DEFAULT_QOS = ["p0", "p1", "p2", "p3", "p4", "p5"]


class SlurmSpec(_Strict):
    """Site settings for the Slurm cluster built from the plan. `deploy: true` makes playbooks/site.yml install it."""

    deploy: bool = Field(False, description="install Slurm with playbooks/site.yml (roles slurm_controller, "
                                            "slurm_node); the configuration files are written either way")
    cluster_name: SlurmName | None = Field(None, description="ClusterName; default: the spec's name with '-' as '_'")
    controller: HostName | None = Field(None, description="host running slurmctld and slurmdbd; default: the first "
                                                     "management server")
    accounting_host: HostName | None = Field(None, description="host running slurmdbd; default: the controller")
    slurmctld_port: int = Field(6817, ge=1024, le=65535)
    slurmd_port: int = Field(6818, ge=1024, le=65535)
    slurmdbd_port: int = Field(6819, ge=1024, le=65535)
    partition: SlurmName = Field("gpu", description="name of the partition holding every GPU node (the default)")
    default_time: SlurmTime = Field("04:00:00", description="DefaultTime of every partition")
    max_time: SlurmTime = Field("7-00:00:00", description="MaxTime of every partition")
    tenant_max_nodes: int | None = Field(None, ge=1, le=1_000_000,
                                         description="MaxNodes of each tenant partition; default: no limit")
    qos: list[SlurmName] = Field(default_factory=lambda: list(DEFAULT_QOS), min_length=QOS_COUNT,
                                 max_length=QOS_COUNT, description="names of the six QOS levels, highest first: "
                                 "the first preempts every later one, the last preempts none")
    default_qos: SlurmName = Field("p3", description="QOS of a job that names none")
    reserved_memory_mib: int = Field(16384, ge=0, le=1 << 20,
                                     description="memory kept from jobs for the OS: RealMemory = the memory Linux "
                                                 "reports (catalog memtotal_mib, else 125/128 of installed) - this")
    admin_account: SlurmName = Field("ops", description="Slurm account of the whole-cluster partition; when the "
                                                         "cluster has tenant partitions it is the only account "
                                                         "allowed there. root is always one of its users")
    users: dict[SlurmName, list[UserName]] = Field(
        default_factory=dict, max_length=1000,
        description="Unix users per Slurm account: the key is a tenant (its partition's account, which its "
                    "partition alone allows) or admin_account; accounts.sh creates each account and user once. "
                    "A user's first account is its default")
    preempt_grace_time: int = Field(120, ge=0, le=86400,
                                    description="seconds a preempted job gets between SIGTERM and its requeue "
                                                "(GraceTime of every QOS level): time to checkpoint and exit")
    mpi_default: Literal["pmix", "pmi2", "none"] = Field(
        "pmix", description="MpiDefault: pmix needs the PMIx library on every node (slurm_node installs it); "
                            "none for nodes without it")
    health_check_program: AbsPath | None = Field(
        "/usr/local/sbin/railforge-node-health",
        description="HealthCheckProgram: slurmd runs it every health_check_interval seconds; it drains its node "
                    "(scontrol update state=drain reason=...) when a check fails. null: none")
    health_check_interval: int = Field(300, ge=10, le=86400)
    bf_interval: int = Field(30, ge=1, le=3600, description="seconds between backfill passes")
    bf_window: int = Field(10080, ge=1, le=43200, description="minutes the backfill scheduler plans ahead; at least "
                                                                "max_time, or long jobs get no reservation")
    bf_resolution: int = Field(300, ge=1, le=3600, description="seconds of time resolution of backfill planning")
    bf_max_job_test: int = Field(1000, ge=1, le=1_000_000, description="jobs backfill considers per pass")

    @field_validator("users")
    @classmethod
    def _users(cls, v: dict[str, list[str]]) -> dict[str, list[str]]:
        for account, names in v.items():
            if len(names) > 10_000:
                raise ValueError(f"account {account!r} lists {len(names)} users; at most 10000 per account")
            seen: set[str] = set()
            for name in names:
                if name in seen:
                    raise ValueError(f"account {account!r} lists user {name!r} twice")
                seen.add(name)
        return v

    @field_validator("qos")
    @classmethod
    def _unique(cls, v: list[str]) -> list[str]:
        seen: set[str] = set()
        for name in v:
            if name in seen:
                raise ValueError(f"QOS name {name!r} appears twice; the six levels need six different names")
            seen.add(name)
        return v

    @model_validator(mode="after")
    def _default_qos(self) -> SlurmSpec:
        if self.default_qos not in self.qos:
            raise ValueError(f"default_qos {self.default_qos!r} is not one of the QOS levels {', '.join(self.qos)}")
        ports = [self.slurmctld_port, self.slurmd_port, self.slurmdbd_port]
        if len(set(ports)) != 3:
            raise ValueError(f"slurmctld_port, slurmd_port and slurmdbd_port must differ (got {ports})")
        return self
