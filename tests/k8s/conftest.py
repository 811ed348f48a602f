"""The live Kubernetes control plane of tests/k8s (and of later suites that import these fixtures): started once per
session from the toolchain tests/tools/k8s-build made, with the GPU nodes of a built example registered as KWOK
nodes.

Fixtures:
    k8s_bin            the toolchain's bin folder (skip off CI when it is not built; under CI=true: fail)
    k8s_cluster        the running K8sCluster (etcd, kube-apiserver, controller-manager, scheduler, kwok)
    k8s_plan           the plan (railforge.plan.Plan) of K8S_EXAMPLE, read from its built plan.json
    k8s_nodes          that plan's GPU nodes (NodeSpec), registered and Ready

RAILFORGE_K8S_MUTATE=<name> registers broken nodes, to watch the tests fail (docs/kubernetes.md):
    no-gpu        nodes without nvidia.com/gpu capacity
    no-rdma       nodes without their rdma/railN resources
    no-labels     nodes without the railforge.io topology and tenant labels
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from railforge.plan.io import read_plan
from railforge.plan.model import Plan
from tests.helpers.k8s_cluster import K8sCluster, K8sClusterConfig, missing_binaries, toolchain_bin
from tests.helpers.k8s_nodes import GPU, NodeSpec, is_ready, plan_nodes, register, without_resource

K8S_EXAMPLE = "dgx-h100-4su"  # 127 GPU nodes in 4 SUs, two tenants
MUTATE = "RAILFORGE_K8S_MUTATE"
MUTATIONS = ("no-gpu", "no-rdma", "no-labels")


def mutation() -> str | None:
    value = os.environ.get(MUTATE) or None
    if value is not None and value not in MUTATIONS:
        raise pytest.UsageError(f"{MUTATE}={value!r}: expected one of {', '.join(MUTATIONS)}")
    return value


def require_k8s_toolchain(*names: str) -> Path:
    """The bin folder holding `names` (the control plane's binaries when none are given). Off CI a missing toolchain
    skips, with the command that builds it; under CI=true it fails (./tasks test builds it first)."""
    bin_dir = toolchain_bin()
    missing = missing_binaries(bin_dir, names) if names else missing_binaries(bin_dir)
    if missing:
        msg = (f"Kubernetes toolchain not built (missing {', '.join(missing)}): run tests/tools/k8s-build "
               f"(about an hour cold on 2 cores), or set RAILFORGE_K8S_BIN")
        if os.environ.get("CI") == "true":
            pytest.fail(f"{msg}; CI=true forbids skipping")
        pytest.skip(msg)
    return bin_dir


@pytest.fixture(scope="session")
def k8s_bin() -> Path:
    return require_k8s_toolchain()


@pytest.fixture(scope="session")
def k8s_cluster(k8s_bin, tmp_path_factory) -> Iterator[K8sCluster]:
    # a Job's pods run until deleted, as training does (KWOK's upstream pod-complete stage would finish them at
    # once, and Kueue would free their quota before a preemption or starvation test could look)
    config = K8sClusterConfig(prefix="rfk8s", kwok_skip_stages=("pod-complete",))
    cluster = K8sCluster(k8s_bin, tmp_path_factory.mktemp("k8s-cluster"), config)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def k8s_plan(built) -> Plan:
    return read_plan(built(K8S_EXAMPLE) / "plan.json")


@pytest.fixture(scope="session")
def k8s_nodes(k8s_cluster, k8s_plan) -> list[NodeSpec]:
    broken = mutation()
    specs = plan_nodes(k8s_plan, topology_labels=broken != "no-labels")
    if broken == "no-gpu":
        specs = without_resource(specs, GPU)
    elif broken == "no-rdma":
        for rail in sorted({k for s in specs for k in s.capacity if k.startswith("rdma/")}):
            specs = without_resource(specs, rail)
    started = time.monotonic()
    register(k8s_cluster.api, specs)
    want = {s.name for s in specs}

    def all_ready() -> bool:
        nodes = k8s_cluster.api.list("v1", "Node")
        return want <= {n["metadata"]["name"] for n in nodes if is_ready(n)}

    k8s_cluster.wait_for(all_ready, timeout=120, what=f"{len(specs)} KWOK nodes Ready", interval=0.5)
    k8s_cluster.nodes_ready_seconds = time.monotonic() - started
    return specs
