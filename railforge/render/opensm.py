"""InfiniBand subnet manager: everything OpenSM needs, under `configs/opensm/`.

- `opensm.conf`: fat-tree routing (`ftree`, falling back to `updn`) rooted at the top-tier switches;
- `root-switches.txt`: the root (spine, or super-spine in a 3-tier fabric) switches by name;
- `make-root-guids`: stdlib-only script that turns those names into the root GUID file from
  `ibnetdiscover` output (`make-root-guids root-switches.txt ibnetdiscover.txt -o root-guids.conf`);
- `partitions.conf`: the default partition (0x7fff, IPoIB, every port full) plus one per tenant PKey with
  the switches; the tenant's member HCAs are listed by name in comments (the plan has no port GUIDs);
- `partition-members.txt` + `make-partitions` (the same script): `make-partitions partition-members.txt
  ibnetdiscover.txt -o partitions.conf` writes partitions.conf with the member HCAs' port GUIDs;
- `expected-topology.txt`: the planned cabling, for `railforge verify cabling --ibnetdiscover`.

expected-topology.txt format: `#` starts a comment; every other line is one cable, tab-separated:
    cable  a_node  a_port  b_node  b_port  gbps  a_name  b_name
`a_node`/`b_node` are the NodeDescriptions ibnetdiscover prints (a switch by its hostname, which an
NVIDIA switch reports as `MF0;<hostname>:<model>/U1`; a host HCA as `<hostname> <hca>`), `a_port`/`b_port`
the IB port numbers on that node (switch: 1..N in cage order, cage/split `1/2` -> 2; HCA: 1), `gbps` the
planned link rate, and `a_name`/`b_name` the plan's `device:port`. Host-to-leaf cables have the host as
`a`; switch-to-switch cables have the lower tier as `a`. Lines are sorted by cable label.
"""

from __future__ import annotations

import os
from pathlib import Path

import jinja2

from railforge.formats.output import Output
from railforge.plan import outdir
from railforge.plan.model import Plan, ib_port_number
from railforge.plan.switch_model import Interface, SwitchConfig, build_models
from railforge.render import ibnetdiscover

ROOT_GUID_FILE = "/etc/opensm/root-guids.conf"
PARTITION_FILE = "/etc/opensm/partitions.conf"
TEMPLATES = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates" / "opensm"),
    undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
)
HEADER = "# cable\ta_node\ta_port\tb_node\tb_port\tgbps\ta_name\tb_name\n"


def ib_port(i: Interface) -> int:
    return ib_port_number(i.index, i.sub, i.breakout)


def _host_node(i: Interface) -> str:
    if i.peer_hca is None:
        raise ValueError(f"{i.peer_device}:{i.peer_port} is cabled to a leaf but has no HCA name in the plan")
    return f"{i.peer_device} {i.peer_hca}"


def expected_topology(switches: list[SwitchConfig]) -> list[tuple]:
    by_name = {s.hostname: s for s in switches}
    rows = []
    for sw in switches:
        for i in sw.interfaces:
            if i.role == "host":
                rows.append((i.cable, _host_node(i), 1, sw.hostname, ib_port(i), i.speed_mbps // 1000,
                             f"{i.peer_device}:{i.peer_port}", f"{sw.hostname}:{i.name}"))
            elif i.role == "uplink" and i.peer_device in by_name:
                far = by_name[i.peer_device].interface(i.peer_port)
                rows.append((i.cable, sw.hostname, ib_port(i), i.peer_device, ib_port(far), i.speed_mbps // 1000,
                             f"{sw.hostname}:{i.name}", f"{i.peer_device}:{i.peer_port}"))
    return sorted(rows)


def partitions(plan: Plan) -> list[ibnetdiscover.Partition]:
    """Each tenant with its members' compute HCAs, named as ibnetdiscover shows them (`<host> <hca>`)."""
    devices = plan.device_index()
    hcas: dict[str, list[str]] = {}
    for link in plan.links:
        if link.fabric == "compute" and link.tier == "node-leaf" and link.a.device in devices:
            host = devices[link.a.device]
            port = next(p for p in host.ports if p.name == link.a.port)
            hcas.setdefault(host.name, []).append(f"{host.name} {host.hca(port)}")
    return [ibnetdiscover.Partition(t.name, t.pkey, [h for m in t.members for h in hcas.get(m, [])])
            for t in plan.tenants]


def render(plan: Plan, out: Output) -> None:
    if plan.cluster.fabric != "infiniband":
        return
    switches = [s for s in build_models(plan) if s.fabric == "compute"]
    top = max(s.tier for s in switches)
    roots = [s.hostname for s in switches if s.tier == top]
    c = plan.cluster
    out.write_text(outdir.opensm_file("opensm.conf"), TEMPLATES.get_template("opensm.conf.j2").render(
        cluster=c.name, switches=len(switches), tiers=c.tiers, root_guid_file=ROOT_GUID_FILE,
        partition_file=PARTITION_FILE))
    out.write_text(outdir.opensm_file("root-switches.txt"),
                   f"# {c.name}: OpenSM root switches (tier {top}), one per line\n" + "".join(f"{r}\n" for r in roots))
    parts = partitions(plan)
    out.write_text(outdir.opensm_file("partitions.conf"), ibnetdiscover.partitions_conf(
        f"OpenSM partitions for {c.name} (generated by railforge)", parts, None))
    out.write_text(outdir.opensm_file("partition-members.txt"),
                   f"# {c.name}: tenant partitions and their member HCAs (input of make-partitions)\n"
                   "# name\tpkey\tmember HCA as ibnetdiscover names it\n"
                   + "".join(f"{t.name}\t0x{t.pkey:04x}\n" + "".join(f"{t.name}\t0x{t.pkey:04x}\t{m}\n"
                                                                     for m in t.members) for t in parts))
    script = Path(ibnetdiscover.__file__).read_text(encoding="utf-8")
    for name in ("make-root-guids", "make-partitions"):
        out.write_text(outdir.opensm_file(name), script)
        os.chmod(out.stage / outdir.opensm_file(name), 0o755)
    rows = expected_topology(switches)
    out.write_text(outdir.opensm_file("expected-topology.txt"),
                   f"# {c.name}: planned InfiniBand cabling, {len(rows)} cables (format: railforge/render/opensm.py)\n"
                   + HEADER + "".join("\t".join(str(x) for x in r) + "\n" for r in rows))
