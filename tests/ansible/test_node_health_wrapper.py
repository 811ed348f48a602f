"""The wrapper slurm.conf's HealthCheckProgram names, rendered by Ansible from the node_health role's template
and run on this host the way slurmd runs it: an empty environment, so the check finds lldpcli (/usr/sbin) only
through the PATH the wrapper sets. This host has none of the plan's rails, so the check must exit 1 and name
each one by its cable label. The role's Molecule scenario runs the same wrapper as installed on a node, with
SLURMD_NODENAME (the drain) and the timer (roles/node_health/molecule/default/verify.yml). Not here: scontrol
with no reachable controller waits 30 s and more before it fails."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT, require_tool, run_cli

ROLE = ROOT / "roles" / "node_health"
NODE = "su001-gpu01"


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    require_tool("ansible", "lldpcli")
    tmp = tmp_path_factory.mktemp("node-health")
    (tmp / "cluster.yaml").write_text((ROOT / "tests" / "specs" / "health-roce.yaml").read_text())
    run_cli("build", str(tmp / "cluster.yaml"), "--only", "plan,inventory")
    host_vars = tmp / "ansible" / "host_vars" / f"{NODE}.json"
    prefix, conf = tmp / "lib", tmp / "etc"
    (prefix / "python").mkdir(parents=True)
    (prefix / "python" / "railforge").symlink_to(ROOT / "railforge")
    (prefix / "venv" / "bin").mkdir(parents=True)
    # the role's venv holds pydantic; this test's interpreter does too
    (prefix / "venv" / "bin" / "python").write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    (prefix / "venv" / "bin" / "python").chmod(0o755)
    conf.mkdir()
    (conf / "host_vars.json").write_bytes(host_vars.read_bytes())
    wrapper = tmp / "railforge-node-health"
    extra = {"node_health_prefix": str(prefix), "node_health_config_dir": str(conf), "node_health_gpus": 8,
             "node_health_nvswitch": True, "node_health_mtu": 9000, "node_health_gpu_model": "A800",
             "node_health_skip": [], "node_health_lldp_socket": str(tmp / "no-lldpd.socket"),
             "node_health_max_drain_share": 0.25}
    env = {**os.environ, "ANSIBLE_NOCOLOR": "1", "ANSIBLE_LOCALHOST_WARNING": "0"}
    subprocess.run(["ansible", "localhost", "-c", "local", "-m", "ansible.builtin.template",
                    "-a", f"src={ROLE / 'templates' / 'railforge-node-health.sh.j2'} dest={wrapper} mode=0755",
                    "-e", json.dumps(extra)], cwd=tmp, env=env, capture_output=True, text=True, check=True,
                   timeout=120)
    return {"wrapper": wrapper, "rails": json.loads(host_vars.read_text())["railforge_rails"], "prefix": prefix,
            "conf": conf}


def _run(cmd: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(["env", "-i", *(f"{k}={v}" for k, v in env.items()), *cmd], capture_output=True,
                          text=True, timeout=120, cwd="/")


def test_wrapper_sets_path_and_names_every_missing_rail_by_cable(installed):
    proc = _run([str(installed["wrapper"])], {})
    lines = proc.stdout.splitlines()
    assert proc.returncode == 1, proc.stdout + proc.stderr
    for r in installed["rails"]:
        assert f"{r['ifname']} {r['cable']}: interface missing" in lines, proc.stdout
    assert "gpu: nvidia-smi failed: nvidia-smi not found" in lines
    lldp = [line for line in lines if line.startswith("lldp: ")]
    assert len(lldp) == 1 and "lldpcli not found" not in lldp[0], lldp
    assert proc.stderr == ""


def test_the_check_without_the_wrapper_misses_lldpcli(installed):
    """The control: the same check and environment without the wrapper does not find /usr/sbin/lldpcli."""
    proc = _run([str(installed["prefix"] / "venv" / "bin" / "python"), "-m", "railforge.health.nodecheck",
                 "--host-vars", str(installed["conf"] / "host_vars.json"), "--skip", "gpu,nvlink,xid,peermem"],
                {"PYTHONPATH": str(installed["prefix"] / "python")})
    assert proc.returncode == 1
    assert "lldp: lldpcli failed: lldpcli not found" in proc.stdout.splitlines()

