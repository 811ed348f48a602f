"""Pods get the plan's rail addresses: whereabouts v0.9.4 as the IPAM of the real containernetworking `macvlan`
plugin, both built from their Go modules, doing CNI ADD and DEL into network namespaces, with its IPPools on the
live API server, configured by the NetworkAttachmentDefinitions that `pulumi up` of the program created.

The stack is the program with whereabouts and the rail attachments only (no Helm chart, no schedulers, no node
labels); whereabouts authenticates with the token of the ServiceAccount the program made, so the program's RBAC is
what allows it. The NAD of an InfiniBand plan has type `ipoib`: no IPoIB plugin or device exists here, so macvlan
over a veth link stands in (tests/k8s/cni.py); the IPAM section is the NAD's unchanged.

Not proven here (docs/pulumi.md): a kubelet or Multus reading the NAD, the IPoIB plugin, a real RDMA netdev, the
whereabouts DaemonSet's pods and its reconciler.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import statistics
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.conftest import example_spec, require_tool, run_cli

from . import cni
from .conftest import K8S_EXAMPLE, require_k8s_toolchain
from .pulumi_stack import RailforgeStack, Run, error_messages

pytestmark = pytest.mark.root  # network namespaces and links

POD_NAMESPACE = "i36cni-pods"  # the stack's workloadNamespace
CONCURRENT = 24
NAD_API = "k8s.cni.cncf.io/v1"
POOL_API = "whereabouts.cni.cncf.io/v1alpha1"


def pools(api, ip_range: str) -> list[dict]:
    return [p for p in api.list(POOL_API, "IPPool", namespace="kube-system") if p["spec"]["range"] == ip_range]


def allocated(api, ip_range: str) -> dict[str, str]:
    """podRef -> address of every allocation of the pool holding ip_range (whereabouts stores offsets)."""
    out = {}
    for pool in pools(api, ip_range):
        base = int(ipaddress.ip_network(pool["spec"]["range"]).network_address)
        for offset, alloc in (pool["spec"].get("allocations") or {}).items():
            out[alloc["podref"]] = str(ipaddress.ip_address(base + int(offset)))
    return out


def in_range(address: str, ipam: dict) -> bool:
    ip = ipaddress.ip_interface(address)
    return (ip.network == ipaddress.ip_network(ipam["range"])
            and ipaddress.ip_address(ipam["range_start"]) <= ip.ip <= ipaddress.ip_address(ipam["range_end"]))


class Node:
    """One stand-in node: its RDMA netdev (a veth end) and the pods (network namespaces) made on it; cleans up after."""

    def __init__(self, tag: str, mtu: int):
        self.master = f"{cni.PREFIX}-{tag}{os.getpid() % 100000}"[:14]
        self.pods: list[cni.Pod] = []
        cni.add_master(self.master, mtu)

    def pod(self, name: str) -> cni.Pod:
        pod = cni.Pod(f"{cni.PREFIX}-{os.getpid() % 100000}-{name}", namespace=POD_NAMESPACE)
        cni.add_netns(pod.netns)
        self.pods.append(pod)
        return pod

    def close(self, bin_dir: Path, config: dict) -> None:
        """DEL every pod (as the runtime does when a pod goes; DEL of a pod that got nothing succeeds), then remove
        the namespaces and the master."""
        for pod in self.pods:
            with contextlib.suppress(cni.CniError):
                cni.call(bin_dir, "DEL", config, pod)
            cni.del_netns(pod.netns)
        cni.del_link(self.master)


@pytest.fixture(scope="module")
def cni_bin() -> Path:
    require_tool("root", "ip")
    return require_k8s_toolchain("pulumi", "pulumi-resource-kubernetes", "macvlan", "whereabouts")


@dataclass
class RailStack:
    stack: RailforgeStack
    refused: Run  # the first `up`, before the workload namespace existed
    refused_state: list[str]  # the stack's resource types after it
    finished: Run  # the next `up`, once the namespace was made


@pytest.fixture(scope="module")
def rail_stack(cni_bin, k8s_cluster, built, tmp_path_factory) -> Iterator[RailStack]:
    """`pulumi up` of the program with whereabouts and the rail attachments, destroyed after the module. The first
    `up` runs before the workload namespace exists, so the API server refuses the NADs; the namespace is then made
    (the cause fixed) and the next `up` finishes the stack."""
    api = k8s_cluster.api
    stack = RailforgeStack(cni_bin, tmp_path_factory.mktemp("cni-stack"), k8s_cluster.kubeconfig, name="cni")
    stack.configure(plan=built(K8S_EXAMPLE) / "plan.json", helmReleases=False, gpuOperator=False, nodeLabels=False,
                    volcano=False, kueue=False, priorityClasses=False, workloadNamespace=POD_NAMESPACE,
                    networkOperatorNamespace="i36cni-network-operator")
    assert api.find("v1", "Namespace", POD_NAMESPACE) is None
    try:
        started = time.monotonic()
        refused = stack.up()
        print(f"\nrefused up: {time.monotonic() - started:.1f} s")
        refused_state = [r["type"] for r in stack.resources()]
        api.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": POD_NAMESPACE}})
        started = time.monotonic()
        finished = stack.up()
        print(f"finishing up: {time.monotonic() - started:.1f} s")
        assert finished.ok, finished.error
        yield RailStack(stack, refused, refused_state, finished)
    finally:
        gone = stack.destroy()
        if api.find("v1", "Namespace", POD_NAMESPACE) is not None:
            api.delete("v1", "Namespace", POD_NAMESPACE)
        assert gone.ok, gone.error


def test_an_object_the_api_server_refuses_fails_up_naming_it_and_the_next_up_finishes(rail_stack, k8s_plan):
    """workloadNamespace names a namespace that does not exist: the API server refuses each rail's NAD. `up` fails
    (exit 1) with one distinct error per refused NAD naming it and the cause, no traceback; what it could create
    stays in the state, and the `up` after the namespace exists creates exactly the NADs and changes nothing else."""
    rails = sorted({n.rail for n in k8s_plan.pod_networks})
    refused = rail_stack.refused
    assert not refused.ok
    assert "code: 1\n" in refused.error, refused.error
    assert "Traceback" not in refused.error + refused.output
    # one distinct message per refused NAD (the CLI prints each where it happened and again in its summaries)
    errors = set(error_messages(refused)) - {"update failed"}
    assert len(errors) == len(rails), "\n".join(sorted(errors))
    for rail in rails:
        (line,) = [e for e in errors if f'NetworkAttachmentDefinition::rail-attachments-rail{rail}-ipoib"' in e]
        assert f'namespaces "{POD_NAMESPACE}" not found' in line, line
    # everything but the NADs was created by the failed `up` and kept in the state
    assert "kubernetes:apps/v1:DaemonSet" in rail_stack.refused_state
    assert rail_stack.refused_state.count("kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition") == 5
    assert "kubernetes:k8s.cni.cncf.io/v1:NetworkAttachmentDefinition" not in rail_stack.refused_state
    assert rail_stack.finished.changes.get("create") == len(rails), rail_stack.finished.changes
    assert set(rail_stack.finished.changes) == {"create", "same"}, rail_stack.finished.changes


@pytest.fixture(scope="module")
def flat_file(rail_stack, k8s_cluster, tmp_path_factory) -> Path:
    """The node's whereabouts config, with a token of the ServiceAccount the program created."""
    token = k8s_cluster.api.create_token("kube-system", "whereabouts")
    return cni.node_config(tmp_path_factory.mktemp("cni-node"), k8s_cluster.server, k8s_cluster.pki.ca, token)


def nads_on_server(api) -> dict[str, dict]:
    return {n["metadata"]["name"]: json.loads(n["spec"]["config"])
            for n in api.list(NAD_API, "NetworkAttachmentDefinition", namespace=POD_NAMESPACE)}


def test_concurrent_adds_get_distinct_addresses_of_the_plans_rail_range_and_del_frees_them(
        rail_stack, flat_file, cni_bin, k8s_cluster, k8s_plan):
    api = k8s_cluster.api
    nads = nads_on_server(api)
    rails = {n.rail: n for n in k8s_plan.pod_networks}
    assert sorted(nads) == sorted(f"rail{rail}-ipoib" for rail in rails), nads
    # rail 3's attachment: its IPAM is the plan's pod range of that rail
    net = rails[3]
    nad = nads["rail3-ipoib"]
    assert (nad["ipam"]["range"], nad["ipam"]["range_start"], nad["ipam"]["range_end"]) == \
        (net.subnet, net.range_start, net.range_end)
    node = Node("r3", nad.get("mtu", 1500))
    config = cni.runtime_config(nad, node.master, flat_file)
    assert config["ipam"] == {**nad["ipam"], "configuration_path": str(flat_file)}
    try:
        pods = [node.pod(f"p{i:02d}") for i in range(CONCURRENT)]
        started = time.monotonic()
        with ThreadPoolExecutor(CONCURRENT) as pool:
            results = list(pool.map(lambda p: cni.call(cni_bin, "ADD", config, p), pods))
        wall = time.monotonic() - started
        addresses = [r.addresses[0] for r in results]
        assert all(len(r.addresses) == 1 for r in results), results
        assert len(set(addresses)) == CONCURRENT, sorted(addresses)
        assert all(in_range(a, nad["ipam"]) for a in addresses), sorted(addresses)
        for r in results:  # the address is on the pod's interface, inside its namespace
            assert cni.netns_addresses(r.pod.netns, r.pod.ifname) == [r.addresses[0]], r.pod
        held = allocated(api, nad["ipam"]["range"])
        assert {f"{POD_NAMESPACE}/{r.pod.name}": r.addresses[0].split("/")[0] for r in results} == held
        print(f"\n{CONCURRENT} concurrent ADDs: {wall:.1f} s wall, per ADD median "
              f"{statistics.median(r.seconds for r in results):.2f} s, max {max(r.seconds for r in results):.2f} s")

        freed = results[5]
        deleted = cni.call(cni_bin, "DEL", config, freed.pod)
        print(f"DEL: {deleted.seconds:.2f} s")
        assert cni.netns_addresses(freed.pod.netns, freed.pod.ifname) == []
        now = allocated(api, nad["ipam"]["range"])
        assert f"{POD_NAMESPACE}/{freed.pod.name}" not in now and len(now) == CONCURRENT - 1, now
        assert freed.addresses[0].split("/")[0] not in now.values()
        # whereabouts hands out the lowest free address: the freed one is the next pod's
        lowest_free = min(ipaddress.ip_address(a.split("/")[0]) for a in addresses
                          if a.split("/")[0] not in now.values())
        again = cni.call(cni_bin, "ADD", config, node.pod("again"))
        print(f"ADD after DEL: {again.seconds:.2f} s")
        assert ipaddress.ip_interface(again.addresses[0]).ip == lowest_free == \
            ipaddress.ip_interface(freed.addresses[0]).ip
    finally:
        node.close(cni_bin, config)
    assert allocated(api, nad["ipam"]["range"]) == {}


def test_pods_with_an_interface_on_every_rail_get_each_rails_address(
        rail_stack, flat_file, cni_bin, k8s_cluster, k8s_plan):
    """Two pods with one interface per rail (net1..net8, as a training pod asks for rdma/rail0..7), all 16 ADDs at
    once through each rail's NAD over its own stand-in netdev: every interface's address is in its own rail's plan
    range and no two are equal; DEL of every interface empties every rail's pool."""
    api = k8s_cluster.api
    nads = nads_on_server(api)
    nets = {n.rail: n for n in k8s_plan.pod_networks}
    masters = {rail: f"{cni.PREFIX}-m{rail}{os.getpid() % 100000}"[:14] for rail in nets}
    stems = [f"{cni.PREFIX}-{os.getpid() % 100000}-mr{i}" for i in range(2)]
    configs = {}
    calls = []
    try:
        for rail, master in masters.items():
            nad = nads[f"rail{rail}-ipoib"]
            cni.add_master(master, nad.get("mtu", 1500))
            configs[rail] = cni.runtime_config(nad, master, flat_file)
        for stem in stems:
            cni.add_netns(stem)
            calls += [(rail, cni.Pod(stem, namespace=POD_NAMESPACE, ifname=f"net{rail + 1}")) for rail in nets]
        with ThreadPoolExecutor(len(calls)) as pool:
            results = list(pool.map(lambda c: (c[0], cni.call(cni_bin, "ADD", configs[c[0]], c[1])), calls))
        addresses = [r.addresses[0] for _, r in results]
        assert len(set(addresses)) == len(calls), sorted(addresses)
        for rail, r in results:
            net = nets[rail]
            assert in_range(r.addresses[0], {"range": net.subnet, "range_start": net.range_start,
                                             "range_end": net.range_end}), (rail, r.addresses)
            assert cni.netns_addresses(r.pod.netns, r.pod.ifname) == r.addresses
    finally:
        for rail, pod in calls:
            with contextlib.suppress(cni.CniError):
                cni.call(cni_bin, "DEL", configs[rail], pod)
        for stem in stems:
            cni.del_netns(stem)
        for master in masters.values():
            cni.del_link(master)
    assert {rail: allocated(api, net.subnet) for rail, net in nets.items()} == {rail: {} for rail in nets}


@pytest.fixture(scope="module")
def tiny_plan(tmp_path_factory) -> Path:
    """A one-SU RoCE cluster of 4 slots with 1 pod address per node and rail: a 4-address range per rail."""
    spec = yaml.safe_load(example_spec("minimal").read_text())
    spec["name"] = "cni-tiny"
    spec["scalable_units"].update(count=1, max=1, nodes_per_su=4)
    spec.setdefault("addressing", {})["pod_addresses_per_node"] = 1
    work = tmp_path_factory.mktemp("cni-tiny")
    (work / "cluster.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    run_cli("build", str(work / "cluster.yaml"), "--out", str(work / "out"))
    return work / "out" / "plan.json"


def test_a_full_range_fails_add_with_whereabouts_error_and_allocates_nothing(
        rail_stack, flat_file, cni_bin, k8s_cluster, tiny_plan):
    """The plan's renderer (routing.plan_attachments, what the program puts in the NAD) for a plan whose rail range
    holds 4 addresses: 4 ADDs fill it, the 5th fails with whereabouts' message, the pool keeps the 4, the pod gets
    no address and, after the runtime's DEL of the failed ADD, no link; after a DEL the next ADD gets the freed
    address."""
    from railforge_k8s.plan_input import load_plan  # on sys.path once .pulumi_stack is imported
    from railforge_k8s.routing import plan_attachments

    api = k8s_cluster.api
    plan = load_plan(tiny_plan)
    spec = plan_attachments(plan, "macvlan", plan.host_mtu)[0]
    nad = spec.cni_config
    start, end = (ipaddress.ip_address(nad["ipam"][k]) for k in ("range_start", "range_end"))
    size = int(end) - int(start) + 1
    assert size == 4, nad["ipam"]
    node = Node("t", nad["mtu"])
    config = cni.runtime_config(nad, node.master, flat_file)
    assert {k: v for k, v in config.items() if k not in ("master", "ipam")} == \
        {k: v for k, v in nad.items() if k not in ("master", "ipam")}
    try:
        filled = [cni.call(cni_bin, "ADD", config, node.pod(f"f{i}")) for i in range(size)]
        assert sorted(ipaddress.ip_interface(r.addresses[0]).ip for r in filled) == \
            [start + i for i in range(size)]
        extra = node.pod("full")
        with pytest.raises(cni.CniError) as err:
            cni.call(cni_bin, "ADD", config, extra)
        assert "Could not allocate IP in range" in err.value.msg and nad["ipam"]["range"] in err.value.msg, \
            err.value.msg
        print(f"\nfull range: {err.value.msg}")
        held = allocated(api, nad["ipam"]["range"])
        assert len(held) == size and f"{POD_NAMESPACE}/{extra.name}" not in held, held
        assert cni.netns_addresses(extra.netns, extra.ifname) == []
        # macvlan v1.10.0 leaves its link (no address) in the pod after an IPAM failure (its cleanup checks an `err`
        # that the IPAM call shadows); the runtime's DEL after a failed ADD, as kubelet does, removes it
        cni.call(cni_bin, "DEL", config, extra)
        assert cni.netns_links(extra.netns) == []
        assert allocated(api, nad["ipam"]["range"]) == held
        cni.call(cni_bin, "DEL", config, filled[2].pod)
        again = cni.call(cni_bin, "ADD", config, extra)
        assert again.addresses == filled[2].addresses
    finally:
        node.close(cni_bin, config)
    assert allocated(api, nad["ipam"]["range"]) == {}
