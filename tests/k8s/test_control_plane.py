"""The live control plane (tests/helpers/k8s_cluster.py) with a built example's GPU nodes as KWOK nodes: it comes
up with TLS and RBAC, denies what it must, holds the plan's nodes with their capacity, labels and taints, and the
real kube-scheduler places a pod asking for 8 GPUs and the rails' RDMA resources, which KWOK then runs.

Each node test fails under RAILFORGE_K8S_MUTATE=no-gpu / no-rdma / no-labels (tests/k8s/conftest.py)."""

from __future__ import annotations

import pytest
import requests

from tests.helpers.k8s_cluster import KubeApiError
from tests.helpers.k8s_nodes import GPU, RDMA_HCA_MAX, TENANT_LABEL, is_ready

SU = "railforge.io/su"
PAUSE = "registry.invalid/railforge/pause:never-pulled"  # KWOK runs no container: the image is never pulled


def namespace(api, name: str) -> str:
    if api.find("v1", "Namespace", name) is None:
        api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name


@pytest.fixture
def pods_ns(k8s_cluster, request):
    """A namespace for one test's pods, emptied (grace 0) when the test ends, passed or not."""
    api = k8s_cluster.api
    name = namespace(api, "rfk8s-" + request.node.name.removeprefix("test_").replace("_", "-")[:50].strip("-"))
    yield name
    for pod in api.list("v1", "Pod", name):
        api.delete("v1", "Pod", pod["metadata"]["name"], name, grace_seconds=0)


def gpu_pod(name: str, ns: str, rails: list[int], gpus: int = 8, selector: dict | None = None,
            tolerations: list | None = None) -> dict:
    requests_ = {GPU: str(gpus), "cpu": "16", "memory": "64Gi", **{f"rdma/rail{r}": "1" for r in rails}}
    spec: dict = {
        "automountServiceAccountToken": False,
        "containers": [{"name": "train", "image": PAUSE, "resources": {"requests": requests_, "limits": requests_}}],
    }
    if selector:
        spec["nodeSelector"] = selector
    if tolerations:
        spec["tolerations"] = tolerations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns}, "spec": spec}


def scheduled_reason(pod: dict) -> str:
    for cond in pod.get("status", {}).get("conditions", []):
        if cond["type"] == "PodScheduled" and cond["status"] == "False":
            return cond.get("message", cond.get("reason", ""))
    return ""


def plan_gpu_nodes(plan):
    return [d for d in plan.devices if d.role == "node"]


# ---- control plane ------------------------------------------------------------------------------------------------

def test_control_plane_serves_tls_with_the_pinned_version(k8s_cluster):
    api = k8s_cluster.api
    version = api.request("GET", "/version")
    assert version["gitVersion"] == "v1.37.2", version
    assert api.request("GET", "/readyz") == "ok"
    # TLS: the server's certificate chains to the harness's CA only; the system trust store refuses it
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(k8s_cluster.server + "/version", timeout=10)
    print(f"control plane ready in {k8s_cluster.start_seconds:.1f} s")


def test_anonymous_requests_are_refused(k8s_cluster):
    resp = requests.get(k8s_cluster.server + "/api/v1/nodes", verify=str(k8s_cluster.pki.ca), timeout=10)
    assert resp.status_code == 401, resp.text


def test_rbac_denies_an_unprivileged_service_account_and_allows_what_is_bound(k8s_cluster):
    api = k8s_cluster.api
    ns = namespace(api, "rfk8s-rbac")
    api.apply({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "nobody", "namespace": ns}})
    token = api.create_token(ns, "nobody")  # signed with the harness's service-account key
    sa = k8s_cluster.token_client(token)
    assert sa.whoami()["username"] == f"system:serviceaccount:{ns}:nobody"
    for call in (lambda: sa.list("v1", "Node"), lambda: sa.list("v1", "Pod", ns),
                 lambda: sa.create(gpu_pod("sneaky", ns, rails=[0]))):
        with pytest.raises(KubeApiError) as denied:
            call()
        assert denied.value.status == 403 and denied.value.reason == "Forbidden", denied.value
    # bound to the built-in `view` role in its namespace: pods become visible there, nodes stay forbidden
    api.apply({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": "nobody-view", "namespace": ns},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
               "subjects": [{"kind": "ServiceAccount", "name": "nobody", "namespace": ns}]})
    k8s_cluster.wait_for(lambda: sa.list("v1", "Pod", ns) == [], timeout=15, what="the RoleBinding to take effect")
    with pytest.raises(KubeApiError) as denied:
        sa.list("v1", "Node")
    assert denied.value.status == 403
    # a client certificate the CA signed, for a user no binding names: authenticated, but allowed nothing
    mallory = k8s_cluster.client_for("mallory", groups=("railforge:nobody",))
    assert mallory.whoami()["username"] == "mallory"
    with pytest.raises(KubeApiError) as denied:
        mallory.list("v1", "Node")
    assert denied.value.status == 403


# ---- nodes --------------------------------------------------------------------------------------------------------

def test_plan_nodes_register_ready_with_plan_capacity_labels_and_taints(k8s_cluster, k8s_plan, k8s_nodes):
    served = {n["metadata"]["name"]: n for n in k8s_cluster.api.list("v1", "Node")}
    planned = plan_gpu_nodes(k8s_plan)
    assert len(planned) == 127 and set(served) >= {d.name for d in planned}
    tenant_of = {m: t.name for t in k8s_plan.tenants for m in t.members}
    assert tenant_of, "the example has tenants: the taint checks below must see some"
    for device in planned:
        node = served[device.name]
        assert is_ready(node), f"{device.name} not Ready: {node['status'].get('conditions')}"
        alloc = node["status"]["allocatable"]
        assert alloc.get(GPU) == str(k8s_plan.cluster.gpus_per_node), (device.name, alloc)
        assert sorted(k for k in alloc if k.startswith("rdma/")) == sorted(f"rdma/rail{r.rail}" for r in device.rails)
        assert all(alloc[f"rdma/rail{r.rail}"] == str(RDMA_HCA_MAX) for r in device.rails)
        labels = node["metadata"]["labels"]
        topo = device.topology
        assert labels.get(SU) == str(topo.su), (device.name, labels)
        assert labels.get("railforge.io/leaf-group") == topo.leaf_group
        assert labels.get("railforge.io/spine-group") == topo.spine_group
        assert labels.get("railforge.io/rack") == topo.rack
        assert labels.get("railforge.io/cluster") == k8s_plan.cluster.name
        taints = [t for t in node["spec"].get("taints", []) if t["key"].startswith("railforge.io/")]
        if device.name in tenant_of:
            assert labels.get(TENANT_LABEL) == tenant_of[device.name]
            assert taints == [{"key": TENANT_LABEL, "value": tenant_of[device.name], "effect": "NoSchedule"}]
        else:
            assert TENANT_LABEL not in labels and taints == []
    # DGX H100: 2 x 56 cores x 2 threads, 2 TiB (railforge/hardware/catalog.yaml)
    first = served[planned[0].name]["status"]["capacity"]
    assert (first["cpu"], first["memory"]) == ("224", "2Ti")  # the API server writes quantities canonically
    print(f"{len(planned)} KWOK nodes Ready in {k8s_cluster.nodes_ready_seconds:.1f} s")


def test_gpu_and_rdma_pod_is_scheduled_by_kube_scheduler_and_run_by_kwok(k8s_cluster, k8s_plan, k8s_nodes, pods_ns):
    api, ns = k8s_cluster.api, pods_ns
    rails = sorted(r.rail for r in plan_gpu_nodes(k8s_plan)[0].rails)
    assert len(rails) == 8
    in_tenants = {m for t in k8s_plan.tenants for m in t.members}
    su = min(d.topology.su for d in plan_gpu_nodes(k8s_plan) if d.name not in in_tenants)  # untainted nodes there
    api.create(gpu_pod("train-0", ns, rails, selector={SU: str(su)}))

    def running():
        pod = api.get("v1", "Pod", "train-0", ns)
        return pod if pod["status"].get("phase") == "Running" else None

    try:
        pod = k8s_cluster.wait_for(running, timeout=60, what="pod train-0 Running")
    except Exception as exc:
        pod = api.get("v1", "Pod", "train-0", ns)
        raise AssertionError(f"{exc}; scheduler says: {scheduled_reason(pod)!r}") from None
    node = pod["spec"]["nodeName"]
    assert node in {d.name for d in plan_gpu_nodes(k8s_plan) if d.topology.su == su}, f"{node} is not in SU {su}"
    assert node not in in_tenants
    assert any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"]["conditions"])
    # the node's 8 GPUs are taken: a second full-node pod pinned to it stays Pending, for want of GPUs
    api.create(gpu_pod("train-1", ns, rails, selector={"kubernetes.io/hostname": node}))

    def unschedulable():
        return scheduled_reason(api.get("v1", "Pod", "train-1", ns))

    reason = k8s_cluster.wait_for(unschedulable, timeout=30, what="train-1 to be found unschedulable")
    assert f"Insufficient {GPU}" in reason, reason


def test_tenant_nodes_take_only_pods_that_tolerate_the_tenant(k8s_cluster, k8s_plan, k8s_nodes, pods_ns):
    api, ns = k8s_cluster.api, pods_ns
    tenant = k8s_plan.tenants[0]
    members = set(tenant.members)
    rails = sorted(r.rail for r in plan_gpu_nodes(k8s_plan)[0].rails)
    selector = {TENANT_LABEL: tenant.name}
    api.create(gpu_pod("intruder", ns, rails, selector=selector))
    reason = k8s_cluster.wait_for(lambda: scheduled_reason(api.get("v1", "Pod", "intruder", ns)), timeout=30,
                                  what="the intruder pod to be found unschedulable")
    assert "untolerated taint" in reason, reason
    toleration = [{"key": TENANT_LABEL, "operator": "Equal", "value": tenant.name, "effect": "NoSchedule"}]
    api.create(gpu_pod("member", ns, rails, selector=selector, tolerations=toleration))
    pod = k8s_cluster.wait_for(
        lambda: (p := api.get("v1", "Pod", "member", ns))["status"].get("phase") == "Running" and p,
        timeout=60, what="the tenant's pod Running")
    assert pod["spec"]["nodeName"] in members
