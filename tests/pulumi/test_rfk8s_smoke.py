"""The smoke-test material a user runs on a real cluster: manifests validate, names match the stack."""

from __future__ import annotations

import json
from pathlib import Path

import jq
import pytest
import rfk8s_validate as v
import yaml
from rfk8s_harness import run_program

SMOKE = Path(__file__).resolve().parents[2] / "pulumi" / "smoke"


@pytest.fixture(scope="module")
def ib_stack(built):
    return run_program({"plan": str(built("dgx-h100-4su") / "plan.json")})


@pytest.mark.parametrize("manifest", ["rdma-pair-secondary.yaml", "rdma-pair-host.yaml"])
def test_smoke_pods_validate_and_use_stack_resources(ib_stack, manifest):
    (policy,) = ib_stack.of_type("kubernetes:mellanox.com/v1alpha1:NicClusterPolicy")
    config = json.loads(policy.inputs["spec"]["rdmaSharedDevicePlugin"]["config"])
    resources = {f"rdma/{e['resourceName']}" for e in config["configList"]}
    nads = {
        r.inputs["metadata"]["name"]
        for r in ib_stack.of_type("kubernetes:k8s.cni.cncf.io/v1:NetworkAttachmentDefinition")
    }
    pods = list(yaml.safe_load_all((SMOKE / manifest).read_text()))
    assert [p["metadata"]["name"] for p in pods] == ["rdma-server", "rdma-client"]
    for pod in pods:
        v.validate_builtin(pod)
        (container,) = pod["spec"]["containers"]
        assert set(container["resources"]["limits"]) <= resources
        network = pod["metadata"].get("annotations", {}).get("k8s.v1.cni.cncf.io/networks")
        assert (network in nads) if network else pod["spec"]["hostNetwork"]


def _nodes(allocatable: list[dict]) -> dict:
    return {"items": [{"metadata": {"name": f"n{i}"}, "status": {"allocatable": a}} for i, a in enumerate(allocatable)]}


def test_allocatable_check_finds_missing_rdma_resources():
    program = jq.compile((SMOKE / "rdma-allocatable.jq").read_text(), args={"rails": 2})
    full = {"rdma/rail0": "63", "rdma/rail1": "63", "cpu": "128"}
    assert program.input_value(_nodes([full, full])).first() == []
    partial = {"rdma/rail0": "63", "rdma/rail1": "0"}
    assert program.input_value(_nodes([full, partial, {}])).first() == [
        {"name": "n1", "missing": ["rdma/rail1"]},
        {"name": "n2", "missing": ["rdma/rail0", "rdma/rail1"]},
    ]
