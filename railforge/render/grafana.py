"""Grafana dashboards from the plan, over the metrics and recording rules of the `health` family.

Two dashboards: a fabric overview (per tier: BGP sessions established against planned, cable ends without
carrier, link errors; per SU: sessions and cables down, nodes failing the node check, firing alerts) and an
SU/rail dashboard whose `su` and `rail` template variables take their options from the plan, so the JSON does
not grow with the cluster: a 100,000-GPU plan has the same panels as the 2-SU example, only longer option lists.

Every query joins exporter series against the plan's expected state (`railforge:expected_*` from
`health/rules.yml`), whose labels carry the cable, SU, rail and tier; exporter series carry the plan's device
name as the `device` target label (`health/targets/*.json`) and the interface as `exported_device`.

Built with grafana-foundation-sdk (Grafana's builders and models generated from its own schemas, v11.6), so
the JSON has Grafana's field names and defaults; ids and uids are fixed functions of the cluster name and the
panel order, and the encoder sorts keys: same plan, same bytes.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from grafana_foundation_sdk.builders import common as gc
from grafana_foundation_sdk.builders import dashboard as gd
from grafana_foundation_sdk.builders import prometheus as gp
from grafana_foundation_sdk.builders import stat as gstat
from grafana_foundation_sdk.builders import table as gtable
from grafana_foundation_sdk.builders import timeseries as gts
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common as cm
from grafana_foundation_sdk.models import dashboard as dm
from grafana_foundation_sdk.models.prometheus import PromQueryFormat

from railforge.formats.output import Output
from railforge.plan import outdir
from railforge.plan.model import Plan
from railforge.render.health import SWITCH_ROLES

DATASOURCE = dm.DataSourceRef(type_val="prometheus", uid="${datasource}")
RATE = "$__rate_interval"
ALL = ".*"
GPU_COMPONENTS = ("gpu", "nvlink", "xid", "peermem")
NODE_EXPORTER = ("node-exporter's netdev collector on each node and switch (`node_network_receive_errs_total`, "
                 "`node_network_transmit_errs_total`; the interface is `exported_device` under the target's "
                 "`device` label)")


@dataclass(frozen=True, slots=True)
class Query:
    expr: str
    legend: str = ""
    table: bool = False


@dataclass(frozen=True, slots=True)
class PanelSpec:
    kind: str  # "stat", "timeseries" or "table"
    title: str
    description: str
    queries: tuple[Query, ...]
    width: int = 12
    height: int = 8
    unit: str = ""


def uid(cluster: str, name: str) -> str:
    """A dashboard uid from the cluster name: stable across builds, distinct per cluster, within Grafana's 40."""
    return f"rf-{name[:16]}-{hashlib.sha256(f'{cluster}/{name}'.encode()).hexdigest()[:16]}"


def _port_join(counter: str, selector: str) -> str:
    """rate(counter) per planned cable end: the exporter's interface (`exported_device`) becomes the plan's port,
    joined on (device, port) to railforge:expected_link for the cable, SU, rail and tier."""
    return (f'sum by (su, rail, tier, cable, device, port) (label_replace(rate({counter}[{RATE}]), "port", "$1", '
            f'"exported_device", "(.+)") * on(device, port) group_left(su, rail, tier, cable) '
            f"railforge:expected_link{selector})")


def _errors(selector: str) -> str:
    rx = _port_join("node_network_receive_errs_total", selector)
    tx = _port_join("node_network_transmit_errs_total", selector)
    return f"{rx} + {tx}"


def overview_panels(plan: Plan) -> list[tuple[str, list[PanelSpec]]]:
    up = "count by (tier) (railforge:expected_bgp_session and on(device, peer) (frr_bgp_peer_state == 1))"
    nodes = 'railforge:expected_device{role="node"}'
    return [
        ("BGP sessions by tier", [
            PanelSpec("stat", "Sessions established / planned, by tier",
                      "Planned: the plan's BGP session ends (railforge:expected_bgp_session, from "
                      "health/expected.prom). Established: those prometheus-frr-exporter reports with "
                      "frr_bgp_peer_state == 1.",
                      (Query(up, "{{tier}} established"),
                       Query("count by (tier) (railforge:expected_bgp_session)", "{{tier}} planned")), width=12),
            PanelSpec("timeseries", "Sessions down, by tier",
                      "Planned session ends that the FRR exporter does not report Established "
                      "(railforge:bgp_session_down).",
                      (Query("count by (tier) (railforge:bgp_session_down)", "{{tier}}"),), width=12),
        ]),
        ("Links by tier", [
            PanelSpec("timeseries", "Cable ends without carrier, by tier",
                      "Planned cable ends whose interface node-exporter reports without carrier (railforge:link_down;"
                      " only devices that run node-exporter count).",
                      (Query("count by (tier) (railforge:link_down)", "{{tier}}"),), width=12),
            PanelSpec("timeseries", "Link errors, by tier",
                      f"Receive + transmit errors per second on planned cable ends, from {NODE_EXPORTER}.",
                      (Query(f"sum by (tier) ({_errors('')})", "{{tier}}"),), width=12, unit="pps"),
        ]),
        ("Per SU", [
            PanelSpec("timeseries", "BGP sessions down, by SU", "railforge:bgp_session_down counted by the SU of the "
                      "leaf the session belongs to.",
                      (Query('count by (su) (railforge:bgp_session_down{su!=""})', "SU {{su}}"),), width=8),
            PanelSpec("timeseries", "Cable ends without carrier, by SU", "railforge:link_down counted by SU.",
                      (Query('count by (su) (railforge:link_down{su!=""})', "SU {{su}}"),), width=8),
            PanelSpec("timeseries", "Nodes failing the node check, by SU",
                      "Nodes whose last railforge node check found something (railforge_nodecheck_findings > 0, "
                      "node-exporter's textfile collector), counted by the SU the plan puts them in.",
                      (Query(f"count by (su) ((railforge_nodecheck_findings > 0) * on(device) group_left(su) "
                             f"{nodes})", "SU {{su}}"),), width=8),
        ]),
        ("Alerts", [
            PanelSpec("table", "Firing railforge alerts",
                      "Prometheus' ALERTS series of the rules in health/rules.yml, with their blast radius.",
                      (Query('count by (alertname, severity, blast_radius, su) '
                             '(ALERTS{alertstate="firing", alertname=~"Railforge.*"})', table=True),), width=24),
        ]),
    ]


def su_rail_panels(plan: Plan) -> list[tuple[str, list[PanelSpec]]]:
    sel = '{su=~"$su", rail=~"$rail"}'
    node_sel = '{role="node", su=~"$su"}'
    prio = plan.qos.lossless_priority
    pfc = (f"the NIC's per-priority pause counters for the plan's lossless priority {prio}: mlx5 "
           f"`rx_prio{prio}_pause`/`tx_prio{prio}_pause`, as node-exporter's ethtool collector "
           f"(`--collector.ethtool`, off by default) names them. No exporter in the railforge lab reports them "
           f"(veth interfaces have no PFC), and switch-side PFC counters have no Prometheus exporter here, so this "
           f"panel is empty until the nodes' node-exporter runs the ethtool collector on ConnectX NICs.")
    gpu = f"({'|'.join(GPU_COMPONENTS)})( .+)?"  # the node check names components "gpu <bus>", "nvlink gpu0 link3"
    return [
        ("BGP sessions", [
            PanelSpec("stat", "Sessions established / planned",
                      "Leaf and spine session ends of the chosen SUs and rails; planned from the plan, established "
                      "as prometheus-frr-exporter reports (frr_bgp_peer_state == 1).",
                      (Query(f"count(railforge:expected_bgp_session{sel} and on(device, peer) "
                             f"(frr_bgp_peer_state == 1))", "established"),
                       Query(f"count(railforge:expected_bgp_session{sel})", "planned")), width=8),
            PanelSpec("table", "Sessions down, with cable labels",
                      "railforge:bgp_session_down: each planned session end not Established, by device, port, "
                      "peer and cable label.",
                      (Query(f"railforge:bgp_session_down{sel}", table=True),), width=16),
        ]),
        ("Links", [
            PanelSpec("table", "Cable ends without carrier",
                      "railforge:link_down: planned cable ends whose interface has no carrier, with the cable label.",
                      (Query(f"railforge:link_down{sel}", table=True),), width=12),
            PanelSpec("timeseries", "Link errors per cable end",
                      f"Receive + transmit errors per second, from {NODE_EXPORTER}.",
                      (Query(_errors(sel), "{{cable}} {{device}}:{{port}}"),), width=12, unit="pps"),
            PanelSpec("timeseries", f"PFC pause frames, priority {prio}", f"Pause frames per second: {pfc}",
                      (Query(_port_join(f"node_ethtool_received_prio{prio}_pause", sel),
                             "rx {{cable}} {{device}}:{{port}}"),
                       Query(_port_join(f"node_ethtool_transmitted_prio{prio}_pause", sel),
                             "tx {{cable}} {{device}}:{{port}}")), width=24, unit="pps"),
        ]),
        ("GPU health", [
            PanelSpec("stat", "Nodes failing the node check",
                      "Nodes of the chosen SUs whose last railforge node check found anything "
                      "(railforge_nodecheck_findings > 0, node-exporter's textfile collector).",
                      (Query(f"count((railforge_nodecheck_findings > 0) * on(device) group_left(su) "
                             f"railforge:expected_device{node_sel})", "nodes"),), width=8),
            PanelSpec("table", "GPU findings",
                      f"railforge_nodecheck_finding of the GPU checks ({', '.join(GPU_COMPONENTS)}; per GPU as "
                      "`gpu <PCI bus>`, per link as `nvlink gpuN linkM`): GPU count and "
                      "model, ECC, fabric manager, NVLink, Xid errors, peer-memory module.",
                      (Query(f'max by (device, component, cable) (railforge_nodecheck_finding{{component=~"{gpu}"}}) '
                             f"* on(device) group_left(su) railforge:expected_device{node_sel}", table=True),),
                      width=16),
        ]),
    ]


def _target(query: Query, ref: str) -> gp.Dataquery:
    q = gp.Dataquery().expr(query.expr).ref_id(ref).datasource(DATASOURCE)
    if query.table:
        return q.instant().format(PromQueryFormat.TABLE)
    return q.range().legend_format(query.legend or "__auto")


def _stat() -> gstat.Panel:
    return (gstat.Panel().graph_mode(cm.BigValueGraphMode.NONE).text_mode(cm.BigValueTextMode.VALUE_AND_NAME)
            .reduce_options(gc.ReduceDataOptions().calcs(["lastNotNull"]).values(False)))


def _timeseries() -> gts.Panel:
    return (gts.Panel().line_width(1).fill_opacity(10).min(0)
            .legend(gc.VizLegendOptions().display_mode(cm.LegendDisplayMode.TABLE)
                    .placement(cm.LegendPlacement.RIGHT).show_legend(True).calcs(["lastNotNull", "max"])))


def _table() -> gtable.Panel:
    return gtable.Panel().show_header(True).frame_index(0)


def _panel(spec: PanelSpec, panel_id: int):
    builder = {"stat": _stat, "timeseries": _timeseries, "table": _table}[spec.kind]()
    builder.id(panel_id).title(spec.title).description(spec.description).datasource(DATASOURCE)
    builder.span(spec.width).height(spec.height)
    if spec.unit:
        builder.unit(spec.unit)
    for i, query in enumerate(spec.queries):
        builder.with_target(_target(query, chr(ord("A") + i)))
    return builder


def _custom(name: str, label: str, values: list[str], description: str) -> gd.CustomVariable:
    every = dm.VariableOption(selected=True, text="All", value="$__all")
    return (gd.CustomVariable(name).label(label).description(description).values(",".join(values))
            .multi(True).include_all(True).all_value(ALL).current(every)
            .options([every, *(dm.VariableOption(selected=False, text=v, value=v) for v in values)]))


def _dashboard(plan: Plan, name: str, title: str, rows: list[tuple[str, list[PanelSpec]]],
               variables: list[gd.CustomVariable]) -> dm.Dashboard:
    cluster = plan.cluster.name
    board = (gd.Dashboard(f"{cluster}: {title}").uid(uid(cluster, name)).tags(["railforge", cluster])
             .description(f"Generated by railforge from the plan of {cluster}; panels read health/rules.yml's "
                          "recording rules.")
             .refresh("30s").time("now-1h", "now").timezone("browser").readonly()
             .with_variable(gd.DatasourceVariable("datasource").label("Prometheus").type("prometheus")))
    for variable in variables:
        board.with_variable(variable)
    panel_id = 0
    for row_title, specs in rows:
        panel_id += 1
        row = gd.Row(row_title).id(panel_id)
        board.with_row(row)
        for spec in specs:
            panel_id += 1
            board.with_panel(_panel(spec, panel_id))
    return board.build()


def dashboards(plan: Plan) -> dict[str, dm.Dashboard]:
    """name -> dashboard model, in a fixed order."""
    compute = [d for d in plan.devices if d.fabric == "compute"]
    sus = sorted({d.su for d in compute if d.su is not None and d.role in (*SWITCH_ROLES, "node")})
    rails = sorted({d.rail for d in compute if d.rail is not None and d.role == "leaf"})
    variables = [
        _custom("su", "SU", [str(s) for s in sus], "Scalable units of the plan"),
        _custom("rail", "Rail", [str(r) for r in rails],
                "Rails of the plan (the leaf each NIC of a node is cabled to)"),
    ]
    return {
        "fabric-overview": _dashboard(plan, "fabric-overview", "fabric overview", overview_panels(plan), []),
        "su-rail": _dashboard(plan, "su-rail", "SU and rail", su_rail_panels(plan), variables),
    }


def encode(board: dm.Dashboard) -> str:
    return JSONEncoder(sort_keys=True, indent=1).encode(board) + "\n"


def render(plan: Plan, out: Output) -> None:
    if not any(d.fabric == "compute" and d.role in SWITCH_ROLES for d in plan.devices):
        return
    for name, board in dashboards(plan).items():
        out.write_text(outdir.grafana_dashboard(name), encode(board))
