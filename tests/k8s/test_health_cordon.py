"""The health receiver on Kubernetes, against the live API server and scheduler: a rail-down alert (the alert
fixtures of the Slurm tests) cordons the node and taints it NoSchedule naming the cable, the real kube-scheduler then
refuses a pod pinned to it; the resolved alert uncordons it and removes exactly railforge's taint (the tenant taint
the plan implies stays). Kubernetes-only receiver (KubeNodes); with Slurm too, SlurmAndKube drains both."""

from __future__ import annotations

import json

import pytest
import yaml

from railforge.health.kubernetes import REASON_ANNOTATION, TAINT_KEY, KubeNodes, KubernetesError, taint_value
from railforge.health.receiver import Engine, ReceiverConfig
from railforge.health.topology import HealthIndex
from railforge.health.webhook import parse_webhook
from tests.conftest import example_spec, run_cli
from tests.health.alerts import alert, body
from tests.helpers.k8s_nodes import TENANT_LABEL

POD = "rfk8s-health-pinned"


def tenant_node(nodes) -> str:
    return next(s.name for s in nodes if any(t["key"] == TENANT_LABEL for t in s.taints))


def actions(tmp_path) -> list[dict]:
    return [json.loads(line) for line in (tmp_path / "state" / "actions.log").read_text().splitlines()]


def our_taints(node: dict) -> list[dict]:
    return [t for t in node["spec"].get("taints") or [] if t["key"] == TAINT_KEY]


def ours(node: dict) -> dict[str, str]:
    """The node's annotations railforge writes."""
    return {k: v for k, v in (node["metadata"].get("annotations") or {}).items() if k.startswith("railforge.io/")}


def test_drain_cordons_and_taints_naming_the_cable_and_resume_undoes_both(k8s_cluster, k8s_nodes, k8s_plan, tmp_path):
    api = k8s_cluster.api
    idx = HealthIndex.of(k8s_plan)
    name = tenant_node(k8s_nodes)
    before = api.get("v1", "Node", name)
    cable = idx.devices[name].rails[1].cable
    kube = KubeNodes(k8s_cluster.kubeconfig, frozenset(idx.links))
    engine = Engine(idx, ReceiverConfig(state_dir=tmp_path / "state"), kube, echo=lambda _line: None)
    firing = alert("RailforgeNodeRailDown", cable=cable, device=name, port="rail1")
    try:
        result = engine.receive(parse_webhook(body(firing)))
        assert result["drained"] == [name], actions(tmp_path)
        node = api.get("v1", "Node", name)
        assert node["spec"]["unschedulable"] is True
        assert our_taints(node) == [{"key": TAINT_KEY, "value": cable, "effect": "NoSchedule"}]  # e.g. CMP-000042
        assert cable in node["metadata"]["annotations"][REASON_ANNOTATION]
        assert [t for t in node["spec"]["taints"] if t["key"] == TENANT_LABEL] == \
               [t for t in before["spec"]["taints"] if t["key"] == TENANT_LABEL]

        # the real scheduler honours the cordon: a pod tolerating the tenant taint, pinned to the node, stays Pending
        tenant = next(t["value"] for t in before["spec"]["taints"] if t["key"] == TENANT_LABEL)
        api.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": POD, "namespace": "default"},
                    "spec": {"nodeSelector": {"kubernetes.io/hostname": name},
                             "tolerations": [{"key": TENANT_LABEL, "value": tenant, "effect": "NoSchedule"}],
                             "containers": [{"name": "c", "image": "registry.invalid/none:0"}]}})

        def unschedulable() -> bool:
            pod = api.get("v1", "Pod", POD, "default")
            return any(c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"
                       for c in pod["status"].get("conditions", []))

        k8s_cluster.wait_for(unschedulable, timeout=60, what="the scheduler to refuse the cordoned node")

        again = engine.receive(parse_webhook(body(firing)))  # a repeated webhook changes nothing
        assert again["drained"] == [name]
        same = api.get("v1", "Node", name)
        # ours only: the controller manager's TTL controller rewrites node.alpha.kubernetes.io/ttl as the
        # cluster's node count changes (0 -> 15 seen in CI while other tests added nodes)
        assert (same["spec"], ours(same)) == (node["spec"], ours(node))
        assert [a["action"] for a in actions(tmp_path)].count("drain") == 1

        engine.receive(parse_webhook(body(alert("RailforgeNodeRailDown", status="resolved", cable=cable,
                                                device=name, port="rail1"))))
        after = api.get("v1", "Node", name)
        assert not after["spec"].get("unschedulable")
        assert our_taints(after) == []
        assert REASON_ANNOTATION not in (after["metadata"].get("annotations") or {})
        assert after["spec"]["taints"] == before["spec"]["taints"]
        done = [a["action"] for a in actions(tmp_path)]
        assert done.count("drain") == 1 and done.count("resume") == 1, done
    finally:
        if api.find("v1", "Pod", POD, "default") is not None:
            api.delete("v1", "Pod", POD, "default", grace_seconds=0)
        if our_taints(api.get("v1", "Node", name)):
            kube.resume(name)


def test_a_kubeconfig_that_points_nowhere_is_one_clear_error(k8s_cluster, k8s_nodes, tmp_path):
    text = k8s_cluster.kubeconfig.read_text().replace(k8s_cluster.server, "https://127.0.0.1:9")
    (tmp_path / "kubeconfig").write_text(text)
    kube = KubeNodes(tmp_path / "kubeconfig", timeout=5)
    with pytest.raises(KubernetesError, match=r"GET node .* at https://127.0.0.1:9: "):
        kube.drain(k8s_nodes[0].name, "railforge: RailforgeNodeRailDown")
    (tmp_path / "broken").write_text("clusters: []\n")
    with pytest.raises(KubernetesError, match="not a usable kubeconfig"):
        KubeNodes(tmp_path / "broken")


def test_taint_value_names_the_cable_as_a_label_value():
    reason = "railforge: RailforgeNodeRailDown rail1 su001-gpu03:ib1/leaf 01"
    assert taint_value(reason, frozenset({"su001-gpu03:ib1/leaf"})) == "su001-gpu03.ib1.leaf"
    assert taint_value("railforge: RailforgeNodeCheckFailed gpu") == "RailforgeNodeCheckFailed"
    assert taint_value("x" * 80 + " CMP-1", frozenset({"x" * 80})) == "x" * 63


def test_no_slurm_and_no_kubeconfig_is_refused_by_the_cli(built, tmp_path):
    proc = run_cli("health", "serve", str(example_spec("minimal").parent), "--out", str(built("minimal")),
                   "--no-slurm", "--state-dir", str(tmp_path / "s"), check=False)
    assert proc.returncode == 2, proc.stderr
    assert "--no-slurm needs --kubeconfig" in proc.stderr and "Traceback" not in proc.stderr


def test_the_kubeconfig_ca_is_used_even_with_requests_ca_bundle_set(tmp_path, monkeypatch):
    """The first live run failed every drain: REQUESTS_CA_BUNDLE (set here) replaced the kubeconfig's CA."""
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt")
    (tmp_path / "ca.crt").write_text("x")
    (tmp_path / "kubeconfig").write_text(yaml.safe_dump({
        "current-context": "x",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443",
                                               "certificate-authority": str(tmp_path / "ca.crt")}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}]}))
    kube = KubeNodes(tmp_path / "kubeconfig")
    settings = kube.session.merge_environment_settings("https://127.0.0.1:6443/api", {}, None, None, None)
    assert settings["verify"] == str(tmp_path / "ca.crt")
