"""ansible-lint finds its configuration at the repository root (`.ansible-lint`, where editors and pre-commit
look too), and its own file discovery skips generated inventories, so a plain `ansible-lint` at the root does
not lint tens of thousands of host_vars files after a large build."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

from tests.conftest import ROOT, require_tool

DISCOVER = """
import json
from ansiblelint.cli import get_config
from ansiblelint.file_utils import discover_lintables, get_all_files
from pathlib import Path
options = get_config([])
found = discover_lintables(options)
unfiltered = [str(p) for p in get_all_files(Path("inventory"), exclude_paths=[])]
print(json.dumps({"config": options.config_file, "profile": options.profile, "found": found,
                  "unfiltered": unfiltered}))
"""


def test_plain_ansible_lint_uses_root_config_and_skips_inventories() -> None:
    require_tool("ansible-lint")
    assert not (ROOT / "tests" / "tools" / "ansible-lint.yml").exists(), "one configuration, at the root"
    probe = ROOT / "inventory" / f".lint-probe-{os.getpid()}"
    host_vars = probe / "generated" / "ansible" / "host_vars"
    host_vars.mkdir(parents=True)
    try:
        (host_vars / "node.yml").write_text("---\nfoo: yes\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
        proc = subprocess.run([sys.executable, "-c", DISCOVER], cwd=ROOT, env=env, capture_output=True, text=True,
                              check=True)
    finally:
        shutil.rmtree(probe)
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["config"] == str(ROOT / ".ansible-lint")
    assert result["profile"] == "production"
    probe_file = f"inventory/{probe.name}/generated/ansible/host_vars/node.yml"
    assert probe_file in result["unfiltered"], "without the exclusion ansible-lint would lint it"
    assert not any(f.startswith("inventory/") or "/generated/" in f for f in result["found"])
    assert "roles/rails/tasks/main.yml" in result["found"] and "playbooks/site.yml" in result["found"]
