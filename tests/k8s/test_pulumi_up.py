"""`pulumi up` of the project's program (pulumi/railforge_k8s) through the real CLI and Kubernetes provider against the
live API server: every object admitted, pinned CRDs from the repository, no Helm chart reachable (helmReleases: false,
as in CI: CRDs + custom resources, the skipped releases named); a second `up` changes nothing; the plan grown by one
SU previews creations and in-place updates of the cluster-wide objects only; `destroy` leaves nothing of the stack;
a configuration error fails with its message and no traceback. See tests/k8s/pulumi_stack.py for why the program runs
inline through the Automation API."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, example_spec, run_cli

from .conftest import K8S_EXAMPLE, require_k8s_toolchain
from .pulumi_stack import RailforgeStack, error_messages

SCHEDULER_CRDS = ("kueue-v0.19.2", "volcano-v1.14.1")  # the schedulers are the site's; the stack only uses them


def install_scheduler_crds(cluster) -> None:
    """Kueue and Volcano are installed by the site, not by the stack: their pinned CRDs, applied if absent (the
    session's cluster is shared with the scheduler tests, so they are never deleted here)."""
    names = []
    for folder in SCHEDULER_CRDS:
        for path in sorted((ROOT / "tests" / "reference" / folder).glob("*.yaml")):
            doc = yaml.safe_load(path.read_text())
            names.append(doc["metadata"]["name"])
            if cluster.api.find("apiextensions.k8s.io/v1", "CustomResourceDefinition", names[-1]) is None:
                cluster.api.apply(doc)

    def established() -> bool:
        for name in names:
            crd = cluster.api.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", name)
            if not any(c["type"] == "Established" and c["status"] == "True"
                       for c in (crd.get("status") or {}).get("conditions") or []):
                return False
        return True

    cluster.wait_for(established, timeout=60, what="Kueue and Volcano CRDs established")


@pytest.fixture(scope="module")
def smaller_plan(tmp_path_factory) -> Path:
    """The example with one SU fewer (same max, so nothing renumbers when it grows back)."""
    spec = yaml.safe_load(example_spec(K8S_EXAMPLE).read_text())
    spec["scalable_units"]["count"] -= 1
    spec["scalable_units"]["reserved_slots"] = [s for s in spec["scalable_units"].get("reserved_slots", [])
                                                if s["su"] <= spec["scalable_units"]["count"]]
    for tenant in spec.get("tenants", []):  # members in the dropped SU go with it
        tenant["nodes"] = [n for n in tenant.get("nodes", []) if not n.startswith("su004-")]
    work = tmp_path_factory.mktemp("smaller")
    (work / "cluster.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    run_cli("build", str(work / "cluster.yaml"), "--out", str(work / "out"))
    return work / "out" / "plan.json"


def stack_objects(stack: RailforgeStack) -> list[tuple[str, str, str, str | None]]:
    """(apiVersion, kind, name, namespace) of every Kubernetes object the stack's state holds (patches excluded)."""
    out = []
    for res in stack.resources():
        typ = res["type"]
        if not typ.startswith("kubernetes:") or typ.startswith("kubernetes:pulumi:") or typ.endswith("Patch"):
            continue
        o = res.get("outputs", {})
        meta = o.get("metadata", {})
        out.append((o["apiVersion"], o["kind"], meta["name"], meta.get("namespace")))
    return out


def pulumi_owned(node: dict) -> bool:
    return any("pulumi" in (m.get("manager") or "") for m in node["metadata"].get("managedFields", []))


def test_pulumi_up_of_the_program_is_idempotent_grows_by_creation_and_destroys(
        k8s_cluster, k8s_nodes, k8s_plan, built, smaller_plan, tmp_path):
    bin_dir = require_k8s_toolchain("pulumi", "pulumi-resource-kubernetes")
    api = k8s_cluster.api
    install_scheduler_crds(k8s_cluster)
    stack = RailforgeStack(bin_dir, tmp_path, k8s_cluster.kubeconfig)
    stack.configure(plan=smaller_plan, helmReleases=False)

    bad = RailforgeStack(bin_dir, tmp_path, k8s_cluster.kubeconfig, name="bad")
    bad.configure(plan=smaller_plan, rdmaMode="sriov")
    refused = bad.up()
    assert not refused.ok
    assert "code: 1\n" in refused.error, refused.error  # the CLI's exit status for a failed update
    # one message; the inline runtime reports it as the program's error and again as the engine's
    # "an unhandled error occurred" (a language host on disk reports it once)
    assert set(error_messages(refused)) == {"rdmaMode 'sriov': choose one of macvlan, ipoib, host, routed"}, \
        refused.error
    assert "Traceback" not in refused.error + refused.output
    assert bad.resources() == [] or {r["type"] for r in bad.resources()} == {"pulumi:pulumi:Stack"}

    first = stack.up()
    assert first.ok, first.error
    assert "skipped the Helm releases network-operator, gpu-operator" in first.output
    assert stack.outputs()["skippedReleases"] == ["network-operator", "gpu-operator"]
    objects = stack_objects(stack)
    for api_version, kind, name, namespace in objects:
        assert api.find(api_version, kind, name, namespace) is not None, (kind, name)
    kinds = {kind for _, kind, _, _ in objects}
    assert {"CustomResourceDefinition", "NicClusterPolicy", "NetworkAttachmentDefinition", "DaemonSet",
            "HyperNode", "ClusterQueue", "Topology", "ResourceFlavor", "PriorityClass", "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding"} <= kinds, kinds
    plan = json.loads(smaller_plan.read_text())
    planned = {d["name"] for d in plan["devices"] if d["role"] == "node"}
    labelled = {n["metadata"]["name"] for n in api.list("v1", "Node") if pulumi_owned(n)}
    assert labelled == planned

    again = stack.preview()
    assert again.ok, again.error
    assert {urn: op for urn, op in again.steps.items() if op != "same"} == {}, "\n".join(
        ln for ln in again.output.splitlines() if "NodePatch" not in ln)[-6000:]
    second = stack.up()
    assert second.ok, second.error
    assert set(second.changes) == {"same"}, second.changes

    stack.configure(plan=built(K8S_EXAMPLE) / "plan.json")
    grown = stack.preview()
    assert grown.ok, grown.error
    # growth creates the new SU's objects and updates in place only what spans the whole cluster: the root HyperNode
    # gains the new leaf group, the production tenant (members in SU 4) gains GPUs, which moves its Volcano queue's
    # capability, both tenants' Volcano weights (GPU shares in lowest terms), its Kueue quota and the quota its
    # admission policy checks Jobs against; nothing is replaced or deleted
    assert set(grown.changes) <= {"same", "create", "update"}, grown.changes
    updated = sorted(name for name, op in grown.steps.items() if op == "update")
    assert updated == ["kueue-quota-policy-production", "tenant-queues-clusterqueue-production",
                       "tenant-queues-volcano-production",
                       "tenant-queues-volcano-research", "topology-hypernode-spine-fabric"], grown.steps
    created = [name for name, op in grown.steps.items() if op == "create"]
    assert {f"node-labels-su004-gpu{i:02d}" for i in range(1, 32)} <= set(created), created

    stack.configure(plan=smaller_plan)
    gone = stack.destroy()
    assert gone.ok, gone.error
    left = []
    for api_version, kind, name, namespace in objects:
        obj = api.find(api_version, kind, name, namespace)
        if obj is not None and not (kind == "Namespace" and obj["status"].get("phase") == "Terminating"):
            left.append((kind, name))
    assert left == []
    assert not [n["metadata"]["name"] for n in api.list("v1", "Node") if pulumi_owned(n)]


def test_a_kubeconfig_that_points_nowhere_fails_up_with_the_reason_and_no_traceback(built, tmp_path):
    """No API server needed: a closed loopback port. The provider reports the cause once per resource it tried."""
    bin_dir = require_k8s_toolchain("pulumi", "pulumi-resource-kubernetes")
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "x",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:9", "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}]}))
    stack = RailforgeStack(bin_dir, tmp_path / "w", kubeconfig)
    stack.configure(plan=built(K8S_EXAMPLE) / "plan.json", helmReleases=False, gpuOperator=False, nodeLabels=False,
                    volcano=False, kueue=False, priorityClasses=False)
    run = stack.up()
    assert not run.ok
    assert "code: 1\n" in run.error
    (cause,) = set(error_messages(run)) - {"update failed"}  # one distinct message, repeated per resource
    assert cause.startswith("configured Kubernetes cluster is unreachable") and "127.0.0.1:9" in cause, cause
    assert "Traceback" not in run.error + run.output
