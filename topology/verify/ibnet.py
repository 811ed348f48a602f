"""`ibnetdiscover` topology output -> observed cabling in the plan's names.

The format (infiniband-diags): blocks separated by blank lines, each with vendid/devid/sysimgguid and
switchguid or caguid lines, a node line and one line per connected port::

    Switch  64 "S-b8cef60300a1b2c0"         # "MF0;su001-leaf-r0:MQM9700/U1" enhanced port 0 lid 12 lmc 0
    [1]     "H-b8cef60300f00010"[1](b8cef60300f00010)       # "su001-gpu01 mlx5_0" lid 20 4xNDR
    Ca      1 "H-b8cef60300f00010"          # "su001-gpu01 mlx5_0"
    [1](b8cef60300f00010)   "S-b8cef60300a1b2c0"[1]         # lid 20 lmc 0 "MF0;su001-leaf-r0:MQM9700/U1" lid 12 4xNDR

Node descriptions are mapped to plan devices: a switch's description contains its name (NVIDIA's
`MF0;<hostname>:<model>/U1`, or the bare hostname), an HCA's is `<hostname> <hca>` (`mlx5_0`), the
default on NVIDIA/Mellanox OFED. Switch port numbers follow the QM9700 numbering: OSFP cage c (plan port
index) carries IB ports c*split+1 .. c*split+split, split being the cage's breakout (2 at NDR 400G).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from topology.plan import Device, Plan, Port
from topology.verify.observed import Adjacency, Observation

NODE = re.compile(r'^(Switch|Ca|Rt)\s+(\d+)\s+"([SHR])-([0-9a-fA-F]+)"\s*#\s*"([^"]*)"')
LINK = re.compile(r'^\[(\d+)\](?:\[ext \d+\])?(?:\([0-9a-fA-F]+\))?\s*"([SHR])-([0-9a-fA-F]+)"\[(\d+)\]'
                  r'(?:\([0-9a-fA-F]+\))?\s*#\s*(.*)$')
WIDTH_SPEED = re.compile(r"\b(\d+)x(SDR|DDR|QDR|FDR10|FDR|EDR|HDR|NDR|XDR)\b")
LANE_GBPS = {"SDR": 2.5, "DDR": 5, "QDR": 10, "FDR10": 10, "FDR": 14, "EDR": 25, "HDR": 50, "NDR": 100,
             "XDR": 200}


class IbnetFormatError(ValueError):
    pass


@dataclass(slots=True)
class IbNode:
    kind: str
    guid: str
    desc: str
    ports: int


def speed_mbps(width: int, rate: str) -> int:
    return int(width * LANE_GBPS[rate] * 1000)


def ib_port_number(port: Port) -> int:
    split = int(port.breakout.split("x", 1)[0]) if port.breakout[:1].isdigit() else 1
    return port.index * split + port.sub + 1


def device_of(desc: str, known: dict[str, Device]) -> Device | None:
    if desc in known:
        return known[desc]
    for token in re.split(r"[;:\s/,]+", desc):
        if token in known:
            return known[token]
        if token.split(".", 1)[0] in known:
            return known[token.split(".", 1)[0]]
    return None


def _hca_port(dev: Device, desc: str) -> str | None:
    m = re.search(r"\b(mlx\d+_\d+)\b", desc)
    if not m:
        return None
    for rail in dev.rails:
        if rail.hca == m.group(1):
            return rail.ifname
    index = int(m.group(1).rsplit("_", 1)[1])
    return next((p.name for p in dev.ports if p.index == index and not p.address), None)


def parse_nodes(text: str) -> tuple[dict[str, IbNode], list[tuple[str, int, str, int, str]]]:
    """Nodes by GUID, and every port line as (guid, port, peer guid, peer port, trailing comment)."""
    nodes: dict[str, IbNode] = {}
    links: list[tuple[str, int, str, int, str]] = []
    current: IbNode | None = None
    for n, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s or s.startswith("#") or "=" in s.split()[0]:
            if not s:
                current = None
            continue
        if m := NODE.match(s):
            current = IbNode(m.group(1), m.group(4).lower(), m.group(5), int(m.group(2)))
            nodes[current.guid] = current
        elif m := LINK.match(s):
            if current is None:
                raise IbnetFormatError(f"line {n}: port line outside a Switch/Ca block: {s}")
            links.append((current.guid, int(m.group(1)), m.group(3).lower(), int(m.group(4)), m.group(5)))
        else:
            raise IbnetFormatError(f"line {n}: not ibnetdiscover output: {s}")
    if not nodes:
        raise IbnetFormatError("no Switch or Ca blocks found")
    return nodes, links


def parse_ibnetdiscover(text: str, plan: Plan, source: str = "ibnetdiscover") -> Observation:
    known = {d.name: d for d in plan.devices if d.fabric == "compute"}
    nodes, links = parse_nodes(text)
    obs = Observation()
    where: dict[tuple[str, int], tuple[str, str] | None] = {}

    def end(guid: str, port: int) -> tuple[str, str] | None:
        if (guid, port) in where:
            return where[(guid, port)]
        node = nodes.get(guid)
        result = None
        dev = device_of(node.desc, known) if node else None
        if node and dev:
            if node.kind == "Switch":
                name = next((p.name for p in dev.ports if ib_port_number(p) == port and not p.address),
                            f"ib-port-{port}")
            else:
                name = _hca_port(dev, node.desc) or f"{node.desc} port {port}"
            result = (dev.name, name)
        where[(guid, port)] = result
        return result

    for guid in nodes:
        node = nodes[guid]
        dev = device_of(node.desc, known)
        if dev:
            obs.devices.add(dev.name)
        else:
            obs.unresolved.append(f"{node.kind} {node.guid} {node.desc!r} is not a planned device")
    for guid, port, peer_guid, peer_port, comment in links:
        a, b = end(guid, port), end(peer_guid, peer_port)
        if a is None or b is None:
            continue
        m = WIDTH_SPEED.search(comment)
        speed = speed_mbps(int(m.group(1)), m.group(2)) if m else None
        obs.adjacencies.append(Adjacency(a, b, speed, source))
    return obs
