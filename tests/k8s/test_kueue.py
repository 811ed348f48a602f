"""Kueue v0.19.2 schedules the plan's objects on the live control plane: the Topology, ResourceFlavors,
WorkloadPriorityClasses and tenant ClusterQueues the Pulumi program generates (pulumi/railforge_k8s/kueue_objects.py,
priority.py, queues.py) for dgx-h100-4su, whose 127 GPU nodes are KWOK nodes (tenant research: SUs 1-2, 64 nodes,
512 GPUs; production: SU 3 + 2 nodes of SU 4, 34 nodes). Jobs are batch/v1 Jobs of 8-GPU pods; Kueue's webhook
suspends them, Kueue admits them and kube-scheduler binds the pods. Pods never run a container (KWOK).

RAILFORGE_K8S_SCHED_MUTATE=<name> turns one behaviour off; the tests of that behaviour then fail:
    no-kueue          Jobs bypass Kueue (no queue label, not suspended): kube-scheduler places what fits
    no-preemption     ClusterQueues with preemption.withinClusterQueue Never
    no-topology       ResourceFlavors without topologyName and Jobs without topology annotations
    no-tenant-flavor  tenant ClusterQueues use the cluster-wide flavor (not the tenant's own nodes)
    best-effort-fifo  ClusterQueues queue BestEffortFIFO (Kueue's default) instead of the program's StrictFIFO
    no-quota-policy   the tenants' ValidatingAdmissionPolicies (quota_policy.py) are not applied
"""

from __future__ import annotations

import os
import time
from collections import Counter

import pytest
from railforge_k8s import kueue_objects, names, quota_policy
from railforge_k8s.plan_input import load_plan
from railforge_k8s.priority import priority_levels
from railforge_k8s.queues import cluster_queue_spec, tenant_queues
from railforge_k8s.versions import KUEUE_API

from tests.helpers.k8s_cluster import K8sHarnessError, KubeApiError
from tests.helpers.k8s_kueue import PRIORITY_LABEL, QUEUE_LABEL, start_kueue
from tests.helpers.k8s_nodes import GPU, node_labels
from tests.k8s.conftest import K8S_EXAMPLE, require_k8s_toolchain

MUTATE = "RAILFORGE_K8S_SCHED_MUTATE"
MUTATIONS = ("no-kueue", "no-preemption", "no-topology", "no-tenant-flavor", "best-effort-fifo", "no-quota-policy")
PAUSE = "registry.invalid/railforge/pause:never-pulled"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"  # Kueue allows one topology annotation per pod set
SU = names.LEAF_GROUP_LABEL


def mutation() -> str | None:
    value = os.environ.get(MUTATE) or None
    if value is not None and value not in MUTATIONS:
        raise pytest.UsageError(f"{MUTATE}={value!r}: expected one of {', '.join(MUTATIONS)}")
    return value


@pytest.fixture(scope="module")
def plan_input(built):
    return load_plan(built(K8S_EXAMPLE) / "plan.json")


@pytest.fixture(scope="module")
def kueue(k8s_cluster, k8s_nodes, plan_input):
    """Kueue running, with the program's objects for the plan applied and every ClusterQueue Active."""
    require_k8s_toolchain("kueue")
    broken = mutation()
    api = k8s_cluster.api
    start_kueue(k8s_cluster)
    cluster = plan_input.cluster
    objects = [kueue_objects.topology(cluster, plan_input.nodes), kueue_objects.resource_flavor(cluster)]
    objects += [kueue_objects.resource_flavor(cluster, t.name) for t in plan_input.tenants]
    if broken == "no-topology":
        for obj in objects:
            obj["spec"].pop("topologyName", None)
    objects += [{"apiVersion": KUEUE_API, "kind": "WorkloadPriorityClass", "metadata": {"name": lv.name},
                 "value": lv.value, "description": lv.description} for lv in priority_levels(plan_input.qos)]
    queues = tenant_queues(plan_input.tenants, plan_input.gpus_per_node)
    for queue in queues:
        flavor = (kueue_objects.flavor_name(cluster) if broken == "no-tenant-flavor"
                  else kueue_objects.tenant_flavor_name(cluster, queue.tenant))
        spec = cluster_queue_spec(queue, flavor)
        if broken == "no-preemption":
            spec["preemption"]["withinClusterQueue"] = "Never"
        if broken == "best-effort-fifo":
            spec["queueingStrategy"] = "BestEffortFIFO"
        objects += [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": queue.namespace}},
            {"apiVersion": KUEUE_API, "kind": "ClusterQueue", "metadata": {"name": queue.name}, "spec": spec},
            {"apiVersion": KUEUE_API, "kind": "LocalQueue",
             "metadata": {"name": queue.name, "namespace": queue.namespace}, "spec": {"clusterQueue": queue.name}},
        ]
        if broken != "no-quota-policy":
            objects += [quota_policy.validating_policy(queue), quota_policy.policy_binding(queue)]
    for obj in objects:
        api.apply(obj)

    def active() -> bool:
        for queue in queues:
            cq = api.get(KUEUE_API, "ClusterQueue", queue.name)
            if not any(c["type"] == "Active" and c["status"] == "True" for c in cq.get("status", {}).get(
                    "conditions", [])):
                return False
        return True

    k8s_cluster.wait_for(active, timeout=60, what="tenant ClusterQueues Active")
    if broken != "no-quota-policy":
        wait_policies_in_force(k8s_cluster, queues)
    yield {q.tenant: q for q in queues}
    # the session's control plane is shared: the Pulumi test creates the same objects under its own field manager
    ours = [o for o in reversed(objects) if o["kind"] != "Namespace"]
    for obj in ours:
        api.delete(obj["apiVersion"], obj["kind"], obj["metadata"]["name"], obj["metadata"].get("namespace"))
    k8s_cluster.wait_for(lambda: all(api.find(o["apiVersion"], o["kind"], o["metadata"]["name"],
                                              o["metadata"].get("namespace")) is None for o in ours),
                         timeout=90, what="the Kueue test's objects deleted (Kueue drops its finalizers)")


def wait_policies_in_force(cluster, queues) -> None:
    """Each tenant's policy type-checked against batch/v1 Job without a warning, and enforced: a dry-run of a Job
    one pod over the quota is refused (the API server loads policies and bindings asynchronously)."""
    api = cluster.api
    for queue in queues:
        name = quota_policy.policy_name(queue)

        def checked(name=name) -> dict | None:
            got = api.get(quota_policy.ADMISSION_API, "ValidatingAdmissionPolicy", name)
            status = got.get("status", {})
            return status if status.get("observedGeneration") == got["metadata"]["generation"] else None

        status = cluster.wait_for(checked, timeout=30, what=f"{name} type-checked")
        assert not status.get("typeChecking", {}).get("expressionWarnings"), status
        over = job("probe", queue.namespace, queue.gpus // 8 + 1, "railforge-p3", 8, queue.name, None, None,
                   queue.tenant)
        over["metadata"]["labels"][QUEUE_LABEL] = queue.name  # also under no-kueue, whose Jobs carry no label
        cluster.wait_for(lambda over=over: refusal(api, over) is not None, timeout=30, what=f"{name} in force")


def dry_run(api, obj: dict) -> dict:
    return api.request("POST", api.path("batch/v1", "Job", None, obj["metadata"]["namespace"]), obj,
                       params={"dryRun": "All"})


def refusal(api, obj: dict) -> KubeApiError | None:
    """The API server's refusal of creating `obj` (dry run: nothing is stored), or None when it would be created."""
    try:
        dry_run(api, obj)
    except KubeApiError as exc:
        return exc
    return None


@pytest.fixture
def jobs(k8s_cluster, kueue):
    """Submit Jobs; every Job this test made is deleted (and its pods gone) when it ends."""
    api = k8s_cluster.api
    made: list[tuple[str, str]] = []

    def submit(name: str, tenant: str, pods: int, priority: str, gpus: int = 8, required: str | None = None,
               preferred: str | None = None, queue: str | None = None,
               node_selector: dict[str, str] | None = None, completions: int | None = None) -> dict:
        ns = kueue[tenant].namespace
        obj = job(name, ns, pods, f"railforge-{priority}", gpus, queue or kueue[tenant].name, required, preferred,
                  tenant)
        if completions is not None:
            obj["spec"]["completions"] = completions
        if node_selector:
            spec = obj["spec"]["template"]["spec"]
            spec["nodeSelector"] = {**spec.get("nodeSelector", {}), **node_selector}
        api.create(obj)
        made.append((ns, name))
        return obj

    yield submit
    for ns, name in made:
        try:
            api.request("DELETE", api.path("batch/v1", "Job", name, ns), {"propagationPolicy": "Background"})
        except KubeApiError as exc:
            if exc.status != 404:  # a test may have deleted it already
                raise
    for ns, name in made:
        k8s_cluster.wait_for(lambda ns=ns, name=name: not pods_of(api, ns, name, scheduled_only=False),
                             timeout=60, what=f"pods of {name} gone")
    namespaces = {ns for ns, _ in made}
    k8s_cluster.wait_for(lambda: not any(api.list(KUEUE_API, "Workload", ns) for ns in namespaces), timeout=60,
                         what="the jobs' workloads gone")


def job(name: str, ns: str, pods: int, priority: str, gpus: int, queue: str, required: str | None,
        preferred: str | None, tenant: str) -> dict:
    broken = mutation()
    resources = {GPU: str(gpus), "cpu": "8", "memory": "32Gi", "rdma/rail0": "1"}
    annotations = {}
    if broken != "no-topology":
        if required:
            annotations[REQUIRED] = required
        if preferred:
            annotations[PREFERRED] = preferred
    pod_spec: dict = {
        "restartPolicy": "Never", "automountServiceAccountToken": False,
        "containers": [{"name": "train", "image": PAUSE, "resources": {"requests": resources, "limits": resources}}],
    }
    labels = {QUEUE_LABEL: queue, PRIORITY_LABEL: priority}
    if broken == "no-kueue":  # what the tenant flavor would have added, so only the gang logic is missing
        labels = {}
        pod_spec["nodeSelector"] = {names.TENANT_LABEL: tenant}
        pod_spec["tolerations"] = [kueue_objects.tenant_toleration(tenant)]
    return {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {"parallelism": pods, "completions": pods, "backoffLimit": 0,
                 "template": {"metadata": {"annotations": annotations}, "spec": pod_spec}},
    }


def pods_of(api, ns: str, job_name: str, scheduled_only: bool = True) -> list[dict]:
    """The Job's pods (bound to a node and not being deleted, unless `scheduled_only` is off)."""
    pods = api.list("v1", "Pod", ns, label_selector=f"batch.kubernetes.io/job-name={job_name}")
    if not scheduled_only:
        return pods
    return [p for p in pods if p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp")]


def workload_of(api, ns: str, job_name: str) -> dict | None:
    for wl in api.list(KUEUE_API, "Workload", ns):
        if any(o["kind"] == "Job" and o["name"] == job_name for o in wl["metadata"].get("ownerReferences", [])):
            return wl
    return None


def condition(obj: dict | None, kind: str) -> dict:
    for cond in (obj or {}).get("status", {}).get("conditions", []):
        if cond["type"] == kind:
            return cond
    return {}


def wait_placed(cluster, ns: str, name: str, count: int, timeout: float = 90) -> list[dict]:
    api = cluster.api
    return cluster.wait_for(lambda: (p := pods_of(api, ns, name)) and len(p) == count and p, timeout=timeout,
                            what=f"{count} pods of {name} bound to nodes")


def settle(seconds: float = 8) -> None:
    """Time for Kueue and kube-scheduler to act on what is pending (several of their cycles)."""
    time.sleep(seconds)


# ---- gang ---------------------------------------------------------------------------------------------------------

def test_gang_jobs_are_admitted_whole_or_not_at_all(k8s_cluster, kueue, jobs):
    """research holds 512 GPUs; two 40-pod jobs (320 GPUs each) do not both fit: the first runs whole, the
    second waits with no pod at all (never half-placed, so neither can deadlock the other)."""
    api = k8s_cluster.api
    ns = kueue["research"].namespace
    jobs("gang-a", "research", 40, "p3")
    wait_placed(k8s_cluster, ns, "gang-a", 40)
    jobs("gang-b", "research", 40, "p3")
    settle()
    assert len(pods_of(api, ns, "gang-a")) == 40
    placed_b = pods_of(api, ns, "gang-b", scheduled_only=False)
    assert placed_b == [], f"gang-b half-placed: {len(placed_b)} of 40 pods exist"
    assert api.get("batch/v1", "Job", "gang-b", ns)["spec"].get("suspend") is True
    assert condition(workload_of(api, ns, "gang-b"), "QuotaReserved").get("status") == "False"


# ---- priority -----------------------------------------------------------------------------------------------------

def test_p0_preempts_p5_which_is_readmitted_later(k8s_cluster, kueue, jobs):
    api = k8s_cluster.api
    ns = kueue["research"].namespace
    jobs("low-p5", "research", 64, "p5")
    wait_placed(k8s_cluster, ns, "low-p5", 64)
    started = time.monotonic()
    jobs("urgent-p0", "research", 8, "p0")
    wait_placed(k8s_cluster, ns, "urgent-p0", 8, timeout=60)
    seconds = time.monotonic() - started
    evicted = condition(workload_of(api, ns, "low-p5"), "Evicted")
    assert evicted.get("status") == "True" and evicted.get("reason") == "Preempted", evicted
    assert api.get("batch/v1", "Job", "low-p5", ns)["spec"].get("suspend") is True
    print(f"P0 job of 8 pods bound {seconds:.1f} s after submission, P5 preempted")
    assert seconds < 30
    api.request("DELETE", api.path("batch/v1", "Job", "urgent-p0", ns), {"propagationPolicy": "Background"})
    wait_placed(k8s_cluster, ns, "low-p5", 64, timeout=90)  # re-admitted once the P0 job is gone


def test_p3_does_not_preempt_p3(k8s_cluster, kueue, jobs):
    api = k8s_cluster.api
    ns = kueue["research"].namespace
    jobs("first-p3", "research", 64, "p3")
    wait_placed(k8s_cluster, ns, "first-p3", 64)
    jobs("second-p3", "research", 8, "p3")
    settle()
    assert len(pods_of(api, ns, "first-p3")) == 64
    assert pods_of(api, ns, "second-p3", scheduled_only=False) == []
    assert condition(workload_of(api, ns, "first-p3"), "Evicted").get("status") != "True"


# ---- topology -----------------------------------------------------------------------------------------------------

def test_a_job_that_fits_one_su_lands_in_one_su(k8s_cluster, kueue, jobs):
    api = k8s_cluster.api
    ns = kueue["research"].namespace
    jobs("one-su", "research", 24, "p3", required=SU)
    pods = wait_placed(k8s_cluster, ns, "one-su", 24)
    labels = node_labels(api)
    sus = Counter(labels[p["spec"]["nodeName"]][SU] for p in pods)
    assert len(sus) == 1, f"24 pods of a one-SU job spread over {dict(sus)}"


def test_a_job_lands_in_the_one_su_it_fits_whole_when_free_nodes_are_spread(k8s_cluster, kueue, jobs):
    """Free capacity spread over both of research's SUs: a 20-pod Job pinned to 16 nodes of the first SU and 4 of
    the second leaves 16 free nodes there and 28 here. A 24-pod Job that must stay in one SU fits only the second,
    whole; placed without the Topology (kube-scheduler alone) its 24 pods fall on 44 free nodes across both SUs."""
    api = k8s_cluster.api
    ns = kueue["research"].namespace
    busy = "railforge.io/test-busy"
    by_su: dict[str, list[str]] = {}
    for node, lab in sorted(node_labels(api).items()):
        if lab.get(names.TENANT_LABEL) == "research":
            by_su.setdefault(lab[SU], []).append(node)
    first, second = sorted(by_su)
    pinned = by_su[first][:16] + by_su[second][:4]
    try:
        for node in pinned:
            api.patch("v1", "Node", node, {"metadata": {"labels": {busy: "yes"}}})
        jobs("spread-busy", "research", 20, "p3", node_selector={busy: "yes"})
        occupied = wait_placed(k8s_cluster, ns, "spread-busy", 20)
        assert sorted(p["spec"]["nodeName"] for p in occupied) == sorted(pinned)
        jobs("fits-second-su", "research", 24, "p3", required=SU)
        pods = wait_placed(k8s_cluster, ns, "fits-second-su", 24)
        labels = node_labels(api)
        sus = Counter(labels[p["spec"]["nodeName"]][SU] for p in pods)
        assert sus == {second: 24}, f"24 pods that fit only {second} whole landed in {dict(sus)}"
    finally:
        for node in pinned:
            api.patch("v1", "Node", node, {"metadata": {"labels": {busy: None}}})


def test_a_two_su_job_takes_two_whole_sus_not_scattered(k8s_cluster, kueue, jobs, plan_input):
    """A queue over all 127 nodes (4 SUs: 32, 32, 32, 31 nodes) and a 64-pod Job that prefers one SU
    (`podset-preferred-topology: leaf-group`, the only topology annotation Kueue's webhook allows with it): it cannot
    fit one SU, so Kueue's TAS takes the fewest SUs that hold it, two whole ones. kube-scheduler alone scatters
    the 64 pods over all four."""
    api = k8s_cluster.api
    base = kueue["research"]
    cluster = plan_input.cluster
    flavor = kueue_objects.resource_flavor(cluster)
    flavor["metadata"]["name"] = "rfk8s-all-flavor"
    flavor["spec"]["tolerations"] = [kueue_objects.tenant_toleration(q.tenant) for q in kueue.values()]
    if mutation() == "no-topology":
        flavor["spec"].pop("topologyName")
    gpus = len(plan_input.nodes) * plan_input.gpus_per_node
    spec = cluster_queue_spec(base, "rfk8s-all-flavor")
    spec["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = str(gpus)
    objects = [
        flavor,
        {"apiVersion": KUEUE_API, "kind": "ClusterQueue", "metadata": {"name": "rfk8s-all"}, "spec": spec},
        {"apiVersion": KUEUE_API, "kind": "LocalQueue",
         "metadata": {"name": "rfk8s-all", "namespace": base.namespace}, "spec": {"clusterQueue": "rfk8s-all"}},
    ]
    labels = node_labels(api)
    su_size = Counter(lab[SU] for lab in labels.values() if SU in lab)
    try:
        for obj in objects:
            api.apply(obj)
        jobs("two-su", "research", 64, "p3", preferred=SU, queue="rfk8s-all")
        pods = wait_placed(k8s_cluster, base.namespace, "two-su", 64)
        sus = Counter(labels[p["spec"]["nodeName"]][SU] for p in pods)
        assert len(sus) == 2, f"64 pods scattered over {len(sus)} SUs: {dict(sus)} (SU sizes {dict(su_size)})"
        assert all(count == su_size[su] for su, count in sus.items()), f"not whole SUs: {dict(sus)} of {dict(su_size)}"
    finally:
        for obj in reversed(objects):
            meta = obj["metadata"]
            api.request("DELETE", api.path(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace")))


def test_a_wrong_topology_changes_the_placement(k8s_cluster, kueue, jobs, plan_input):
    """The same one-SU job under a Topology whose 'SU' level is a label alternating across the real SUs lands in
    both real SUs: Kueue places by the Topology it is given, so the plan's Topology is what makes one SU."""
    api = k8s_cluster.api
    wrong = "railforge.io/test-wrong-su"
    research = sorted(n for n, lab in node_labels(api).items() if lab.get(names.TENANT_LABEL) == "research")
    for i, node in enumerate(research):
        api.patch("v1", "Node", node, {"metadata": {"labels": {wrong: f"w{i % 2}"}}})
    base = kueue["research"]
    flavor = kueue_objects.resource_flavor(plan_input.cluster, "research")
    flavor["metadata"]["name"] = "rfk8s-wrong-flavor"
    flavor["spec"]["topologyName"] = "rfk8s-wrong"
    spec = cluster_queue_spec(base, "rfk8s-wrong-flavor")
    spec["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": base.namespace}}
    objects = [
        {"apiVersion": KUEUE_API, "kind": "Topology", "metadata": {"name": "rfk8s-wrong"},
         "spec": {"levels": [{"nodeLabel": wrong}, {"nodeLabel": names.HOSTNAME_LABEL}]}},
        flavor,
        {"apiVersion": KUEUE_API, "kind": "ClusterQueue", "metadata": {"name": "rfk8s-wrong"}, "spec": spec},
        {"apiVersion": KUEUE_API, "kind": "LocalQueue", "metadata": {"name": "rfk8s-wrong", "namespace":
                                                                     base.namespace},
         "spec": {"clusterQueue": "rfk8s-wrong"}},
    ]
    try:
        for obj in objects:
            api.apply(obj)
        jobs("wrong-su", "research", 24, "p3", required=wrong, queue="rfk8s-wrong")
        pods = wait_placed(k8s_cluster, base.namespace, "wrong-su", 24)
        labels = node_labels(api)
        assert len({labels[p["spec"]["nodeName"]][wrong] for p in pods}) == 1
        sus = Counter(labels[p["spec"]["nodeName"]][SU] for p in pods)
        assert len(sus) == 2, f"under the wrong topology the job still landed in one SU: {dict(sus)}"
    finally:
        for obj in reversed(objects[2:]):
            meta = obj["metadata"]
            api.request("DELETE", api.path(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace")))
        for node in research:
            api.patch("v1", "Node", node, {"metadata": {"labels": {wrong: None}}})


def test_small_jobs_fill_one_node_before_the_next(k8s_cluster, kueue, jobs):
    api = k8s_cluster.api
    ns = kueue["research"].namespace
    for i in range(8):
        jobs(f"small-{i}", "research", 1, "p4", gpus=1)
        wait_placed(k8s_cluster, ns, f"small-{i}", 1)
    nodes = {pods_of(api, ns, f"small-{i}")[0]["spec"]["nodeName"] for i in range(8)}
    assert len(nodes) == 1, f"eight 1-GPU jobs on {len(nodes)} nodes"


# ---- tenants ------------------------------------------------------------------------------------------------------

def test_a_tenant_gets_its_quota_on_its_own_nodes(k8s_cluster, kueue, jobs):
    api = k8s_cluster.api
    production = kueue["production"]
    ns = production.namespace
    pods_n = production.gpus // 8
    jobs("prod-all", "production", pods_n, "p3")
    pods = wait_placed(k8s_cluster, ns, "prod-all", pods_n)
    labels = node_labels(api)
    tenants = Counter(labels[p["spec"]["nodeName"]].get(names.TENANT_LABEL) for p in pods)
    assert tenants == {"production": pods_n}
    jobs("prod-more", "production", 1, "p3", gpus=1)
    settle()
    assert pods_of(api, ns, "prod-more", scheduled_only=False) == [], "quota exceeded"


# ---- no starvation ------------------------------------------------------------------------------------------------

def test_a_large_job_behind_small_ones_starts_when_its_nodes_free(k8s_cluster, kueue, jobs):
    """research full of eight 8-pod Jobs; a 32-pod Job waits, then four more 8-pod Jobs of the same level arrive
    behind it. Four of the first Jobs end one by one: under StrictFIFO the freed nodes are kept for the large
    Job at the head of the queue (none of the later small Jobs passes it) and it starts once 32 are free. Under
    BestEffortFIFO each freed node-set goes to a later small Job and the large one never starts."""
    api = k8s_cluster.api
    ns = kueue["research"].namespace
    for i in range(8):
        jobs(f"fill-{i}", "research", 8, "p3")
    for i in range(8):
        wait_placed(k8s_cluster, ns, f"fill-{i}", 8)
    jobs("large", "research", 32, "p3")
    settle(3)
    for i in range(4):
        jobs(f"late-{i}", "research", 8, "p3")
    settle()
    assert pods_of(api, ns, "large", scheduled_only=False) == []
    for i in range(4):
        api.request("DELETE", api.path("batch/v1", "Job", f"fill-{i}", ns), {"propagationPolicy": "Background"})
        settle()
        passed = [f"late-{j}" for j in range(4) if pods_of(api, ns, f"late-{j}", scheduled_only=False)]
        assert passed == [], f"after {i + 1} of the first Jobs ended, {passed} started ahead of the large Job"
    wait_placed(k8s_cluster, ns, "large", 32, timeout=60)
    settle(3)
    assert all(pods_of(api, ns, f"late-{j}", scheduled_only=False) == [] for j in range(4))


# ---- quota at submission ------------------------------------------------------------------------------------------

def gpu_job(ns: str, queue: str, pods: int, requests: int | None = 8, limits: int | None = 8,
            init: int | None = None, sidecar: int | None = None, completions: int | None = None,
            min_parallelism: int | None = None, name: str = "variant") -> dict:
    """A Job for the admission checks: GPUs in requests and/or limits, in an init container or a sidecar."""
    def container(cname: str, req: int | None, lim: int | None) -> dict:
        res = {k: {GPU: str(n)} for k, n in (("requests", req), ("limits", lim)) if n is not None}
        return {"name": cname, "image": PAUSE, "resources": res}

    spec: dict = {"restartPolicy": "Never", "containers": [container("train", requests, limits)]}
    inits = []
    if init is not None:
        inits.append(container("prepare", init, init))
    if sidecar is not None:
        inits.append({**container("side", sidecar, sidecar), "restartPolicy": "Always"})
    if inits:
        spec["initContainers"] = inits
    meta: dict = {"name": name, "namespace": ns, "labels": {QUEUE_LABEL: queue}}
    if min_parallelism is not None:
        meta["annotations"] = {"kueue.x-k8s.io/job-min-parallelism": str(min_parallelism)}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
            "spec": {"parallelism": pods, "completions": completions or pods, "suspend": True,
                     "template": {"spec": spec}}}


def test_a_job_larger_than_its_tenants_quota_is_refused_and_the_queue_keeps_moving(k8s_cluster, kueue, jobs):
    """research's quota is its GPUs in the plan (64 nodes x 8). A Job one 8-GPU pod over it is refused by the API
    server, its message naming the Job, the GPUs, the quota and the queue; a Job at exactly the quota is admitted;
    and the StrictFIFO hazard is gone: an 8-pod Job submitted after the refusal is bound at once (unrefused, the
    large Job would hold the head of research's P3 level and the 8-pod Job would wait behind it for ever)."""
    api = k8s_cluster.api
    research = kueue["research"]
    ns = research.namespace
    over = research.gpus // 8 + 1
    refused: KubeApiError | None = None
    try:
        jobs("too-big", "research", over, "p3")
    except KubeApiError as exc:
        refused = exc
    started = time.monotonic()
    jobs("after-big", "research", 8, "p3")
    try:
        wait_placed(k8s_cluster, ns, "after-big", 8, timeout=20)
        waited = None
    except K8sHarnessError:
        waited = condition(workload_of(api, ns, "after-big"), "QuotaReserved")
    seconds = time.monotonic() - started
    assert refused is not None and waited is None, (
        f"the {over}-pod Job was {'refused' if refused else 'accepted'}; the 8-pod Job after it "
        + (f"was not bound in 20 s (QuotaReserved: {waited})" if waited is not None else "was bound"))
    print(f"8-pod Job bound {seconds:.1f} s after the over-quota Job was refused")
    message = refused.message
    for part in ("Job too-big", f"asks for {over * 8} nvidia.com/gpu", f"more than the {research.gpus} GPUs",
                 f"LocalQueue {ns}/{research.name}"):
        assert part in message, f"{part!r} not in the refusal: {message}"
    assert refused.status == 403 and refused.reason == "Forbidden", refused
    api.request("DELETE", api.path("batch/v1", "Job", "after-big", ns), {"propagationPolicy": "Background"})
    k8s_cluster.wait_for(lambda: workload_of(api, ns, "after-big") is None, timeout=60,
                         what="after-big's workload gone")
    jobs("at-quota", "research", research.gpus // 8, "p3")
    wait_placed(k8s_cluster, ns, "at-quota", research.gpus // 8)


def test_the_quota_policy_counts_gpus_as_kueue_does(k8s_cluster, kueue):
    """Dry-run creates (nothing stored) of Jobs bound for research's queue: what the policy counts, against the
    quota from the plan. Jobs not bound for the tenant's LocalQueue are not its business."""
    api = k8s_cluster.api
    research = kueue["research"]
    ns, q, quota = research.namespace, research.name, research.gpus
    pods = quota // 8
    refused = {
        "requests and limits": gpu_job(ns, q, pods + 1),
        "limits only": gpu_job(ns, q, pods + 1, requests=None),
        "an init container larger than the pod": gpu_job(ns, q, pods, init=9),
        "a sidecar's GPUs added": gpu_job(ns, q, pods, sidecar=1),
        "min-parallelism over the quota": gpu_job(ns, q, pods + 2, min_parallelism=pods + 1),
    }
    admitted = {
        "exactly the quota": gpu_job(ns, q, pods),
        "completions cap the pods": gpu_job(ns, q, pods + 1, completions=pods),
        "min-parallelism within the quota (partial admission)": gpu_job(ns, q, pods + 1, min_parallelism=pods),
        "an init container within the pod's GPUs": gpu_job(ns, q, pods, init=8),
        "no queue label (Kueue ignores it)": {**gpu_job(ns, q, pods + 1), "metadata": {"name": "variant",
                                                                                       "namespace": ns}},
        "another LocalQueue": gpu_job(ns, "not-the-tenants", pods + 1),
    }
    wrong = [what for what, obj in refused.items() if refusal(api, obj) is None]
    wrong += [f"{what}: {exc.message}" for what, obj in admitted.items() if (exc := refusal(api, obj)) is not None]
    assert wrong == [], wrong


def test_an_update_that_grows_a_job_past_the_quota_is_refused(k8s_cluster, kueue, jobs):
    """A running 8-pod Job with 65 completions (Kueue counts min(parallelism, completions) pods): raising its
    parallelism to 65 would ask for more than the quota, and is refused by the policy."""
    api = k8s_cluster.api
    research = kueue["research"]
    ns = research.namespace
    jobs("grows", "research", 8, "p3", completions=research.gpus // 8 + 1)
    wait_placed(k8s_cluster, ns, "grows", 8)
    path = api.path("batch/v1", "Job", "grows", ns)
    with pytest.raises(KubeApiError) as refused:
        api.request("PATCH", path, {"spec": {"parallelism": research.gpus // 8 + 1}},
                    content_type="application/merge-patch+json")
    assert f"more than the {research.gpus} GPUs" in refused.value.message, refused.value
