"""The generated Ansible inventory, read back by Ansible itself: through `-i inventory/<cluster>` from the
repository root and through `-i inventory/<cluster>/ansible` from any folder, without a warning."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import orjson
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from railforge.render.inventory import _halve_indent, host_vars, host_vars_bytes
from tests.conftest import ROOT, example_spec, plan_of, require_tool, run_cli, tool_path


@pytest.fixture(scope="module")
def roce_inventory(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("inv") / "roce-a800-4nic"
    folder.mkdir()
    shutil.copy(example_spec("roce-a800-4nic"), folder / "cluster.yaml")
    run_cli("build", str(folder / "cluster.yaml"))
    return folder


def _ansible_inventory(source: Path, cwd: Path) -> dict:
    require_tool("ansible-inventory")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    proc = subprocess.run([tool_path("ansible-inventory"), "-i", str(source), "--list"], capture_output=True,
                          text=True, cwd=cwd, env=env, check=True)
    assert "WARNING" not in proc.stderr and "ERROR" not in proc.stderr, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def test_inventory_folder_layout(roce_inventory: Path) -> None:
    generated = (roce_inventory / "generated" / "ansible").resolve()
    assert (roce_inventory / "ansible").resolve() == generated
    for name in ("hosts.yml", "host_vars", "group_vars"):
        assert (roce_inventory / name).is_symlink()
        assert (roce_inventory / name).resolve() == generated / name
    assert sorted(p.name for p in generated.iterdir()) == ["group_vars", "host_vars", "hosts.yml"], \
        "the inventory folder holds the inventory and nothing else"
    plan = plan_of("roce-a800-4nic")
    expected = sorted(f"{d.name}.json" for d in plan.devices_by_role("node", "mgmt"))
    assert sorted(p.name for p in (generated / "host_vars").iterdir()) == expected
    assert sorted(p.name for p in (generated / "group_vars" / "all").iterdir()) == ["cluster.yml", "qos.yml"]
    hosts = yaml.safe_load((generated / "hosts.yml").read_text())["all"]["children"]
    assert hosts["su001"]["hosts"] == {n.name: None for n in plan.devices_by_role("node") if n.su == 1}, \
        "hosts.yml holds groups only; node vars live in host_vars"


def test_any_folder_same_inventory_no_warnings(roce_inventory: Path, tmp_path: Path) -> None:
    """From the repository root (ansible.cfg) `-i inventory/<cluster>`; from elsewhere (no ansible.cfg, default
    plugins) `-i inventory/<cluster>/ansible`: the same inventory, and neither parses cluster.yaml or a CSV."""
    at_root = _ansible_inventory(roce_inventory, ROOT)
    elsewhere = _ansible_inventory(roce_inventory / "ansible", tmp_path)
    assert at_root == elsewhere
    assert "cluster.yaml" not in json.dumps(at_root)


def test_site_vars_beside_the_playbook_reach_every_host(roce_inventory: Path, tmp_path: Path) -> None:
    """The place the role READMEs give for site variables (a mirror URL): `<playbook dir>/group_vars/all/`, which a
    build never writes. Ansible reads it with the generated inventory and ranks it above the inventory's
    group_vars/all (a generated variable set there wins)."""
    require_tool("ansible-inventory")
    site = tmp_path / "playbooks" / "group_vars" / "all"
    site.mkdir(parents=True)
    generated = yaml.safe_load((roce_inventory / "ansible" / "group_vars" / "all" / "cluster.yml").read_text())
    overridden = sorted(generated)[0]
    (site / "site.yml").write_text(f"doca_ofed_repo_url: http://mirror.example.internal/doca/\n{overridden}: site\n")
    node = next(d.name for d in plan_of("roce-a800-4nic").devices_by_role("node"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    proc = subprocess.run([tool_path("ansible-inventory"), "-i", str(roce_inventory / "ansible"), "--playbook-dir",
                           str(tmp_path / "playbooks"), "--host", node], capture_output=True, text=True, cwd=tmp_path,
                          env=env, check=True)
    host = json.loads(proc.stdout)
    assert host["doca_ofed_repo_url"] == "http://mirror.example.internal/doca/"
    assert host[overridden] == "site"
    own = json.loads((roce_inventory / "ansible" / "host_vars" / f"{node}.json").read_text())
    assert own and all(host[k] == v for k, v in own.items()), "the node's generated variables are still there"


def test_stale_per_su_layout_is_cleaned(tmp_path: Path) -> None:
    """A build over an older one (per-SU nodes/ files, a `nodes` link) leaves no stale inventory source behind,
    and `--only inventory` writes the whole inventory: hosts.yml, host_vars and group_vars."""
    folder = tmp_path / "c"
    folder.mkdir()
    shutil.copy(example_spec("roce-a800-4nic"), folder / "cluster.yaml")
    stale = folder / "generated" / "ansible" / "nodes"
    stale.mkdir(parents=True)
    (stale / "su001.yml").write_text("all: {children: {su001: {hosts: {ghost: {ansible_host: 1.2.3.4}}}}}\n")
    (folder / "nodes").symlink_to("generated/ansible/nodes")
    run_cli("build", str(folder / "cluster.yaml"), "--only", "inventory")
    ansible = folder / "generated" / "ansible"
    assert not (folder / "nodes").is_symlink() and not stale.exists()
    assert (ansible / "hosts.yml").is_file() and (ansible / "group_vars" / "all" / "qos.yml").is_file()
    inv = _ansible_inventory(folder / "ansible", tmp_path)
    assert "ghost" not in inv["_meta"]["hostvars"]
    assert inv["_meta"]["hostvars"]["su002-gpu16"]["railforge_qos"]["roce_dscp"] == 26
    assert len(inv["su002"]["hosts"]) == 16


def test_ansible_cfg_reads_json_inventories(tmp_path: Path) -> None:
    """ansible.cfg restricts the inventory plugins but still reads a .json inventory in a folder."""
    (tmp_path / "extra.json").write_text(json.dumps({"all": {"children": {"lab": {"hosts": {"h1": {"x": 1}}}}}}))
    inv = _ansible_inventory(tmp_path, ROOT)
    assert inv["lab"]["hosts"] == ["h1"] and inv["_meta"]["hostvars"]["h1"] == {"x": 1}


def test_ansible_reads_the_inventory(roce_inventory: Path) -> None:
    inv = _ansible_inventory(roce_inventory, ROOT)
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


_ASCII = st.characters(max_codepoint=127)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1) | st.text(_ASCII),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(_ASCII, max_size=3), inner, max_size=3),
    max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(_JSON)
def test_halved_orjson_indent_is_json_indent_one(data) -> None:
    """host_vars files are orjson's output re-indented; json.dumps(indent=1) is the format they promise."""
    text = orjson.dumps(data, option=orjson.OPT_INDENT_2)
    if b"\x7f" not in text:  # DEL: json escapes it, orjson does not; host_vars_bytes sends it to json
        assert _halve_indent(text).decode() == json.dumps(data, indent=1)


def test_host_vars_files_are_json_indent_one() -> None:
    for name in ("roce-a800-4nic", "dgx-h100-4su"):
        for dev in plan_of(name).devices_by_role("mgmt", "node"):
            assert host_vars_bytes(dev).decode() == json.dumps(host_vars(dev), indent=1) + "\n", dev.name
