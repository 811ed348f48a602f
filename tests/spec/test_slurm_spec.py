"""The spec's `slurm:` section and `catalog.nodes` at the front door: hypothesis writes random values of the
right and wrong types into them (and into tenants), and every case must either build and render the Slurm files
or fail with SpecErrors whose every line names the file and line; never another exception."""

from __future__ import annotations

import re

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from railforge.planner import build_plan
from railforge.render.slurm import gres_conf, slurm_conf
from railforge.spec import load_spec
from railforge.spec.errors import SpecError, SpecErrors
from tests.conftest import ROOT

BASE = yaml.safe_load((ROOT / "tests" / "specs" / "slurm-lab.yaml").read_text())
KEYS = ["deploy", "cluster_name", "controller", "accounting_host", "slurmctld_port", "slurmd_port", "slurmdbd_port",
        "partition", "default_time", "max_time", "tenant_max_nodes", "qos", "default_qos", "reserved_memory_mib",
        "health_check_program", "health_check_interval", "bf_interval", "bf_window", "bf_resolution",
        "bf_max_job_test", "admin_account", "users", "preempt_grace_time", "mpi_default", "no_such_key"]
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-10, 70000), st.text(max_size=12),
                    st.sampled_from(["p0", "gpu", "mgmt01", "su001-gpu01", "4:00:00", "1-00:00:00", "UNLIMITED",
                                     "/usr/sbin/x", "research", "a b", "-1", "0"]))
VALUES = st.one_of(SCALARS, st.lists(SCALARS, max_size=7), st.sampled_from([
    {"research": ["rf-alice"]}, {"ops": ["root", "x"]}, {"nope": ["a"]}, {"research": ["Bad User"]},
    {"research": ["a", "a"]}, {"production": "carol"}, "pmix", "none", "pmi5"]))
LOCATED = re.compile(r"^\S*slurm-fuzz\.yaml:\d+: ")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(slurm=st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=4),
       tenant=st.sampled_from([None, {"name": "gpu", "pkey": 5}, {"name": "x", "pkey": 6},
                               {"name": "y", "pkey": 7, "nodes": ["su001-gpu09"]},
                               {"name": "z", "pkey": 8, "sus": [9]}]),
       node=st.sampled_from([None, {"sockets": 2}, {"sockets": 1, "cores_per_socket": 4, "memory_mib": 4096,
                                                    "gpu_type": "h100", "gpu_sockets": [0, 1]},
                             {"sockets": 2, "cores_per_socket": 4, "memory_mib": 8192, "gpu_type": "h100",
                              "memtotal_mib": 9000},
                             {"sockets": 2, "cores_per_socket": 4, "memory_mib": 8192, "gpu_type": "h100",
                              "memtotal_mib": 7900, "hcas": ["mlx5_0", "mlx5_0"]},
                             {"sockets": 2, "cores_per_socket": 4, "memory_mib": 20000, "gpu_type": "h100",
                              "memtotal_mib": 19000, "hcas": ["mlx5_2", "mlx5_5"], "hcas_source": "our lab"}]))
def test_slurm_section_builds_or_fails_with_file_and_line(tmp_path, slurm, tenant, node):
    data = yaml.safe_load(yaml.safe_dump(BASE))
    data["slurm"] = slurm
    if tenant is not None:
        data["tenants"].append(tenant)
    if node is not None:
        data["catalog"]["nodes"] = {"DGX-H100": node}
    path = tmp_path / "slurm-fuzz.yaml"
    path.write_text(yaml.safe_dump(data))
    try:
        spec, lines = load_spec(path)
        plan = build_plan(spec, lines, str(path))
    except (SpecError, SpecErrors) as exc:
        for line in str(exc).splitlines():
            assert LOCATED.match(line), f"error without file and line: {line!r}"
        return
    assert plan.slurm is not None
    conf = slurm_conf(plan, plan.slurm)
    assert conf.count("\nPartitionName=") == len(plan.slurm.partitions)
    assert 1024 <= plan.slurm.node.real_memory_mib <= plan.slurm.node.linux_memory_mib <= plan.slurm.node.memory_mib
    assert "Name=gpu" in gres_conf(plan, plan.slurm)
