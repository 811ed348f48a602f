"""The project's Pulumi program (pulumi/railforge_k8s) run by the real Pulumi CLI and Kubernetes provider built from
their Go modules, on a local file backend, against the session's API server.

The Python language host is not served by the Go module proxy (tests/tools/k8s/README.md), so the CLI cannot start
`pulumi/` as a project on disk; the Automation API runs the same program function (`railforge_k8s.program.main`)
inline, with the pulumi SDK serving the language runtime to the CLI. Engine, provider, state, diff and API calls are
the real ones.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from pulumi import automation as auto

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "pulumi") not in sys.path:
    sys.path.insert(0, str(ROOT / "pulumi"))

from railforge_k8s.program import PROJECT, main  # noqa: E402

PASSPHRASE = "railforge-test"


def pulumi_env(bin_dir: Path, work: Path, kubeconfig: Path) -> dict[str, str]:
    return {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",  # the provider is found on PATH; nothing is downloaded
        "PULUMI_HOME": str(work / "pulumi-home"),
        "PULUMI_BACKEND_URL": f"file://{work / 'state'}",
        "PULUMI_CONFIG_PASSPHRASE": PASSPHRASE,
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
        "KUBECONFIG": str(kubeconfig),  # the default Kubernetes provider's cluster
    }


@dataclass
class Run:
    ok: bool
    output: str
    changes: dict[str, int]
    error: str = ""
    steps: dict[str, str] = field(default_factory=dict)  # resource name -> op (same, create, update, replace, ...)


class RailforgeStack:
    """One stack of the railforge-k8s program; config keys without the project prefix."""

    def __init__(self, bin_dir: Path, work: Path, kubeconfig: Path, name: str = "test"):
        (work / "state").mkdir(parents=True, exist_ok=True)
        (work / "pulumi-home").mkdir(parents=True, exist_ok=True)
        command = auto.PulumiCommand(root=str(bin_dir.parent))
        self.stack = auto.create_or_select_stack(
            stack_name=name, project_name=PROJECT, program=main,
            opts=auto.LocalWorkspaceOptions(pulumi_command=command, work_dir=str(work),
                                            env_vars=pulumi_env(bin_dir, work, kubeconfig)))

    def configure(self, **values: str | bool | int) -> None:
        for key, value in values.items():
            text = str(value).lower() if isinstance(value, bool) else str(value)
            self.stack.set_config(f"{PROJECT}:{key}", auto.ConfigValue(text))

    def up(self) -> Run:
        return self._run(lambda out: self.stack.up(on_output=out.append, color="never"))

    def preview(self) -> Run:
        steps: dict[str, str] = {}

        def on_event(event) -> None:
            pre = event.resource_pre_event
            if pre is not None:
                steps[pre.metadata.urn.rsplit("::", 1)[-1]] = str(getattr(pre.metadata.op, "value", pre.metadata.op))

        run = self._run(lambda out: self.stack.preview(on_output=out.append, on_event=on_event, color="never",
                                                       diff=True))
        run.steps = steps
        return run

    def destroy(self) -> Run:
        return self._run(lambda out: self.stack.destroy(on_output=out.append, color="never"))

    def outputs(self) -> dict:
        return {k: v.value for k, v in self.stack.outputs().items()}

    def resources(self) -> list[dict]:
        return self.stack.export_stack().deployment.get("resources", [])

    def _run(self, call) -> Run:
        out: list[str] = []
        try:
            result = call(out)
        except auto.CommandError as exc:
            return Run(False, "".join(out), {}, str(exc))
        summary = getattr(result, "summary", None)
        changes = dict(summary.resource_changes or {}) if summary else dict(result.change_summary or {})
        return Run(True, "".join(out), changes)


def error_messages(run: Run) -> list[str]:
    """The text of every `error:` line of the CLI's output."""
    out = []
    for line in run.error.splitlines():
        if "error: " in line:
            text = line.split("error: ", 1)[1].strip()
            out.append(text.removeprefix("an unhandled error occurred: "))
    return out
