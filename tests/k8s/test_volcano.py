"""Volcano v1.14.1 schedules the plan's objects on the live control plane: the scheduler configuration
(volcano_config.py), the tenant Queues (queues.py), the PriorityClasses P0-P5 (priority.py) and the HyperNodes
(scheduling.py) the Pulumi program generates for dgx-h100-4su, whose 127 GPU nodes are KWOK nodes (tenant research:
SUs 1-2, 64 nodes, 512 GPUs). Jobs are Volcano Jobs (batch.volcano.sh) of 8-GPU pods; vc-controller-manager makes
their PodGroup and pods, vc-scheduler binds them. Pods never run a container (KWOK).

A tenant's Queue caps its GPUs (capability) and, with the program's node groups, pins its pods to its nodes: the
Queue requires the node group named after the tenant, the tenant's nodes carry `volcano.sh/nodegroup-name=<tenant>`
(the program's node labels, applied here as its NodePatch would) and the scheduler runs the nodegroup plugin. The
tests of gang, priority and topology still give their Jobs the tenant's nodeSelector; the tenant tests give only
the toleration (the plugin does not handle taints).

RAILFORGE_K8S_VOLCANO_MUTATE=<name> turns one behaviour off; the tests of that behaviour then fail:
    no-gang        Jobs ask minAvailable 1 (no gang: what fits is bound)
    no-preemption  the scheduler configuration without the preempt action
    no-topology    Jobs without networkTopology (no HyperNode constraint)
    enqueue-gate   proportion votes on enqueue again (the configuration before the P0 test found it blocked P0)
    no-queue-affinity  tenant Queues without their node group affinity (the plugin and node labels stay)
    no-capability  tenant Queues without capability (weight alone shares the GPUs)
"""

from __future__ import annotations

import os
import time
from collections import Counter

import pytest
from railforge_k8s import kueue_objects, names
from railforge_k8s.node_labels import topology_labels
from railforge_k8s.plan_input import load_plan
from railforge_k8s.priority import priority_levels
from railforge_k8s.queues import tenant_queues, volcano_queue_spec
from railforge_k8s.scheduling import hypernode_specs
from railforge_k8s.versions import VOLCANO_QUEUE_API
from railforge_k8s.volcano_config import scheduler_configuration

from tests.helpers.k8s_cluster import KubeApiError
from tests.helpers.k8s_nodes import GPU, node_labels
from tests.helpers.k8s_volcano import start_volcano
from tests.k8s.conftest import K8S_EXAMPLE, require_k8s_toolchain

MUTATE = "RAILFORGE_K8S_VOLCANO_MUTATE"
MUTATIONS = ("no-gang", "no-preemption", "no-topology", "enqueue-gate", "no-queue-affinity", "no-capability")
JOB_API = "batch.volcano.sh/v1alpha1"
PODGROUP_API = "scheduling.volcano.sh/v1beta1"
HYPERNODE_API = "topology.volcano.sh/v1alpha1"
PAUSE = "registry.invalid/railforge/pause:never-pulled"
SU = names.LEAF_GROUP_LABEL


def mutation() -> str | None:
    value = os.environ.get(MUTATE) or None
    if value is not None and value not in MUTATIONS:
        raise pytest.UsageError(f"{MUTATE}={value!r}: expected one of {', '.join(MUTATIONS)}")
    return value


def conf_text() -> str:
    import yaml

    conf = scheduler_configuration()
    if mutation() == "no-preemption":
        conf["actions"] = ", ".join(a.strip() for a in conf["actions"].split(",") if a.strip() != "preempt")
    if mutation() == "enqueue-gate":
        for tier in conf["tiers"]:
            for plugin in tier["plugins"]:
                plugin.pop("enableJobEnqueued", None)
    return yaml.safe_dump(conf, sort_keys=False)


def hypernode(name: str, tier: int, tier_name: str, members: list[dict]) -> dict:
    return {"apiVersion": HYPERNODE_API, "kind": "HyperNode", "metadata": {"name": name},
            "spec": {"tier": tier, "tierName": tier_name, "members": members}}


@pytest.fixture(scope="module")
def volcano(k8s_cluster, k8s_nodes, built):
    """Volcano running with the program's objects for the plan applied and every tenant Queue open."""
    require_k8s_toolchain("vc-scheduler", "vc-controller-manager")
    api = k8s_cluster.api
    plan = load_plan(built(K8S_EXAMPLE) / "plan.json")
    start_volcano(k8s_cluster, conf_text())
    queues = tenant_queues(plan.tenants, plan.gpus_per_node)
    groups = tenant_node_groups(plan)
    for node, labels in groups.items():
        api.patch("v1", "Node", node, {"metadata": {"labels": labels}})
    objects = [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": lv.name},
                "value": lv.value, "preemptionPolicy": lv.preemption_policy, "globalDefault": False,
                "description": lv.description} for lv in priority_levels(plan.qos)]
    objects += [hypernode(s.name, s.tier, s.tier_name, list(s.members))
                for s in hypernode_specs(plan.cluster, plan.nodes)]
    for queue in queues:
        spec = volcano_queue_spec(queue, node_group=mutation() != "no-queue-affinity")
        if mutation() == "no-capability":
            del spec["capability"]
        objects += [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": queue.namespace}},
            {"apiVersion": VOLCANO_QUEUE_API, "kind": "Queue", "metadata": {"name": queue.name},
             "spec": spec},
        ]
    for obj in objects:
        api.apply(obj)

    def open_() -> bool:
        return all(api.get(VOLCANO_QUEUE_API, "Queue", q.name).get("status", {}).get("state") == "Open"
                   for q in queues)

    k8s_cluster.wait_for(open_, timeout=60, what="tenant Queues Open")
    yield {"queues": {q.tenant: q for q in queues}, "plan": plan}
    for obj in reversed(objects):
        if obj["kind"] != "Namespace":
            _delete(api, obj["apiVersion"], obj["kind"], obj["metadata"]["name"])
    for node in groups:
        api.patch("v1", "Node", node, {"metadata": {"labels": {names.VOLCANO_NODE_GROUP_LABEL: None}}})


def tenant_node_groups(plan) -> dict[str, dict[str, str]]:
    """node -> the labels the program's NodePatch gives a tenant's node with Volcano node groups on."""
    of = kueue_objects.tenant_of(plan.tenants)
    return {node.name: topology_labels(plan.cluster, node, of[node.name], volcano_node_group=True)
            for node in plan.nodes if node.name in of}


def _delete(api, api_version: str, kind: str, name: str, namespace: str | None = None) -> None:
    try:
        api.request("DELETE", api.path(api_version, kind, name, namespace), {"propagationPolicy": "Background"})
    except KubeApiError as exc:
        if exc.status != 404:  # a test may have deleted it already
            raise


@pytest.fixture
def jobs(k8s_cluster, volcano):
    """Submit Volcano Jobs to a tenant's Queue; every Job this test made is deleted (and its pods gone) at its end."""
    api = k8s_cluster.api
    made: list[tuple[str, str]] = []

    def submit(name: str, tenant: str, pods: int, priority: str, topology: bool = False,
               node_selector: dict[str, str] | None = None, tenant_selector: bool = True,
               min_available: int | None = None) -> dict:
        queue = volcano["queues"][tenant]
        obj = vcjob(name, queue.namespace, queue.name, tenant, pods, f"railforge-{priority}", topology, node_selector,
                    tenant_selector, min_available)
        api.create(obj)
        made.append((queue.namespace, name))
        return obj

    yield submit
    for ns, name in made:
        _delete(api, JOB_API, "Job", name, ns)
    for ns, name in made:
        k8s_cluster.wait_for(lambda ns=ns, name=name: not pods_of(api, ns, name, bound_only=False), timeout=90,
                             what=f"pods of {name} gone")


def vcjob(name: str, ns: str, queue: str, tenant: str, pods: int, priority: str, topology: bool,
          node_selector: dict[str, str] | None, tenant_selector: bool = True, min_available: int | None = None) -> dict:
    """`tenant_selector=False`: the pods name no node at all (the Queue's node group alone pins them)."""
    broken = mutation()
    gang = 1 if broken == "no-gang" else min_available or pods
    selector = ({names.TENANT_LABEL: tenant} if tenant_selector else {}) | (node_selector or {})
    resources = {GPU: "8", "cpu": "8", "memory": "32Gi", "rdma/rail0": "1"}
    spec: dict = {
        "schedulerName": "volcano", "queue": queue, "minAvailable": gang, "priorityClassName": priority,
        "maxRetry": 3,
        # a training gang that loses a pod to preemption restarts whole (frees all its nodes) rather than keep
        # the rest of its nodes while below minAvailable (docs/kubernetes.md)
        "policies": [{"event": "PodEvicted", "action": "RestartJob"}],
        "tasks": [{"name": "worker", "replicas": pods, "minAvailable": gang, "template": {"spec": {
            "restartPolicy": "Never", "automountServiceAccountToken": False, "priorityClassName": priority,
            **({"nodeSelector": selector} if selector else {}),
            "tolerations": [kueue_objects.tenant_toleration(tenant)],
            "containers": [{"name": "train", "image": PAUSE,
                            "resources": {"requests": resources, "limits": resources}}],
        }}}],
    }
    if topology and broken != "no-topology":
        spec["networkTopology"] = {"mode": "hard", "highestTierAllowed": 1}
    return {"apiVersion": JOB_API, "kind": "Job", "metadata": {"name": name, "namespace": ns}, "spec": spec}


def pods_of(api, ns: str, job_name: str, bound_only: bool = True) -> list[dict]:
    """The Job's pods (bound to a node and not being deleted, unless `bound_only` is off)."""
    pods = api.list("v1", "Pod", ns, label_selector=f"volcano.sh/job-name={job_name}")
    if not bound_only:
        return pods
    return [p for p in pods if p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp")]


def wait_placed(cluster, ns: str, name: str, count: int, timeout: float = 90) -> list[dict]:
    api = cluster.api
    return cluster.wait_for(lambda: (p := pods_of(api, ns, name)) and len(p) == count and p, timeout=timeout,
                            what=f"{count} pods of {name} bound to nodes")


def settle(seconds: float = 8) -> None:
    """Time for Volcano to act on what is pending (vc-scheduler runs a cycle every second)."""
    time.sleep(seconds)


def research_nodes_by_su(api) -> dict[str, list[str]]:
    by_su: dict[str, list[str]] = {}
    for node, lab in sorted(node_labels(api).items()):
        if lab.get(names.TENANT_LABEL) == "research":
            by_su.setdefault(lab[SU], []).append(node)
    return by_su


# ---- gang ---------------------------------------------------------------------------------------------------------

def test_a_gang_is_bound_whole_or_not_at_all(k8s_cluster, volcano, jobs):
    """research (64 nodes) with 56 busy: a 16-pod Job (minAvailable 16) finds 8 free nodes and gets none of them;
    once the busy Job ends it is bound whole."""
    api = k8s_cluster.api
    ns = volcano["queues"]["research"].namespace
    jobs("busy-56", "research", 56, "p3")
    wait_placed(k8s_cluster, ns, "busy-56", 56)
    jobs("gang-16", "research", 16, "p3")
    settle()
    bound = pods_of(api, ns, "gang-16")
    assert bound == [], f"gang-16 half-placed: {len(bound)} of 16 pods bound"
    _delete(api, JOB_API, "Job", "busy-56", ns)
    wait_placed(k8s_cluster, ns, "gang-16", 16)


def test_two_gangs_that_do_not_both_fit_never_deadlock_half_placed(k8s_cluster, volcano, jobs):
    """Two 40-pod Jobs (320 GPUs each, research holds 512) submitted together: one is bound whole, the other gets
    no pod at all (a half-placed pair would hold 64 nodes and never run either)."""
    api = k8s_cluster.api
    ns = volcano["queues"]["research"].namespace
    jobs("gang-a", "research", 40, "p3")
    jobs("gang-b", "research", 40, "p3")
    k8s_cluster.wait_for(lambda: len(pods_of(api, ns, "gang-a")) + len(pods_of(api, ns, "gang-b")) >= 40,
                         timeout=90, what="40 pods of gang-a or gang-b bound")
    settle()
    counts = sorted([len(pods_of(api, ns, "gang-a")), len(pods_of(api, ns, "gang-b"))])
    assert counts == [0, 40], f"two gangs of 40 on 64 nodes bound as {counts}"


# ---- priority -----------------------------------------------------------------------------------------------------

def test_p0_preempts_p5_which_restarts_whole_and_is_bound_again(k8s_cluster, volcano, jobs):
    """research full of P5 work (64 pods, 512 GPUs); an 8-pod P0 Job is bound within seconds, the P5 gang loses
    pods to it and restarts whole (its PodEvicted policy), holding no node while it waits; once the P0 Job is gone
    all 64 P5 pods are bound again."""
    api = k8s_cluster.api
    ns = volcano["queues"]["research"].namespace
    jobs("low-p5", "research", 64, "p5")
    before = {p["metadata"]["uid"] for p in wait_placed(k8s_cluster, ns, "low-p5", 64)}
    started = time.monotonic()
    jobs("urgent-p0", "research", 8, "p0")
    wait_placed(k8s_cluster, ns, "urgent-p0", 8, timeout=60)
    seconds = time.monotonic() - started
    print(f"P0 Job of 8 pods bound {seconds:.1f} s after submission")
    assert seconds < 30
    k8s_cluster.wait_for(lambda: not pods_of(api, ns, "low-p5"), timeout=30, what="the P5 gang's nodes freed")
    _delete(api, JOB_API, "Job", "urgent-p0", ns)
    again = {p["metadata"]["uid"] for p in wait_placed(k8s_cluster, ns, "low-p5", 64)}
    assert not again & before, "the P5 gang was bound again with pods that had never been evicted"


def test_p3_does_not_preempt_p3(k8s_cluster, volcano, jobs):
    api = k8s_cluster.api
    ns = volcano["queues"]["research"].namespace
    jobs("first-p3", "research", 64, "p3")
    before = {p["metadata"]["uid"] for p in wait_placed(k8s_cluster, ns, "first-p3", 64)}
    jobs("second-p3", "research", 8, "p3")
    settle(12)
    assert {p["metadata"]["uid"] for p in pods_of(api, ns, "first-p3")} == before
    assert pods_of(api, ns, "second-p3") == []


# ---- topology -----------------------------------------------------------------------------------------------------

def _spread_busy(k8s_cluster, jobs, ns: str) -> tuple[str, str, list[str]]:
    """Pin a 20-pod Job to 16 nodes of research's first SU and 4 of its second: 16 free there, 28 here."""
    api = k8s_cluster.api
    by_su = research_nodes_by_su(api)
    first, second = sorted(by_su)
    pinned = by_su[first][:16] + by_su[second][:4]
    for node in pinned:
        api.patch("v1", "Node", node, {"metadata": {"labels": {BUSY: "yes"}}})
    jobs("spread-busy", "research", 20, "p3", node_selector={BUSY: "yes"})
    occupied = wait_placed(k8s_cluster, ns, "spread-busy", 20)
    assert sorted(p["spec"]["nodeName"] for p in occupied) == sorted(pinned)
    return first, second, pinned


BUSY = "railforge.io/test-busy"


def test_a_job_that_fits_one_su_lands_in_one_su(k8s_cluster, volcano, jobs):
    """Free nodes spread over research's two SUs (16 and 28): a 24-pod Job with networkTopology hard,
    highestTierAllowed 1 (one tier-1 HyperNode = one SU) lands whole in the second SU, the only one it fits."""
    api = k8s_cluster.api
    ns = volcano["queues"]["research"].namespace
    pinned: list[str] = []
    try:
        _, second, pinned = _spread_busy(k8s_cluster, jobs, ns)
        jobs("fits-one-su", "research", 24, "p3", topology=True)
        pods = wait_placed(k8s_cluster, ns, "fits-one-su", 24)
        labels = node_labels(api)
        sus = Counter(labels[p["spec"]["nodeName"]][SU] for p in pods)
        assert sus == {second: 24}, f"24 pods that fit only {second} whole landed in {dict(sus)}"
    finally:
        for node in pinned:
            api.patch("v1", "Node", node, {"metadata": {"labels": {BUSY: None}}})


def test_a_wrong_hypernode_set_changes_the_placement(k8s_cluster, volcano, jobs):
    """The same Job under tier-1 HyperNodes whose members alternate across the real SUs (w0: every other research
    node) lands in one wrong HyperNode, so across both real SUs: Volcano places by the HyperNodes it is given, so
    the plan's HyperNodes are what make one SU."""
    api = k8s_cluster.api
    ns = volcano["queues"]["research"].namespace
    plan = volcano["plan"]
    wrong = "railforge.io/test-wrong-su"
    research = sorted(n for ns_ in research_nodes_by_su(api).values() for n in ns_)
    real = [hypernode(s.name, s.tier, s.tier_name, list(s.members)) for s in hypernode_specs(plan.cluster, plan.nodes)]
    tiers = [h for h in real if h["spec"]["tier"] > 1]
    fake = [hypernode(f"rfk8s-wrong-{i}", 1, "leaf-group",
                      [{"type": "Node", "selector": {"labelMatch": {"matchLabels": {wrong: f"w{i}"}}}}])
            for i in range(2)]
    for i, node in enumerate(research):
        api.patch("v1", "Node", node, {"metadata": {"labels": {wrong: f"w{i % 2}"}}})
    try:
        for h in tiers + [h for h in real if h["spec"]["tier"] == 1]:
            _delete(api, HYPERNODE_API, "HyperNode", h["metadata"]["name"])
        for h in fake:
            api.apply(h)
        settle(3)
        jobs("wrong-su", "research", 24, "p3", topology=True)
        pods = wait_placed(k8s_cluster, ns, "wrong-su", 24)
        labels = node_labels(api)
        assert len({labels[p["spec"]["nodeName"]][wrong] for p in pods}) == 1
        sus = Counter(labels[p["spec"]["nodeName"]][SU] for p in pods)
        assert len(sus) == 2, f"under the wrong HyperNodes the Job still landed in one SU: {dict(sus)}"
    finally:
        for h in fake:
            _delete(api, HYPERNODE_API, "HyperNode", h["metadata"]["name"])
        k8s_cluster.wait_for(lambda: all(api.find(HYPERNODE_API, "HyperNode", h["metadata"]["name"]) is None
                                         for h in real + fake), timeout=30, what="HyperNodes deleted")
        for h in real:
            api.apply(h)
        for node in research:
            api.patch("v1", "Node", node, {"metadata": {"labels": {wrong: None}}})


# ---- tenants: node groups and capability -------------------------------------------------------------------------

def tenant_members(plan) -> dict[str, set[str]]:
    return {t.name: set(t.nodes) for t in plan.tenants}


def test_a_tenants_jobs_land_only_on_its_own_nodes(k8s_cluster, volcano, jobs):
    """A 16-pod research Job and an 8-pod production Job with only their tenant's toleration, no nodeSelector: every
    pod binds to a node of its own tenant (plan.json members), never to one of the cluster's nodes of no tenant
    (untainted, free) nor the other tenant's."""
    members = tenant_members(volcano["plan"])
    for tenant, pods in (("research", 16), ("production", 8)):
        jobs(f"pinned-{tenant}", tenant, pods, "p3", tenant_selector=False)
    for tenant, pods in (("research", 16), ("production", 8)):
        ns = volcano["queues"][tenant].namespace
        bound = wait_placed(k8s_cluster, ns, f"pinned-{tenant}", pods)
        outside = sorted(p["spec"]["nodeName"] for p in bound if p["spec"]["nodeName"] not in members[tenant])
        assert not [p for p in bound if p["spec"].get("nodeSelector") or p["spec"].get("affinity")]
        assert outside == [], f"{tenant} pods bound outside its {len(members[tenant])} nodes: {outside}"


def test_a_job_over_the_capability_gets_the_capability(k8s_cluster, volcano, jobs):
    """research's Queue caps it at its 512 GPUs. Four nodes of no tenant join research's node group (labelled and
    tainted as the stack and the harness do a research node) while the Queue is unchanged, so 68 nodes could take
    research pods: a 72-pod Job of gangs of 8 gets 64 pods (512 GPUs), all on research's nodes, never 68."""
    api = k8s_cluster.api
    plan = volcano["plan"]
    queue = volcano["queues"]["research"]
    members = tenant_members(plan)
    spare = sorted(n for n, lab in node_labels(api).items()
                   if names.TENANT_LABEL not in lab and lab.get(names.CLUSTER_LABEL) == plan.cluster)[:4]
    assert len(spare) == 4
    taint = {k: v for k, v in kueue_objects.tenant_toleration("research").items() if k != "operator"}
    join = {names.TENANT_LABEL: "research", names.VOLCANO_NODE_GROUP_LABEL: "research"}
    try:
        for node in spare:
            api.patch("v1", "Node", node, {"metadata": {"labels": join}, "spec": {"taints": [taint]}})
        jobs("over-cap", "research", 72, "p3", tenant_selector=False, min_available=8)
        per_pod = 8
        cap = queue.gpus // per_pod
        k8s_cluster.wait_for(lambda: len(pods_of(api, queue.namespace, "over-cap")) >= cap, timeout=90,
                             what=f"{cap} pods of over-cap bound")
        settle()
        bound = pods_of(api, queue.namespace, "over-cap")
        assert len(bound) * per_pod == queue.gpus, f"{len(bound)} pods x {per_pod} GPUs bound, capability {queue.gpus}"
        assert {p["spec"]["nodeName"] for p in bound} <= members["research"] | set(spare)
    finally:
        for node in spare:
            api.patch("v1", "Node", node, {"metadata": {"labels": {k: None for k in join}}, "spec": {"taints": None}})
