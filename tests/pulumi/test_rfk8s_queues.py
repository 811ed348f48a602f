"""Volcano scheduler configuration, per-tenant Volcano/Kueue queues and the P0-P5 priority levels the program
emits: each object against the pinned CRD schema (Volcano v1.14.1, Kueue v0.19.2), a broken copy of each rejected
by the same validation, and their meaning checked against the plan (tenant GPUs, Slurm QOS) computed here."""

from __future__ import annotations

import copy
import json
from fractions import Fraction
from math import gcd

import jsonschema
import pytest
import rfk8s_cel as cel
import rfk8s_plans as plans
import rfk8s_scheduling_checks as checks
import rfk8s_validate as v
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from railforge_k8s import plan_input
from railforge_k8s.config import ConfigError, config_from_mapping
from railforge_k8s.plan_input import PlanError, QosLevel, TenantInput
from railforge_k8s.priority import priority_levels
from railforge_k8s.queues import VOLCANO_MAX_WEIGHT, tenant_queues
from rfk8s_harness import run_program

from railforge.planner.slurm import qos_levels
from railforge.spec.slurm import DEFAULT_QOS
from tests.conftest import ROOT, run_cli

QUEUE = "kubernetes:scheduling.volcano.sh/v1beta1:Queue"
CLUSTER_QUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue"
LOCAL_QUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue"
WPC = "kubernetes:kueue.x-k8s.io/v1beta2:WorkloadPriorityClass"
FLAVOR = "kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor"
PRIORITY_CLASS = "kubernetes:scheduling.k8s.io/v1:PriorityClass"
CONFIGMAP = "kubernetes:core/v1:ConfigMap"
NAMESPACE = "kubernetes:core/v1:Namespace"
POLICY = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
BINDING = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"
SCHEDULING_GROUPS = ("scheduling.volcano.sh/", "topology.volcano.sh/", "kueue.x-k8s.io/")
CUSTOM_QOS = ["crit", "high", "norm", "exp", "dev", "scav"]


@pytest.fixture(scope="module")
def plan_files(built, tmp_path_factory):
    """name -> plan.json: the IB example (tenants, no slurm:), the Slurm lab spec (tenants and slurm.qos) and the
    lab plan with the QOS renamed as a spec's `slurm.qos` would name them (levels from railforge's Slurm planner)."""
    out = tmp_path_factory.mktemp("k8s-sched")
    run_cli("build", str(ROOT / "tests" / "specs" / "slurm-lab.yaml"), "--out", str(out / "slurm-lab"))
    renamed = plans.load(out / "slurm-lab" / "plan.json")
    renamed["slurm"]["qos"] = [
        {"name": q.name, "priority": q.priority, "preempts": q.preempts} for q in qos_levels(CUSTOM_QOS)
    ]
    (out / "renamed.json").write_text(json.dumps(renamed))
    return {
        "dgx-h100-4su": built("dgx-h100-4su") / "plan.json",
        "slurm-lab": out / "slurm-lab" / "plan.json",
        "renamed-qos": out / "renamed.json",
    }


@pytest.fixture(scope="module")
def deployed(plan_files):
    cache = {}

    def run(name: str, **config):
        key = (name, json.dumps(config, sort_keys=True))
        if key not in cache:
            path = plan_files[name]
            cache[key] = (plans.load(path), run_program({"plan": str(path), "rdmaMode": "ipoib", **config}))
        return cache[key]

    return run


def tenant_gpus(plan: dict) -> dict[str, int]:
    """Each tenant's GPUs from plan.json alone: its members that are GPU nodes x the cluster's GPUs per node."""
    per_node = plan["cluster"]["gpus"] // plan["cluster"]["nodes"]
    gpu_nodes = {d["name"] for d in plans.nodes(plan)}
    return {t["name"]: per_node * len(set(t["members"]) & gpu_nodes) for t in plan["tenants"]}


def conf_text(rec) -> str:
    (configmap,) = rec.of_type(CONFIGMAP)
    return configmap.inputs["data"][checks.volcano_facts()["configmap"]["key"]]


# ---- every object against the pinned CRD --------------------------------------------------------------


@pytest.mark.parametrize("name", ["dgx-h100-4su", "slurm-lab"])
def test_scheduling_objects_validate_against_pinned_crds(deployed, name):
    plan, rec = deployed(name)
    objects = [r for r in rec.custom() if r.inputs.get("apiVersion", "").startswith(SCHEDULING_GROUPS)]
    for reg in objects:
        assert (reg.inputs["apiVersion"], reg.inputs["kind"]) in v.crd_schemas(), reg.type
        v.validate_registration(reg.type, reg.custom, reg.inputs)
    kinds = sorted(r.inputs["kind"] for r in objects)
    tenants = len(plan["tenants"])
    assert kinds.count("Queue") == kinds.count("ClusterQueue") == kinds.count("LocalQueue") == tenants >= 2
    assert kinds.count("WorkloadPriorityClass") == 6
    for reg in rec.of_type(CONFIGMAP) + rec.of_type(PRIORITY_CLASS) + rec.of_type(NAMESPACE):
        v.validate_registration(reg.type, reg.custom, reg.inputs)
    checks.validate_volcano_conf(conf_text(rec))


@pytest.fixture(scope="module")
def good(deployed):
    _, rec = deployed("dgx-h100-4su")
    return {kind: copy.deepcopy(rec.of_type(kind)[0].inputs) for kind in (QUEUE, CLUSTER_QUEUE, LOCAL_QUEUE, WPC)}


def _set(obj: dict, path: str, value) -> dict:
    obj = copy.deepcopy(obj)
    *parents, last = path.split(".")
    node = obj
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    node[last] = value
    return obj


BROKEN = [
    (QUEUE, "spec.weight", "10", "is not of type 'integer'"),
    (QUEUE, "spec.weight", VOLCANO_MAX_WEIGHT + 1, "is greater than the maximum"),
    (QUEUE, "spec.capability", {"nvidia.com/gpu": "many"}, "does not match"),
    (QUEUE, "spec.reclaimable", "yes", "is not of type 'boolean'"),
    (CLUSTER_QUEUE, "spec.preemption.withinClusterQueue", "ByPriority", "is not one of"),
    (CLUSTER_QUEUE, "spec.resourceGroups.0.flavors.0.resources.0.nominalQuota", "lots", "does not match"),
    (CLUSTER_QUEUE, "spec.cohort", "all", "Additional properties"),  # v1beta1's field name, gone in v1beta2
    (LOCAL_QUEUE, "spec.clusterqueue", "research", "Additional properties"),
    (WPC, "value", "1000000", "is not of type 'integer'"),
    (WPC, "spec", {"value": 1}, "Additional properties"),
]


@pytest.mark.parametrize(("kind", "path", "value", "message"), BROKEN, ids=[f"{b[0].rsplit(':')[-1]}-{b[1]}"
                                                                          for b in BROKEN])
def test_broken_object_is_rejected(good, kind, path, value, message):
    v.validate_object(good[kind])
    with pytest.raises(jsonschema.ValidationError, match=message):
        v.validate_object(_set(good[kind], path, value))


CEL_BROKEN = [
    ("spec.resourceGroups.0.coveredResources", ["nvidia.com/gpu", "cpu"], "size\\(x.resources\\) =="),
    ("spec.resourceGroups.0.flavors.0.resources.0.borrowingLimit", 8, "borrowingLimit must be nil"),
    ("spec.preemption.borrowWithinCohort", {"policy": "LowerPriority"}, "reclaimWithinCohort"),
]


@pytest.mark.parametrize(("path", "value", "message"), CEL_BROKEN, ids=[b[0].rsplit(".")[-1] for b in CEL_BROKEN])
def test_cluster_queue_breaking_a_cel_rule_is_rejected(good, path, value, message):
    """Kueue's CEL rules (x-kubernetes-validations), which the API server evaluates and jsonschema cannot."""
    schema = v.crd_schemas()[("kueue.x-k8s.io/v1beta2", "ClusterQueue")]
    assert cel.check_cel_rules(schema, good[CLUSTER_QUEUE]) >= 2
    broken = _set(good[CLUSTER_QUEUE], path, value)
    jsonschema.Draft7Validator(schema).validate(broken)
    with pytest.raises(cel.CelRuleFailed, match=message):
        v.validate_object(broken)


# ---- priority levels = the Slurm QOS ------------------------------------------------------------------


def _levels(rec):
    pcs = [r.inputs for r in rec.of_type(PRIORITY_CLASS)]
    wpcs = [r.inputs for r in rec.of_type(WPC)]
    return pcs, wpcs


@pytest.mark.parametrize("name", ["dgx-h100-4su", "slurm-lab", "renamed-qos"])
def test_priority_levels_are_the_slurm_qos(deployed, name):
    plan, rec = deployed(name)
    pcs, wpcs = _levels(rec)
    # without slurm:, the levels Slurm would get from the spec's default QOS names
    qos = plan.get("slurm", {}).get("qos") or [
        {"name": q.name, "preempts": q.preempts} for q in qos_levels(list(DEFAULT_QOS))
    ]
    checks.check_priority_levels(pcs, wpcs, qos)
    values = {pc["metadata"]["name"]: pc["value"] for pc in pcs}
    names = [f"railforge-{q['name']}" for q in qos]
    assert [values[n] for n in names] == sorted(values.values(), reverse=True)
    assert len(set(values.values())) == 6
    if name == "renamed-qos":
        assert sorted(values) == sorted(f"railforge-{n}" for n in CUSTOM_QOS)


def test_priority_check_rejects_unknown_or_inconsistent_levels(deployed):
    plan, rec = deployed("slurm-lab")
    pcs, wpcs = _levels(rec)
    qos = plan["slurm"]["qos"]
    unknown = copy.deepcopy(wpcs)
    unknown[0]["metadata"]["name"] = "railforge-p6"
    with pytest.raises(AssertionError, match=r"WorkloadPriorityClass \['railforge-p6'\]: not a level"):
        checks.check_priority_levels(pcs, unknown, qos)
    swapped = copy.deepcopy(pcs)
    swapped[0]["value"], swapped[1]["value"] = swapped[1]["value"], swapped[0]["value"]
    with pytest.raises(AssertionError, match="do not fall from P0 to P5"):
        checks.check_priority_levels(swapped, wpcs, qos)
    never = copy.deepcopy(pcs)
    never[2]["preemptionPolicy"] = "Never"
    with pytest.raises(AssertionError, match="preemptionPolicy Never"):
        checks.check_priority_levels(never, wpcs, qos)


def test_partial_preemption_cannot_be_said_in_kubernetes():
    slurm = tuple(QosLevel(q.name, tuple(q.preempts)) for q in qos_levels(list(DEFAULT_QOS)))
    assert slurm == plan_input.DEFAULT_QOS, "the stack's default levels are the Slurm planner's"
    levels = list(priority_levels(slurm))
    assert [lv.preemption_policy for lv in levels] == ["PreemptLowerPriority"] * 5 + ["Never"]
    partial = tuple(QosLevel(n, ("p5",) if n == "p0" else ()) for n in DEFAULT_QOS)
    with pytest.raises(PlanError, match=r"'p0' preempts \['p5'\].*every lower level"):
        priority_levels(partial)


# ---- tenants' queues ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["dgx-h100-4su", "slurm-lab"])
def test_tenant_quota_is_the_tenants_gpus(deployed, name):
    plan, rec = deployed(name)
    expected = tenant_gpus(plan)
    flavors = {r.inputs["metadata"]["name"]: r for r in rec.of_type(FLAVOR)}
    cqs = {r.inputs["metadata"]["name"]: r for r in rec.of_type(CLUSTER_QUEUE)}
    queues = {r.inputs["metadata"]["name"]: r.inputs["spec"] for r in rec.of_type(QUEUE)}
    assert set(cqs) == set(queues) == set(expected)
    members = {t["name"]: set(t["members"]) for t in plan["tenants"]}
    for tenant, gpus in expected.items():
        (group,) = cqs[tenant].inputs["spec"]["resourceGroups"]
        assert group["coveredResources"] == ["nvidia.com/gpu"]
        (entry,) = group["flavors"]
        assert entry["resources"] == [{"name": "nvidia.com/gpu", "nominalQuota": str(gpus)}]
        flavor = flavors[entry["name"]]
        selector = flavor.inputs["spec"]["nodeLabels"]
        assert selector == {"railforge.io/cluster": plan["cluster"]["name"], "railforge.io/tenant": tenant}
        assert flavor.inputs["spec"]["tolerations"] == [
            {"key": "railforge.io/tenant", "operator": "Equal", "value": tenant, "effect": "NoSchedule"}]
        labelled = {r.inputs["metadata"]["name"] for r in rec.of_type("kubernetes:core/v1:NodePatch")
                    if r.inputs["metadata"]["labels"].get("railforge.io/tenant") == tenant}
        assert labelled == members[tenant] & {d["name"] for d in plans.nodes(plan)}
        assert len(labelled) * (gpus // len(labelled)) == gpus
        assert cqs[tenant].inputs["spec"]["preemption"]["withinClusterQueue"] == "LowerPriority"
        assert flavor.urn in cqs[tenant].dependencies
        assert queues[tenant]["capability"] == {"nvidia.com/gpu": str(gpus)}
    weights = {t: Fraction(q["weight"]) for t, q in queues.items()}
    shares = {t: Fraction(g) for t, g in expected.items()}
    first = next(iter(expected))
    assert all(weights[t] / weights[first] == shares[t] / shares[first] for t in expected)
    assert all(q["weight"] == int(q["weight"]) for q in queues.values())
    assert gcd(*(int(q["weight"]) for q in queues.values())) == 1


def test_local_queue_per_tenant_namespace(deployed):
    plan, rec = deployed("dgx-h100-4su", tenantNamespaces={"research": "team-research"})
    namespaces = {r.inputs["metadata"]["name"]: r.urn for r in rec.of_type(NAMESPACE)}
    cqs = {r.inputs["metadata"]["name"]: r for r in rec.of_type(CLUSTER_QUEUE)}
    want = {"research": "team-research", "production": "production"}
    assert {t["name"] for t in plan["tenants"]} == set(want)
    for lq in rec.of_type(LOCAL_QUEUE):
        tenant = lq.inputs["spec"]["clusterQueue"]
        assert lq.inputs["metadata"]["namespace"] == want[tenant]
        assert namespaces[want[tenant]] in lq.dependencies and cqs[tenant].urn in lq.dependencies
        selector = cqs[tenant].inputs["spec"]["namespaceSelector"]
        assert selector == {"matchLabels": {"kubernetes.io/metadata.name": want[tenant]}}


# ---- Jobs larger than the tenant's quota refused at submission (quota_policy.py) -----------------------


def quota_job(queue: str, pods: int, gpus: int = 8, **extra) -> dict:
    res = {"nvidia.com/gpu": str(gpus)}
    spec = {"containers": [{"name": "train", "resources": {"requests": res, "limits": res}}], **extra}
    return {"metadata": {"name": "train-1", "namespace": "x", "labels": {"kueue.x-k8s.io/queue-name": queue}},
            "spec": {"parallelism": pods, "completions": pods, "template": {"spec": spec}}}


@pytest.mark.parametrize("name", ["dgx-h100-4su", "slurm-lab"])
def test_quota_policy_per_tenant_refuses_jobs_over_the_plans_quota(deployed, name):
    """One policy + Deny binding per tenant, matching the tenant's namespace and LocalQueue; evaluated with
    cel-python on Jobs one pod under, at and over the quota computed here from plan.json."""
    plan, rec = deployed(name)
    expected = tenant_gpus(plan)
    policies = {r.inputs["metadata"]["name"]: r for r in rec.of_type(POLICY)}
    bindings = {r.inputs["spec"]["policyName"]: r for r in rec.of_type(BINDING)}
    lqs = {lq.inputs["spec"]["clusterQueue"]: lq.inputs["metadata"] for lq in rec.of_type(LOCAL_QUEUE)}
    assert set(policies) == set(bindings) == {f"railforge-gpu-quota-{t}" for t in expected}
    for reg in [*policies.values(), *bindings.values()]:
        v.validate_registration(reg.type, reg.custom, reg.inputs)
    for tenant, gpus in expected.items():
        policy = policies[f"railforge-gpu-quota-{tenant}"]
        spec = policy.inputs["spec"]
        binding = bindings[policy.inputs["metadata"]["name"]]
        assert binding.inputs["spec"]["validationActions"] == ["Deny"] and policy.urn in binding.dependencies
        local = lqs[tenant]
        assert spec["matchConstraints"]["namespaceSelector"] == {
            "matchLabels": {"kubernetes.io/metadata.name": local["namespace"]}}
        assert spec["failurePolicy"] == "Fail"
        pods = gpus // 8
        assert cel.evaluate_policy(spec, quota_job(local["name"], pods)) is None
        assert cel.evaluate_policy(spec, quota_job(local["name"], pods - 1)) is None
        message = cel.evaluate_policy(spec, quota_job(local["name"], pods + 1))
        assert message is not None and message.startswith(f"Job train-1 asks for {(pods + 1) * 8} nvidia.com/gpu")
        assert f"more than the {gpus} GPUs of the quota of tenant {tenant}" in message
        assert f"LocalQueue {local['namespace']}/{local['name']}" in message
        assert cel.evaluate_policy(spec, quota_job("another-queue", pods + 1)) is None


def test_quota_policy_follows_tenant_namespaces(deployed):
    _, rec = deployed("dgx-h100-4su", tenantNamespaces={"research": "team-research"})
    (policy,) = [r for r in rec.of_type(POLICY) if r.inputs["metadata"]["name"] == "railforge-gpu-quota-research"]
    selector = policy.inputs["spec"]["matchConstraints"]["namespaceSelector"]
    assert selector == {"matchLabels": {"kubernetes.io/metadata.name": "team-research"}}
    namespaces = {r.inputs["metadata"]["name"]: r.urn for r in rec.of_type(NAMESPACE)}
    assert namespaces["team-research"] in policy.dependencies


POLICY_CASES = [
    # (what, the Job's change from 8-GPU pods in requests and limits, pods, refused at quota/8 pods per GPU count)
    ("limits only", {"requests": None}, 0, False),
    ("limits only, one pod over", {"requests": None}, 1, True),
    ("an init container of 9 GPUs", {"init": 9}, 0, True),
    ("an init container of 8 GPUs", {"init": 8}, 0, False),
    ("a sidecar of 1 GPU is added to the pod", {"sidecar": 1}, 0, True),
    ("completions cap the pods", {"completions": 0}, 1, False),
    ("min-parallelism within the quota", {"min": 0}, 2, False),
    ("min-parallelism over the quota", {"min": 1}, 2, True),
    ("min-parallelism not a number", {"min": "many"}, 1, True),
    ("no GPUs at all", {"requests": None, "limits": None}, 100, False),
]


@pytest.mark.parametrize(("what", "change", "extra", "refused"), POLICY_CASES, ids=[c[0] for c in POLICY_CASES])
def test_quota_policy_counts_gpus_as_kueue_does(deployed, what, change, extra, refused):
    plan, rec = deployed("dgx-h100-4su")
    quota = tenant_gpus(plan)["research"]
    spec = next(r for r in rec.of_type(POLICY)
                if r.inputs["metadata"]["name"] == "railforge-gpu-quota-research").inputs["spec"]
    pods = quota // 8
    job = quota_job("research", pods + extra)
    container = job["spec"]["template"]["spec"]["containers"][0]
    for key in ("requests", "limits"):
        if key in change and change[key] is None:
            del container["resources"][key]
    inits = []
    if "init" in change:
        inits.append({"name": "prepare", "resources": {"limits": {"nvidia.com/gpu": str(change["init"])}}})
    if "sidecar" in change:
        inits.append({"name": "side", "restartPolicy": "Always",
                      "resources": {"limits": {"nvidia.com/gpu": str(change["sidecar"])}}})
    if inits:
        job["spec"]["template"]["spec"]["initContainers"] = inits
    if "completions" in change:
        job["spec"]["completions"] = pods + change["completions"]
    if "min" in change:
        value = change["min"]
        job["metadata"]["annotations"] = {"kueue.x-k8s.io/job-min-parallelism":
                                          str(pods + value) if isinstance(value, int) else value}
    assert (cel.evaluate_policy(spec, job) is not None) is refused, what


def test_quota_policy_lets_an_update_that_does_not_grow_the_job_through(deployed):
    """A Job over the quota that exists already (made before the policy): Kueue's own updates of it (suspend,
    labels) keep working; growing it, or moving an over-quota Job into the queue, is refused."""
    plan, rec = deployed("dgx-h100-4su")
    pods = tenant_gpus(plan)["research"] // 8
    spec = next(r for r in rec.of_type(POLICY)
                if r.inputs["metadata"]["name"] == "railforge-gpu-quota-research").inputs["spec"]
    big = quota_job("research", pods + 1)
    assert cel.evaluate_policy(spec, big, old=big, operation="UPDATE") is None
    assert cel.evaluate_policy(spec, quota_job("research", pods + 2), old=big, operation="UPDATE") is not None
    assert cel.evaluate_policy(spec, big, old=quota_job("research", pods), operation="UPDATE") is not None
    assert cel.evaluate_policy(spec, big, old=quota_job("elsewhere", pods + 1), operation="UPDATE") is not None


@pytest.mark.parametrize("value", ["maybe", 1])
def test_quota_policy_switch_is_a_bool(value):
    with pytest.raises(ConfigError, match="kueueQuotaPolicy: expected true or false"):
        config_from_mapping({"plan": "p", "kueueQuotaPolicy": value})


@pytest.mark.parametrize("value", ["maybe", 1])
def test_volcano_node_groups_switch_is_a_bool(value):
    with pytest.raises(ConfigError, match="volcanoNodeGroups: expected true or false"):
        config_from_mapping({"plan": "p", "volcanoNodeGroups": value})


# ---- Volcano tenant pinning (nodegroup) ---------------------------------------------------------------

NODE_PATCH = "kubernetes:core/v1:NodePatch"


def node_groups(rec) -> dict[str, str]:
    """node -> the Volcano node group the stack labels it with (only labelled nodes)."""
    label = checks.volcano_facts()["nodegroup_label"]
    return {r.inputs["metadata"]["name"]: r.inputs["metadata"]["labels"][label]
            for r in rec.of_type(NODE_PATCH) if label in r.inputs["metadata"]["labels"]}


def nodegroup_plugins(rec) -> list[dict]:
    conf = checks.validate_volcano_conf(conf_text(rec))
    return [p for tier in conf["tiers"] for p in tier["plugins"] if p["name"] == "nodegroup"]


@pytest.mark.parametrize("name", ["dgx-h100-4su", "slurm-lab"])
def test_volcano_queue_requires_its_tenants_node_group(deployed, name):
    """Each tenant's Queue requires one node group, exactly the tenant's GPU nodes (plan.json members) carry it,
    no other node carries any, and the scheduler runs nodegroup non-strict (unlabelled nodes stay open to Queues
    that require no group)."""
    plan, rec = deployed(name)
    gpu_nodes = {d["name"] for d in plans.nodes(plan)}
    members = {t["name"]: set(t["members"]) & gpu_nodes for t in plan["tenants"]}
    queues = {r.inputs["metadata"]["name"]: r.inputs["spec"] for r in rec.of_type(QUEUE)}
    groups = node_groups(rec)
    assert set(groups) == set().union(*members.values()) <= gpu_nodes
    for tenant, nodes in members.items():
        required = queues[tenant]["affinity"]["nodeGroupAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        (group,) = required
        assert {n for n, g in groups.items() if g == group} == nodes
        assert set(queues[tenant]["affinity"]) == {"nodeGroupAffinity"}
    assert nodegroup_plugins(rec) == [{"name": "nodegroup", "arguments": {"strict": False}}]


def test_volcano_node_groups_switch_off(deployed):
    """volcanoNodeGroups: false (or no Volcano) leaves the Queues without affinity, the nodes without the group label
    and the scheduler without the plugin; the capability stays."""
    _, on = deployed("dgx-h100-4su")
    _, off = deployed("dgx-h100-4su", volcanoNodeGroups=False)
    _, kueue_only = deployed("dgx-h100-4su", volcano=False)
    for rec in (off, kueue_only):
        assert node_groups(rec) == {}
        assert all("affinity" not in r.inputs["spec"] for r in rec.of_type(QUEUE))
    assert nodegroup_plugins(off) == []
    want = {r.inputs["metadata"]["name"]: r.inputs["spec"]["capability"] for r in on.of_type(QUEUE)}
    assert {r.inputs["metadata"]["name"]: r.inputs["spec"]["capability"] for r in off.of_type(QUEUE)} == want
    assert node_groups(on)


# ---- Volcano scheduler configuration ------------------------------------------------------------------


def test_volcano_conf_uses_registered_names(deployed):
    _, rec = deployed("dgx-h100-4su")
    facts = checks.volcano_facts()
    (configmap,) = rec.of_type(CONFIGMAP)
    assert configmap.inputs["metadata"] == {"name": facts["configmap"]["name"], "namespace": "volcano-system"}
    conf = checks.validate_volcano_conf(conf_text(rec))
    assert checks.volcano_actions(conf) == ["enqueue", "allocate", "preempt", "backfill"]
    plugins = [p["name"] for tier in conf["tiers"] for p in tier["plugins"]]
    required = {"gang", "priority", "conformance", "drf", "proportion", "binpack", "network-topology-aware",
                "predicates", "nodeorder"}
    assert required <= set(plugins) <= set(facts["plugins"])
    assert set(facts["actions"]) >= set(checks.volcano_actions(conf))
    tier1 = [p["name"] for p in conf["tiers"][0]["plugins"]]
    assert {"gang", "priority"} <= set(tier1), "gang and priority decide before fair share and packing"
    voters = [p["name"] for tier in conf["tiers"] for p in tier["plugins"] if p.get("enableJobEnqueued", True)]
    assert "proportion" not in voters, "a full tenant's P0 Job would never be enqueued, so never preempt"


BROKEN_CONF = [
    ("actions", "enqueue, allocate, preemption", "actions \\['preemption'\\]"),
    ("plugin", "gang-scheduling", "is not one of"),
    ("option", "enablePreemptible", "Additional properties"),
    ("option-type", "enablePreemptable", "is not of type 'boolean'"),
    ("argument", "binpack.gpu", "argument 'binpack.gpu'"),
    ("hdrf", "enableHierarchy", "conflict"),
    ("bool-argument", "false", "only a YAML boolean"),
]


@pytest.mark.parametrize(("what", "value", "message"), BROKEN_CONF, ids=[b[0] for b in BROKEN_CONF])
def test_broken_volcano_conf_is_rejected(deployed, what, value, message):
    _, rec = deployed("dgx-h100-4su")
    conf = yaml.safe_load(conf_text(rec))
    drf = next(p for p in conf["tiers"][1]["plugins"] if p["name"] == "drf")
    binpack = next(p for p in conf["tiers"][1]["plugins"] if p["name"] == "binpack")
    if what == "actions":
        conf["actions"] = value
    elif what == "plugin":
        conf["tiers"][0]["plugins"][1]["name"] = value
    elif what == "option":
        drf[value] = False
    elif what == "option-type":
        drf[value] = "no"
    elif what == "argument":
        binpack["arguments"][value] = 1
    elif what == "bool-argument":
        next(p for p in conf["tiers"][1]["plugins"] if p["name"] == "nodegroup")["arguments"]["strict"] = value
    else:
        drf[value] = True
    with pytest.raises((AssertionError, jsonschema.ValidationError), match=message):
        checks.validate_volcano_conf(yaml.safe_dump(conf))


# ---- switches, determinism, errors --------------------------------------------------------------------


def test_switches(deployed):
    _, everything = deployed("dgx-h100-4su")
    _, no_conf = deployed("dgx-h100-4su", volcanoSchedulerConfig=False)
    _, no_queues = deployed("dgx-h100-4su", tenantQueues=False)
    _, volcano_only = deployed("dgx-h100-4su", kueue=False)
    types = lambda rec: {r.type for r in rec.custom()}  # noqa: E731
    _, no_policy = deployed("dgx-h100-4su", kueueQuotaPolicy=False)
    assert types(everything) - types(no_conf) == {CONFIGMAP}
    assert types(everything) - types(no_queues) == {QUEUE, CLUSTER_QUEUE, LOCAL_QUEUE, POLICY, BINDING}
    assert types(everything) - types(no_policy) == {POLICY, BINDING}
    assert {QUEUE, CONFIGMAP} <= types(volcano_only)
    assert not {CLUSTER_QUEUE, LOCAL_QUEUE, WPC, POLICY, BINDING} & types(volcano_only)


def test_same_plan_same_objects(plan_files):
    """Registration order follows Pulumi's async runtime; the objects themselves must be identical."""

    def objects():
        rec = run_program({"plan": str(plan_files["slurm-lab"]), "rdmaMode": "ipoib"})
        return json.dumps(sorted((r.type, r.name, r.inputs) for r in rec.custom()
                                 if r.type in (QUEUE, CLUSTER_QUEUE, LOCAL_QUEUE, WPC, CONFIGMAP, PRIORITY_CLASS)),
                          sort_keys=True)

    assert objects() == objects()


def test_roce_plan_without_tenants_gets_no_queues(built):
    rec = run_program({"plan": str(built("roce-a800-4nic") / "plan.json"), "rdmaMode": "host"})
    assert not rec.of_type(QUEUE) and not rec.of_type(CLUSTER_QUEUE)
    assert len(rec.of_type(WPC)) == 6


@pytest.mark.parametrize(("namespaces", "message"), [
    ({"nobody": "x"}, r"tenantNamespaces names tenants the plan does not have: \['nobody'\]"),
    ({"research": "Team_A"}, r"tenantNamespaces.research: 'Team_A' is not a namespace name"),
    ({"research": "shared", "production": "shared"}, "both get namespace 'shared'"),
    ({"research": "kube-system"}, "namespace 'kube-system' already exists or belongs to the stack"),
    ({"research": "network-operator"}, "namespace 'network-operator' already exists or belongs to the stack"),
])
def test_bad_tenant_namespaces_are_refused(namespaces, message):
    tenants = (TenantInput("research", ("a", "b")), TenantInput("production", ("c",)))
    with pytest.raises(PlanError, match=message):
        tenant_queues(tenants, 8, namespaces, frozenset({"network-operator"}))


def test_tenant_named_like_a_volcano_queue_is_refused():
    with pytest.raises(PlanError, match="Volcano creates a queue 'default' itself"):
        tenant_queues((TenantInput("default", ("a",)),), 8)


def test_stack_namespaces_are_taken(deployed):
    """The program hands its own namespaces to the check: a tenant may not take the workload namespace."""
    with pytest.raises(PlanError, match="namespace 'jobs' already exists or belongs to the stack"):
        deployed("dgx-h100-4su", workloadNamespace="jobs", tenantNamespaces={"research": "jobs"})


def test_tenant_without_gpu_nodes_is_refused_only_when_queues_are_built(deployed, tmp_path):
    plan, _ = deployed("slurm-lab")
    plan = copy.deepcopy(plan)
    plan["tenants"][0]["members"] = ["mgmt01"]
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    with pytest.raises(PlanError, match=r"tenants \['research'\] have no GPU nodes.*tenantQueues: false"):
        run_program({"plan": str(path), "rdmaMode": "ipoib"})
    rec = run_program({"plan": str(path), "rdmaMode": "ipoib", "tenantQueues": False})
    assert not rec.of_type(QUEUE) and len(rec.of_type(WPC)) == 6


@pytest.mark.parametrize("value", ["research", ["a"], {"research": 3}])
def test_tenant_namespaces_config_type(value):
    with pytest.raises(ConfigError, match="tenantNamespaces: expected a map"):
        config_from_mapping({"plan": "p", "tenantNamespaces": value})


@settings(max_examples=60, deadline=None)
@given(
    nodes=st.lists(st.integers(min_value=1, max_value=20_000), min_size=1, max_size=6),
    per_node=st.integers(min_value=0, max_value=16),
)
def test_weights_keep_the_gpu_ratio_or_refuse(nodes, per_node):
    tenants = tuple(TenantInput(f"t{i}", tuple(f"n{i}-{k}" for k in range(n))) for i, n in enumerate(nodes))
    try:
        queues = tenant_queues(tenants, per_node)
    except PlanError as exc:
        assert "gpus_per_node" in str(exc) or "exceeds 65535" in str(exc)
        return
    assert [q.gpus for q in queues] == [n * per_node for n in nodes]
    assert all(1 <= q.weight <= VOLCANO_MAX_WEIGHT for q in queues)
    assert all(q.weight * queues[0].gpus == queues[0].weight * q.gpus for q in queues)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.sets(st.integers(min_value=0, max_value=5)), min_size=6, max_size=6))
def test_any_qos_preemption_is_translated_faithfully_or_refused(preempted):
    """Whatever a plan's QOS preempts: each level maps to all-lower or none, else a PlanError names the level."""
    names = list(DEFAULT_QOS)
    qos = tuple(QosLevel(n, tuple(names[j] for j in sorted(preempted[i]) if j > i)) for i, n in enumerate(names))
    try:
        levels = priority_levels(qos)
    except PlanError as exc:
        bad = next(q for i, q in enumerate(qos) if q.preempts not in ((), tuple(names[i + 1:])))
        assert f"{bad.name!r} preempts" in str(exc)
        return
    for i, (level, q) in enumerate(zip(levels, qos, strict=True)):
        assert level.preemption_policy == ("PreemptLowerPriority" if q.preempts else "Never")
        assert q.preempts in ((), tuple(names[i + 1:]))
    assert [lv.value for lv in levels] == sorted((lv.value for lv in levels), reverse=True)
