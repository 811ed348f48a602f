"""`railforge health`: the remediation receiver for Alertmanager, and the node health check."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from railforge.cli import show
from railforge.health.decide import Policy
from railforge.health.kubernetes import KubernetesError, scheduler
from railforge.health.receiver import Engine, ReceiverConfig, approve, serve
from railforge.health.slurm import Scontrol
from railforge.health.topology import HealthIndex
from railforge.inputs import InputError
from railforge.plan import outdir

health_app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)


def _listen(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isascii() or not port.isdigit() or not 0 <= int(port) <= 65535:
        Console(stderr=True, soft_wrap=True).print(show.line(
            "error", "red", f"--listen {show.plain(text)}: want HOST:PORT with a port 0-65535, such as 127.0.0.1:9777"))
        raise typer.Exit(2)
    return host, int(port)


@health_app.command("serve")
def serve_cmd(
    cluster: Annotated[Path, typer.Argument(help="inventory/<cluster> or its cluster.yaml")],
    out: Annotated[Path | None, typer.Option(help="generated folder (default: the cluster's generated/)")] = None,
    listen: Annotated[str, typer.Option(help="HOST:PORT for Alertmanager's webhook (POST /alerts)")]
    = "127.0.0.1:9777",
    state_dir: Annotated[Path, typer.Option(help="state.json, actions.log and workorders/ go here")]
    = Path("health-state"),
    dry_run: Annotated[bool, typer.Option(help="log what would be drained, resumed and ordered; do nothing")] = False,
    max_drain_share: Annotated[float, typer.Option(min=0.0, max=1.0, help="most of the cluster's nodes drained "
                                                   "without a human")] = 0.25,
    max_auto_drain: Annotated[int, typer.Option(min=0, help="most nodes one action (a leaf or SU escalation) drains "
                                                "without a human; a bigger batch waits for `railforge health "
                                                "approve`")] = 8,
    node_check: Annotated[str | None, typer.Option(help="command run before resuming a node ({node} = its name); "
                                                   "exit 0 = healthy")] = None,
    scontrol: Annotated[str, typer.Option(help="the scontrol binary")] = "scontrol",
    kubeconfig: Annotated[Path | None, typer.Option(help="also cordon and taint drained nodes on this "
                                                    "Kubernetes cluster")] = None,
    no_slurm: Annotated[bool, typer.Option("--no-slurm", help="Kubernetes only (with --kubeconfig): drain "
                                           "nothing in Slurm")] = False,
    leaf_escalation: Annotated[int, typer.Option(min=1, help="nodes with a rail down on one leaf that make a "
                                                 "leaf action")] = 2,
    su_escalation: Annotated[int, typer.Option(min=1, help="leaves of one SU in trouble that make an SU action")]
    = 2,
    rate: Annotated[float, typer.Option(min=0.1, help="webhooks per second accepted (burst 4x)")] = 5.0,
) -> None:
    """Receive Alertmanager webhooks; drain, escalate, write work orders and resume, as the plan says."""
    err = Console(stderr=True)
    host, port = _listen(listen)
    try:
        plan, _ = outdir.load(cluster, out)
    except outdir.BuildError as exc:
        err.print(f"[red]error[/red] {escape(str(exc))}")
        raise typer.Exit(2) from None
    cfg = ReceiverConfig(state_dir=state_dir, dry_run=dry_run, max_drain_share=max_drain_share,
                         max_auto_drain=max_auto_drain, node_check=node_check, rate_per_s=rate,
                         burst=max(1, int(rate * 4)),
                         policy=Policy(leaf_escalation, su_escalation))
    try:
        idx = HealthIndex.of(plan)
        engine = Engine(idx, cfg, scheduler(None if no_slurm else Scontrol(scontrol), kubeconfig, frozenset(idx.links)))
    except (InputError, KubernetesError) as exc:
        err.print(f"[red]error[/red] {escape(str(exc))}")
        raise typer.Exit(2) from None
    except OSError as exc:
        err.print(f"[red]error[/red] --state-dir {escape(show.plain(state_dir))}: cannot use it: "
                  f"{escape(exc.strerror or str(exc))}")
        raise typer.Exit(2) from None
    try:
        serve(engine, host, port)
    except KeyboardInterrupt:
        pass
    except OSError as exc:
        err.print(f"[red]error[/red] cannot listen on {escape(listen)}: {escape(str(exc))}")
        raise typer.Exit(2) from None


@health_app.command("approve")
def approve_cmd(
    batch: Annotated[str | None, typer.Argument(help="the held batch's id, as the receiver's `held` line names it "
                                                "(default: whatever is held now)")] = None,
    state_dir: Annotated[Path, typer.Option(help="the receiver's --state-dir")] = Path("health-state"),
) -> None:
    """Let the drain batch the receiver holds go ahead (its next reconcile, within 5 s, drains it)."""
    err = Console(stderr=True)
    try:
        held = approve(state_dir, batch)
    except InputError as exc:
        err.print(f"[red]error[/red] {escape(str(exc))}")
        raise typer.Exit(2) from None
    except OSError as exc:
        err.print(f"[red]error[/red] --state-dir {escape(show.plain(state_dir))}: {escape(exc.strerror or str(exc))}")
        raise typer.Exit(2) from None
    Console().print(f"approved batch {held.id}: drain {len(held.nodes)} nodes "
                    f"({escape(', '.join(sorted(held.nodes)[:8]))}{' ...' if len(held.nodes) > 8 else ''}); "
                    f"held because {escape(held.why)}")
