"""The generated slurm/topology.conf loaded by a real slurmctld (Debian's Slurm 22.05, topology/tree).

For every example a private slurmctld runs on 127.0.0.1 (ports 16817/16818, a temporary
StateSaveLocation, auth/none) with a minimal slurm.conf holding the plan's GPU nodes. The test asserts
that `scontrol show topology` is the plan's tree (every node under exactly one leaf switch, its SU)
and that slurmctld logged no warning or error. The daemon is stopped by its PID.

slurmctld runs twice: the first start creates the state files (a fresh StateSaveLocation makes
slurmctld log `error: Could not open ... state file`), the second, checked start reads them.
PluginDir is a private folder of links to the installed plugins without mpi/pmix*: slurmctld loads
every MPI plugin at start and logs errors for PMIx, whose library Debian's slurmctld does not pull in.
"""

from __future__ import annotations

import getpass
import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from railforge.render.hostlist import compress
from tests.conftest import EXAMPLES, plan_of, require_tool
from tests.render.test_scheduler_files import expand, expected_tree

PORT, SLURMD_PORT = 16817, 16818
PLUGINS = Path("/usr/lib/x86_64-linux-gnu/slurm-wlm")
# slurmctld times gettimeofday() at start and complains when the machine is busy: load, not config.
HOST_NOISE = re.compile(r"High latency for \d+ calls to gettimeofday")


def slurm_conf(folder: Path, plan) -> Path:
    plugins = folder / "plugins"
    plugins.mkdir()
    for so in sorted(PLUGINS.glob("*.so")):
        if not so.name.startswith(("mpi_pmix", "mpi_cray")):
            (plugins / so.name).symlink_to(so)
    (folder / "state").mkdir()
    nodes = compress(d.name for d in plan.devices_by_role("node"))
    conf = folder / "slurm.conf"
    conf.write_text("\n".join([
        "ClusterName=railforge",
        f"SlurmctldHost={socket.gethostname().split('.')[0]}(127.0.0.1)",
        f"SlurmctldPort={PORT}",
        f"SlurmdPort={SLURMD_PORT}",
        "AuthType=auth/none",
        "CredType=cred/none",
        f"SlurmUser={getpass.getuser()}",
        f"StateSaveLocation={folder / 'state'}",
        f"SlurmctldPidFile={folder / 'slurmctld.pid'}",
        f"SlurmctldLogFile={folder / 'slurmctld.log'}",
        "SlurmctldDebug=info",
        f"PluginDir={plugins}",
        "MailProg=/bin/true",
        "MpiDefault=none",
        "ReturnToService=2",
        "TopologyPlugin=topology/tree",
        f"NodeName={nodes} NodeAddr=127.0.0.1 CPUs=1 State=UNKNOWN",
        "PartitionName=gpu Nodes=ALL Default=YES",
        "",
    ]))
    return conf


def _port_free() -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", PORT)) != 0


def run_slurmctld(conf: Path, query: bool) -> tuple[str, str]:
    """Start slurmctld in the foreground, wait until it answers, optionally read the topology, stop it."""
    env = {**os.environ, "SLURM_CONF": str(conf)}
    log = conf.parent / "slurmctld.log"
    log.unlink(missing_ok=True)
    proc = subprocess.Popen(["slurmctld", "-D", "-f", str(conf)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=env, cwd=conf.parent)
    topology = ""
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, f"slurmctld exited ({proc.returncode}):\n{proc.stdout.read()}"
            ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, env=env)
            if "UP" in ping.stdout:
                break
            assert time.monotonic() < deadline, f"slurmctld did not answer on 127.0.0.1:{PORT}: {ping.stdout}"
            time.sleep(0.2)
        if query:
            shown = subprocess.run(["scontrol", "show", "topology"], capture_output=True, text=True, env=env)
            assert shown.returncode == 0, shown.stderr
            topology = shown.stdout
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return topology, log.read_text() + (proc.stdout.read() if proc.stdout else "")


def parse_topology(text: str) -> dict[str, dict[str, str]]:
    out = {}
    for line in text.splitlines():
        if line.startswith("SwitchName="):
            fields = dict(kv.split("=", 1) for kv in line.split())
            out[fields["SwitchName"]] = fields
    return out


@pytest.mark.root
@pytest.mark.parametrize("name", EXAMPLES)
def test_slurmctld_loads_the_topology_without_warnings(built, tmp_path, name):
    require_tool("slurmctld", "scontrol")
    assert _port_free(), f"127.0.0.1:{PORT} is taken; this test needs it for its private slurmctld"
    plan = plan_of(name)
    conf = slurm_conf(tmp_path, plan)
    (tmp_path / "topology.conf").write_text((built(name) / "slurm" / "topology.conf").read_text())
    run_slurmctld(conf, query=False)
    shown, log = run_slurmctld(conf, query=True)

    complaints = [line for line in log.splitlines()
                  if re.search(r"error|warning", line, re.I) and not HOST_NOISE.search(line)]
    assert not complaints, "slurmctld complained:\n" + "\n".join(complaints)

    switches = parse_topology(shown)
    leaves, uppers = expected_tree(plan)
    got_leaves = {n: set(expand(s["Nodes"])) for n, s in switches.items() if s["Level"] == "0"}
    assert got_leaves == leaves
    placed = [node for nodes in got_leaves.values() for node in nodes]
    assert len(placed) == len(set(placed)) == len(plan.devices_by_role("node")), "one leaf switch per node"
    got_uppers = {n: set(expand(s["Switches"])) for n, s in switches.items() if s["Level"] != "0"}
    assert got_uppers == uppers
    top = max(int(s["Level"]) for s in switches.values())
    assert top == plan.cluster.tiers - 1
    every = {d.name for d in plan.devices_by_role("node")}
    assert all(set(expand(s["Nodes"])) == every for s in switches.values() if int(s["Level"]) == top), \
        "every top-tier switch reaches every node"


@pytest.mark.root
def test_slurmctld_warns_on_a_node_under_two_leaves(tmp_path):
    """The check above can fail: a node listed under two leaf switches is what slurmctld warns about."""
    require_tool("slurmctld", "scontrol")
    plan = plan_of("dgx-h100-4su")
    conf = slurm_conf(tmp_path, plan)
    (tmp_path / "topology.conf").write_text(
        "SwitchName=su001-leaf-r0 Nodes=su001-gpu[01-32]\nSwitchName=su001-leaf-r1 Nodes=su001-gpu[01-32]\n"
        "SwitchName=spine01 Switches=su001-leaf-r[0-1]\n")
    run_slurmctld(conf, query=False)
    _, log = run_slurmctld(conf, query=True)
    assert "Multiple leaf switches contain nodes" in log
