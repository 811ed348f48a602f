"""Scale benchmark: Kueue v0.19.2 admitting and placing a 2,048-pod gang on the 16K example's nodes.

Builds roce-16k-railplane (2,048 8-GPU nodes in 32 SUs of 64, 3-tier rail-plane fabric), starts the control plane
of tests/helpers/k8s_cluster.py with every GPU node as a KWOK node, starts Kueue (tests/helpers/k8s_kueue.py) and
applies the program's Topology and cluster-wide ResourceFlavor (pulumi/railforge_k8s/kueue_objects.py) with one
ClusterQueue over all GPUs. Then, side by side in one run, the time from creating a Job to all its pods bound:

    kueue-tas   the gang through Kueue with `podset-preferred-topology: railforge.io/leaf-group`
                (quota, topology assignment, ungating, then kube-scheduler binds)
    scheduler   the same Job with no queue: kube-scheduler alone (no gang, no topology), the baseline

Pods never run (KWOK). Prints a table and writes JSON under benchmarks/results/. Uses free loopback ports:

    nice -n 10 python benchmarks/bench_kueue.py [--pods 2048]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "pulumi")]

from railforge_k8s import kueue_objects, names  # noqa: E402
from railforge_k8s.plan_input import load_plan  # noqa: E402
from railforge_k8s.versions import KUEUE_API  # noqa: E402

from railforge.plan.io import read_plan  # noqa: E402
from tests.conftest import run_cli  # noqa: E402
from tests.helpers.k8s_cluster import K8sCluster, K8sClusterConfig, toolchain_bin  # noqa: E402
from tests.helpers.k8s_kueue import QUEUE_LABEL, start_kueue  # noqa: E402
from tests.helpers.k8s_nodes import GPU, is_ready, plan_nodes, register  # noqa: E402

EXAMPLE = "roce-16k-railplane"
NAMESPACE = "bench"
QUEUE = "bench"
# One KWOK process renews 2,048 node leases; on a loaded 2-core machine (load 17-25) renewals lag past the
# controller manager's 40 s default, nodes flap NotReady, Kueue's TAS excludes the tainted nodes and evicts the
# admitted gang (the whole cluster no longer fits). A real node's kubelet renews its own lease; the longer grace
# removes an artefact of simulating 2,048 kubelets in one process, not a cost of Kueue.
LOADED_MACHINE = {"kube-controller-manager": {"node-monitor-grace-period": "900s"}}


def load() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def gang(name: str, pods: int, through_kueue: bool) -> dict:
    resources = {GPU: "8", "cpu": "8", "memory": "32Gi"}
    template: dict = {"spec": {"restartPolicy": "Never", "automountServiceAccountToken": False,
                               "containers": [{"name": "train", "image": "registry.invalid/pause:never-pulled",
                                               "resources": {"requests": resources, "limits": resources}}]}}
    labels = {}
    if through_kueue:
        labels = {QUEUE_LABEL: QUEUE}
        template["metadata"] = {"annotations": {"kueue.x-k8s.io/podset-preferred-topology": names.LEAF_GROUP_LABEL}}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": NAMESPACE,
                                                                  "labels": labels},
            "spec": {"parallelism": pods, "completions": pods, "backoffLimit": 0, "template": template}}


def bound(cluster: K8sCluster, name: str) -> list[dict]:
    pods = cluster.api.list("v1", "Pod", NAMESPACE, label_selector=f"batch.kubernetes.io/job-name={name}")
    return [p for p in pods if p["spec"].get("nodeName")]


def place(cluster: K8sCluster, name: str, pods: int, through_kueue: bool, su_of: dict[str, str]) -> dict:
    api = cluster.api
    started = time.monotonic()
    api.create(gang(name, pods, through_kueue))
    placed = cluster.wait_for(lambda: (b := bound(cluster, name)) and len(b) == pods and b, timeout=1200,
                              what=f"{pods} pods of {name} bound", interval=1)
    seconds = time.monotonic() - started
    sus = {su_of[p["spec"]["nodeName"]] for p in placed}
    api.request("DELETE", api.path("batch/v1", "Job", name, NAMESPACE), {"propagationPolicy": "Background"})
    cluster.wait_for(lambda: not api.list("v1", "Pod", NAMESPACE), timeout=600, what=f"pods of {name} gone",
                     interval=1)
    return {"seconds": round(seconds, 1), "sus": len(sus)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=2048)
    args = parser.parse_args()
    bin_dir = toolchain_bin()
    if bin_dir is None:
        raise SystemExit("Kubernetes toolchain not built: run tests/tools/k8s-build")
    with tempfile.TemporaryDirectory(prefix="rfbench-kueue-") as tmp:
        out = Path(tmp) / "out"
        run_cli("build", str(ROOT / "inventory" / EXAMPLE / "cluster.yaml"), "--out", str(out))
        plan = read_plan(out / "plan.json")
        plan_input = load_plan(out / "plan.json")
        specs = plan_nodes(plan)
        su_of = {s.name: s.labels[names.LEAF_GROUP_LABEL] for s in specs}
        cluster = K8sCluster(bin_dir, Path(tmp) / "k8s", K8sClusterConfig(
            prefix="rfbench", kwok_skip_stages=("pod-complete",), extra_args=LOADED_MACHINE))
        result: dict = {"example": EXAMPLE, "nodes": len(specs), "pods": args.pods, "load_before": load()}
        cluster.start()
        try:
            api = cluster.api
            started = time.monotonic()
            register(api, specs)
            want = {s.name for s in specs}
            cluster.wait_for(lambda: want <= {n["metadata"]["name"] for n in api.list("v1", "Node") if is_ready(n)},
                             timeout=600, what=f"{len(specs)} KWOK nodes Ready", interval=2)
            result["nodes_ready_s"] = round(time.monotonic() - started, 1)
            started = time.monotonic()
            start_kueue(cluster)
            result["kueue_ready_s"] = round(time.monotonic() - started, 1)
            cluster_name = plan_input.cluster
            flavor = kueue_objects.flavor_name(cluster_name)
            gpus = len(specs) * plan_input.gpus_per_node
            for obj in (
                kueue_objects.topology(cluster_name, plan_input.nodes), kueue_objects.resource_flavor(cluster_name),
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
                {"apiVersion": KUEUE_API, "kind": "ClusterQueue", "metadata": {"name": QUEUE},
                 "spec": {"namespaceSelector": {}, "queueingStrategy": "StrictFIFO",
                          "resourceGroups": [{"coveredResources": [GPU], "flavors": [
                              {"name": flavor, "resources": [{"name": GPU, "nominalQuota": str(gpus)}]}]}]}},
                {"apiVersion": KUEUE_API, "kind": "LocalQueue", "metadata": {"name": QUEUE, "namespace": NAMESPACE},
                 "spec": {"clusterQueue": QUEUE}},
            ):
                api.apply(obj)
            cluster.wait_for(lambda: any(c["type"] == "Active" and c["status"] == "True" for c in api.get(
                KUEUE_API, "ClusterQueue", QUEUE).get("status", {}).get("conditions", [])), timeout=120,
                what="ClusterQueue Active")
            result["kueue-tas"] = place(cluster, "gang-kueue", args.pods, True, su_of)
            result["scheduler"] = place(cluster, "gang-scheduler", args.pods, False, su_of)
            result["ratio_kueue_to_scheduler"] = round(result["kueue-tas"]["seconds"]
                                                       / max(result["scheduler"]["seconds"], 0.1), 2)
        finally:
            result["load_after"] = load()
            cluster.stop()
    print(f"{EXAMPLE}: {result['nodes']} KWOK nodes Ready in {result.get('nodes_ready_s')} s, "
          f"Kueue ready in {result.get('kueue_ready_s')} s")
    for key in ("kueue-tas", "scheduler"):
        if key in result:
            print(f"  {key:10} {args.pods} pods bound in {result[key]['seconds']:7.1f} s over {result[key]['sus']} SUs")
    print(f"  ratio kueue-tas / scheduler: {result.get('ratio_kueue_to_scheduler')}")
    print(f"  load before: {result['load_before']}\n  load after:  {result['load_after']}")
    results = ROOT / "benchmarks" / "results"
    results.mkdir(exist_ok=True)
    (results / f"kueue-{EXAMPLE}-{args.pods}.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
