"""The Ansible inventory, laid out so Ansible reads only what a run needs: a groups-only `hosts.yml`
(switches and UFM carry just `ansible_host`), one `host_vars/<host>.json` per node and management host
with its rails, bond, BMC and topology (Ansible tries JSON before YAML, so these load at JSON speed),
and `group_vars/all/` split by topic. Also the Kubespray groups."""

from __future__ import annotations

import json
from dataclasses import asdict

import orjson

from railforge.formats.output import Output
from railforge.formats.yamlout import dumps
from railforge.plan.model import Device, Plan

SWITCH_GROUPS = {
    "leaf": "compute_leaf", "spine": "compute_spine", "superspine": "compute_superspine",
    "storage-leaf": "storage_leaf", "storage-spine": "storage_spine", "storage-superspine": "storage_superspine",
    "oob-leaf": "oob", "oob-spine": "oob", "oob-superspine": "oob",
}


def _host_ip(dev: Device) -> str | None:
    if dev.bond is not None:
        return dev.bond.address.split("/")[0]
    if dev.mgmt_address:
        return dev.mgmt_address.split("/")[0]
    if dev.bmc is not None:
        return dev.bmc.address.split("/")[0]
    return None


def _name_only(devices: list[Device]) -> dict:
    return {d.name: None for d in devices}


def inventory_groups(plan: Plan) -> dict:
    """Every group and its members. Nodes and management hosts have their vars in host_vars/."""
    mgmt = plan.devices_by_role("mgmt")
    by_su: dict[int, list[Device]] = {}
    for node in plan.devices_by_role("node"):
        by_su.setdefault(node.su, []).append(node)
    children: dict[str, dict] = {
        "nodes": {"children": {f"su{su:03d}": None for su in sorted(by_su)}},
        "mgmt": {"hosts": _name_only(mgmt)},
        "ufm": {"hosts": {u.name: ({"ansible_host": _host_ip(u)} if _host_ip(u) else None)
                          for u in plan.devices_by_role("ufm")}},
        f"fabric_{plan.cluster.fabric}": {"children": {"nodes": None}},
    }
    for su, nodes in sorted(by_su.items()):
        children[f"su{su:03d}"] = {"hosts": _name_only(nodes)}
    for role, group in SWITCH_GROUPS.items():
        members = {d.name: ({"ansible_host": _host_ip(d)} if d.mgmt_address else None)
                   for d in plan.devices if d.role == role}
        if members:
            children.setdefault(group, {"hosts": {}})["hosts"].update(members)
    children["kube_control_plane"] = {"hosts": _name_only(mgmt)}
    children["etcd"] = {"hosts": _name_only(mgmt)}
    children["kube_node"] = {"children": {"nodes": None}}
    children["k8s_cluster"] = {"children": {"kube_control_plane": None, "kube_node": None}}
    return {"all": {"children": children}}


def host_vars(dev: Device) -> dict:
    out: dict = {"ansible_host": _host_ip(dev)}
    if dev.role == "node":
        out["railforge_rails"] = [asdict(r) for r in dev.rails]
        out["railforge_topology"] = asdict(dev.topology) if dev.topology else None
    if dev.bond is not None:
        out["railforge_bond"] = asdict(dev.bond)
    if dev.bmc is not None:
        out["railforge_bmc"] = asdict(dev.bmc)
    return out


def group_vars(plan: Plan) -> dict[str, dict]:
    """group_vars/all split by topic: file stem -> its variables."""
    slurm = {} if plan.slurm is None else {"slurm": {
        "railforge_slurm_deploy": plan.slurm.deploy,
        "railforge_slurm_controller": plan.slurm.controller,
        "railforge_slurm_accounting_host": plan.slurm.accounting_host,
        "railforge_slurm_cluster_name": plan.slurm.cluster_name,
        "railforge_slurm_dbd_port": plan.slurm.slurmdbd_port,
    }}
    return slurm | {
        "cluster": {
            "railforge_cluster": plan.cluster.name,
            "railforge_fabric": plan.cluster.fabric,
            "railforge_gpus_per_node": plan.cluster.gpus_per_node,
            "railforge_nvswitch": plan.cluster.nvswitch,
        },
        "qos": {"railforge_qos": asdict(plan.qos)},
    }


def _halve_indent(data: bytes) -> bytes:
    """orjson's two-space indent as one space, with bytes.replace only: deepest first, each depth's indent becomes
    tabs (a shallower pass cannot match a line already done), then the tabs spaces. orjson writes no raw tab (JSON
    escapes it in strings) and raw newlines only between tokens. ~25% faster than one regex pass per depth."""
    depth = 1
    while b"\n" + b"  " * depth in data:
        depth += 1
    for d in range(depth - 1, 0, -1):
        data = data.replace(b"\n" + b"  " * d, b"\n" + b"\t" * d)
    return data.replace(b"\t", b" ")


def _host_vars_objects(dev: Device) -> dict:
    out: dict = {"ansible_host": _host_ip(dev)}
    if dev.role == "node":
        out["railforge_rails"] = dev.rails
        out["railforge_topology"] = dev.topology
    if dev.bond is not None:
        out["railforge_bond"] = dev.bond
    if dev.bmc is not None:
        out["railforge_bmc"] = dev.bmc
    return out


def host_vars_bytes(dev: Device) -> bytes:
    """`json.dumps(host_vars(dev), indent=1)` plus a newline, byte for byte, built by orjson (its two-space
    indent halved); anything json escapes and orjson does not (outside ASCII, and DEL) takes json's own path."""
    data = orjson.dumps(_host_vars_objects(dev), option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)
    if not data.isascii() or b"\x7f" in data:
        return (json.dumps(host_vars(dev), indent=1) + "\n").encode()
    return _halve_indent(data)


def host_vars_json(dev: Device) -> str:
    return host_vars_bytes(dev).decode()


def kubespray_inventory(plan: Plan) -> dict:
    hosts = {}
    for dev in plan.devices_by_role("mgmt", "node"):
        ip = _host_ip(dev)
        hosts[dev.name] = {"ansible_host": ip, "ip": ip, "access_ip": ip}
    mgmt = {m.name: None for m in plan.devices_by_role("mgmt")}
    return {"all": {"hosts": hosts, "children": {
        "kube_control_plane": {"hosts": dict(mgmt)},
        "etcd": {"hosts": dict(mgmt)},
        "kube_node": {"hosts": {n.name: None for n in plan.devices_by_role("node")}},
        "k8s_cluster": {"children": {"kube_control_plane": None, "kube_node": None}},
    }}}


def render(plan: Plan, out: Output) -> None:
    for dev in plan.devices_by_role("mgmt", "node"):
        if out.selects(dev.name):
            out.write_bytes(f"ansible/host_vars/{dev.name}.json", host_vars_bytes(dev))
    if out.limited:
        return
    out.write_text("ansible/hosts.yml", dumps(inventory_groups(plan)))
    for topic, data in group_vars(plan).items():
        out.write_text(f"ansible/group_vars/all/{topic}.yml", dumps(data))
    out.write_text("kubespray/hosts.yaml", dumps(kubespray_inventory(plan)))
