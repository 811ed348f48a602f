"""The generated Ansible inventory, read back by Ansible itself through `-i inventory/<cluster>`."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, example_spec, plan_of, require_tool, run_cli, tool_path


@pytest.fixture(scope="module")
def roce_inventory(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("inv") / "roce-a800-4nic"
    folder.mkdir()
    shutil.copy(example_spec("roce-a800-4nic"), folder / "cluster.yaml")
    run_cli("build", str(folder / "cluster.yaml"))
    return folder


def test_inventory_folder_layout(roce_inventory: Path) -> None:
    for name in ("hosts.yml", "nodes", "group_vars"):
        assert (roce_inventory / name).is_symlink()
        assert (roce_inventory / name).resolve().is_relative_to((roce_inventory / "generated").resolve())


def test_ansible_reads_the_inventory(roce_inventory: Path) -> None:
    require_tool("ansible-inventory")
    proc = subprocess.run([tool_path("ansible-inventory"), "-i", str(roce_inventory), "--list"], capture_output=True,
                          text=True, cwd=ROOT, check=True)
    assert "cluster.yaml" not in proc.stderr, "cluster.yaml must not be parsed as an inventory source"
    inv = json.loads(proc.stdout)
    plan = plan_of("roce-a800-4nic")
    nodes = [d for d in plan.devices if d.role == "node"]
    kube_nodes = set()
    for child in inv["kube_node"].get("children", []):
        for grand in inv[child].get("children", []):
            kube_nodes.update(inv[grand]["hosts"])
    assert kube_nodes == {n.name for n in nodes}
    assert set(inv["su001"]["hosts"]) == {n.name for n in nodes if n.su == 1}
    assert set(inv["kube_control_plane"]["hosts"]) == {"mgmt01", "mgmt02", "mgmt03"}
    hostvars = inv["_meta"]["hostvars"]
    for node in nodes:
        hv = hostvars[node.name]
        assert hv["ansible_host"] == node.bond.address.split("/")[0]
        assert [r["address"] for r in hv["railforge_rails"]] == [r.address for r in node.rails]
        assert [r["leaf_port"] for r in hv["railforge_rails"]] == [r.leaf_port for r in node.rails]
        assert [m["switch"] for m in hv["railforge_bond"]["members"]] == [m.switch for m in node.bond.members]
        assert hv["railforge_bmc"]["address"] == node.bmc.address
        assert hv["railforge_qos"]["roce_dscp"] == plan.qos.roce_dscp == 26
        assert hv["railforge_qos"]["traffic_class"] == 104
    leaf = next(d for d in plan.devices if d.role == "leaf")
    assert hostvars[leaf.name]["ansible_host"] == leaf.mgmt_address.split("/")[0]


def test_rail_addresses_sit_in_their_leaf_subnet() -> None:
    import netaddr

    plan = plan_of("roce-a800-4nic")
    leaves = plan.device_index()
    for node in plan.devices_by_role("node"):
        for rail in node.rails:
            subnet = netaddr.IPNetwork(leaves[rail.leaf].host_subnets[0].prefix)
            assert netaddr.IPAddress(rail.address.split("/")[0]) in subnet
            assert rail.gateway == leaves[rail.leaf].host_subnets[0].gateway
            assert rail.table == 100 + rail.rail


def test_kubespray_export(roce_inventory: Path) -> None:
    data = yaml.safe_load((roce_inventory / "generated" / "kubespray" / "hosts.yaml").read_text())
    groups = data["all"]["children"]
    assert set(groups["kube_control_plane"]["hosts"]) == set(groups["etcd"]["hosts"]) == {"mgmt01", "mgmt02", "mgmt03"}
    assert len(groups["kube_node"]["hosts"]) == 32
    for name, hv in data["all"]["hosts"].items():
        assert hv["ip"] == hv["access_ip"] == hv["ansible_host"], name
