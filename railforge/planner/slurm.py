"""The plan's Slurm section: the spec's `slurm:` settings checked against the built cluster.

Checked here, because only the built cluster knows them: the controller and accounting hosts exist, the node
model is in the catalog, every tenant partition has GPU nodes, and partition names do not collide."""

from __future__ import annotations

from railforge.plan.model import SlurmNodeHardware, SlurmPartition, SlurmQos, SlurmSettings, Tenant
from railforge.planner.context import BuildContext
from railforge.spec.slurm import CatalogNode

QOS_PRIORITY_STEP = 1000


def settings(ctx: BuildContext, tenants: list[Tenant]) -> SlurmSettings | None:
    spec = ctx.spec.slurm
    if spec is None:
        return None
    nodes = [d.name for d in ctx.devices if d.role == "node"]
    hosts = [d.name for d in ctx.devices if d.role in ("mgmt", "node")]
    mgmt = [d.name for d in ctx.devices if d.role == "mgmt"]
    if spec.controller is None and not mgmt:
        raise ctx.fail("slurm.controller", "no controller named and the cluster has no management servers "
                                           "(management.servers is 0); name a host, e.g. controller: "
                                           f"{nodes[0] if nodes else 'mgmt01'}")
    controller = spec.controller or mgmt[0]
    for key, host in (("controller", controller), ("accounting_host", spec.accounting_host)):
        if host is not None and host not in hosts:
            raise ctx.fail(f"slurm.{key}", f"{host[:40]!r} is not a host of this cluster; use a management "
                                           f"server ({', '.join(mgmt[:3]) or 'none built'}) or a GPU node")
    model = ctx.spec.node.model
    hw = ctx.catalog.nodes.get(model)
    if hw is None:
        raise ctx.fail("node.model", f"{model!r} has no entry in the node catalog, so Slurm cannot declare its "
                                     f"CPUs and memory; known: {', '.join(sorted(ctx.catalog.nodes))}, or add it "
                                     "under catalog.nodes")
    return SlurmSettings(
        deploy=spec.deploy,
        cluster_name=spec.cluster_name or ctx.spec.name.replace("-", "_"),
        controller=controller,
        accounting_host=spec.accounting_host or controller,
        slurmctld_port=spec.slurmctld_port, slurmd_port=spec.slurmd_port, slurmdbd_port=spec.slurmdbd_port,
        default_time=spec.default_time, max_time=spec.max_time, default_qos=spec.default_qos,
        qos=qos_levels(spec.qos),
        partitions=partitions(ctx, nodes, tenants),
        node=hardware(ctx, model, hw),
        health_check_program=spec.health_check_program, health_check_interval=spec.health_check_interval,
        bf_interval=spec.bf_interval, bf_window=spec.bf_window, bf_resolution=spec.bf_resolution,
        bf_max_job_test=spec.bf_max_job_test,
    )


def qos_levels(names: list[str]) -> list[SlurmQos]:
    """Highest first: level i preempts every level below it; priorities step by 1000 so fair share cannot reorder."""
    top = len(names) - 1
    return [SlurmQos(name, (top - i) * QOS_PRIORITY_STEP, names[i + 1:]) for i, name in enumerate(names)]


def partitions(ctx: BuildContext, nodes: list[str], tenants: list[Tenant]) -> list[SlurmPartition]:
    spec = ctx.spec.slurm
    out = [SlurmPartition(spec.partition, nodes, True)]
    gpu = set(nodes)
    for i, t in enumerate(tenants):
        name = t.name.replace("-", "_")
        members = [n for n in t.members if n in gpu]
        if not members:
            raise ctx.fail(f"tenants.{i}", f"tenant {t.name!r} has no GPU nodes, so its Slurm partition would be "
                                           "empty; give it sus or nodes that are GPU nodes")
        clash = next((p for p in out if p.name == name), None)
        if clash is not None:
            what = "the whole-cluster partition (slurm.partition)" if clash.default else "another tenant"
            raise ctx.fail(f"tenants.{i}.name", f"tenant {t.name!r} becomes Slurm partition {name!r}, the name of "
                                                f"{what}; rename one")
        out.append(SlurmPartition(name, members, False, spec.tenant_max_nodes))
    return out


def _core_range(hw: CatalogNode, socket: int) -> str:
    first = socket * hw.cores_per_socket
    return f"{first}-{first + hw.cores_per_socket - 1}"


def hardware(ctx: BuildContext, model: str, hw: CatalogNode) -> SlurmNodeHardware:
    gpus = ctx.spec.node.gpus
    if hw.gpu_sockets and len(hw.gpu_sockets) != gpus:
        raise ctx.fail("node.gpus", f"{gpus} GPUs, but catalog node {model!r} places {len(hw.gpu_sockets)} "
                                    "(gpu_sockets); make them agree")
    rails = ctx.spec.node.compute.ports
    nic = hw.nic_sockets if len(hw.nic_sockets) == rails else []
    memory = hw.memory_mib - ctx.spec.slurm.reserved_memory_mib
    if memory < 1024:
        raise ctx.fail("slurm.reserved_memory_mib", f"keeps {ctx.spec.slurm.reserved_memory_mib} MiB of the "
                                                    f"{hw.memory_mib} MiB of {model!r}, leaving jobs under 1 GiB")
    return SlurmNodeHardware(model, hw.sockets, hw.cores_per_socket, hw.threads_per_core, memory, gpus,
                             hw.gpu_type, [_core_range(hw, s) for s in hw.gpu_sockets],
                             [_core_range(hw, s) for s in nic])
