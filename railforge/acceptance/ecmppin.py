"""Pin every lab test's flows to one known path through the ECMP fabric, read hop by hop from the switches' own
forwarding decisions, so a slow test names the exact leaf-spine cables it crossed instead of a leaf's uplinks.

The lab's switches are Linux namespaces; pinning sets their multipath hash to the packet's 5-tuple (`HASH`):
the next hop of a flow is then fixed once its ports are. `ip route get DST from SRC iif IN ipproto
tcp sport S dport D` asks a switch's kernel which next hop that flow takes, so walking it from the source leaf
along the plan's cables gives the flow's path. An iperf3 test is two TCP connections: the control connection
(client port pinned per round through the client namespace's `ip_local_port_range`) and the data stream
(`--cport`); each direction is walked. Ports are chosen so both connections take the same path each way (a
test then crosses exactly the cables recorded for it) and come back over the cables they went out on (iperf3's
data flows one way: a cable crossed only by the ACKs would not slow the test, and a healthy test would clear
it), and among control ports the one whose paths cross the most upper cables still on fewer than two tests
(greedy, like the InfiniBand cover). Ports a client namespace
has in use (TIME-WAIT included) are never chosen.

This needs the hash and the live forwarding state: a real fabric's switch ASICs hash with seeds and fields this
cannot know, which is why the plan keeps ECMP bundles and flows-per-pair for them (`paths`).
"""

from __future__ import annotations

import json
import subprocess
from collections import Counter, defaultdict
from dataclasses import dataclass

from railforge.lab.scope import LabTopology, lab_topology
from railforge.lab.shell import in_ns
from railforge.lab.state import load_state
from railforge.plan.model import Plan

MAX_HOPS = 6
# Policy 1 (L4) short-circuits to the packet's own hash when it has one, and a TCP packet from a host namespace
# crossing a veth keeps its socket's random txhash: measured here, half the flows left the leaf on the uplink
# `ip route get` did not name. Policy 3 hashes the chosen header fields of every packet (src/dst address,
# protocol, src/dst port), as a switch ASIC does, and `ip route get` computes the same.
HASH = {"net.ipv4.fib_multipath_hash_policy": 3, "net.ipv4.fib_multipath_hash_fields": "0x0037"}
CONTROL_PORTS = range(33000, 33064)
DATA_PORTS = range(34000, 34256)
UPPER_TIERS = ("leaf-spine", "spine-superspine")


NOTE = ("lab only: each test's ports chosen so its TCP connections take one path the switches' kernels report "
        "(fib_multipath_hash_policy=3 on the 5-tuple, ip route get); its cables are that path. A real fabric's "
        "ASIC hash is not known: there, bundles and flows per pair apply")


class PinError(RuntimeError):
    pass


@dataclass(frozen=True, slots=True)
class Flow:
    leaf: str  # where the flow enters the fabric
    iif: str  # the leaf's interface it enters on (the host VLAN's bridge)
    src: str
    dst: str
    sport: int
    dport: int
    end: str  # the leaf that must deliver it


class Walker:
    """Routes flows through the lab, one `ip -batch` per switch namespace per hop."""

    def __init__(self, topo: LabTopology):
        self.topo = topo
        switches = {d.name for d in topo.switches}
        self.next: dict[tuple[str, str], tuple[str, str, str]] = {}  # (device, port) -> (peer, peer port, cable)
        for lk in topo.links:
            if lk.a.device in switches and lk.b.device in switches:
                self.next[(lk.a.device, lk.a.port)] = (lk.b.device, lk.b.port, lk.id)
                self.next[(lk.b.device, lk.b.port)] = (lk.a.device, lk.a.port, lk.id)
        self.upper = {lk.id for lk in topo.links if lk.tier in UPPER_TIERS}
        self.bridge: dict[tuple[str, str], str] = {}
        for d in topo.switches:
            for hs in d.host_subnets:
                for p in hs.ports:
                    self.bridge[(d.name, p)] = f"Vlan{hs.vlan}"

    def walk(self, flows: list[Flow]) -> list[tuple[str, ...]]:
        at = [(f.leaf, f.iif) for f in flows]
        path: list[list[str]] = [[] for _ in flows]
        live = list(range(len(flows)))
        for _ in range(MAX_HOPS):
            if not live:
                return [tuple(p) for p in path]
            by_ns: dict[str, list[int]] = defaultdict(list)
            for i in live:
                by_ns[at[i][0]].append(i)
            still = []
            for device, idx in sorted(by_ns.items()):
                for i, dev in zip(idx, self._route(device, [(flows[i], at[i][1]) for i in idx]), strict=True):
                    hop = self.next.get((device, dev))
                    if hop is None:
                        if device != flows[i].end:
                            raise PinError(f"{device} delivers {flows[i].dst} on {dev}; {flows[i].end} should")
                        continue
                    path[i].append(hop[2])
                    at[i] = (hop[0], hop[1])
                    still.append(i)
            live = still
        raise PinError(f"a flow took more than {MAX_HOPS} hops (a loop?)")

    def _route(self, device: str, queries: list[tuple[Flow, str]]) -> list[str]:
        lines = "".join(f"route get {f.dst} from {f.src} iif {iif} ipproto tcp sport {f.sport} dport {f.dport}\n"
                        for f, iif in queries)
        proc = subprocess.run(["ip", "-n", self.topo.ns(device), "-j", "-batch", "-"], input=lines,
                              capture_output=True, text=True, timeout=60)
        out = [ln for ln in proc.stdout.splitlines() if ln.strip()]
        if proc.returncode != 0 or len(out) != len(queries):
            raise PinError(f"ip route get in {self.topo.ns(device)} failed: {proc.stderr.strip()[:300]}")
        devs = [(json.loads(ln) or [{}])[0].get("dev") for ln in out]
        if None in devs:
            f, _ = queries[devs.index(None)]
            raise PinError(f"{self.topo.ns(device)} has no route for {f.src} -> {f.dst}")
        return devs


def topology(plan: Plan, prefix: str) -> LabTopology:
    """The running lab's topology, as `lab up` recorded it."""
    state = load_state(plan.cluster.name, prefix)
    if state is None:
        raise PinError(f"no lab of {plan.cluster.name} with prefix {prefix!r} is up")
    o = state.options
    return lab_topology(plan, o["sus"], o["spines"], o["hosts_per_su"], state.prefix, o.get("superspines", "all"),
                        o.get("parallel", "all"))


def ports_in_use(ns: str) -> set[int]:
    proc = subprocess.run(in_ns(ns, "ss", "-Htan"), capture_output=True, text=True, timeout=30)
    used = set()
    for ln in proc.stdout.splitlines():
        cols = ln.split()
        if len(cols) >= 4 and cols[3].rpartition(":")[2].isdigit():
            used.add(int(cols[3].rpartition(":")[2]))
    return used


def _flows(w: Walker, t: dict, sport: int, dport: int, leaf_of: dict[str, tuple[str, str]]) -> list[Flow]:
    a, b = t["a"], t["b"]
    la, lb = leaf_of[a["cable"]], leaf_of[b["cable"]]
    return [Flow(la[0], la[1], a["address"], b["address"], sport, dport, lb[0]),
            Flow(lb[0], lb[1], b["address"], a["address"], dport, sport, la[0])]


def pin(doc: dict, topo: LabTopology, server_port) -> dict[int, dict[str, int]]:
    """Choose every test's ports and rewrite its cables to the exact path (in `doc`, in place). Returns the control
    port per round and client namespace."""
    for d in topo.switches:
        subprocess.run(in_ns(topo.ns(d.name), "sysctl", "-q", "-w", *[f"{k}={v}" for k, v in HASH.items()]),
                       check=True, capture_output=True, timeout=30)
    w = Walker(topo)
    leaf_of: dict[str, tuple[str, str]] = {}
    for lk in topo.links:
        if lk.tier == "node-leaf":
            leaf_of[lk.id] = (lk.b.device, w.bridge.get((lk.b.device, lk.b.port), lk.b.port))
    uses: Counter = Counter()
    control: dict[int, dict[str, int]] = {}
    taken: dict[str, set[int]] = {}  # per client namespace: in use now, or chosen for an earlier round
    for r in doc["rounds"]:
        by_client: dict[str, list[dict]] = defaultdict(list)
        for t in r["tests"]:
            by_client[t["a"]["node"]].append(t)
        control[r["round"]] = {}
        for node, tests in sorted(by_client.items()):
            ns = topo.ns(node)
            if ns not in taken:
                taken[ns] = ports_in_use(ns)
            used = taken[ns]
            cands = [p for p in CONTROL_PORTS if p not in used]
            flows = [f for p in cands for t in tests for f in _flows(w, t, p, server_port(t), leaf_of)]
            paths = w.walk(flows)
            per = 2 * len(tests)
            best, best_key = None, None
            for k, p in enumerate(cands):
                mine = paths[k * per:(k + 1) * per]
                if any(set(mine[j]) != set(mine[j + 1]) for j in range(0, per, 2)):
                    continue  # the ACKs would cross a cable the data does not: a slowed cable would not show
                cables = {c for path in mine for c in path if c in w.upper}
                key = (-sum(1 for c in cables if uses[c] < 2), sum(uses[c] for c in cables), k)
                if best_key is None or key < best_key:
                    best, best_key = p, key
            if best is None:
                raise PinError(f"{ns}: no free control port in {CONTROL_PORTS.start}-{CONTROL_PORTS.stop - 1} whose "
                               "paths return over the cables they go out on")
            control[r["round"]][node] = best
            used.add(best)
            for t in tests:
                _pin_test(w, t, best, server_port(t), used, leaf_of, uses)
                used.add(t["ports"]["data"])
    return control


def _pin_test(w: Walker, t: dict, cport: int, sport: int, used: set[int], leaf_of: dict, uses: Counter) -> None:
    want = w.walk(_flows(w, t, cport, sport, leaf_of))
    cands = [p for p in DATA_PORTS if p not in used and p != cport]
    got = w.walk([f for p in cands for f in _flows(w, t, p, sport, leaf_of)])
    data = next((p for k, p in enumerate(cands) if [got[2 * k], got[2 * k + 1]] == want), None)
    if data is None:
        raise PinError(f"{t['id']}: no data port in {DATA_PORTS.start}-{DATA_PORTS.stop - 1} takes the control "
                       "connection's path both ways")
    upper = sorted({c for path in want for c in path})
    for c in upper:
        uses[c] += 1
    t["cables"] = [t["a"]["cable"], t["b"]["cable"], *upper]
    t["bundles"] = []
    t["ports"] = {"control": cport, "data": data, "server": sport}
