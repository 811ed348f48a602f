"""The toolchain tests/tools/k8s-build made: every binary runs and reports the version its go.mod pins, and the cache
is keyed so a warm machine reuses it."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.helpers.k8s_cluster import BUILD

from .conftest import require_k8s_toolchain

K8S = Path(__file__).resolve().parents[1] / "tools" / "k8s"


def pinned(family: str, module: str) -> str:
    """The version of `module` in tests/tools/k8s/<family>/go.mod (its replace target when it has one)."""
    text = (K8S / family / "go.mod").read_text()
    replaced = re.search(rf"^\s*{re.escape(module)} => \S+ (v\S+)$", text, re.M)
    required = re.search(rf"^\s*{re.escape(module)} (v\S+)", text, re.M)
    found = replaced or required
    assert found, f"{module} not in {family}/go.mod"
    return found.group(1)


def run(binary: Path, *args: str) -> str:
    proc = subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, f"{binary.name} {' '.join(args)}: {proc.stderr}"
    return proc.stdout + proc.stderr


# (binary, arguments, family, module whose version it must report, the version as the binary writes it)
VERSIONS = [
    ("kube-apiserver", ("--version",), "controlplane", "k8s.io/kubernetes", lambda v: f"Kubernetes {v}"),
    ("kube-controller-manager", ("--version",), "controlplane", "k8s.io/kubernetes", lambda v: f"Kubernetes {v}"),
    ("kube-scheduler", ("--version",), "controlplane", "k8s.io/kubernetes", lambda v: f"Kubernetes {v}"),
    ("kubectl", ("version", "--client", "-o", "json"), "controlplane", "k8s.io/kubernetes",
     lambda v: f'"gitVersion": "{v}"'),
    ("etcd", ("--version",), "controlplane", "go.etcd.io/etcd/server/v3", lambda v: f"etcd Version: {v[1:]}"),
    ("kwok", ("--version",), "kwok", "sigs.k8s.io/kwok", lambda v: v[1:]),
    ("pulumi", ("version",), "pulumi", "github.com/pulumi/pulumi/pkg/v3", lambda v: v),
    ("vc-scheduler", ("--version",), "volcano", "volcano.sh/volcano", lambda v: f"Version: {v}"),
    ("vc-controller-manager", ("--version",), "volcano", "volcano.sh/volcano", lambda v: f"Version: {v}"),
    ("vc-webhook-manager", ("--version",), "volcano", "volcano.sh/volcano", lambda v: f"Version: {v}"),
]


@pytest.mark.parametrize(("binary", "args", "family", "module", "shape"), VERSIONS, ids=[v[0] for v in VERSIONS])
def test_binary_reports_the_pinned_version(binary, args, family, module, shape):
    bin_dir = require_k8s_toolchain(binary)
    assert shape(pinned(family, module)) in run(bin_dir / binary, *args)


def test_cni_plugins_answer_the_cni_version_query():
    bin_dir = require_k8s_toolchain("whereabouts", "macvlan", "host-device", "static", "host-local", "multus")
    for plugin in ("whereabouts", "macvlan", "host-device", "static", "host-local"):
        proc = subprocess.run([str(bin_dir / plugin)], input="{}", capture_output=True, text=True, timeout=30,
                              env={"CNI_COMMAND": "VERSION"})
        assert proc.returncode == 0, (plugin, proc.stderr)
        assert "1.0.0" in json.loads(proc.stdout)["supportedVersions"], (plugin, proc.stdout)


def test_kueue_and_pulumi_provider_binaries_start():
    bin_dir = require_k8s_toolchain("kueue", "pulumi-resource-kubernetes")
    assert "--kubeconfig" in run(bin_dir / "kueue", "--help") or "-kubeconfig" in run(bin_dir / "kueue", "--help")
    # a Pulumi provider prints the port of its gRPC server and waits for the engine
    proc = subprocess.Popen([str(bin_dir / "pulumi-resource-kubernetes")], stdout=subprocess.PIPE, text=True)
    try:
        port = proc.stdout.readline().strip()
    finally:
        proc.kill()
        proc.wait()
    assert port.isdigit(), port


def test_warm_cache_is_reused_without_building():
    bin_dir = require_k8s_toolchain()
    if os.environ.get("RAILFORGE_K8S_BIN"):
        pytest.skip("the toolchain comes from RAILFORGE_K8S_BIN, not from the cache")
    proc = subprocess.run([str(BUILD)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("k8s toolchain: reusing "), proc.stdout
    assert Path(proc.stdout.strip().splitlines()[-1]) == bin_dir
