"""The project's Pulumi program (pulumi/railforge_k8s) run by the real Pulumi CLI and Kubernetes provider built from
their Go modules, on a local file backend, against the session's API server.

The Python language host is not served by the Go module proxy (tests/tools/k8s/README.md), so the CLI cannot start
`pulumi/` as a project on disk; the Automation API runs the same program function (`railforge_k8s.program.main`)
inline, with the pulumi SDK serving the language runtime to the CLI. Engine, provider, state, diff and API calls are
the real ones.

Each up, preview and destroy runs in its own Python process (this file run as a script): the inline runtime leaves
threads and, after a failed run, an unfinished coroutine behind, and on CPython 3.11 that state can end a long pytest
session in `SystemError: AST constructor recursion depth mismatch` (CPython gh-106905) after every test passed.
Config, outputs and state exports are plain CLI calls and stay in the test's process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from pulumi import automation as auto

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "pulumi") not in sys.path:
    sys.path.insert(0, str(ROOT / "pulumi"))

from railforge_k8s.program import PROJECT, main  # noqa: E402

PASSPHRASE = "railforge-test"
RUN_TIMEOUT_S = 1800


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
        self.args = {"bin_dir": str(bin_dir), "work": str(work), "kubeconfig": str(kubeconfig), "name": name}
        self.stack = open_stack(bin_dir, work, kubeconfig, name)

    def configure(self, **values: str | bool | int) -> None:
        for key, value in values.items():
            text = str(value).lower() if isinstance(value, bool) else str(value)
            self.stack.set_config(f"{PROJECT}:{key}", auto.ConfigValue(text))

    def up(self) -> Run:
        return self._run("up")

    def preview(self) -> Run:
        return self._run("preview")

    def destroy(self) -> Run:
        return self._run("destroy")

    def outputs(self) -> dict:
        return {k: v.value for k, v in self.stack.outputs().items()}

    def resources(self) -> list[dict]:
        return self.stack.export_stack().deployment.get("resources", [])

    def _run(self, op: str) -> Run:
        result = self.args["work"] + f"/{op}-result.json"
        try:
            proc = subprocess.run([sys.executable, __file__, op, json.dumps(self.args), result], cwd=ROOT,
                                  capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return Run(False, "", {}, f"error: pulumi {op} still running after {RUN_TIMEOUT_S} s")
        if proc.returncode != 0 or not Path(result).exists():
            return Run(False, proc.stdout, {}, f"error: pulumi {op} driver exited {proc.returncode}: "
                                                f"{proc.stderr[-4000:]}")
        data = json.loads(Path(result).read_text())
        Path(result).unlink()
        return Run(**data)


def open_stack(bin_dir: Path, work: Path, kubeconfig: Path, name: str) -> auto.Stack:
    (work / "state").mkdir(parents=True, exist_ok=True)
    (work / "pulumi-home").mkdir(parents=True, exist_ok=True)
    command = auto.PulumiCommand(root=str(bin_dir.parent))
    return auto.create_or_select_stack(
        stack_name=name, project_name=PROJECT, program=main,
        opts=auto.LocalWorkspaceOptions(pulumi_command=command, work_dir=str(work),
                                        env_vars=pulumi_env(bin_dir, work, kubeconfig)))


def run_op(stack: auto.Stack, op: str) -> Run:
    out: list[str] = []
    steps: dict[str, str] = {}

    def on_event(event) -> None:
        pre = event.resource_pre_event
        if pre is not None:
            steps[pre.metadata.urn.rsplit("::", 1)[-1]] = str(getattr(pre.metadata.op, "value", pre.metadata.op))

    try:
        if op == "up":
            result = stack.up(on_output=out.append, color="never")
        elif op == "preview":
            result = stack.preview(on_output=out.append, on_event=on_event, color="never", diff=True)
        else:
            result = stack.destroy(on_output=out.append, color="never")
    except auto.CommandError as exc:
        return Run(False, "".join(out), {}, str(exc))
    summary = getattr(result, "summary", None)
    changes = dict(summary.resource_changes or {}) if summary else dict(result.change_summary or {})
    return Run(True, "".join(out), changes, steps=steps)


def error_messages(run: Run) -> list[str]:
    """The text of every `error:` line of the CLI's output."""
    out = []
    for line in run.error.splitlines():
        if "error: " in line:
            text = line.split("error: ", 1)[1].strip()
            out.append(text.removeprefix("an unhandled error occurred: "))
    return out


if __name__ == "__main__":
    op, args, result_path = sys.argv[1], json.loads(sys.argv[2]), Path(sys.argv[3])
    stack = open_stack(Path(args["bin_dir"]), Path(args["work"]), Path(args["kubeconfig"]), args["name"])
    run = run_op(stack, op)
    result_path.write_text(json.dumps(run.__dict__))
    sys.stdout.flush()
    os._exit(0)
