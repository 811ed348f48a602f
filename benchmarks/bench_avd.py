"""Side-by-side with Arista AVD: CPU per switch for pyavd's eos_designs (facts + structured config) and
eos_cli_config_gen (CLI text) on an eBGP leaf/spine pod of 64-port switches, the shape of railforge's
leaf/spine tier (each leaf with one uplink to each of 32 spines, each spine with one port to each leaf).

pyavd is not a railforge dependency: install it into its own environment and run this file with it,

    python3 -m venv /tmp/avdvenv && /tmp/avdvenv/bin/pip install pyavd
    /tmp/avdvenv/bin/python benchmarks/bench_avd.py [--spines 32 --leaves 64]

Without pyavd it prints why and exits 0. AVD is given fabric links only (no host ports), so its figure
is for less work per leaf than railforge's.
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def fabric_inputs(spines: int, leaves: int) -> dict[str, dict]:
    spine_names = [f"spine{i + 1}" for i in range(spines)]
    common = {
        "fabric_name": "RAILFORGE_BENCH",
        "underlay_routing_protocol": "ebgp",
        "overlay_routing_protocol": "none",
        "spine": {
            "defaults": {"platform": "7800R3", "bgp_as": "65000", "loopback_ipv4_pool": "10.255.0.0/22"},
            "nodes": [{"name": n, "id": i + 1, "mgmt_ip": f"192.168.0.{i + 1}/24"} for i, n in enumerate(spine_names)],
        },
        "l3leaf": {
            "defaults": {
                "platform": "7280R3", "loopback_ipv4_pool": "10.254.0.0/22", "vtep_loopback_ipv4_pool": "10.253.0.0/22",
                "uplink_interfaces": [f"Ethernet{p + 1}" for p in range(spines)],
                "uplink_switches": spine_names, "uplink_ipv4_pool": "10.0.0.0/16",
                "virtual_router_mac_address": "00:1c:73:00:dc:01",
            },
            "node_groups": [
                {"group": f"leaf{j + 1}", "bgp_as": str(65101 + j),
                 "nodes": [{"name": f"leaf{j + 1}", "id": j + 1, "mgmt_ip": f"192.168.1.{j + 1}/24",
                            "uplink_switch_interfaces": [f"Ethernet{j + 1}"] * spines}]}
                for j in range(leaves)
            ],
        },
    }
    out = {n: {**common, "type": "spine"} for n in spine_names}
    out.update({f"leaf{j + 1}": {**common, "type": "l3leaf"} for j in range(leaves)})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spines", type=int, default=32)
    parser.add_argument("--leaves", type=int, default=64)
    args = parser.parse_args(argv)
    try:
        import pyavd
    except ImportError as exc:
        print(f"pyavd is not importable here ({exc}); install it in a separate venv (see this file's docstring)")
        return 0
    inputs = fabric_inputs(args.spines, args.leaves)
    t0 = time.process_time()
    facts = pyavd.get_avd_facts(inputs)
    t1 = time.process_time()
    configs = {}
    for host, hv in inputs.items():
        configs[host] = pyavd.get_device_structured_config(host, hv, facts)
    t2 = time.process_time()
    text_bytes = sum(len(pyavd.get_device_config(sc)) for sc in configs.values())
    t3 = time.process_time()
    n = len(inputs)
    result = {"pyavd": pyavd.__version__, "switches": n, "spines": args.spines, "leaves": args.leaves,
              "facts_cpu_s": round(t1 - t0, 3), "structured_cpu_s": round(t2 - t1, 3),
              "config_cpu_s": round(t3 - t2, 3), "config_bytes": text_bytes,
              "ms_cpu_per_switch": round(1000 * (t3 - t0) / n, 2)}
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
