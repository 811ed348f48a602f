"""Every resource the program emits validates strictly; every validator rejects a broken object."""

from __future__ import annotations

import copy
import json

import jsonschema
import pytest
import rfk8s_plans as plans
import rfk8s_validate as v
from railforge_k8s import nic_cluster_policy, routing, whereabouts
from railforge_k8s.crds import CRD_ROOT, WHEREABOUTS, crd_documents
from railforge_k8s.gpu_operator import GpuOperatorArgs, gpu_operator_values
from railforge_k8s.network_operator import NetworkOperatorArgs, network_operator_values
from railforge_k8s.plan_input import load_plan
from railforge_k8s.versions import Versions
from rfk8s_harness import run_program

RUNS = [
    ("dgx-h100-4su", {"installDocaDriver": True, "imagePullSecrets": ["mirror-secret"]}),
    ("roce-a800-4nic", {"rdmaMode": "host"}),
    ("roce-16k-railplane", {"rdmaMode": "host", "installDocaDriver": True}),
]


@pytest.mark.parametrize(("name", "config"), RUNS, ids=[r[0] for r in RUNS])
def test_every_emitted_resource_validates(built, name, config):
    rec = run_program({"plan": str(built(name) / "plan.json"), **config})
    checked = 0
    for reg in rec.resources:
        v.validate_registration(reg.type, reg.custom, reg.inputs)
        checked += reg.custom
    assert checked == len(rec.custom()) > plans.load(built(name) / "plan.json")["cluster"]["nodes"]


def test_macvlan_attachments_validate(built, tmp_path):
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plans.first_su_only(plans.load(built("roce-a800-4nic") / "plan.json"))))
    rec = run_program({"plan": str(path), "rdmaMode": "macvlan"})
    nads = rec.of_type("kubernetes:k8s.cni.cncf.io/v1:NetworkAttachmentDefinition")
    assert nads
    for reg in rec.resources:
        v.validate_registration(reg.type, reg.custom, reg.inputs)


# ---- negative tests: each validator catches an error ----------------------------------------------


@pytest.fixture(scope="module")
def policy(built):
    plan = load_plan(built("dgx-h100-4su") / "plan.json")
    args = nic_cluster_policy.NicClusterPolicyArgs(plan.rails, "ipoib", 63, True, Versions())
    obj = {
        "apiVersion": "mellanox.com/v1alpha1",
        "kind": "NicClusterPolicy",
        "metadata": {"name": "nic-cluster-policy"},
        "spec": nic_cluster_policy.nic_cluster_policy_spec(args),
    }
    v.validate_object(obj)
    return obj


def test_crd_rejects_misspelt_top_level_field(policy):
    broken = copy.deepcopy(policy)
    broken["spec"]["rdmaSharedDevicePlugn"] = broken["spec"].pop("rdmaSharedDevicePlugin")
    with pytest.raises(jsonschema.ValidationError, match="rdmaSharedDevicePlugn"):
        v.validate_object(broken)


def test_crd_rejects_unknown_nested_field(policy):
    broken = copy.deepcopy(policy)
    broken["spec"]["secondaryNetwork"]["multus"]["tag"] = "v1"
    with pytest.raises(jsonschema.ValidationError, match="tag"):
        v.validate_object(broken)


def test_crd_rejects_missing_required_field(policy):
    broken = copy.deepcopy(policy)
    del broken["spec"]["ofedDriver"]["image"]
    with pytest.raises(jsonschema.ValidationError, match="image"):
        v.validate_object(broken)


def test_crd_rejects_wrong_type_and_bad_metadata():
    hypernode = {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": "leaf-su001"},
        "spec": {"tier": 1, "members": [{"type": "Node", "selector": {"exactMatch": {"name": "n1"}}}]},
    }
    v.validate_object(hypernode)
    wrong_type = copy.deepcopy(hypernode)
    wrong_type["spec"]["tier"] = "one"
    with pytest.raises(jsonschema.ValidationError):
        v.validate_object(wrong_type)
    bad_member = copy.deepcopy(hypernode)
    bad_member["spec"]["members"][0]["type"] = "Rack"
    with pytest.raises(jsonschema.ValidationError):
        v.validate_object(bad_member)
    bad_meta = copy.deepcopy(hypernode)
    bad_meta["metadata"]["lables"] = {"a": "b"}
    with pytest.raises(jsonschema.ValidationError, match="lables"):
        v.validate_object(bad_meta)


def test_crd_version_must_exist():
    with pytest.raises(v.SchemaMissing):
        v.validate_custom({"apiVersion": "kueue.x-k8s.io/v1alpha9", "kind": "Topology", "metadata": {}})


def test_strictify_keeps_preserve_unknown_fields_open():
    schema = {
        "type": "object",
        "properties": {
            "closed": {"type": "object", "properties": {"a": {"type": "string"}}},
            "open": {"type": "object", "properties": {}, "x-kubernetes-preserve-unknown-fields": True},
        },
    }
    strict = jsonschema.Draft7Validator(v.strictify(schema))
    assert strict.is_valid({"open": {"anything": 1}})
    assert not strict.is_valid({"closed": {"b": "x"}})
    assert not strict.is_valid({"other": 1})


def _daemonset() -> dict:
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "whereabouts", "namespace": "kube-system"},
        "spec": whereabouts.daemonset_spec(whereabouts.WhereaboutsArgs(Versions())),
    }


def test_builtin_rejects_unknown_field_and_agrees_with_library():
    good = _daemonset()
    v.validate_builtin(good)
    v.validate_builtin_with_library(good)
    broken = copy.deepcopy(good)
    broken["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "Always"
    with pytest.raises(jsonschema.ValidationError, match="imagePullPolicyy"):
        v.validate_builtin(broken)
    with pytest.raises(jsonschema.ValidationError):
        v.validate_builtin_with_library(broken)


def test_builtin_rejects_wrong_type():
    pc = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "p"}, "value": "high"}
    with pytest.raises(jsonschema.ValidationError):
        v.validate_builtin(pc)


def test_unknown_kind_has_no_schema_and_fails():
    with pytest.raises(v.SchemaMissing):
        v.validate_object({"apiVersion": "example.com/v1", "kind": "Frobnicator", "metadata": {"name": "x"}})
    with pytest.raises(v.SchemaMissing):
        v.validate_builtin_with_library({"apiVersion": "example.com/v1", "kind": "Frobnicator", "metadata": {}})
    with pytest.raises(v.SchemaMissing):
        v.validate_registration("kubernetes:helm.sh/v4:Chart", True, {})


def test_network_operator_values_reject_misspelt_key():
    values = network_operator_values(NetworkOperatorArgs("network-operator", Versions()))
    v.validate_helm_release({"chart": "network-operator", "values": values})
    broken = copy.deepcopy(values)
    broken["nfd"]["enabeld"] = True
    with pytest.raises(AssertionError, match="nfd.enabeld"):
        v.validate_helm_release({"chart": "network-operator", "values": broken})
    wrong_type = copy.deepcopy(values)
    wrong_type["nfd"]["enabled"] = "yes"
    with pytest.raises(AssertionError, match="nfd.enabled"):
        v.validate_helm_release({"chart": "network-operator", "values": wrong_type})


def test_gpu_operator_values_reject_misspelt_key():
    values = gpu_operator_values(GpuOperatorArgs("gpu-operator", Versions(), ("s",)))
    v.validate_helm_release({"chart": "gpu-operator", "values": values})
    broken = copy.deepcopy(values)
    broken["driver"]["rdma"]["useHostMofet"] = True
    with pytest.raises(AssertionError, match="driver.rdma.useHostMofet"):
        v.validate_helm_release({"chart": "gpu-operator", "values": broken})


def test_unknown_chart_has_no_values_schema():
    with pytest.raises(v.SchemaMissing):
        v.validate_helm_release({"chart": "whereabouts-chart", "values": {}})


def test_cni_config_rejects_unknown_keys(built):
    plan = load_plan(built("dgx-h100-4su") / "plan.json")
    (spec, *_) = routing.plan_attachments(plan, "ipoib", plan.host_mtu)
    v.validate_cni_config(spec.config_json)
    broken = dict(spec.cni_config, masterr="ib0")
    with pytest.raises(AssertionError, match="masterr"):
        v.validate_cni_config(json.dumps(broken))
    broken_ipam = dict(spec.cni_config, ipam=dict(spec.cni_config["ipam"], rangeStart="1.2.3.4"))
    with pytest.raises(AssertionError, match="rangeStart"):
        v.validate_cni_config(json.dumps(broken_ipam))


def test_rdma_plugin_config_rejects_unknown_selector(policy):
    config = json.loads(policy["spec"]["rdmaSharedDevicePlugin"]["config"])
    config["configList"][0]["selectors"]["ifName"] = ["ib0"]
    with pytest.raises(AssertionError, match="ifName"):
        v.validate_rdma_plugin_config(json.dumps(config))


def test_installed_crds_must_be_the_pinned_ones():
    (good, *_) = crd_documents(WHEREABOUTS)
    v.validate_pinned_crd(good)
    changed = copy.deepcopy(good)
    changed["spec"]["versions"][0]["served"] = False
    with pytest.raises(AssertionError, match="differs"):
        v.validate_pinned_crd(changed)
    with pytest.raises(v.SchemaMissing):
        v.validate_pinned_crd({**good, "metadata": {"name": "ipamclaims.k8s.cni.cncf.io"}})


def test_the_programs_crds_are_the_reference_files():
    """pulumi/crds carries byte-for-byte copies of the pinned upstream files in tests/reference."""
    program_files = sorted(CRD_ROOT.glob("*/*.yaml"))
    assert len(program_files) == 5
    for path in program_files:
        assert path.read_bytes() == (v.reference_dir() / path.parent.name / path.name).read_bytes(), path
