"""Facts read straight from a built plan.json, independent of the Pulumi program under test."""

from __future__ import annotations

import ipaddress
import json
from pathlib import Path

EXAMPLES = ("dgx-h100-4su", "roce-a800-4nic", "roce-16k-railplane")
# The mode each example deploys with: RoCE examples have several leaves per rail, so macvlan is refused.
EXAMPLE_MODES = {"dgx-h100-4su": "ipoib", "roce-a800-4nic": "host", "roce-16k-railplane": "host"}


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def nodes(plan: dict) -> list[dict]:
    return [d for d in plan["devices"] if d["role"] == "node"]


def first_su_only(plan: dict) -> dict:
    """The plan restricted to SU 1: a real one-leaf-per-rail RoCE cluster for the macvlan path."""
    keep = {d["name"] for d in nodes(plan) if d["topology"]["su"] == 1}
    leaves = {rail["leaf"] for d in nodes(plan) if d["name"] in keep for rail in d["rails"]}
    out = dict(plan)
    out["devices"] = [d for d in plan["devices"] if d["role"] != "node" or d["name"] in keep]
    out["pod_networks"] = [n for n in plan["pod_networks"] if n["leaf"] in leaves]
    return out


def rail_addresses(plan: dict) -> dict[int, set[ipaddress.IPv4Address]]:
    """Every address a node or a gateway holds on each rail."""
    used: dict[int, set] = {}
    for node in nodes(plan):
        for rail in node["rails"]:
            used.setdefault(rail["rail"], set()).add(ipaddress.ip_interface(rail["address"]).ip)
            if rail["gateway"]:
                used[rail["rail"]].add(ipaddress.ip_address(rail["gateway"]))
    return used
