"""Real CNI calls for tests/k8s: the containernetworking `macvlan` plugin and whereabouts v0.9.4 (both built by
tests/tools/k8s-build) doing ADD and DEL into network namespaces this module creates, as a container runtime does
on a node.

What stands in for a node:
- the RDMA netdev (IPoIB or a RoCE port) is a veth link in the host namespace, the macvlan master (this kernel
  has no `dummy` links);
- the whereabouts DaemonSet's install step (script/install-cni.sh: a kubeconfig with its ServiceAccount's token and
  a flat file whereabouts.d/whereabouts.conf) is `node_config`, written under the test's temp folder and named by
  the `configuration_path` key, because the default paths (/etc/cni/net.d/...) are the machine's, not the test's.
The plugins run in the host namespace (whereabouts reaches the API server on 127.0.0.1) with CNI_NETNS naming the
pod's namespace, exactly as a runtime calls them.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

PREFIX = "i36cni"  # every namespace and link this module makes starts with it


class CniError(RuntimeError):
    def __init__(self, command: str, container: str, code: int, msg: str):
        super().__init__(f"CNI {command} {container}: {msg}")
        self.code = code
        self.msg = msg


def ip(*args: str) -> str:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {proc.stderr.strip()}")
    return proc.stdout


def add_netns(name: str) -> None:
    ip("netns", "add", name)


def del_netns(name: str) -> None:
    subprocess.run(["ip", "netns", "del", name], capture_output=True)


def netns_addresses(name: str, ifname: str) -> list[str]:
    """The IPv4 addresses (CIDR) on ifname inside namespace `name`; [] when the link does not exist."""
    proc = subprocess.run(["ip", "-n", name, "-j", "addr", "show", "dev", ifname], capture_output=True, text=True)
    if proc.returncode != 0:
        return []
    return [f"{a['local']}/{a['prefixlen']}" for link in json.loads(proc.stdout) for a in link.get("addr_info", [])
            if a.get("family") == "inet"]


def netns_links(name: str) -> list[str]:
    """The names of the links inside namespace `name` other than lo."""
    proc = subprocess.run(["ip", "-n", name, "-j", "link", "show"], capture_output=True, text=True, check=True)
    return sorted(link["ifname"] for link in json.loads(proc.stdout) if link["ifname"] != "lo")


def add_master(name: str, mtu: int) -> None:
    """The stand-in RDMA netdev: one end of a veth pair (this kernel has no dummy links); the peer, `name` + "p",
    plays the fabric side."""
    ip("link", "add", name, "mtu", str(mtu), "type", "veth", "peer", "name", f"{name}p", "mtu", str(mtu))
    ip("link", "set", name, "up")
    ip("link", "set", f"{name}p", "up")


def del_link(name: str) -> None:  # a veth's peer goes with it
    subprocess.run(["ip", "link", "del", name], capture_output=True)


def node_config(folder: Path, server: str, ca: Path, token: str) -> Path:
    """What the whereabouts DaemonSet installs on a node: a kubeconfig with its ServiceAccount token (namespace
    kube-system, where its IPPools live) and the flat whereabouts.conf naming it. Returns the flat file's path."""
    folder.mkdir(parents=True, exist_ok=True)
    kubeconfig = folder / "whereabouts.kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "whereabouts-context",
        "clusters": [{"name": "local", "cluster": {"server": server, "certificate-authority": str(ca)}}],
        "users": [{"name": "whereabouts", "user": {"token": token}}],
        "contexts": [{"name": "whereabouts-context",
                      "context": {"cluster": "local", "user": "whereabouts", "namespace": "kube-system"}}],
    }, sort_keys=False))
    kubeconfig.chmod(0o600)
    flat = folder / "whereabouts.conf"
    flat.write_text(json.dumps({"datastore": "kubernetes", "kubernetes": {"kubeconfig": str(kubeconfig)},
                                "log_file": str(folder / "whereabouts.log"), "log_level": "debug"}))
    return flat


def runtime_config(nad_config: dict, master: str, flat_file: Path) -> dict:
    """The NetworkAttachmentDefinition's CNI config as the node's runtime runs it here: the main plugin is the real
    macvlan over `master` (the stand-in for the RDMA netdev; an IPoIB NAD's `ipoib` type has no plugin or device
    here), the IPAM section is the NAD's, plus only the flat file's path."""
    return {
        "cniVersion": nad_config["cniVersion"],
        "name": nad_config["name"],
        "type": "macvlan",
        "master": master,
        "mode": "bridge",
        "mtu": nad_config.get("mtu", 1500),
        "ipam": {**nad_config["ipam"], "configuration_path": str(flat_file)},
    }


@dataclass
class Pod:
    name: str  # also the network namespace's and the container id's stem
    namespace: str = "default"
    ifname: str = "net1"

    @property
    def netns(self) -> str:
        return self.name

    @property
    def container_id(self) -> str:
        return f"{self.name}-container"


@dataclass
class CniResult:
    pod: Pod
    addresses: list[str]  # CIDR, as the plugin reported them
    seconds: float


def call(bin_dir: Path, command: str, config: dict, pod: Pod, timeout: float = 150) -> CniResult:
    """One CNI ADD or DEL of the macvlan plugin (which execs whereabouts from CNI_PATH)."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "CNI_COMMAND": command,
        "CNI_CONTAINERID": pod.container_id,
        "CNI_NETNS": f"/run/netns/{pod.netns}",
        "CNI_IFNAME": pod.ifname,
        "CNI_PATH": str(bin_dir),
        "CNI_ARGS": f"IgnoreUnknown=1;K8S_POD_NAMESPACE={pod.namespace};K8S_POD_NAME={pod.name};"
                    f"K8S_POD_INFRA_CONTAINER_ID={pod.container_id}",
    }
    started = time.monotonic()
    proc = subprocess.run([str(bin_dir / config["type"])], input=json.dumps(config), capture_output=True, text=True,
                          env=env, timeout=timeout)
    seconds = time.monotonic() - started
    if proc.returncode != 0:
        try:
            err = json.loads(proc.stdout)
            raise CniError(command, pod.name, int(err.get("code", -1)),
                           f"{err.get('msg', '')}{': ' + err['details'] if err.get('details') else ''}")
        except (ValueError, AttributeError):
            raise CniError(command, pod.name, proc.returncode, (proc.stdout + proc.stderr).strip()) from None
    if command != "ADD":
        return CniResult(pod, [], seconds)
    result = json.loads(proc.stdout)
    return CniResult(pod, [i["address"] for i in result.get("ips", [])], seconds)
