"""The Node objects tests/helpers/k8s_nodes.py makes from a plan (no cluster needed): the Pulumi program's label keys
and RDMA count, the rail plane of a 3-tier plan, tenants, and a clear error for what it cannot know."""

from __future__ import annotations

import dataclasses

import pytest

from railforge.plan.io import read_plan
from tests.helpers.k8s_cluster import K8sHarnessError
from tests.helpers.k8s_nodes import GPU, RDMA_HCA_MAX, TENANT_LABEL, plan_nodes, without_resource

from .conftest import K8S_EXAMPLE


@pytest.fixture(scope="module")
def plan_path(built):
    return built(K8S_EXAMPLE) / "plan.json"


@pytest.fixture(scope="module")
def plan(plan_path):
    return read_plan(plan_path)


def test_rdma_count_is_the_stacks_default_rdma_hca_max():
    config = pytest.importorskip("railforge_k8s.config")
    assert config.StackConfig(plan="plan.json").rdma_hca_max == RDMA_HCA_MAX


def test_topology_labels_are_the_ones_the_pulumi_program_sets(plan, plan_path):
    node_labels = pytest.importorskip("railforge_k8s.node_labels")
    from railforge_k8s.plan_input import load_plan

    program = {n.name: n for n in load_plan(plan_path).nodes}
    for spec in plan_nodes(plan):
        ours = {k: v for k, v in spec.labels.items() if k.startswith("railforge.io/") and k != TENANT_LABEL}
        assert ours == node_labels.topology_labels(plan.cluster.name, program[spec.name]), spec.name


def test_rail_plane_label_comes_from_the_plan(plan):
    devices = [dataclasses.replace(d, topology=dataclasses.replace(d.topology, rail_plane="plane3"))
               if d.role == "node" else d for d in plan.devices]
    specs = plan_nodes(dataclasses.replace(plan, devices=devices))
    assert {s.labels["railforge.io/rail-plane"] for s in specs} == {"plane3"}
    assert all("railforge.io/rail-plane" not in s.labels for s in plan_nodes(plan))


def test_only_tenant_members_carry_the_tenant_label_and_taint(plan):
    members = {m: t.name for t in plan.tenants for m in t.members}
    specs = plan_nodes(plan)
    assert {s.name for s in specs if s.taints} == set(members) & {s.name for s in specs}
    for spec in specs:
        assert spec.labels.get(TENANT_LABEL) == members.get(spec.name)


def test_mutation_drops_only_the_named_resource(plan):
    specs = without_resource(plan_nodes(plan, only=["su002-gpu01"]), GPU)
    assert GPU not in specs[0].capacity and "rdma/rail0" in specs[0].capacity


def test_unknown_names_and_models_are_one_clear_error(plan):
    with pytest.raises(K8sHarnessError, match=r"not GPU nodes of the plan: \['su001-leaf-r0'\]"):
        plan_nodes(plan, only=["su001-gpu01", "su001-leaf-r0"])
    odd = dataclasses.replace(plan, cluster=dataclasses.replace(plan.cluster, node_model="HGX-Z999"))
    with pytest.raises(K8sHarnessError, match="node model 'HGX-Z999' has no catalog entry"):
        plan_nodes(odd)
