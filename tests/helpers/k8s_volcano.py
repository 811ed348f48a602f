"""Volcano v1.14.1 (vc-scheduler and vc-controller-manager, built from volcano.sh/volcano by tests/tools/k8s-build)
against the live control plane of tests/helpers/k8s_cluster.py.

- CRDs: tests/reference/volcano-v1.14.1 (copied unchanged from the module the binaries are built from): Jobs,
  Commands, PodGroups, Queues, HyperNodes, NUMA topologies (the informers the two programs start).
- The scheduler reads its configuration from a file (Volcano's chart mounts the ConfigMap the program makes,
  volcano-scheduler-configmap, as that file): the test writes the program's text there.
- Controllers: job, podgroup and queue (the others need CRDs or objects these tests do not use).
- No webhooks: vc-webhook-manager's admission (defaulting and validating Volcano Jobs, Queues, PodGroups) is not
  registered, so the tests write every field the Job controller reads (queue, schedulerName, minAvailable per job
  and task) themselves; its checks are not proven here.
- RBAC: both run with the harness's admin credentials, not upstream's ClusterRoles (not proven here).
- Leader election off; health and metrics listen on free loopback ports.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import requests
import yaml

from .k8s_cluster import K8sCluster, free_port

REFERENCE = Path(__file__).resolve().parents[1] / "reference" / "volcano-v1.14.1"
VOLCANO_VERSION = "v1.14.1"
CONTROLLERS = "job-controller,pg-controller,queue-controller"


@dataclass
class VolcanoRun:
    scheduler_health: int
    controller_health: int
    conf: Path


def crd_objects() -> list[dict]:
    return [yaml.safe_load(p.read_text()) for p in sorted(REFERENCE.glob("*.yaml"))]


def start_volcano(cluster: K8sCluster, scheduler_conf: str) -> VolcanoRun:
    api = cluster.api
    crds = crd_objects()
    for crd in crds:
        api.apply(crd)

    def established() -> bool:
        for crd in crds:
            got = api.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", crd["metadata"]["name"])
            conds = {c["type"]: c["status"] for c in got.get("status", {}).get("conditions") or []}
            if conds.get("Established") != "True":
                return False
        return True

    cluster.wait_for(established, timeout=60, what="Volcano CRDs established")
    conf = cluster.dir / "volcano-scheduler.conf"
    conf.write_text(scheduler_conf)
    run = VolcanoRun(free_port(), free_port(), conf)
    common = [f"--kubeconfig={cluster.kubeconfig}", "--leader-elect=false", "--enable-healthz=true"]
    cluster.spawn("vc-controller-manager", [
        str(cluster.bin / "vc-controller-manager"), *common, f"--controllers={CONTROLLERS}",
        f"--healthz-address=127.0.0.1:{run.controller_health}", f"--listen-address=127.0.0.1:{free_port()}", "-v=2",
    ])
    cluster.spawn("vc-scheduler", [
        str(cluster.bin / "vc-scheduler"), *common, f"--scheduler-conf={conf}",
        f"--healthz-address=127.0.0.1:{run.scheduler_health}", f"--listen-address=127.0.0.1:{free_port()}", "-v=3",
    ])
    for name, port in (("vc-scheduler", run.scheduler_health), ("vc-controller-manager", run.controller_health)):
        cluster.wait_for(lambda port=port: _healthy(port), timeout=120, what=f"{name} healthz", interval=0.5)
    return run


def _healthy(port: int) -> bool:
    try:
        return requests.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200
    except requests.RequestException:
        return False
