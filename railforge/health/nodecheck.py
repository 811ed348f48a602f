"""The node health check: a GPU node against its planned state, one line per finding, exit 1 on any.

Runs on the node from its host_vars (`python -m railforge.health.nodecheck --host-vars su001-gpu01.json`), as
Slurm's HealthCheckProgram (`--drain` drains the node with the first finding as the reason) and on a timer
(`--textfile` writes the findings for node-exporter's textfile collector, where the
`RailforgeNodeCheckFailed` rule sees them). Each finding names the component and, for links, the cable label.

What it reads: `ip -j addr` (link state, MTU, addresses), /sys/class/net (speed, NIC PCIe width),
`lldpcli -f json show neighbors` (the neighbour each rail sees = the planned leaf and port),
/proc/net/bonding/<bond> (bond members), `nvidia-smi -q -x` (GPU count and model, ECC, PCIe width, fabric
state), `nvidia-smi nvlink -s` (inactive links), the kernel log (`NVRM: Xid`) and /sys/module (peer memory).
Hand-written because none of NVIDIA's or the distributions' checks know the plan's cables.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shlex
import socket
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from ipaddress import ip_interface
from pathlib import Path

from railforge.health.hostvars import HostVars, HostVarsError, RailVars, read_host_vars

CHECKS = ("link", "speed", "mtu", "address", "lldp", "bond", "pcie", "gpu", "nvlink", "xid", "peermem")
XID = re.compile(r"NVRM: Xid \(PCI:([0-9a-fA-F:.]+)\): (\d+),")
NVLINK = re.compile(r"^\s*Link (\d+): (.+?)\s*$")
NVLINK_GPU = re.compile(r"^GPU (\d+): (.*)$")
PEERMEM_MODULES = ("nvidia_peermem", "nv_peer_mem")


@dataclass(frozen=True, slots=True)
class Finding:
    component: str
    cable: str
    message: str

    def line(self) -> str:
        cable = f" {self.cable}" if self.cable else ""
        return f"{self.component}{cable}: {self.message}"


@dataclass(slots=True)
class Sources:
    """Where the check reads the node; tests point these at namespaces and recorded outputs."""

    sys_root: Path = Path("/")
    ip: tuple[str, ...] = ("ip",)
    lldpcli: tuple[str, ...] = ("lldpcli",)
    nvidia_smi: tuple[str, ...] = ("nvidia-smi",)
    kernel_log: tuple[str, ...] = ("dmesg",)
    timeout: float = 20

    def run(self, cmd: tuple[str, ...], *args: str) -> tuple[int, str]:
        try:
            proc = subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=self.timeout)
        except FileNotFoundError:
            return 127, f"{cmd[0]} not found"
        except subprocess.TimeoutExpired:
            return 124, f"{shlex.join(cmd)} timed out after {self.timeout:.0f} s"
        return proc.returncode, proc.stdout if proc.returncode == 0 else (proc.stderr or proc.stdout).strip()

    def read(self, *parts: str) -> str | None:
        try:
            return (self.sys_root.joinpath(*parts)).read_text().strip()
        except OSError:
            return None


def _rail(r: RailVars) -> str:
    return r.ifname if r.ifname == f"rail{r.rail}" else f"rail{r.rail} {r.ifname}"


# ---- network --------------------------------------------------------------------------------------------------

def check_links(hv: HostVars, src: Sources, mtu: int | None, enabled: set[str]) -> list[Finding]:
    code, out = src.run(src.ip, "-j", "addr", "show")
    if code != 0:
        return [Finding("network", "", f"ip -j addr show failed: {out[:200]}")]
    links = {x["ifname"]: x for x in json.loads(out or "[]")}
    found: list[Finding] = []
    for r in hv.railforge_rails:
        comp = _rail(r)
        link = links.get(r.ifname)
        if link is None:
            found.append(Finding(comp, r.cable, "interface missing"))
            continue
        flags = set(link.get("flags", []))
        if "link" in enabled:
            if "UP" not in flags:
                found.append(Finding(comp, r.cable, "administratively down"))
            elif "LOWER_UP" not in flags:
                found.append(Finding(comp, r.cable, f"no carrier (cable to {r.leaf}:{r.leaf_port})"))
        if "mtu" in enabled and mtu and link.get("mtu") != mtu:
            found.append(Finding(comp, r.cable, f"MTU {link.get('mtu')}, planned {mtu}"))
        if "address" in enabled:
            want = ip_interface(r.address)
            have = {ip_interface(f"{a['local']}/{a['prefixlen']}") for a in link.get("addr_info", [])
                    if a.get("family") == "inet"}
            if want not in have:
                got = ", ".join(sorted(str(h) for h in have)) or "none"
                found.append(Finding(comp, r.cable, f"address {want} missing (has {got})"))
        if "speed" in enabled:
            speed = src.read("sys/class/net", r.ifname, "speed")
            if speed is not None and speed.lstrip("-").isdigit() and int(speed) != r.speed_mbps:
                found.append(Finding(comp, r.cable, f"speed {speed} Mb/s, planned {r.speed_mbps}"))
        if "pcie" in enabled:
            cur = src.read("sys/class/net", r.ifname, "device/current_link_width")
            top = src.read("sys/class/net", r.ifname, "device/max_link_width")
            if cur and top and cur.isdigit() and top.isdigit() and int(cur) < int(top):
                found.append(Finding(comp, r.cable, f"NIC PCIe link x{cur} of x{top}"))
    return found


def lldp_neighbours(text: str) -> dict[str, tuple[str, str]]:
    """Local interface -> (system name, port id) from `lldpcli -f json show neighbors`."""
    raw = json.loads(text or "{}")
    lldp = raw.get("lldp", {}) if isinstance(raw, dict) else {}
    if isinstance(lldp, list):
        lldp = lldp[0] if lldp else {}
    interfaces = lldp.get("interface", []) if isinstance(lldp, dict) else []
    out: dict[str, tuple[str, str]] = {}
    for item in interfaces if isinstance(interfaces, list) else [interfaces]:
        for local, entry in (item.items() if isinstance(item, dict) else []):
            chassis = entry.get("chassis", {}) if isinstance(entry, dict) else {}
            names = [k for k, v in chassis.items() if isinstance(v, dict) and k not in ("id", "descr", "mgmt-ip")]
            if "name" in chassis and isinstance(chassis["name"], dict):
                names = [chassis["name"].get("value", "")]
            port = ((entry.get("port") or {}).get("id") or {}).get("value", "")
            out[local] = (names[0] if names else "", port)
    return out


def check_lldp(hv: HostVars, src: Sources) -> tuple[list[Finding], dict[str, tuple[str, str]]]:
    code, out = src.run(src.lldpcli, "-f", "json", "show", "neighbors")
    if code != 0:
        return [Finding("lldp", "", f"lldpcli failed: {out[:200]}")], {}
    try:
        seen = lldp_neighbours(out)
    except (json.JSONDecodeError, AttributeError) as exc:
        return [Finding("lldp", "", f"lldpcli output not understood: {exc}")], {}
    found = []
    for r in hv.railforge_rails:
        got = seen.get(r.ifname)
        comp = _rail(r)
        if got is None:
            found.append(Finding(comp, r.cable, f"no LLDP neighbour (planned {r.leaf}:{r.leaf_port})"))
        elif got != (r.leaf, r.leaf_port):
            found.append(Finding(comp, r.cable, f"LLDP neighbour {got[0]}:{got[1]}, planned {r.leaf}:{r.leaf_port}"))
    return found, seen


def check_bond(hv: HostVars, src: Sources) -> list[Finding]:
    """/proc/net/bonding/<bond>: each planned member listed with `MII Status: up`."""
    bond = hv.railforge_bond
    if bond is None:
        return []
    text = src.read("proc/net/bonding", bond.name)
    if text is None:
        return [Finding(f"bond {bond.name}", "", "missing (/proc/net/bonding has no such bond)")]
    members: dict[str, str] = {}
    current = None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "Slave Interface":
            current = value.strip()
            members[current] = ""
        elif key.strip() == "MII Status" and current is not None:
            members[current] = value.strip()
    found = []
    for m in bond.members:
        comp = f"bond {bond.name} {m.ifname}"
        if m.ifname not in members:
            found.append(Finding(comp, m.cable, f"not a member (cable to {m.switch}:{m.switch_port})"))
        elif members[m.ifname] != "up":
            found.append(Finding(comp, m.cable, f"MII status {members[m.ifname] or 'unknown'}"))
    return found


# ---- GPUs -----------------------------------------------------------------------------------------------------

def _text(node: ET.Element, path: str) -> str:
    el = node.find(path)
    return (el.text or "").strip() if el is not None else ""


def _count(value: str) -> int:
    return int(value) if value.isdigit() else 0


def check_gpus_xml(xml_text: str, gpus: int, model: str, nvswitch: bool) -> list[Finding]:
    """`nvidia-smi -q -x` (nvsmi_device_v12 DTD): count, model, uncorrectable ECC, PCIe width, fabric state."""
    try:
        root = ET.fromstring(xml_text)
    except ET.ParseError as exc:
        return [Finding("gpu", "", f"nvidia-smi -q -x output is not XML: {exc}")]
    found = []
    boards = root.findall("gpu")
    if len(boards) != gpus:
        found.append(Finding("gpu", "", f"{len(boards)} GPUs, planned {gpus}"))
    for g in boards:
        bus = g.get("id", "?")
        comp = f"gpu {bus}"
        name = _text(g, "product_name")
        if model and model.lower() not in name.lower():
            found.append(Finding(comp, "", f"model {name!r}, planned {model!r}"))
        ue = sum(_count(_text(g, f"ecc_errors/volatile/{k}")) for k in ("sram_uncorrectable", "dram_uncorrectable"))
        if ue:
            found.append(Finding(comp, "", f"{ue} uncorrectable ECC errors since the driver loaded"))
        if _text(g, "gpu_reset_status/reset_required") == "Yes":
            found.append(Finding(comp, "", "reset required"))
        cur, top = _text(g, "pci/pci_gpu_link_info/link_widths/current_link_width"), _text(
            g, "pci/pci_gpu_link_info/link_widths/max_link_width")
        if cur.endswith("x") and top.endswith("x") and _count(cur[:-1]) < _count(top[:-1]):
            found.append(Finding(comp, "", f"PCIe link {cur} of {top}"))
        state = _text(g, "fabric/state")
        if nvswitch and state not in ("", "N/A") and state != "Completed":
            found.append(Finding(comp, "", f"fabric manager state {state} ({_text(g, 'fabric/status')})"))
    return found


def check_nvlink(text: str) -> list[Finding]:
    """`nvidia-smi nvlink -s`: any link `<inactive>` or at 0 GB/s."""
    found, gpu = [], "?"
    for line in text.splitlines():
        m = NVLINK_GPU.match(line)
        if m:
            gpu = m.group(1)
            continue
        m = NVLINK.match(line)
        if m and (m.group(2) == "<inactive>" or m.group(2).startswith("0 GB/s")):
            found.append(Finding(f"nvlink gpu{gpu} link{m.group(1)}", "", m.group(2)))
    return found


def check_xid(text: str) -> list[Finding]:
    seen: dict[tuple[str, str], int] = {}
    for m in XID.finditer(text):
        seen[(m.group(1), m.group(2))] = seen.get((m.group(1), m.group(2)), 0) + 1
    return [Finding(f"gpu {bus}", "", f"Xid {xid} in the kernel log ({n}x)") for (bus, xid), n in sorted(seen.items())]


def check_peermem(src: Sources) -> list[Finding]:
    if any((src.sys_root / "sys/module" / m).is_dir() for m in PEERMEM_MODULES):
        return []
    return [Finding("peermem", "", "nvidia_peermem not loaded: GPUDirect RDMA off")]


# ---- the run --------------------------------------------------------------------------------------------------

@dataclass(slots=True)
class Expect:
    gpus: int = 8
    model: str = ""
    nvswitch: bool = True
    mtu: int | None = None


def run_checks(hv: HostVars, src: Sources, expect: Expect, enabled: set[str]) -> tuple[list[Finding], dict]:
    found: list[Finding] = []
    lldp: dict[str, tuple[str, str]] = {}
    if enabled & {"link", "speed", "mtu", "address", "pcie"}:
        found += check_links(hv, src, expect.mtu, enabled)
    if "lldp" in enabled:
        more, lldp = check_lldp(hv, src)
        found += more
    if "bond" in enabled:
        found += check_bond(hv, src)
    if expect.gpus and enabled & {"gpu", "nvlink"}:
        code, out = src.run(src.nvidia_smi, "-q", "-x")
        if code != 0:
            found.append(Finding("gpu", "", f"nvidia-smi failed: {out[:200]}"))
        else:
            if "gpu" in enabled:
                found += check_gpus_xml(out, expect.gpus, expect.model, expect.nvswitch)
            if "nvlink" in enabled and expect.nvswitch:
                code, out = src.run(src.nvidia_smi, "nvlink", "-s")
                found += check_nvlink(out) if code == 0 else [Finding("nvlink", "", f"nvidia-smi nvlink: {out}")]
    if "xid" in enabled:
        code, out = src.run(src.kernel_log)
        found += check_xid(out) if code == 0 else [Finding("xid", "", f"kernel log unreadable: {out[:200]}")]
    if "peermem" in enabled:
        found += check_peermem(src)
    return found, lldp


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def textfile(hv: HostVars, found: list[Finding], lldp: dict[str, tuple[str, str]]) -> str:
    """node-exporter textfile: findings, and each rail's LLDP neighbour (the target label names the node)."""
    lines = ["# HELP railforge_nodecheck_finding A failed node check (1), by component and cable.",
             "# TYPE railforge_nodecheck_finding gauge"]
    lines += sorted({f'railforge_nodecheck_finding{{component="{_label(f.component)}",cable="{_label(f.cable)}"}} 1'
                     for f in found})
    lines += ["# HELP railforge_nodecheck_findings Findings of the last node check.",
              "# TYPE railforge_nodecheck_findings gauge", f"railforge_nodecheck_findings {len(found)}",
              "# HELP railforge_lldp_neighbor The LLDP neighbour a rail sees.", "# TYPE railforge_lldp_neighbor gauge"]
    rails = {r.ifname for r in hv.railforge_rails}
    lines += [f'railforge_lldp_neighbor{{port="{_label(p)}",peer_device="{_label(s)}",peer_port="{_label(q)}"}} 1'
              for p, (s, q) in sorted(lldp.items()) if p in rails]
    return "\n".join(lines) + "\n"


def _drained(line: str) -> bool:
    return "DRAIN" in next((p for p in line.split() if p.startswith("State=")), "")


def drain_refusal(show_nodes: str, max_share: float) -> str | None:
    """Why one more drain would pass the cap, from `scontrol -o show nodes` (one node a line), or None.

    The same guard the remediation receiver keeps (`--max-drain-share`): a check that fails on every node at once
    (a broken driver update, a leaf of the check's own reading) must not take the cluster out of service. Each
    node decides alone, so two nodes failing in the same second may both pass the last free place."""
    lines = [x for x in show_nodes.splitlines() if x.startswith("NodeName=")]
    drained = sum(_drained(x) for x in lines)
    limit = int(max_share * len(lines))
    if drained + 1 <= limit:
        return None
    return (f"not drained: {drained} of {len(lines)} nodes are drained already and --max-drain-share {max_share:g} "
            f"allows {limit}: a human must decide")


def drain(node: str, first: Finding, max_share: float = 1.0) -> str | None:
    """As Slurm's HealthCheckProgram must: drain this node, reason = the first finding; a node already drained
    keeps its reason (a human's or the remediation loop's). No drain when it would take the drained share of the
    cluster's nodes over `max_share` (`drain_refusal`). Returns why the drain failed, None when it did not."""
    try:
        show = subprocess.run(["scontrol", "-o", "show", "node", node], capture_output=True, text=True,
                              check=False, timeout=30)
        if _drained(show.stdout):
            return None
        if max_share < 1.0:
            every = subprocess.run(["scontrol", "-o", "show", "nodes"], capture_output=True, text=True,
                                   check=False, timeout=30)
            if every.returncode != 0:
                why = (every.stderr or every.stdout).strip()[:200]
                return f"scontrol show nodes exited {every.returncode}: {why} (not drained: the cap cannot be checked)"
            refused = drain_refusal(every.stdout, max_share)
            if refused:
                return refused
        reason = f"railforge-node-health: {first.line()}"[:200]
        done = subprocess.run(["scontrol", "update", f"NodeName={node}", "State=DRAIN", f"Reason={reason}"],
                              capture_output=True, text=True, check=False, timeout=30)
    except FileNotFoundError:
        return "scontrol not found on PATH"
    except subprocess.TimeoutExpired:
        return "scontrol timed out after 30 s"
    if done.returncode != 0:
        return f"scontrol update exited {done.returncode}: {(done.stderr or done.stdout).strip()[:200]}"
    return None


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise


def _share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text!r}: a share from 0 to 1, e.g. 0.25")
    return value


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="railforge-node-health", description=__doc__.split("\n\n")[0])
    p.add_argument("--host-vars", type=Path, required=True, help="this node's host_vars JSON from railforge build")
    p.add_argument("--gpus", type=int, default=8, help="planned GPUs (0: no GPU checks)")
    p.add_argument("--gpu-model", default="", help="substring of nvidia-smi's product name, e.g. H100")
    p.add_argument("--nvswitch", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--mtu", type=int, default=None, help="planned rail MTU (the plan's host_mtu)")
    p.add_argument("--skip", default="", help=f"comma list of checks to skip: {','.join(CHECKS)}")
    p.add_argument("--lldp-socket", default=None, help="lldpd's control socket (lldpcli -u)")
    p.add_argument("--nvidia-smi", default="nvidia-smi")
    p.add_argument("--kernel-log", default="dmesg", help="command printing the kernel log")
    p.add_argument("--textfile", type=Path, default=None, help="write findings for node-exporter here (.prom)")
    p.add_argument("--drain", action="store_true", help="on findings: scontrol drain this node, reason = the first")
    p.add_argument("--node-name", default=None, help="Slurm node name for --drain (default: short host name)")
    p.add_argument("--max-drain-share", type=_share, default=0.25,
                   help="--drain: no drain when more than this share of the cluster's nodes would then be drained "
                        "(0..1; 1 = no cap)")
    args = p.parse_args(argv)
    skip = {s for s in args.skip.split(",") if s}
    unknown = skip - set(CHECKS)
    if unknown:
        print(f"--skip: unknown checks {', '.join(sorted(unknown))}; known: {', '.join(CHECKS)}", file=sys.stderr)
        return 2
    try:
        hv = read_host_vars(args.host_vars)
    except HostVarsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    src = Sources(lldpcli=("lldpcli", *(("-u", args.lldp_socket) if args.lldp_socket else ())),
                  nvidia_smi=(args.nvidia_smi,), kernel_log=tuple(shlex.split(args.kernel_log)))
    expect = Expect(args.gpus, args.gpu_model, args.nvswitch, args.mtu)
    found, lldp = run_checks(hv, src, expect, set(CHECKS) - skip)
    for f in found:
        print(f.line().encode("unicode_escape").decode("ascii"))
    if args.textfile is not None:
        _write_atomic(args.textfile, textfile(hv, found, lldp))
    if found and args.drain:
        node = args.node_name or socket.gethostname().split(".")[0]
        failed = drain(node, found[0], args.max_drain_share)
        if failed:
            print(f"error: drain {node}: {failed}".encode("unicode_escape").decode("ascii"), file=sys.stderr)
    if not found:
        print(f"OK: {len(set(CHECKS) - skip)} checks, {len(hv.railforge_rails)} rails")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
