"""Read a namespace's kernel FIB over rtnetlink, without spawning a process per look.

Reconvergence is timed by polling every switch's FIB every few milliseconds; starting `ip` a dozen
times per poll would itself load the two CPUs the daemons need. A netlink socket opened inside a
namespace stays bound to it, so one socket per namespace is opened once (setns via libc) and
dumped on each poll.
"""

from __future__ import annotations

import ctypes
import os
import socket
import struct
from ipaddress import ip_address

NETLINK_ROUTE = 0
RTM_GETLINK, RTM_NEWLINK = 18, 16
RTM_GETROUTE, RTM_NEWROUTE = 26, 24
NLMSG_ERROR, NLMSG_DONE = 2, 3
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
IFLA_IFNAME = 3
RTA_DST, RTA_OIF, RTA_MULTIPATH, RTA_TABLE = 1, 4, 9, 15
RT_TABLE_MAIN = 254
CLONE_NEWNET = 0x40000000
NLMSG = struct.Struct("=IHHII")
RTATTR = struct.Struct("=HH")
RTNH = struct.Struct("=HBBi")


def _align(n: int) -> int:
    return (n + 3) & ~3


def _attrs(data: bytes, offset: int, end: int) -> dict[int, bytes]:
    out: dict[int, bytes] = {}
    while offset + 4 <= end:
        length, kind = RTATTR.unpack_from(data, offset)
        if length < 4:
            break
        out[kind & 0x3FFF] = data[offset + 4: offset + length]
        offset += _align(length)
    return out


class NetnsFib:
    """One rtnetlink socket inside network namespace `ns` (a name under /run/netns)."""

    def __init__(self, ns: str):
        self.ns = ns
        self.seq = 0
        libc = ctypes.CDLL(None, use_errno=True)
        own = os.open("/proc/self/ns/net", os.O_RDONLY)
        target = os.open(f"/run/netns/{ns}", os.O_RDONLY)
        try:
            if libc.setns(target, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), f"setns {ns}")
            try:
                self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_ROUTE)
            finally:
                if libc.setns(own, CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), "setns back to the lab's own namespace")
        finally:
            os.close(own)
            os.close(target)
        self.sock.bind((0, 0))
        self.names: dict[int, str] = {}

    def close(self) -> None:
        self.sock.close()

    def _dump(self, msg_type: int, body: bytes) -> list[tuple[int, bytes]]:
        self.seq += 1
        self.sock.send(NLMSG.pack(NLMSG.size + len(body), msg_type, NLM_F_REQUEST | NLM_F_DUMP, self.seq, 0) + body)
        out: list[tuple[int, bytes]] = []
        while True:
            data = self.sock.recv(1 << 20)
            offset = 0
            while offset + NLMSG.size <= len(data):
                length, kind, _, seq, _ = NLMSG.unpack_from(data, offset)
                if length < NLMSG.size:
                    return out
                if seq == self.seq:
                    if kind == NLMSG_DONE:
                        return out
                    if kind == NLMSG_ERROR:
                        raise OSError(f"netlink dump failed in {self.ns}")
                    out.append((kind, data[offset + NLMSG.size: offset + length]))
                offset += _align(length)

    def _links(self) -> None:
        self.names = {}
        for kind, msg in self._dump(RTM_GETLINK, struct.pack("=BxHiII", socket.AF_UNSPEC, 0, 0, 0, 0)):
            if kind == RTM_NEWLINK:
                index = struct.unpack_from("=i", msg, 4)[0]
                name = _attrs(msg, 16, len(msg)).get(IFLA_IFNAME, b"").rstrip(b"\0").decode()
                self.names[index] = name

    def _name(self, index: int) -> str:
        if index not in self.names:
            self._links()
        return self.names.get(index, f"if{index}")

    def routes(self, protocol: int, family: int = socket.AF_INET) -> dict[str, set[str]]:
        """Main-table routes of `protocol` (186 = bgp): prefix -> names of the next hops' interfaces."""
        out: dict[str, set[str]] = {}
        for kind, msg in self._dump(RTM_GETROUTE, struct.pack("=BBBBBBBBI", family, 0, 0, 0, 0, 0, 0, 0, 0)):
            if kind != RTM_NEWROUTE:
                continue
            fam, dst_len, _, _, table, proto, _, _, _ = struct.unpack_from("=BBBBBBBBI", msg, 0)
            if proto != protocol:
                continue
            attrs = _attrs(msg, 12, len(msg))
            if RTA_TABLE in attrs:
                table = struct.unpack("=I", attrs[RTA_TABLE])[0]
            if table != RT_TABLE_MAIN:
                continue
            dst = ip_address(attrs[RTA_DST]) if RTA_DST in attrs else ip_address(b"\0" * (4 if fam == 2 else 16))
            hops: set[str] = set()
            if RTA_OIF in attrs:
                hops.add(self._name(struct.unpack("=i", attrs[RTA_OIF])[0]))
            mp = attrs.get(RTA_MULTIPATH, b"")
            offset = 0
            while offset + RTNH.size <= len(mp):
                length, _, _, index = RTNH.unpack_from(mp, offset)
                if length < RTNH.size:
                    break
                hops.add(self._name(index))
                offset += _align(length)
            out[f"{dst}/{dst_len}"] = hops
        return out
