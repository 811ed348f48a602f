"""The Pulumi CLI and the Kubernetes provider built from their Go modules, against the live control plane: an inline
Automation API program (the `pulumi` SDK serves the language runtime to the CLI; the Python language host is not
served by the module proxy, see tests/tools/k8s/README.md) creates a Namespace and a ConfigMap through the real
engine and provider, a second `up` changes nothing, `destroy` removes both. Local file backend, no network."""

from __future__ import annotations

import os

import pytest

from .conftest import require_k8s_toolchain

auto = pytest.importorskip("pulumi.automation")
pulumi = pytest.importorskip("pulumi")
k8s = pytest.importorskip("pulumi_kubernetes")


def pulumi_env(bin_dir, tmp_path) -> dict[str, str]:
    home = tmp_path / "pulumi-home"
    home.mkdir()
    return {
        # the provider binary is found on PATH ("ambient" plugin); nothing may be downloaded
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "PULUMI_HOME": str(home),
        "PULUMI_BACKEND_URL": f"file://{tmp_path / 'state'}",
        "PULUMI_CONFIG_PASSPHRASE": "railforge-test",
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
    }


def test_pulumi_up_through_the_real_cli_and_provider_is_idempotent_and_destroys(k8s_cluster, tmp_path):
    bin_dir = require_k8s_toolchain("pulumi", "pulumi-resource-kubernetes")
    (tmp_path / "state").mkdir()
    kubeconfig = k8s_cluster.kubeconfig.read_text()

    def program():
        provider = k8s.Provider("live", kubeconfig=kubeconfig, enable_server_side_apply=True)
        opts = pulumi.ResourceOptions(provider=provider)
        ns = k8s.core.v1.Namespace("ns", metadata={"name": "rfk8s-pulumi"}, opts=opts)
        k8s.core.v1.ConfigMap("cm", metadata={"name": "plan", "namespace": ns.metadata["name"]},
                              data={"cluster": "dgx-h100-4su"}, opts=opts)

    command = auto.PulumiCommand(root=str(bin_dir.parent))
    stack = auto.create_or_select_stack(
        stack_name="test", project_name="rfk8s-cli", program=program,
        opts=auto.LocalWorkspaceOptions(pulumi_command=command, env_vars=pulumi_env(bin_dir, tmp_path),
                                        work_dir=str(tmp_path)))
    try:
        output: list[str] = []
        first = stack.up(on_output=output.append)
        assert first.summary.result == "succeeded"
        # the provider built here is the version the program's Python SDK asks for (pyproject.toml pins both)
        assert not [line for line in output if "is expected to have version" in line], output
        assert first.summary.resource_changes.get("create") == 4, first.summary.resource_changes  # stack, provider, 2
        cm = k8s_cluster.api.get("v1", "ConfigMap", "plan", "rfk8s-pulumi")
        assert cm["data"] == {"cluster": "dgx-h100-4su"}
        second = stack.up()
        assert set(second.summary.resource_changes) == {"same"}, second.summary.resource_changes
    finally:
        stack.destroy()
    assert k8s_cluster.api.find("v1", "ConfigMap", "plan", "rfk8s-pulumi") is None
    ns = k8s_cluster.api.find("v1", "Namespace", "rfk8s-pulumi")
    assert ns is None or ns["status"]["phase"] == "Terminating"
