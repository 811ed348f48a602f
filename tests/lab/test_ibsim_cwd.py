"""`railforge lab ibsim` as the docs show it: a relative cluster path, from a working directory other than the
run's. OpenSM runs in the run's folder and, given a relative `-F` path it cannot open, silently ran on its
defaults (minhop, no ftree roots): every check failed and the generated opensm.conf looked broken."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from tests.conftest import ROOT
from tests.lab.test_ibsim import _require_sim

SPEC = ROOT / "tests" / "specs" / "configs-ib.yaml"


def test_lab_ibsim_with_a_relative_cluster_path_from_another_folder(tmp_path):
    _require_sim()
    cluster = tmp_path / "inventory" / "ib1"
    cluster.mkdir(parents=True)
    shutil.copy(SPEC, cluster / "cluster.yaml")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    build = subprocess.run([sys.executable, "-m", "railforge", "build", "inventory/ib1/cluster.yaml", "--only",
                            "plan,opensm"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr
    for extra in ([], ["--workdir", "run"]):  # the docs' command; and a relative run folder
        run = subprocess.run([sys.executable, "-m", "railforge", "lab", "ibsim", "inventory/ib1", *extra],
                             cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, run.stdout + run.stderr
        assert "FAIL" not in run.stdout and "minhop" not in run.stdout
    assert "building routing with 'ftree'" in (tmp_path / "run" / "opensm.log").read_text()
