#!/usr/bin/env python3
"""Read `ibnetdiscover` output and turn planned names into OpenSM GUID files.

Standard library only: railforge writes this file unchanged as `configs/opensm/make-root-guids` and
`configs/opensm/make-partitions` for the subnet-manager host (the name it is run by picks the job), the
OpenSM renderer formats `partitions.conf` with it, and `railforge verify cabling --ibnetdiscover` imports
the parser.

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

Usage: make-partitions PARTITION_MEMBERS IBNETDISCOVER_OUTPUT [-o PARTITIONS_CONF]
PARTITION_MEMBERS has one line per partition (`<name>\t0x<pkey>`) and one per member HCA
(`<name>\t0x<pkey>\t<hostname> <hca>`). The partitions.conf written has the default partition and
each tenant partition with the switches and the member HCAs' port GUIDs as full members. Exit status 1
names every member HCA that ibnetdiscover did not show (or showed twice); nothing is written then.
"""

from __future__ import annotations

import argparse
import os
import re
import stat
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
    port_guids: dict[int, str] = field(default_factory=dict)  # CA/router ports: port number -> port GUID

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
            port, port_guid, _, guid, rport, _, comment = m.groups()
            if port_guid:
                current.port_guids[int(port)] = f"{int(port_guid, 16):016x}"
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


def hca_port_guids(names: list[str], fabric: Fabric) -> tuple[dict[str, str], list[str]]:
    """`<hostname> <hca>` -> `0x<port guid>` of the HCA's connected port, and the problems."""
    by_name: dict[str, list[Node]] = {}
    for node in fabric.nodes.values():
        if node.kind == "Ca":
            by_name.setdefault(node.description.strip(), []).append(node)
    guids, problems = {}, []
    for name in names:
        found = by_name.get(name, [])
        if len(found) != 1:
            problems.append(f"HCA {name!r} is not in the ibnetdiscover output" if not found else
                            f"HCA {name!r} appears {len(found)} times: {', '.join(n.guid for n in found)}")
        elif not found[0].port_guids:
            problems.append(f"HCA {name!r} has no connected port in the ibnetdiscover output")
        else:
            guids[name] = "0x" + found[0].port_guids[min(found[0].port_guids)]
    return guids, problems


@dataclass
class Partition:
    name: str
    pkey: int
    members: list[str] = field(default_factory=list)  # `<hostname> <hca>`


def read_partitions(text: str) -> list[Partition]:
    """PARTITION_MEMBERS: `<name>\t0x<pkey>[\t<hostname> <hca>]` per line; `#` starts a comment."""
    parts: dict[str, Partition] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].rstrip()
        if not line.strip():
            continue
        fields = line.split("\t")
        try:
            name, pkey = fields[0].strip(), int(fields[1], 16)
        except (IndexError, ValueError):
            raise ValueError(f"line {n}: expected '<name>\\t0x<pkey>[\\t<hostname> <hca>]', got {raw!r}") from None
        part = parts.setdefault(name, Partition(name, pkey))
        if part.pkey != pkey:
            raise ValueError(f"line {n}: partition {name} has PKey 0x{pkey:04x} here, 0x{part.pkey:04x} before")
        if len(fields) > 2 and fields[2].strip():
            part.members.append(fields[2].strip())
    return list(parts.values())


def partitions_conf(title: str, parts: list[Partition], guids: dict[str, str] | None) -> str:
    """OpenSM partitions.conf: the default partition (every port full, IPoIB) and one partition per tenant
    with the switches and its member HCA ports. Without `guids` the members are listed as comments
    (the file is valid, the tenants hold only switches) for make-partitions to resolve."""
    out = [f"# {title}\n",
           "# Default partition: every port a full member, IPoIB enabled (the rail subnets run on it).\n",
           "Default=0x7fff, ipoib, defmember=full : ALL=full ;\n"]
    for part in parts:
        head = f"{part.name}=0x{part.pkey:04x}, ipoib, defmember=full : ALL_SWITCHES=full"
        if not part.members:
            out.append(f"# Tenant {part.name}: no member hosts in the plan; switches only.\n{head} ;\n")
        elif guids is None:
            out.append(f"# Tenant {part.name}: {len(part.members)} member HCA ports, resolved to port GUIDs by "
                       "make-partitions from ibnetdiscover output:\n"
                       + "".join(f"#   {m}\n" for m in part.members) + f"{head} ;\n")
        else:
            out.append(f"# Tenant {part.name}: {len(part.members)} member HCA ports\n{head},\n"
                       + ",\n".join(f"  {guids[m]}=full" for m in part.members) + " ;\n")
    return "".join(out)


def read_names(text: str) -> list[str]:
    return [s for s in (line.split("#", 1)[0].strip() for line in text.splitlines()) if s]


MAX_BYTES = 512 << 20


def _read(path: str) -> str:
    """A regular file (or stdin) of at most MAX_BYTES, UTF-8. Opened without blocking and checked before reading,
    so a FIFO or a device given by mistake is refused rather than waited on or read forever."""
    if path == "-":
        data = sys.stdin.buffer.read(MAX_BYTES + 1)
    else:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise ValueError(f"{path}: not a regular file")
            data = fh.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise ValueError(f"{path}: over {MAX_BYTES:,} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start:,})") from None


def _write(text: str, path: str | None) -> None:
    if path:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
    else:
        sys.stdout.write(text)


def _fail(prog: str, problems: list[str], status: int = 1) -> int:
    for p in problems:
        shown = "".join(c if c.isprintable() else repr(c)[1:-1] for c in p)
        print(f"{prog}: {shown[:2000]}", file=sys.stderr)
    return status


def make_root_guids(argv: list[str] | None) -> int:
    ap = argparse.ArgumentParser(prog="make-root-guids", description="root switch names -> OpenSM root GUID file")
    ap.add_argument("roots", help="root-switches.txt: one switch name per line")
    ap.add_argument("ibnetdiscover", help="saved `ibnetdiscover` output ('-' for stdin)")
    ap.add_argument("-o", "--output", help="root GUID file to write (default: stdout)")
    args = ap.parse_args(argv)
    guids, problems = root_guids(read_names(_read(args.roots)), parse(_read(args.ibnetdiscover)))
    if problems:
        return _fail("make-root-guids", problems)
    _write("".join(f"{g}\n" for g in guids), args.output)
    return 0


def make_partitions(argv: list[str] | None) -> int:
    ap = argparse.ArgumentParser(prog="make-partitions", description="partition members -> OpenSM partitions.conf")
    ap.add_argument("members", help="partition-members.txt: partitions and their member HCAs by name")
    ap.add_argument("ibnetdiscover", help="saved `ibnetdiscover` output ('-' for stdin)")
    ap.add_argument("-o", "--output", help="partitions.conf to write (default: stdout)")
    args = ap.parse_args(argv)
    try:
        parts = read_partitions(_read(args.members))
    except ValueError as exc:
        return _fail("make-partitions", [f"{args.members}: {exc}"])
    guids, problems = hca_port_guids([m for p in parts for m in p.members], parse(_read(args.ibnetdiscover)))
    if problems:
        return _fail("make-partitions", problems)
    _write(partitions_conf(f"OpenSM partitions written by make-partitions from {args.members}", parts, guids),
           args.output)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Exit 0 on success, 1 when a name is missing from the fabric, 2 when an input cannot be read."""
    prog = os.path.basename(sys.argv[0])
    try:
        return make_partitions(argv) if prog == "make-partitions" else make_root_guids(argv)
    except (OSError, ValueError) as exc:
        return _fail(prog, [str(exc) if not isinstance(exc, OSError) else f"{exc.filename}: {exc.strerror}"], 2)


if __name__ == "__main__":
    sys.exit(main())
