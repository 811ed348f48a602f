"""The Pulumi program over the built example clusters: resource graph, per-rail inputs, labels, refusals."""

from __future__ import annotations

import ipaddress
import json
from collections import Counter

import pytest
import rfk8s_plans as plans
from railforge_k8s.config import ConfigError
from railforge_k8s.routing import RoutabilityError
from rfk8s_harness import Recording, run_program

NAMESPACE = "kubernetes:core/v1:Namespace"
RELEASE = "kubernetes:helm.sh/v3:Release"
NCP = "kubernetes:mellanox.com/v1alpha1:NicClusterPolicy"
NAD = "kubernetes:k8s.cni.cncf.io/v1:NetworkAttachmentDefinition"
CRD = "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition"
HYPERNODE = "kubernetes:topology.volcano.sh/v1alpha1:HyperNode"
NODE_PATCH = "kubernetes:core/v1:NodePatch"
DAEMONSET = "kubernetes:apps/v1:DaemonSet"


@pytest.fixture(scope="module")
def plan_path(built):
    return lambda name: built(name) / "plan.json"


@pytest.fixture(scope="module")
def deployed(plan_path):
    """deployed(name, **config) -> (plan dict, recording), one program run per distinct config."""
    cache = {}

    def run(name: str, **config):
        key = (name, json.dumps(config, sort_keys=True))
        if key not in cache:
            path = plan_path(name)
            cfg = {"plan": str(path), "rdmaMode": plans.EXAMPLE_MODES[name], **config}
            cache[key] = (plans.load(path), run_program(cfg))
        return cache[key]

    return run


@pytest.fixture(scope="module")
def one_su_roce(plan_path, tmp_path_factory):
    """SU 1 of roce-a800-4nic: one leaf per rail, so the macvlan path is routable."""
    plan = plans.first_su_only(plans.load(plan_path("roce-a800-4nic")))
    path = tmp_path_factory.mktemp("one-su") / "plan.json"
    path.write_text(json.dumps(plan))
    return plan, run_program({"plan": str(path), "rdmaMode": "macvlan"})


def nad_configs(rec: Recording) -> list[dict]:
    return [json.loads(r.inputs["spec"]["config"]) for r in rec.of_type(NAD)]


def rdma_config(rec: Recording) -> dict:
    (policy,) = rec.of_type(NCP)
    return json.loads(policy.inputs["spec"]["rdmaSharedDevicePlugin"]["config"])


@pytest.mark.parametrize("name", plans.EXAMPLES)
def test_dependency_order(deployed, name):
    plan, rec = deployed(name)
    urns = rec.by_urn()
    namespace = rec.one(NAMESPACE, "network-operator-namespace")
    release = rec.one(RELEASE, "network-operator")
    policy = rec.one(NCP, "nic-cluster-policy-policy")
    assert namespace.urn in release.dependencies
    assert release.urn in policy.dependencies
    assert release.inputs["namespace"] == namespace.inputs["metadata"]["name"] == "network-operator"
    for nad in rec.of_type(NAD):
        assert policy.urn in nad.dependencies, nad.name
        assert any(urns[d].type == DAEMONSET for d in nad.dependencies), f"{nad.name} does not wait for whereabouts"
    gpu = rec.one(RELEASE, "gpu-operator")
    assert policy.urn in gpu.dependencies


@pytest.mark.parametrize("name", plans.EXAMPLES)
def test_resource_counts_follow_the_plan(deployed, name):
    plan, rec = deployed(name)
    counts = Counter(r.type for r in rec.custom())
    topo = [n["topology"] for n in plans.nodes(plan)]
    leaf_groups = {t["leaf_group"] for t in topo}
    spine_groups = {t["spine_group"] for t in topo}
    assert counts[NCP] == 1
    assert counts[RELEASE] == 2
    assert counts[NODE_PATCH] == plan["cluster"]["nodes"]
    assert counts["kubernetes:scheduling.k8s.io/v1:PriorityClass"] == 6
    assert counts[HYPERNODE] == len(leaf_groups) + len(spine_groups) + (1 if len(spine_groups) > 1 else 0)
    expected_nads = plan["cluster"]["rails"] if plans.EXAMPLE_MODES[name] != "host" else 0
    assert counts[NAD] == expected_nads


@pytest.mark.parametrize("name", plans.EXAMPLES)
def test_one_rdma_resource_per_rail(deployed, name):
    plan, rec = deployed(name, rdmaHcaMax=17)
    entries = rdma_config(rec)["configList"]
    assert len(entries) == plan["cluster"]["rails"]
    for node in plans.nodes(plan):
        by_name = {e["resourceName"]: e for e in entries}
        for rail in node["rails"]:
            entry = by_name[f"rail{rail['rail']}"]
            assert entry["selectors"]["ifNames"] == [rail["ifname"]], node["name"]
    assert {e["rdmaHcaMax"] for e in entries} == {17}


def _check_ranges(plan: dict, configs: list[dict]) -> None:
    pools = [ipaddress.ip_network(p["prefix"]) for p in plan["pools"]]
    taken = plans.rail_addresses(plan)
    spans = []
    for cfg in configs:
        ipam = cfg["ipam"]
        subnet = ipaddress.ip_network(ipam["range"])
        first, last = ipaddress.ip_address(ipam["range_start"]), ipaddress.ip_address(ipam["range_end"])
        assert first <= last and first in subnet and last in subnet, cfg["name"]
        assert any(subnet.subnet_of(pool) for pool in pools), f"{subnet} outside every plan pool"
        rail = int(cfg["name"].removeprefix("rail").split("-")[0])
        clashes = [a for a in taken[rail] if first <= a <= last]
        assert not clashes, f"{cfg['name']} range holds node/gateway addresses {clashes[:3]}"
        spans.append((first, last, cfg["name"]))
    spans.sort()
    for (_, last, a), (first, _, b) in zip(spans, spans[1:], strict=False):
        assert last < first, f"ranges of {a} and {b} overlap"


def test_ipoib_attachments_per_rail(deployed):
    plan, rec = deployed("dgx-h100-4su")
    configs = nad_configs(rec)
    assert [c["type"] for c in configs] == ["ipoib"] * plan["cluster"]["rails"]
    node_ifnames = {r["rail"]: r["ifname"] for r in plans.nodes(plan)[0]["rails"]}
    assert {int(c["name"][4:].split("-")[0]): c["master"] for c in configs} == node_ifnames
    _check_ranges(plan, configs)


def test_macvlan_attachments_on_one_leaf_per_rail(one_su_roce):
    plan, rec = one_su_roce
    configs = nad_configs(rec)
    assert len(configs) == plan["cluster"]["rails"]
    assert all(c["type"] == "macvlan" and c["mtu"] == plan["qos"]["host_mtu"] for c in configs)
    _check_ranges(plan, configs)
    for nad in rec.of_type(NAD):
        rail = json.loads(nad.inputs["spec"]["config"])["master"].removeprefix("rail")
        assert nad.inputs["metadata"]["annotations"]["k8s.v1.cni.cncf.io/resourceName"] == f"rdma/rail{rail}"


@pytest.mark.parametrize("name", ["roce-a800-4nic", "roce-16k-railplane"])
def test_macvlan_refused_when_a_rail_has_several_leaf_subnets(plan_path, name):
    plan = plans.load(plan_path(name))
    leaves_on_rail0 = sum(1 for n in plan["pod_networks"] if n["rail"] == 0)
    recording = Recording()
    with pytest.raises(RoutabilityError) as err:
        run_program({"plan": str(plan_path(name)), "rdmaMode": "macvlan"}, recording)
    message = str(err.value)
    assert f"rail 0 (rail0) has {leaves_on_rail0} leaf subnets" in message
    assert "rdmaMode: host" in message and "hostNetwork" in message
    assert recording.resources == [], "nothing may be created before the refusal"


def test_host_mode_has_no_secondary_networks(deployed):
    plan, rec = deployed("roce-a800-4nic")
    policy = rec.one(NCP, "nic-cluster-policy-policy")
    assert "secondaryNetwork" not in policy.inputs["spec"]
    assert rec.of_type(NAD) == [] and rec.of_type(DAEMONSET) == []
    assert len(rdma_config(rec)["configList"]) == plan["cluster"]["rails"]


def test_ipoib_mode_on_roce_is_a_config_error(plan_path):
    with pytest.raises(ConfigError, match="ipoib needs an InfiniBand fabric"):
        run_program({"plan": str(plan_path("roce-a800-4nic")), "rdmaMode": "ipoib"})


@pytest.mark.parametrize("name", plans.EXAMPLES)
def test_node_labels_match_plan_topology(deployed, name):
    plan, rec = deployed(name)
    patches = {r.inputs["metadata"]["name"]: r.inputs["metadata"]["labels"] for r in rec.of_type(NODE_PATCH)}
    assert set(patches) == {n["name"] for n in plans.nodes(plan)}
    for node in plans.nodes(plan):
        topo, labels = node["topology"], patches[node["name"]]
        assert labels["railforge.io/su"] == str(topo["su"])
        assert labels["railforge.io/leaf-group"] == topo["leaf_group"]
        assert labels["railforge.io/spine-group"] == topo["spine_group"]
        assert labels["railforge.io/rack"] == topo["rack"]
        assert labels["railforge.io/cluster"] == plan["cluster"]["name"]
        tenants = [t["name"] for t in plan.get("tenants", []) if node["name"] in t["members"]]
        assert labels.get("railforge.io/tenant") == (tenants[0] if tenants else None), node["name"]


@pytest.mark.parametrize("name", plans.EXAMPLES)
def test_hypernodes_nest_and_select_labelled_nodes(deployed, name):
    plan, rec = deployed(name)
    hyper = {r.inputs["metadata"]["name"]: r.inputs["spec"] for r in rec.of_type(HYPERNODE)}
    leaf_groups = {n["topology"]["leaf_group"]: n["topology"]["spine_group"] for n in plans.nodes(plan)}
    tier1 = {name: spec for name, spec in hyper.items() if spec["tier"] == 1}
    selected = {m["selector"]["labelMatch"]["matchLabels"]["railforge.io/leaf-group"] for s in tier1.values()
                for m in s["members"]}  # fmt: skip
    assert selected == set(leaf_groups)
    for spec in hyper.values():
        if spec["tier"] > 1:
            children = [m["selector"]["exactMatch"]["name"] for m in spec["members"]]
            assert all(hyper[c]["tier"] == spec["tier"] - 1 for c in children)
    tops = [s for s in hyper.values() if s["tier"] == max(h["tier"] for h in hyper.values())]
    assert len(tops) == 1, "one root HyperNode spans the cluster"


@pytest.mark.parametrize("name", plans.EXAMPLES)
def test_kueue_topology_has_the_plans_tiers(deployed, name):
    """Outermost first: rail plane (when the plan has planes), spine group, SU (leaf group), node; every node
    carries every level's label, and each level nests in the one above (one parent per value)."""
    plan, rec = deployed(name)
    (topology,) = rec.of_type("kubernetes:kueue.x-k8s.io/v1beta2:Topology")
    levels = [lvl["nodeLabel"] for lvl in topology.inputs["spec"]["levels"]]
    planes = {n["topology"]["rail_plane"] is not None for n in plans.nodes(plan)}
    tiers = ["railforge.io/spine-group", "railforge.io/leaf-group", "kubernetes.io/hostname"]
    assert levels == (["railforge.io/rail-plane"] if planes == {True} else []) + tiers
    labels = {r.inputs["metadata"]["name"]: {**r.inputs["metadata"]["labels"], "kubernetes.io/hostname":
              r.inputs["metadata"]["name"]} for r in rec.of_type(NODE_PATCH)}  # fmt: skip
    for outer, inner in zip(levels, levels[1:], strict=False):
        parents: dict[str, set[str]] = {}
        for node_labels in labels.values():
            parents.setdefault(node_labels[inner], set()).add(node_labels[outer])
        assert all(len(p) == 1 for p in parents.values()), f"{inner} does not nest in {outer}"
    flavors = rec.of_type("kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor")
    assert {f.inputs["spec"]["topologyName"] for f in flavors} == {topology.inputs["metadata"]["name"]}


def test_kueue_levels_are_node_labels(deployed):
    plan, rec = deployed("roce-16k-railplane")
    (topology,) = rec.of_type("kubernetes:kueue.x-k8s.io/v1beta2:Topology")
    levels = [lvl["nodeLabel"] for lvl in topology.inputs["spec"]["levels"]]
    labelled = set(rec.of_type(NODE_PATCH)[0].inputs["metadata"]["labels"])
    assert levels[-1] == "kubernetes.io/hostname"
    assert set(levels[:-1]) <= labelled
    (flavor,) = rec.of_type("kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor")  # no tenants: one flavor
    assert flavor.inputs["spec"]["topologyName"] == topology.inputs["metadata"]["name"]


def test_toggles_remove_optional_parts(deployed):
    _, rec = deployed(
        "dgx-h100-4su", gpuOperator=False, nodeLabels=False, volcano=False, kueue=False, priorityClasses=False
    )
    types = {r.type for r in rec.custom()}
    assert types == {NAMESPACE, RELEASE, NCP, NAD, DAEMONSET, CRD} | {
        "kubernetes:core/v1:ServiceAccount",
        "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole",
        "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding",
    }
    assert [r.name for r in rec.of_type(RELEASE)] == ["network-operator"]


def test_doca_driver_is_optional(deployed):
    _, without = deployed("dgx-h100-4su")
    _, with_driver = deployed("dgx-h100-4su", installDocaDriver=True)
    assert "ofedDriver" not in without.one(NCP, "nic-cluster-policy-policy").inputs["spec"]
    driver = with_driver.one(NCP, "nic-cluster-policy-policy").inputs["spec"]["ofedDriver"]
    assert driver["image"] == "doca-driver"


def test_without_helm_releases_the_chart_crds_come_from_the_repository(deployed):
    _, rec = deployed("dgx-h100-4su", helmReleases=False)
    assert rec.of_type(RELEASE) == []
    crds = {r.inputs["metadata"]["name"]: r for r in rec.of_type(CRD)}
    assert set(crds) == {
        "nicclusterpolicies.mellanox.com",
        "network-attachment-definitions.k8s.cni.cncf.io",
        "ippools.whereabouts.cni.cncf.io",
        "overlappingrangeipreservations.whereabouts.cni.cncf.io",
        "nodeslicepools.whereabouts.cni.cncf.io",
    }
    (policy,) = rec.of_type(NCP)
    assert crds["nicclusterpolicies.mellanox.com"].urn in policy.dependencies
    for nad in rec.of_type(NAD):
        assert policy.urn in nad.dependencies


def test_a_local_chart_path_replaces_the_repository(deployed, tmp_path):
    chart = tmp_path / "network-operator-26.4.1.tgz"
    chart.write_bytes(b"")
    _, rec = deployed("dgx-h100-4su", charts={"networkOperator": {"path": str(chart)}})
    release = next(r for r in rec.of_type(RELEASE) if r.inputs["name"] == "network-operator")
    assert release.inputs["chart"] == str(chart)
    assert "repositoryOpts" not in release.inputs
