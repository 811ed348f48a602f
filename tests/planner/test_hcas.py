"""Compute HCA names come from the hardware: the spec's node.compute.hcas, else the catalog model's names from
the vendor's document (a DGX H100's rails are mlx5_0,3,4,5,6,9,10,11: its storage ConnectX-7 take 1, 2, 7, 8),
else mlx5_0... as a guess that validate warns about. One plan field (each rail's `hca`) feeds NCCL_IB_HCA,
gres.conf, the hosts' railforge_rails (node check, rails role) and the burn-in pairs."""

from __future__ import annotations

import re

import pytest

from railforge.acceptance.fabric import read_fabric
from railforge.hardware.catalog import builtin_catalog
from railforge.planner import build_plan
from railforge.render.inventory import host_vars
from railforge.render.nccl import node_env
from railforge.render.slurm import gres_conf
from railforge.spec import load_spec
from tests.conftest import ROOT, plan_of

DGX_H100_RAILS = ["mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"]


@pytest.fixture(scope="module")
def dgx():
    return plan_of("dgx-h100-4su")


def test_every_dgx_h100_rail_has_the_user_guides_rdma_device(dgx):
    nodes = [d for d in dgx.devices if d.role == "node"]
    assert nodes and all([r.hca for r in sorted(n.rails, key=lambda r: r.rail)] == DGX_H100_RAILS for n in nodes)


def test_nccl_the_host_vars_and_the_burn_in_pairs_use_the_same_names(dgx):
    node = next(d for d in dgx.devices if d.role == "node")
    assert node_env(dgx, node)["NCCL_IB_HCA"] == "=" + ",".join(DGX_H100_RAILS)
    assert [r["hca"] for r in host_vars(node)["railforge_rails"]] == DGX_H100_RAILS
    fabric = read_fabric(dgx)
    assert {n.hca for n in fabric.all_nics() if n.node == node.name} == set(DGX_H100_RAILS)
    gpu_nodes = {d.name for d in dgx.devices if d.role == "node"}
    assert {n.hca for n in fabric.all_nics() if n.node in gpu_nodes} == set(DGX_H100_RAILS)
    assert {n.node for n in fabric.all_nics()} - gpu_nodes == {d.name for d in dgx.devices if d.role == "ufm"}


def test_gres_conf_lists_the_same_names(tmp_path):
    spec_path = tmp_path / "c.yaml"
    spec_path.write_text((ROOT / "tests" / "specs" / "slurm-lab.yaml").read_text().replace(
        "compute: {ports: 2, speed: 400G}", "compute: {ports: 2, speed: 400G, hcas: [mlx5_0, mlx5_3]}"))
    spec, lines = load_spec(spec_path)
    plan = build_plan(spec, lines, str(spec_path))
    rails = re.findall(r"^#   rail (\d)  (\S+)", gres_conf(plan, plan.slurm), re.M)
    assert rails == [("0", "mlx5_0"), ("1", "mlx5_3")]


def test_the_spec_names_win_over_the_catalog(tmp_path):
    spec_path = tmp_path / "c.yaml"
    text = (ROOT / "inventory" / "dgx-h100-4su" / "cluster.yaml").read_text()
    spec_path.write_text(text.replace("    ports: 8\n    speed: 400G\n",
                                      "    ports: 8\n    speed: 400G\n    hcas: [a0, a1, a2, a3, a4, a5, a6, a7]\n", 1))
    spec, lines = load_spec(spec_path)
    plan = build_plan(spec, lines, str(spec_path))
    node = next(d for d in plan.devices if d.role == "node")
    assert [r.hca for r in node.rails] == [f"a{k}" for k in range(8)]


def test_catalog_names_are_cited_or_are_a_guess():
    """A model with names either cites the vendor document that gives them (an address to read it at) or has
    none, so validate warns; HGX boards differ by vendor and carry none."""
    nodes = builtin_catalog().nodes
    cited = {m for m, n in nodes.items() if n.hcas and n.hcas_source}
    assert cited == {"DGX-H100", "DGX-H200"}
    assert all(re.search(r"https://\S+", nodes[m].hcas_source) and "Network Modules" in nodes[m].hcas_source
               for m in cited)
    assert all(nodes[m].hcas == DGX_H100_RAILS for m in cited)
    assert not any(n.hcas for m, n in nodes.items() if m.startswith("HGX-"))
    assert nodes["DGX-B200"].hcas and nodes["DGX-B200"].hcas_source is None
