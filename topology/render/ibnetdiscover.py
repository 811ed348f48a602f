#!/usr/bin/env python3
"""Read `ibnetdiscover` output and turn switch names into OpenSM root GUIDs.

Standard library only: railforge writes this file unchanged as `configs/opensm/make-root-guids`
for the subnet-manager host, and `railforge verify cabling --ibnetdiscover` imports the parser.

ibnetdiscover prints one block per node: a header such as
    Switch  65 "S-fc6a1c0300e0a6b0"   # "MF0;spine01:MQM9700/U1" enhanced port 0 lid 1 lmc 0
    Ca      1 "H-946dae03006d0b2a"    # "su001-gpu01 mlx5_0"
followed by one line per connected port:
    [1]   "S-fc6a1c0300e0a7c0"[33]     # "MF0;su001-leaf-r0:MQM9700/U1" lid 3 4xNDR
    [1](946dae03006d0b2a)   "S-fc6a1c0300e0a7c0"[1]   # lid 5 lmc 0 "MF0;su001-leaf-r0:MQM9700/U1" lid 3 4xNDR
A node's name is its NodeDescription; NVIDIA switch descriptions `MF0;<hostname>:<model>/U1` name the
switch by the hostname between `;` and `:`. Host HCAs describe themselves as `<hostname> <hca>`.

Usage: make-root-guids ROOT_SWITCHES IBNETDISCOVER_OUTPUT [-o ROOT_GUID_FILE]
ROOT_SWITCHES has one switch name per line (`#` comments allowed). The GUID file gets one
`0x<guid>` per line, in the order of ROOT_SWITCHES. Exit status 1 names every root switch that
ibnetdiscover did not show (or showed twice); nothing is written then.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field

_NODE = re.compile(r'^(Switch|Ca|Rt)\s+(\d+)\s+"([SHR])-([0-9a-fA-F]+)"\s*(?:#\s*"([^"]*)")?')
_PORT = re.compile(r'^\[(\d+)\](?:\[ext \d+\])?(?:\(([0-9a-fA-F]+)\))?\s*"([SHR])-([0-9a-fA-F]+)"\[(\d+)\]'
                   r'(?:\(([0-9a-fA-F]+)\))?\s*(?:#\s*(.*))?$')
_SPEED = re.compile(r"\b(\d+)x(SDR|DDR|QDR|FDR10|FDR|EDR|HDR|NDR|XDR)\b")
_LANE_GBPS = {"SDR": 2.5, "DDR": 5, "QDR": 10, "FDR10": 10, "FDR": 14, "EDR": 25, "HDR": 50, "NDR": 100, "XDR": 200}


@dataclass
class Node:
    guid: str
    kind: str  # Switch | Ca | Rt
    ports: int
    description: str

    @property
    def name(self) -> str:
        return node_name(self.description)


@dataclass(frozen=True)
class Cable:
    a_guid: str
    a_port: int
    b_guid: str
    b_port: int
    rate: str  # e.g. 4xNDR, empty when not shown

    @property
    def gbps(self) -> int:
        m = _SPEED.search(self.rate)
        return int(int(m.group(1)) * _LANE_GBPS[m.group(2)]) if m else 0


@dataclass
class Fabric:
    nodes: dict[str, Node] = field(default_factory=dict)
    cables: list[Cable] = field(default_factory=list)


def node_name(description: str) -> str:
    m = re.match(r"^[^;\s]*;([^:]+):", description)
    return m.group(1) if m else description.strip()


def parse(text: str, strict: bool = False) -> Fabric:
    """Nodes by GUID and each cable once (as seen from the lower GUID/port end).
    `strict` refuses any line that is not ibnetdiscover output (ValueError naming the line)."""
    fabric = Fabric()
    seen: set[tuple[str, int]] = set()
    current: Node | None = None
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#") or "=" in line.split()[0]:
            if not line:
                current = None
            continue
        m = _NODE.match(line)
        if m:
            kind, ports, _, guid, desc = m.groups()
            current = Node(guid.lower(), kind, int(ports), desc or "")
            fabric.nodes[current.guid] = current
            continue
        m = _PORT.match(line)
        if strict and m is None:
            raise ValueError(f"line {n}: not ibnetdiscover output: {line}")
        if strict and current is None:
            raise ValueError(f"line {n}: port line outside a Switch/Ca block: {line}")
        if m and current is not None:
            port, _, _, guid, rport, _, comment = m.groups()
            a, b = (current.guid, int(port)), (guid.lower(), int(rport))
            rate = _SPEED.search(comment or "")
            if a in seen or b in seen:
                continue
            seen.update((a, b))
            lo, hi = sorted((a, b))
            fabric.cables.append(Cable(lo[0], lo[1], hi[0], hi[1], rate.group(0) if rate else ""))
    return fabric


def root_guids(roots: list[str], fabric: Fabric) -> tuple[list[str], list[str]]:
    """GUIDs in the order of `roots`, and the problems (missing or ambiguous names)."""
    by_name: dict[str, list[str]] = {}
    for node in fabric.nodes.values():
        if node.kind == "Switch":
            by_name.setdefault(node.name, []).append(node.guid)
    guids, problems = [], []
    for name in roots:
        found = by_name.get(name, [])
        if len(found) == 1:
            guids.append(f"0x{found[0]}")
        elif not found:
            problems.append(f"root switch {name} is not in the ibnetdiscover output")
        else:
            problems.append(f"root switch {name} appears {len(found)} times: {', '.join(found)}")
    return guids, problems


def read_names(text: str) -> list[str]:
    return [s for s in (line.split("#", 1)[0].strip() for line in text.splitlines()) if s]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="make-root-guids", description="root switch names -> OpenSM root GUID file")
    ap.add_argument("roots", help="root-switches.txt: one switch name per line")
    ap.add_argument("ibnetdiscover", help="saved `ibnetdiscover` output ('-' for stdin)")
    ap.add_argument("-o", "--output", help="root GUID file to write (default: stdout)")
    args = ap.parse_args(argv)
    with open(args.roots, encoding="utf-8") as fh:
        roots = read_names(fh.read())
    if args.ibnetdiscover == "-":
        text = sys.stdin.read()
    else:
        with open(args.ibnetdiscover, encoding="utf-8") as fh:
            text = fh.read()
    guids, problems = root_guids(roots, parse(text))
    if problems:
        for p in problems:
            print(f"make-root-guids: {p}", file=sys.stderr)
        return 1
    out = "".join(f"{g}\n" for g in guids)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as fh:
            fh.write(out)
    else:
        sys.stdout.write(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
