"""Plan -> artifacts. One module per output family; each only reads the plan. The per-switch configuration
families are the switch OSes' own renderers (`railforge/nos/<os>/render.py`), taken from their profiles."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from railforge.formats.output import Output
from railforge.plan.model import Plan


@dataclass(frozen=True)
class Family:
    """An artifact family. `per_device` families honour `--limit` through `Output.selects`;
    `shardable` ones render every device independently, so workers can split them by device.
    `owns` names output folders the family writes entirely: `--only` replaces them as a whole, so no
    stale file from an earlier build stays behind. Families with the same `shares` read the same derived view
    of the plan (`Plan.views`), so parallel builds run them in one worker, one after the other; `weight` is the
    family's share of a large build's CPU (measured at 131K GPUs), which orders parallel work longest first."""

    name: str
    description: str
    render: Callable[[Plan, Output], None]
    per_device: bool = False
    shardable: bool = False
    owns: tuple[str, ...] = ()
    shares: str = ""
    weight: int = 1


def families() -> list[Family]:
    from railforge import nos
    from railforge.plan import outdir
    from railforge.render import (
        bom,
        cabling,
        elevations,
        grafana,
        health,
        host_macs,
        inventory,
        ipplan,
        nccl,
        netbox,
        opensm,
        plan_json,
        rails_svg,
        report,
        slurm,
        svg,
        switch_macs,
    )

    return [
        Family("plan", "plan.json, the contract every other artifact reads", plan_json.render, weight=6),
        Family("inventory", "Ansible inventory (hosts.yml, host_vars/*.json, group_vars) and a Kubespray export",
               inventory.render, per_device=True, owns=("ansible",), weight=6),
        Family("cabling", "cabling.xlsx, cabling.csv and per-rack pull sheets", cabling.render,
               shares="tables", weight=25),
        Family("ipplan", "ipplan.csv, ipplan-pools.csv (headroom per pool) and asnplan.csv", ipplan.render,
               shares="tables", weight=3),
        Family("bom", "bom.csv: switches, hosts, transceivers, cables, fibre, NIC ports", bom.render,
               shares="tables"),
        Family("netbox", "netbox/*.csv for NetBox 4.4 bulk import (sites ... IP addresses)", netbox.render,
               weight=9),
        Family("report", "report.md: counts, oversubscription, bisection, traffic paths, failure arithmetic",
               report.render, shares="tables", weight=2),
        Family("svg", "fabric.svg: each fabric by tier with link bundles", svg.render),
        Family("elevations", "elevations/row-<NNN>.svg: every rack of a row, each device at its U", elevations.render),
        Family("rails", "rails/su-<NNN>.svg: which NIC of which node goes to which leaf port, per SU",
               rails_svg.render, owns=("rails",)),
        Family("slurm", "slurm/topology.conf (tree) and slurm/topology-block.conf (one block per SU); with a `slurm:` "
               "section also slurm.conf, gres.conf, cgroup.conf and qos.sh", slurm.render),
        Family("nccl", "nccl/<node>.env per node and nccl/hostfile in topology order", nccl.render,
               per_device=True, weight=4),
        *(Family(r.family, r.description, r.render, per_device=True, shardable=True, weight=r.weight)
          for p in nos.profiles() if (r := p.renderer) is not None),
        Family("ztp", "switch-macs.csv: the template of switch management MACs/serials to fill in after racking",
               switch_macs.render),
        Family("hosts", "host-macs.csv: the template of host BMC/boot-NIC MACs, serials and boot targets to fill in",
               host_macs.render),
        Family("opensm", "InfiniBand subnet manager: opensm.conf, root switches and GUID script, partitions, "
               "expected topology", opensm.render),
        Family("health", "health/: expected fabric state for node-exporter, Prometheus rules, Alertmanager "
               "routing, file_sd targets", health.render),
        Family("grafana", "Grafana dashboard JSON: fabric overview and SU/rail dashboards over the health rules",
               grafana.render, owns=(outdir.GRAFANA,)),
    ]
