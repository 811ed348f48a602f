"""`ibnetdiscover` topology output -> observed cabling in the plan's names.

The format (infiniband-diags): blocks separated by blank lines, each with vendid/devid/sysimgguid and
switchguid or caguid lines, a node line and one line per connected port::

    Switch  64 "S-b8cef60300a1b2c0"         # "MF0;su001-leaf-r0:MQM9700/U1" enhanced port 0 lid 12 lmc 0
    [1]     "H-b8cef60300f00010"[1](b8cef60300f00010)       # "su001-gpu01 mlx5_0" lid 20 4xNDR
    Ca      1 "H-b8cef60300f00010"          # "su001-gpu01 mlx5_0"
    [1](b8cef60300f00010)   "S-b8cef60300a1b2c0"[1]         # lid 20 lmc 0 "MF0;su001-leaf-r0:MQM9700/U1" lid 12 4xNDR

Node descriptions are mapped to plan devices: a switch's description contains its name (NVIDIA's
`MF0;<hostname>:<model>/U1`, or the bare hostname), an HCA's is `<hostname> <hca>` (`mlx5_0`), the
default on NVIDIA/Mellanox OFED; the HCA is mapped to its port by `Device.hca_port` of the plan, the rule
the OpenSM renderer names HCAs by (a rail's HCA, else `mlx5_<port index>` on an appliance such as UFM).
Switch port numbers follow the QM9700 numbering: OSFP cage c (plan port index) carries IB ports
c*split+1 .. c*split+split, split being the cage's breakout (2 at NDR 400G).
"""

from __future__ import annotations

import re
from pathlib import Path

from railforge.cli.show import plain
from railforge.inputs import MAX_LINE_CHARS, InputError, MiB, read_text, shown
from railforge.plan.model import Device, Plan, Port
from railforge.render import ibnetdiscover
from railforge.verify.observed import Adjacency, Observation

MAX_BYTES = 512 * MiB


class IbnetFormatError(ValueError):
    pass


def ib_port_number(port: Port) -> int:
    return port.ib_number()


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
    """The host port of an HCA described as `<hostname> <hca>`, by the plan's HCA naming rule."""
    found = (dev.hca_port(token) for token in desc.split()[1:])
    return next((port for port in found if port), None)


def read_ibnetdiscover(path: Path) -> str:
    """The text of an ibnetdiscover file through the strict reader (regular file, at most MAX_BYTES, UTF-8)."""
    try:
        return read_text(path, MAX_BYTES)
    except InputError as exc:
        raise IbnetFormatError(str(exc)) from None


def parse_nodes(text: str, source: str = "") -> ibnetdiscover.Fabric:
    """The nodes and cables of ibnetdiscover output, with the parser `make-root-guids` ships; a line longer than
    MAX_LINE_CHARS is refused before parsing, and an error quotes at most 80 characters of the line."""
    where = f"{source}: " if source else ""
    for n, line in enumerate(text.splitlines(), 1):
        if len(line) > MAX_LINE_CHARS:
            raise IbnetFormatError(f"{where}line {n}: {len(line):,} characters; an ibnetdiscover line is at most "
                                   f"{MAX_LINE_CHARS:,}")
    try:
        fabric = ibnetdiscover.parse(text, strict=True)
    except ValueError as exc:
        message = str(exc)
        head, _, rest = message.partition(": not ibnetdiscover output: ")
        if rest:
            message = f"{head}: not ibnetdiscover output: {shown(rest, 80)}"
        raise IbnetFormatError(f"{where}{plain(message)[:300]}") from None
    if not fabric.nodes:
        raise IbnetFormatError(f"{where}no Switch or Ca blocks found: not ibnetdiscover output (run "
                               "`ibnetdiscover` on the fabric and give its output)")
    return fabric


def parse_ibnetdiscover(text: str, plan: Plan, source: str = "ibnetdiscover") -> Observation:
    known = {d.name: d for d in plan.devices if d.fabric == "compute"}
    fabric = parse_nodes(text, source)
    nodes = fabric.nodes
    obs = Observation()
    where: dict[tuple[str, int], tuple[str, str] | None] = {}

    def end(guid: str, port: int) -> tuple[str, str] | None:
        if (guid, port) in where:
            return where[(guid, port)]
        node = nodes.get(guid)
        result = None
        dev = device_of(node.description, known) if node else None
        if node and dev:
            if node.kind == "Switch":
                name = next((p.name for p in dev.ports if ib_port_number(p) == port and not p.address),
                            f"ib-port-{port}")
            else:
                name = _hca_port(dev, node.description) or f"{node.description} port {port}"
            result = (dev.name, name)
        where[(guid, port)] = result
        return result

    for guid in nodes:
        node = nodes[guid]
        dev = device_of(node.description, known)
        if dev:
            obs.devices.add(dev.name)
        else:
            obs.unresolved.append(f"{node.kind} {node.guid} {node.description!r} is not a planned device")
    for cable in fabric.cables:
        a, b = end(cable.a_guid, cable.a_port), end(cable.b_guid, cable.b_port)
        if a is None or b is None:
            continue
        obs.adjacencies.append(Adjacency(a, b, cable.gbps * 1000 if cable.rate else None, source))
    return obs
