"""The Ansible inventory: hosts grouped by role, SU and fabric, each node's rails, bond and BMC as
inline host vars in one file per SU; group_vars with the QoS profile. Also the Kubespray groups."""

from __future__ import annotations

from dataclasses import asdict

from topology.output import Output
from topology.plan import Device, Plan
from topology.render.yamlout import dumps

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


def inventory_groups(plan: Plan) -> dict:
    """Every group and its members, except the GPU nodes, which the per-SU files add to their SU group."""
    mgmt = plan.devices_by_role("mgmt")
    sus = sorted({n.su for n in plan.devices_by_role("node")})
    children: dict[str, dict] = {
        "nodes": {"children": {f"su{su:03d}": None for su in sus}},
        "mgmt": {"hosts": {m.name: host_vars(m) for m in mgmt}},
        "ufm": {"hosts": {u.name: ({"ansible_host": _host_ip(u)} if _host_ip(u) else None)
                          for u in plan.devices_by_role("ufm")}},
        f"fabric_{plan.cluster.fabric}": {"children": {"nodes": None}},
    }
    for role, group in SWITCH_GROUPS.items():
        members = {d.name: ({"ansible_host": _host_ip(d)} if d.mgmt_address else None)
                   for d in plan.devices if d.role == role}
        if members:
            children.setdefault(group, {"hosts": {}})["hosts"].update(members)
    children["kube_control_plane"] = {"hosts": {m.name: None for m in mgmt}}
    children["etcd"] = {"hosts": {m.name: None for m in mgmt}}
    children["kube_node"] = {"children": {"nodes": None}}
    children["k8s_cluster"] = {"children": {"kube_control_plane": None, "kube_node": None}}
    return {"all": {"children": children}}


def su_inventory(su: int, nodes: list[Device]) -> dict:
    """One SU's GPU nodes with their host vars inline (one file per SU keeps huge clusters fast to write)."""
    return {"all": {"children": {f"su{su:03d}": {"hosts": {n.name: host_vars(n) for n in nodes}}}}}


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


def group_vars(plan: Plan) -> dict:
    return {
        "railforge_cluster": plan.cluster.name,
        "railforge_fabric": plan.cluster.fabric,
        "railforge_qos": asdict(plan.qos),
        "railforge_gpus_per_node": plan.cluster.gpus_per_node,
        "railforge_nvswitch": plan.cluster.nvswitch,
    }


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
    by_su: dict[int, list[Device]] = {}
    for dev in plan.devices_by_role("node"):
        by_su.setdefault(dev.su, []).append(dev)
    for su, nodes in sorted(by_su.items()):
        if any(out.selects(n.name) for n in nodes):
            out.write_text(f"ansible/nodes/su{su:03d}.yml", dumps(su_inventory(su, nodes)))
    if out.partial:
        return
    out.write_text("ansible/hosts.yml", dumps(inventory_groups(plan)))
    out.write_text("ansible/group_vars/all/railforge.yml", dumps(group_vars(plan)))
    out.write_text("kubespray/hosts.yaml", dumps(kubespray_inventory(plan)))
