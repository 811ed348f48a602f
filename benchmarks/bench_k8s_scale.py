"""Scale benchmark: `pulumi up` of the railforge-k8s program against a live API server holding thousands of KWOK nodes,
and whereabouts allocations against that API server (issue 36, item 5).

For each ladder size (GPU nodes; 16,384 = the 131K benchmark spec, benchmarks/specs/gpu-131k.yaml) it builds the plan
(`railforge build --only plan`), starts the control plane of tests/helpers/k8s_cluster.py
(etcd, kube-apiserver, controller-manager, scheduler, KWOK), registers the plan's GPU nodes as KWOK nodes without the
railforge.io labels, and measures:
  - node registration and KWOK readiness;
  - `pulumi up` of the program (real CLI + provider, Automation API inline program, as tests/k8s/pulumi_stack.py;
    `helmReleases: false`): wall time, peak RSS (VmHWM) of the Pulumi CLI and of the Kubernetes provider, the
    Python process that runs the inline program (one per up, started by pulumi_stack.py), the benchmark's own
    process (the harness), kube-apiserver and etcd; the API server's requests by HTTP
    code during the `up` (from its /metrics: 429s, 409s, 5xx) and its objects held;
  - a no-op preview (must show only `same`) and a no-op `up`;
  - optionally (`--allocations N`): N whereabouts IPAM ADDs (the built whereabouts binary, invoked as the IPAM
    plugin with the ipam section the program writes into an attachment, for the first leaves' rail-0 pod ranges,
    4 at a time) against the same API server, then the IPPools' allocation counts; no main plugin and no network
    namespace (CNI ADD/DEL in namespaces is issue 36 item 3). `--no-up` measures the allocations alone.
The machine's load (/proc/loadavg) is recorded next to every number. A result JSON per size is written under
benchmarks/results/ as soon as that size finishes. Not a test and not in CI; run it niced, alone:

    nice -n 10 .venv/bin/python benchmarks/bench_k8s_scale.py --nodes 1024,4096,16384 --allocations 1024

KWOK renews node leases every lease-duration/4 (upstream default 40 s: 1,600 lease writes/s at 16,384 nodes, which
two cores cannot serve), so the benchmark sets a 1,200 s lease and the controller manager's node-monitor grace
period to 3,600 s: nodes stay Ready with 14 lease writes/s at 16,384 nodes. Docs: docs/pulumi.md, "Scale".
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "pulumi")]  # the project, and the Pulumi program (railforge_k8s)

from railforge_k8s.plan_input import load_plan  # noqa: E402
from railforge_k8s.routing import CNI_VERSION, _ipam  # noqa: E402

from benchmarks.bench_build import ladder_spec  # noqa: E402
from railforge.plan.io import read_plan  # noqa: E402
from tests.helpers.k8s_cluster import K8sCluster, K8sClusterConfig, toolchain_bin  # noqa: E402
from tests.helpers.k8s_nodes import is_ready, plan_nodes, register  # noqa: E402
from tests.k8s.pulumi_stack import RailforgeStack  # noqa: E402
from tests.k8s.test_pulumi_up import install_scheduler_crds  # noqa: E402

LEASE_S = 1200
PER_RANGE = 256  # allocations per leaf range (the 131K spec's leaves hold 512 pod addresses per rail)
PREFIX = "rfi36scale"
WATCHED = ("pulumi", "pulumi-resource-kubernetes")
REQUEST_LINE = re.compile(r'^apiserver_request_total\{(?P<labels>[^}]*)\} (?P<value>\S+)$')
OBJECTS_LINE = re.compile(r'^apiserver_resource_objects\{[^}]*resource="(?P<res>[^"]+)"[^}]*\} (?P<value>\S+)$')


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def status_kib(pid: int, key: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                kids = Path(f"/proc/{p}/task/{task}/children").read_text().split()
                todo.extend(int(k) for k in kids)
                out.extend(int(k) for k in kids)
        except OSError:
            continue
    return out


class PeakRss:
    """Peak RSS (VmHWM, MiB) of the Pulumi CLI and provider (children of this process) and of given PIDs, sampled
    every 0.2 s while running; the kernel's high-water mark makes the peak exact for every process seen alive."""

    def __init__(self, fixed: dict[str, int]):
        self.fixed = fixed
        self.peak: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        seen = dict(self.fixed)
        for pid in descendants(os.getpid()):
            try:
                comm = Path(f"/proc/{pid}/comm").read_text().strip()
            except OSError:
                continue
            if comm in WATCHED or comm.startswith("pulumi-resource"):
                seen[f"{comm}:{pid}"] = pid
            elif comm.startswith("python"):  # tests/k8s/pulumi_stack.py runs each up/preview in its own process
                seen[f"python (inline program):{pid}"] = pid
        seen["benchmark-python (harness)"] = os.getpid()
        for name, pid in seen.items():
            hwm = status_kib(pid, "VmHWM") / 1024
            key = name.split(":")[0]
            self.peak[key] = max(self.peak.get(key, 0.0), round(hwm, 1))

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            self._sample()

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def request_codes(cluster: K8sCluster) -> dict[str, float]:
    """apiserver_request_total summed per HTTP code."""
    text = cluster.api.session.get(cluster.server + "/metrics", timeout=60).text
    codes: dict[str, float] = {}
    for line in text.splitlines():
        m = REQUEST_LINE.match(line)
        if m:
            code = re.search(r'code="(\d+)"', m["labels"])
            if code:
                codes[code[1]] = codes.get(code[1], 0.0) + float(m["value"])
    return codes


def stored_objects(cluster: K8sCluster) -> dict[str, int]:
    text = cluster.api.session.get(cluster.server + "/metrics", timeout=60).text
    return {m["res"]: int(float(m["value"])) for line in text.splitlines() if (m := OBJECTS_LINE.match(line))
            and float(m["value"]) >= 10}


def delta(before: dict[str, float], after: dict[str, float]) -> dict[str, int]:
    return {code: int(after[code] - before.get(code, 0.0)) for code in sorted(after)
            if after[code] - before.get(code, 0.0) > 0}


def timed(fn):
    started, at = time.monotonic(), load()
    value = fn()
    return value, round(time.monotonic() - started, 2), {"load_start": at, "load_end": load()}


def build_plan(nodes: int, work: Path) -> tuple[Path, float]:
    work.mkdir(parents=True, exist_ok=True)
    spec = ladder_spec(nodes * 8, work)
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "railforge", "build", str(spec), "--out", str(work / "out"), "--only",
                    "plan"], check=True, cwd=ROOT, capture_output=True)
    return work / "out" / "plan.json", round(time.monotonic() - started, 2)


def whereabouts_allocations(cluster: K8sCluster, bin_dir: Path, plan_path: Path, count: int, work: Path) -> dict:
    """`count` IPAM ADDs through the whereabouts binary, 4 at a time, round-robin over the first leaves' pod ranges
    of rail 0, each with the ipam section the program writes into an attachment (railforge_k8s.routing._ipam)."""
    for crd in sorted((ROOT / "pulumi" / "crds" / "whereabouts-v0.9.4").glob("*.yaml")):
        doc = yaml.safe_load(crd.read_text())  # the stack installs them only with attachments that use whereabouts
        if cluster.api.find("apiextensions.k8s.io/v1", "CustomResourceDefinition", doc["metadata"]["name"]) is None:
            cluster.api.apply(doc)
    cluster.wait_for(lambda: cluster.api.find("apiextensions.k8s.io/v1", "CustomResourceDefinition",
                                              "ippools.whereabouts.cni.cncf.io"), timeout=60, what="IPPool CRD")
    cluster.wait_for(lambda: cluster.api.request("GET", "/apis/whereabouts.cni.cncf.io/v1alpha1/ippools"),
                     timeout=60, what="IPPools served")
    plan = load_plan(plan_path)
    nets = [n for n in plan.pod_networks if n.rail == plan.rails[0].index][:-(-count // PER_RANGE)]
    flat = work / "whereabouts.conf"  # whereabouts reads its datastore from a flat file beside the ipam section
    flat.write_text(json.dumps({"datastore": "kubernetes", "kubernetes": {"kubeconfig": str(cluster.kubeconfig)}}))
    confs = [json.dumps({"cniVersion": CNI_VERSION, "name": f"{PREFIX}-{n.leaf}", "type": "macvlan",
                         "ipam": {**_ipam(n, f"{PREFIX}-{n.leaf}"), "configuration_path": str(flat)}})
             for n in nets]
    errors: list[str] = []

    def add(i: int) -> float:
        env = {"PATH": os.environ["PATH"], "CNI_COMMAND": "ADD", "CNI_CONTAINERID": f"{PREFIX}-{i:05d}",
               "CNI_NETNS": f"/run/netns/{PREFIX}-{i:05d}", "CNI_IFNAME": "net1", "CNI_PATH": str(bin_dir),
               "CNI_ARGS": f"IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME={PREFIX}-pod-{i:05d}"}
        started = time.monotonic()
        proc = subprocess.run([str(bin_dir / "whereabouts")], input=confs[i % len(confs)], env=env,
                              capture_output=True, text=True, timeout=120)
        if proc.returncode != 0 or '"ips"' not in proc.stdout:
            errors.append(f"#{i}: rc {proc.returncode} {proc.stdout.strip()[:300]}")
        return time.monotonic() - started

    started, at = time.monotonic(), load()
    with ThreadPoolExecutor(4) as pool:
        each = sorted(pool.map(add, range(count)))
    wall = time.monotonic() - started
    pools = cluster.api.request("GET", "/apis/whereabouts.cni.cncf.io/v1alpha1/ippools")["items"]  # all namespaces
    allocated = {p["spec"]["range"]: len(p["spec"].get("allocations", {})) for p in pools}
    return {"ranges": [f"{n.range_start}-{n.range_end}" for n in nets], "adds": count, "parallel": 4,
            "failed": len(errors), "first_errors": errors[:3], "wall_s": round(wall, 2),
            "per_add_ms_median": round(1000 * each[len(each) // 2], 1),
            "per_add_ms_p99": round(1000 * each[int(len(each) * 0.99)], 1),
            "ippool_allocations": allocated, "load_start": at, "load_end": load()}


def run(result: dict, nodes: int, allocations: int, work: Path, node_labels: bool = True, up: bool = True) -> None:
    """Fills `result` as it goes, so a failure still leaves the numbers measured before it."""
    bin_dir = toolchain_bin()
    result |= {"nodes": nodes, "gpus": nodes * 8, "load_at_start": load(),
              "skip_checkpoints": os.environ.get("PULUMI_SKIP_CHECKPOINTS") == "true", "node_labels": node_labels}
    plan_path, result["build_s"] = build_plan(nodes, work / "plan")
    plan = read_plan(plan_path)
    config = K8sClusterConfig(prefix=PREFIX, start_timeout=600, kwok_skip_stages=("pod-complete",), extra_args={
        "kwok": {"node-lease-duration-seconds": str(LEASE_S)},
        "kube-controller-manager": {"node-monitor-grace-period": "3600s"},
    })
    cluster = K8sCluster(bin_dir, work / "cluster", config)
    cluster.start()
    try:
        result["control_plane_start_s"] = round(cluster.start_seconds, 2)
        specs = plan_nodes(plan, topology_labels=False)
        _, result["register_nodes_s"], result["register_nodes_load"] = timed(
            lambda: register(cluster.api, specs, workers=4))
        want = {s.name for s in specs}

        def all_ready() -> bool:
            return want <= {n["metadata"]["name"] for n in cluster.api.list("v1", "Node") if is_ready(n)}

        _, result["nodes_ready_after_register_s"], _ = timed(
            lambda: cluster.wait_for(all_ready, timeout=1800, what=f"{nodes} KWOK nodes Ready",
                                     interval=max(5, nodes / 512)))  # a LIST of 16K nodes is ~50 MB of JSON
        fixed = {"kube-apiserver": cluster.procs["kube-apiserver"].pid, "etcd": cluster.procs["etcd"].pid}
        if up:
            measure_up(result, cluster, bin_dir, plan_path, work, nodes, node_labels, fixed)
        if allocations:
            result["whereabouts"] = whereabouts_allocations(cluster, bin_dir, plan_path, allocations, work)
        held(result, cluster, fixed, work)
    finally:
        cluster.stop()
    result["load_at_end"] = load()
    result["host"] = {"cpus": os.cpu_count(), "python": platform.python_version(),
                      "mem_total_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)}


def measure_up(result: dict, cluster: K8sCluster, bin_dir: Path, plan_path: Path, work: Path, nodes: int,
               node_labels: bool, fixed: dict[str, int]) -> None:
    install_scheduler_crds(cluster)
    stack = RailforgeStack(bin_dir, work / "pulumi", cluster.kubeconfig, name=f"scale{nodes}")
    stack.configure(plan=plan_path, helmReleases=False, nodeLabels=node_labels)
    before = request_codes(cluster)
    with PeakRss(fixed) as rss:
        up, result["up_s"], result["up_load"] = timed(stack.up)
    result["up_ok"] = up.ok
    result["up_error"] = up.error[-2000:] if not up.ok else ""
    result["up_changes"] = up.changes
    result["up_peak_rss_mib"] = rss.peak
    result["up_requests_by_code"] = delta(before, request_codes(cluster))
    result["resources_in_state"] = len(stack.resources())
    labelled = sum(1 for n in cluster.api.list("v1", "Node", label_selector="railforge.io/su"))
    result["nodes_labelled_by_pulumi"] = labelled
    if up.ok:
        preview, result["noop_preview_s"], result["noop_preview_load"] = timed(stack.preview)
        result["noop_preview_changes"] = preview.changes
        result["noop_preview_not_same"] = {k: v for k, v in preview.steps.items() if v != "same"}
        before = request_codes(cluster)
        with PeakRss(fixed) as rss:
            again, result["noop_up_s"], result["noop_up_load"] = timed(stack.up)
        result["noop_up_changes"] = again.changes
        result["noop_up_peak_rss_mib"] = rss.peak
        result["noop_up_requests_by_code"] = delta(before, request_codes(cluster))


def held(result: dict, cluster: K8sCluster, fixed: dict[str, int], work: Path) -> None:
    """What the API server and etcd hold at the end, and their memory."""
    result["apiserver_rss_mib"] = round(status_kib(fixed["kube-apiserver"], "VmRSS") / 1024, 1)
    result["apiserver_peak_rss_mib"] = round(status_kib(fixed["kube-apiserver"], "VmHWM") / 1024, 1)
    result["etcd_rss_mib"] = round(status_kib(fixed["etcd"], "VmRSS") / 1024, 1)
    result["etcd_peak_rss_mib"] = round(status_kib(fixed["etcd"], "VmHWM") / 1024, 1)
    result["etcd_db_mib"] = round((work / "cluster" / "etcd-data" / "member" / "snap" / "db").stat().st_size / 2**20, 1)
    result["stored_objects"] = stored_objects(cluster)


def write(results: Path, nodes: int, result: dict) -> None:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    (results / f"k8s-scale-{nodes}-{stamp}.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="1024,4096,16384", help="comma-separated GPU node counts (multiples of 64)")
    parser.add_argument("--allocations", type=int, default=0, help="whereabouts IPAM ADDs per size (0: none)")
    parser.add_argument("--no-node-labels", action="store_true",
                        help="nodeLabels: false (no NodePatch per node): the cluster-wide objects only")
    parser.add_argument("--no-up", action="store_true", help="no pulumi up (e.g. only --allocations)")
    parser.add_argument("--skip-checkpoints", action="store_true",
                        help="PULUMI_SKIP_CHECKPOINTS=true: the state is written once at the end, not after each step")
    args = parser.parse_args()
    # stop cleanly (the control plane by PID, in run's finally) on SIGTERM, and on SIGINT even when started in the
    # background, where the shell ignores it
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sizes = [int(x) for x in args.nodes.split(",") if x.strip()]
    if any(n <= 0 or n % 64 for n in sizes):
        parser.error(f"--nodes {args.nodes!r}: each size must be a positive multiple of 64 (nodes per SU)")
    if toolchain_bin() is None:
        parser.error("the Kubernetes toolchain is not built: run tests/tools/k8s-build")
    if args.skip_checkpoints:
        os.environ["PULUMI_SKIP_CHECKPOINTS"] = "true"  # the CLI inherits this process's environment
    results = ROOT / "benchmarks" / "results"
    results.mkdir(exist_ok=True)
    for nodes in sizes:
        result: dict = {}
        try:
            with tempfile.TemporaryDirectory(prefix=f"{PREFIX}-{nodes}-") as tmp:
                run(result, nodes, args.allocations, Path(tmp), node_labels=not args.no_node_labels,
                    up=not args.no_up)
        except (Exception, KeyboardInterrupt, SystemExit) as exc:  # the numbers so far are kept, with the cause
            result["failed"] = f"{type(exc).__name__}: {exc}"[:2000]
            result["failed_at"] = traceback.format_exc()[-3000:]
            if not isinstance(exc, Exception):
                write(results, nodes, result)
                raise
        write(results, nodes, result)


if __name__ == "__main__":
    main()
