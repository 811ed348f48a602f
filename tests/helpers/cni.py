"""Run CNI plugin chains as Multus (through libcni) does: each plugin of a .conflist in order with the
network's name and cniVersion and the previous result, CNI_* in the environment, config on stdin."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

CNI_PATH = "/usr/lib/cni"


class CniError(RuntimeError):
    pass


def _call(node_ns: str, command: str, netconf: dict, netns: str, ifname: str, container: str) -> dict:
    env = {"CNI_COMMAND": command, "CNI_CONTAINERID": container, "CNI_NETNS": f"/run/netns/{netns}",
           "CNI_IFNAME": ifname, "CNI_PATH": CNI_PATH, "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    plugin = str(Path(CNI_PATH) / netconf["type"])
    proc = subprocess.run(["ip", "netns", "exec", node_ns, plugin], input=json.dumps(netconf), env=env,
                          capture_output=True, text=True, timeout=30)
    out = json.loads(proc.stdout) if proc.stdout.strip() else {}
    if proc.returncode != 0:
        raise CniError(out.get("msg", proc.stderr.strip() or f"{netconf['type']} exit {proc.returncode}"))
    return out


def _plugins(conflist: dict) -> list[dict]:
    return [dict(p, name=conflist["name"], cniVersion=conflist["cniVersion"]) for p in conflist["plugins"]]


def add(node_ns: str, conflist: dict, netns: str, ifname: str, container: str) -> dict:
    result: dict | None = None
    for plugin in _plugins(conflist):
        if result is not None:
            plugin["prevResult"] = result
        result = _call(node_ns, "ADD", plugin, netns, ifname, container)
    return result or {}


def delete(node_ns: str, conflist: dict, netns: str, ifname: str, container: str) -> None:
    for plugin in reversed(_plugins(conflist)):
        _call(node_ns, "DEL", plugin, netns, ifname, container)
