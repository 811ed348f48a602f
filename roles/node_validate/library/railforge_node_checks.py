#!/usr/bin/python3
"""Check one GPU node against the railforge plan; every problem is recorded, nothing is changed."""

import ipaddress
import json
import os
import re
import shutil
import subprocess
import time

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
module: railforge_node_checks
short_description: Check one GPU node's rails, LLDP neighbours, GPUs and GPUDirect against the railforge plan
description:
  - Runs each requested check and returns every failure; the module itself fails only on bad arguments.
  - Failures about a rail name its cable label from the cabling plan.
options:
  rails:
    description: The node's rails from the plan (railforge_rails).
    type: list
    elements: dict
    required: true
  fabric:
    description: roce or infiniband.
    type: str
    choices: [roce, infiniband]
    required: true
  checks:
    description: Checks to run.
    type: list
    elements: str
    choices: [link, speed, lldp, ip, gid, hca, gpu, fabric_manager, peermem]
    required: true
  gpus_expected:
    description: Number of GPUs the node must show.
    type: int
    default: 8
  nvswitch:
    description: The node is an NVSwitch system, so Fabric Manager must run.
    type: bool
    default: false
  lldp_wait:
    description: Seconds to wait for an LLDP neighbour on every rail.
    type: int
    default: 0
author: railforge
"""

RETURN = r"""
failures:
  description: One entry per failed check.
  type: list
  elements: dict
  returned: always
  sample: [{check: lldp, rail: 0, ifname: rail0, cable: CMP-000123, message: "..."}]
passed:
  description: Number of checks that passed.
  type: int
  returned: always
"""

SYS_NET = "/sys/class/net"
SYS_IB = "/sys/class/infiniband"


def read(path):
    try:
        with open(path, encoding="ascii") as handle:
            return handle.read().strip()
    except OSError:
        return None


def run(argv):
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return 127, "", str(error)
    return done.returncode, done.stdout, done.stderr


def rail_failure(check, rail, message):
    return {
        "check": check,
        "rail": rail["rail"],
        "ifname": rail["ifname"],
        "cable": rail.get("cable"),
        "message": f"{rail['ifname']} (cable {rail.get('cable') or 'unlabelled'}): {message}",
    }


def node_failure(check, message):
    return {"check": check, "rail": None, "ifname": None, "cable": None, "message": message}


def ib_port(rail, name):
    return read(f"{SYS_IB}/{rail['hca']}/ports/1/{name}")


def check_link(rail, fabric):
    if fabric == "infiniband":
        state = ib_port(rail, "state")
        if state is None:
            return f"no RDMA device {rail['hca']}"
        return None if state.endswith("ACTIVE") else f"{rail['hca']} port 1 is {state}, expected ACTIVE"
    state = read(f"{SYS_NET}/{rail['ifname']}/operstate")
    if state is None:
        return "interface missing"
    return None if state == "up" else f"link is {state}"


def link_speed(rail, fabric):
    if fabric == "infiniband":
        rate = ib_port(rail, "rate")
        match = re.match(r"(\d+)", rate or "")
        return int(match.group(1)) * 1000 if match else None
    speed = read(f"{SYS_NET}/{rail['ifname']}/speed")
    return int(speed) if speed and speed.lstrip("-").isdigit() else None


def check_speed(rail, fabric):
    speed = link_speed(rail, fabric)
    if speed == rail["speed_mbps"]:
        return None
    if speed is None or speed < 0:
        return f"speed unknown, plan says {rail['speed_mbps']} Mb/s"
    return f"runs at {speed} Mb/s, plan says {rail['speed_mbps']} Mb/s"


def lldp_neighbours():
    """Map of local interface -> (system name, port id, port description) from lldpd."""
    code, out, err = run(["lldpcli", "-f", "json0", "show", "neighbors"])
    if code != 0:
        return None, (err or out).strip() or f"lldpcli exited {code}"
    neighbours = {}
    for lldp in json.loads(out).get("lldp", []):
        for interface in lldp.get("interface", []):
            chassis = (interface.get("chassis") or [{}])[0]
            port = (interface.get("port") or [{}])[0]
            name = ((chassis.get("name") or [{}])[0]).get("value")
            port_id = ((port.get("id") or [{}])[0]).get("value")
            port_descr = ((port.get("descr") or [{}])[0]).get("value")
            neighbours[interface["name"]] = (name, port_id, port_descr)
    return neighbours, None


def check_lldp(rail, neighbours):
    planned = f"{rail['leaf']} {rail['leaf_port']}"
    seen = neighbours.get(rail["ifname"])
    if seen is None:
        return f"no LLDP neighbour, plan says {planned}"
    name, port_id, port_descr = seen
    if name == rail["leaf"] and rail["leaf_port"] in (port_id, port_descr):
        return None
    return f"cabled to {name} {port_id}, plan says {planned}"


def check_ip(rail):
    code, out, err = run(["ip", "-j", "addr", "show", "dev", rail["ifname"]])
    if code != 0:
        return f"cannot read addresses: {err.strip()}"
    planned = ipaddress.ip_interface(rail["address"])
    present = [
        ipaddress.ip_interface(f"{info['local']}/{info['prefixlen']}")
        for link in json.loads(out)
        for info in link.get("addr_info", [])
    ]
    if planned in present:
        return None
    return f"address {planned} missing (has {', '.join(map(str, present)) or 'none'})"


def check_gid(rail, fabric):
    gid_dir = f"{SYS_IB}/{rail['hca']}/ports/1/gids"
    if not os.path.isdir(gid_dir):
        return f"no RDMA device {rail['hca']}"
    gids = {read(os.path.join(gid_dir, name)) for name in os.listdir(gid_dir)}
    if fabric == "infiniband":
        return None if any(g and g.startswith("fe80:") for g in gids) else f"{rail['hca']} has no port GID"
    address = ipaddress.ip_interface(rail["address"]).ip
    mapped = ipaddress.IPv6Address(f"::ffff:{address}").exploded.replace(":", "")
    wanted = ":".join(mapped[i : i + 4] for i in range(0, 32, 4))
    return None if wanted in gids else f"{rail['hca']} has no RoCE v2 GID for {address}"


def _natural(name):
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def rdma_devices():
    """RDMA device -> the network interfaces behind it, as ibdev2netdev reads them:
    /sys/class/infiniband/<device>/device/net/<interface>."""
    try:
        names = os.listdir(SYS_IB)
    except OSError:
        return {}
    devices = {}
    for name in names:
        try:
            devices[name] = sorted(os.listdir(os.path.join(SYS_IB, name, "device", "net")))
        except OSError:
            devices[name] = []
    return devices


def check_hca(rail, devices):
    """The rail's interface is behind the RDMA device the plan names (NCCL_IB_HCA, gres.conf and burn-in use it)."""
    planned, ifname = rail["hca"], rail["ifname"]
    actual = sorted((d for d, nets in devices.items() if ifname in nets), key=_natural)
    if planned in actual:
        return None
    if actual:
        return f"{ifname} is on RDMA device {', '.join(actual)}, plan says {planned}"
    if planned not in devices:
        present = ", ".join(sorted(devices, key=_natural)) or "none"
        return f"no RDMA device {planned} (this host has {present})"
    behind = ", ".join(devices[planned]) or "no interface"
    return f"RDMA device {planned} is behind {behind}, not {ifname}"


def check_gpu(expected):
    if shutil.which("nvidia-smi") is None:
        return "nvidia-smi not found"
    code, out, err = run(["nvidia-smi", "-L"])
    if code != 0:
        return f"nvidia-smi -L failed ({code}): {(err or out).strip()}"
    count = sum(1 for line in out.splitlines() if line.startswith("GPU "))
    return None if count == expected else f"{count} GPUs, plan says {expected}"


def check_fabric_manager():
    code, out, _ = run(["systemctl", "is-active", "nvidia-fabricmanager.service"])
    if code == 0:
        return None
    return f"nvidia-fabricmanager is {out.strip() or 'not running'} on an NVSwitch system"


def check_peermem():
    if os.path.isdir("/sys/module/nvidia_peermem"):
        return None
    return "nvidia-peermem is not loaded (no GPUDirect RDMA)"


def wait_for_neighbours(rails, wait):
    deadline = time.monotonic() + wait
    while True:
        neighbours, error = lldp_neighbours()
        complete = neighbours is not None and all(r["ifname"] in neighbours for r in rails)
        if complete or time.monotonic() >= deadline:
            return neighbours, error
        time.sleep(1)


def run_checks(params):
    rails, fabric, checks = params["rails"], params["fabric"], params["checks"]
    failures, passed = [], 0

    def record(failure):
        nonlocal passed
        if failure is None:
            passed += 1
        else:
            failures.append(failure)

    devices = rdma_devices() if "hca" in checks else {}
    neighbours = None
    if "lldp" in checks and fabric == "roce":
        neighbours, error = wait_for_neighbours(rails, params["lldp_wait"])
        if neighbours is None:
            failures.append(node_failure("lldp", f"cannot read LLDP neighbours: {error}"))
    for rail in rails:
        per_rail = {
            "link": lambda r: check_link(r, fabric),
            "speed": lambda r: check_speed(r, fabric),
            "ip": check_ip,
            "gid": lambda r: check_gid(r, fabric),
            "hca": lambda r: check_hca(r, devices),
        }
        if neighbours is not None:
            per_rail["lldp"] = lambda r: check_lldp(r, neighbours)
        for name, check in per_rail.items():
            if name in checks:
                message = check(rail)
                record(None if message is None else rail_failure(name, rail, message))
    node_checks = {
        "gpu": lambda: check_gpu(params["gpus_expected"]),
        "fabric_manager": check_fabric_manager if params["nvswitch"] else None,
        "peermem": check_peermem,
    }
    for name, check in node_checks.items():
        if name in checks and check is not None:
            message = check()
            record(None if message is None else node_failure(name, message))
    return failures, passed


def main():
    module = AnsibleModule(
        argument_spec={
            "rails": {"type": "list", "elements": "dict", "required": True},
            "fabric": {"type": "str", "choices": ["roce", "infiniband"], "required": True},
            "checks": {
                "type": "list",
                "elements": "str",
                "required": True,
                "choices": ["link", "speed", "lldp", "ip", "gid", "hca", "gpu", "fabric_manager", "peermem"],
            },
            "gpus_expected": {"type": "int", "default": 8},
            "nvswitch": {"type": "bool", "default": False},
            "lldp_wait": {"type": "int", "default": 0},
        },
        supports_check_mode=True,
    )
    failures, passed = run_checks(module.params)
    module.exit_json(changed=False, failures=failures, passed=passed)


if __name__ == "__main__":
    main()
