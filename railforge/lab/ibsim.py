"""The planned InfiniBand compute fabric on ibsim: the net file, and real OpenSM and diags run against it.

ibsim (Debian `ibsim-utils` 0.10) simulates switches and HCAs from a net file in ibnetdiscover's format;
programs reach it through `LD_PRELOAD=libumad2sim.so`, on the unix socket named by `IBSIM_SOCKNAME`, and
attach at the node named by `SIM_HOST`. The net file comes from the plan alone: every compute cable of
`configs/opensm/expected-topology.txt`'s model (same node descriptions, same IB port numbers), switches
described as NVIDIA switches describe themselves (`MF0;<hostname>:<model>/U1`), HCAs as `<hostname> <hca>`.
GUIDs are invented (a switch: `SWITCH_GUID_BASE + n`; an HCA node `HCA_GUID_BASE + 16 n`, port 1 that + 1):
the plan cannot know them, which is why the generated files resolve names from ibnetdiscover output.
Each cable carries its planned width (`w=`); ibsim 0.10 cannot express NDR, so every link trains at SDR.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from railforge.plan.model import Plan
from railforge.plan.switch_model import build_models
from railforge.render import ibnetdiscover, opensm

UMAD2SIM = next((str(p) for p in sorted(Path("/usr/lib").glob("*/umad2sim/libumad2sim.so"))),
                "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so")
SWITCH_GUID_BASE = 0xFC6A1C0300000000
HCA_GUID_BASE = 0x946DAE0300000000
WIDTH_BITS = {1: 1, 4: 2, 8: 4, 12: 8}  # PortInfo LinkWidthEnabled bit per lane count
TOOLS = ("ibsim", "opensm", "ibnetdiscover", "smpquery")


class SimError(RuntimeError):
    pass


@dataclass
class NetNode:
    kind: str  # Switch | Ca
    nodeid: str
    description: str
    ports: int
    links: dict[int, tuple[str, int, int]] = field(default_factory=dict)  # port -> (peer nodeid, port, lanes)


def fabric_nodes(plan: Plan, swaps: list[tuple[str, str]] = ()) -> dict[str, NetNode]:
    """The simulated nodes by nodeid (a switch's hostname, an HCA's `<hostname> <hca>`). `swaps` exchanges
    the `b` ends (the upper switch's ports) of pairs of cables: a seeded miswire."""
    switches = [s for s in build_models(plan) if s.fabric == "compute"]
    devices = plan.device_index()
    nodes: dict[str, NetNode] = {}
    for sw in switches:
        dev = devices[sw.hostname]
        ib_ports = [p.ib_number() for p in dev.ports if p.lanes]
        nodes[sw.hostname] = NetNode("Switch", sw.hostname, f"MF0;{sw.hostname}:{dev.model}/U1", max(ib_ports))
    lanes = {(s.hostname, opensm.ib_port(i)): len(i.lanes) for s in switches for i in s.interfaces}
    rows = {r[0]: r for r in opensm.expected_topology(switches)}
    for x, y in swaps:
        rx, ry = rows[x], rows[y]
        rows[x], rows[y] = rx[:3] + ry[3:5] + rx[5:], ry[:3] + rx[3:5] + ry[5:]
    for _, a_node, a_port, b_node, b_port, *_ in rows.values():
        width = lanes.get((b_node, b_port), 4)
        if a_node not in nodes:
            nodes[a_node] = NetNode("Ca", a_node, a_node, 1)
        nodes[a_node].links[a_port] = (b_node, b_port, width)
        nodes[b_node].links[b_port] = (a_node, a_port, width)
    return nodes


def net_file(plan: Plan, swaps: list[tuple[str, str]] = ()) -> str:
    """ibsim's net file: `switchguid=`/`caguid=` set each node's GUID, then its header and cabled ports."""
    nodes = fabric_nodes(plan, swaps)
    out = [f"# {plan.cluster.name}: planned InfiniBand compute fabric for ibsim (railforge lab ibsim)\n"]
    n_sw = n_ca = 0
    for node in nodes.values():
        if node.kind == "Switch":
            n_sw += 1
            out.append(f"switchguid=0x{SWITCH_GUID_BASE + n_sw:016x}\n"
                       f'Switch\t{node.ports} "{node.nodeid}"\t# "{node.description}" enhanced port 0\n')
        else:
            n_ca += 1
            out.append(f"caguid=0x{HCA_GUID_BASE + 16 * n_ca:016x}\n"
                       f'Ca\t{node.ports} "{node.nodeid}"\t# "{node.description}"\n')
        for port, (peer, peer_port, lanes) in sorted(node.links.items()):
            out.append(f'[{port}]\t"{peer}"[{peer_port}]\tw={WIDTH_BITS.get(lanes, 2)}\n')
        out.append("\n")
    return "".join(out)


def sm_host(plan: Plan) -> str:
    """Where the subnet manager runs: the UFM appliance's first HCA, else the first node's."""
    nodes = fabric_nodes(plan)
    cas = [n for n in nodes.values() if n.kind == "Ca"]
    ufm = {d.name for d in plan.devices if d.role == "ufm"}
    return next((n.nodeid for n in cas if n.nodeid.split()[0] in ufm), cas[0].nodeid)


def missing_tools() -> list[str]:
    return [t for t in TOOLS if shutil.which(t) is None] + ([] if Path(UMAD2SIM).exists() else ["libumad2sim0"])


class IbSim:
    """One ibsim and (optionally) one OpenSM in `workdir`, on a private socket; `stop` ends both by PID."""

    def __init__(self, workdir: Path, sockname: str, sim_host: str):
        workdir = workdir.resolve()  # the daemons run in workdir: a path relative to the caller would miss
        self.workdir, self.sockname, self.sim_host = workdir, sockname, sim_host
        self.ibsim: subprocess.Popen | None = None
        self.opensm: subprocess.Popen | None = None
        self.osm_log = workdir / "opensm.log"

    def env(self) -> dict[str, str]:
        cache = self.workdir / "osm-cache"
        cache.mkdir(exist_ok=True)
        return {**os.environ, "LD_PRELOAD": UMAD2SIM, "IBSIM_SOCKNAME": self.sockname, "SIM_HOST": self.sim_host,
                "OSM_TMP_DIR": str(cache), "OSM_CACHE_DIR": str(cache)}

    def start(self, net: Path, timeout: float = 30) -> None:
        """Start ibsim on `net` and wait until it answers an SMP; on failure nothing is left running."""
        try:
            self._start(net, timeout)
        except BaseException:
            self.stop()
            raise

    def _start(self, net: Path, timeout: float) -> None:
        log = open(self.workdir / "ibsim.log", "w")  # noqa: SIM115 - closed by the child's exit
        env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
        env["IBSIM_SOCKNAME"] = self.sockname
        self.ibsim = subprocess.Popen(["ibsim", "-s", "-n", str(Path(net).resolve())], stdout=log,
                                      stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=self.workdir)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.ibsim.poll() is not None:
                raise SimError(f"ibsim exited ({self.ibsim.returncode}): {self._tail('ibsim.log')}")
            if re.search(r"parsed \d+ lines", self._tail("ibsim.log")):
                probe = self.run("smpquery", "-D", "nodeinfo", "0", check=False, timeout=10)
                if probe.returncode == 0:
                    return
            time.sleep(0.1)
        raise SimError(f"ibsim did not answer within {timeout} s: {self._tail('ibsim.log')}")

    def run(self, *cmd: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=self.env(), cwd=self.workdir, timeout=timeout)
        if check and proc.returncode != 0:
            raise SimError(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
        return proc

    def start_opensm(self, conf: Path, root_guids: Path, partitions: Path, timeout: float = 120) -> str:
        """OpenSM with the generated opensm.conf; the root GUID and partition files and the log are given on
        the command line (they override the conf's /etc and /var/log paths). Returns the log once the
        subnet is up (or raises)."""
        try:
            return self._start_opensm(conf, root_guids, partitions, timeout)
        except BaseException:
            self.stop()
            raise

    def _start_opensm(self, conf: Path, root_guids: Path, partitions: Path, timeout: float) -> str:
        # OpenSM runs in workdir and silently falls back to its defaults when -F names no file: every path is
        # made absolute (a relative one was resolved against workdir, not the caller's folder) and checked.
        conf, root_guids, partitions = (Path(p).resolve() for p in (conf, root_guids, partitions))
        for path in (conf, root_guids, partitions):
            if not path.is_file():
                raise SimError(f"{path} is not a file; OpenSM would run on its defaults without it")
        cmd = ["opensm", "-F", str(conf), "-a", str(root_guids), "-P", str(partitions), "-f", str(self.osm_log),
               "-D", "0x07", "-d", "2"]
        out = open(self.workdir / "opensm.out", "w")  # noqa: SIM115 - closed by the child's exit
        self.opensm = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       env=self.env(), cwd=self.workdir)
        out.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.opensm.poll() is not None:
                raise SimError(f"opensm exited ({self.opensm.returncode}): {self._tail('opensm.out')}")
            log = self.osm_log.read_text(errors="replace") if self.osm_log.exists() else ""
            if "SUBNET UP" in log:
                return log
            time.sleep(0.2)
        raise SimError(f"OpenSM did not bring the subnet up within {timeout} s: {self._tail('opensm.out')}")

    def _tail(self, name: str) -> str:
        path = self.workdir / name
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    def stop(self) -> None:
        for proc in (self.opensm, self.ibsim):
            if proc is None or proc.poll() is not None:
                continue
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@dataclass
class DayOne:
    """What a site does on day 1, on the simulated fabric: the files made and OpenSM's log."""

    before: Path  # ibnetdiscover output before the SM runs (input of the generated scripts)
    root_guids: Path
    partitions: Path
    log: str
    after: Path  # ibnetdiscover output with the subnet up (LIDs assigned)


def day_one(sim: IbSim, opensm_dir: Path) -> DayOne:
    """ibnetdiscover -> make-root-guids, make-partitions -> OpenSM with the generated opensm.conf -> ibnetdiscover."""
    w = sim.workdir
    before, after = w / "ibnetdiscover-before.txt", w / "ibnetdiscover.txt"
    before.write_text(sim.run("ibnetdiscover").stdout)
    made = {}
    for script, arg, target in (("make-root-guids", "root-switches.txt", "root-guids.conf"),
                                ("make-partitions", "partition-members.txt", "partitions.conf")):
        proc = subprocess.run([str(opensm_dir / script), str(opensm_dir / arg), str(before), "-o", str(w / target)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise SimError(f"{script} failed: {proc.stderr.strip()}")
        made[script] = w / target
    log = sim.start_opensm(opensm_dir / "opensm.conf", made["make-root-guids"], made["make-partitions"])
    after.write_text(sim.run("ibnetdiscover").stdout)
    return DayOne(before, made["make-root-guids"], made["make-partitions"], log, after)


def sm_checks(run: DayOne, roots: list[str]) -> list[tuple[str, bool, str]]:
    """(check, ok, detail): MASTER, the routing engine that built the tables, the root switches it ranked."""
    log = run.log
    engines = sorted(set(re.findall(r"building routing with '(\w+)' routing algorithm", log)))
    block = log.split("- Root switches:", 1)[-1].split("- Leaf switches", 1)[0]
    ranked = {int(g, 16) for g in re.findall(r"GUID: 0x([0-9a-f]+)", block)}
    fabric = ibnetdiscover.parse(run.after.read_text())
    by_guid = {int(n.guid, 16): n.name for n in fabric.nodes.values() if n.kind == "Switch"}
    ranked_names = sorted(by_guid.get(g, hex(g)) for g in ranked)
    ok_tables = "ftree tables configured on all switches" in log
    return [
        ("master", "Entering MASTER state" in log and "SUBNET UP" in log, "OpenSM MASTER, SUBNET UP"),
        ("routing", engines == ["ftree"] and ok_tables, f"engines that built tables: {', '.join(engines) or 'none'}"),
        ("roots", ranked_names == sorted(roots),
         f"ftree ranked {len(ranked_names)} roots ({', '.join(ranked_names[:3])}{' ...' if len(ranked) > 3 else ''})"
         f", {len(roots)} planned"),
    ]

