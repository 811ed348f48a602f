"""The roles shipped as the Ansible collection railforge.cluster: `ansible-galaxy collection build` from the
repository root takes every role under roles/ (and nothing of the rest of the repository), `ansible-galaxy
collection install` installs it (its dependencies come with the `ansible` package), and `site.yml` runs from a
folder outside the repository with FQCN role names, both as `railforge.cluster.site` and by path. Before the
collection, roles were found only from the repository root: `the role 'host_tuning' was not found`."""

from __future__ import annotations

import os
import re
import subprocess
import tarfile
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, require_tool, run_cli

ROLES = sorted(p.name for p in (ROOT / "roles").iterdir() if (p / "tasks").is_dir())


def _run(cmd: list[str], cwd: Path, env: dict | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "ANSIBLE_NOCOLOR": "1", **(env or {})})
    assert proc.returncode == 0, f"{' '.join(cmd)}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    require_tool("ansible-galaxy", "ansible-playbook")
    tmp = tmp_path_factory.mktemp("collection")
    version = yaml.safe_load((ROOT / "galaxy.yml").read_text())["version"]
    _run(["ansible-galaxy", "collection", "build", "--output-path", str(tmp / "dist"), "--force"], ROOT)
    tarball = tmp / "dist" / f"railforge-cluster-{version}.tar.gz"
    # --force and a path of its own: a railforge.cluster already in ~/.ansible or beside a checkout's ansible.cfg
    # must not make the install a no-op
    _run(["ansible-galaxy", "collection", "install", "--force", str(tarball), "-p", str(tmp / "collections")], tmp,
         {"ANSIBLE_COLLECTIONS_PATH": str(tmp / "collections")})
    inv = tmp / "inv"
    inv.mkdir()
    (inv / "cluster.yaml").write_text((ROOT / "tests" / "specs" / "tiny-roce.yaml").read_text())
    run_cli("build", str(inv / "cluster.yaml"), "--only", "plan,inventory")
    away = tmp / "elsewhere"  # no ansible.cfg, no roles/: nothing of the repository
    away.mkdir()
    return {"tarball": tarball, "collections": tmp / "collections", "inventory": inv / "ansible", "cwd": away}


def test_the_build_holds_every_role_and_none_of_the_rest(installed):
    with tarfile.open(installed["tarball"]) as tar:
        names = tar.getnames()
    assert sorted({n.split("/")[1] for n in names if n.startswith("roles/") and n.count("/") >= 2}) == ROLES
    assert {"playbooks/site.yml", "meta/runtime.yml", "MANIFEST.json"} <= set(names)
    assert not [n for n in names if n.split("/")[0] in ("railforge", "tests", "inventory", "docs", "pulumi")
                or "/molecule/" in n or n.startswith(".")]
    root = installed["collections"] / "ansible_collections" / "railforge" / "cluster"
    assert sorted(p.name for p in (root / "roles").iterdir()) == ROLES


def test_playbooks_name_roles_by_fqcn():
    for book in sorted((ROOT / "playbooks").glob("*.yml")):
        text = book.read_text()
        for name in re.findall(r"^\s*-?\s*(?:role|name):\s*(\S+)\s*$", text, re.M):
            if name.split(".")[-1] in ROLES:
                assert name.startswith("railforge.cluster."), f"{book.name}: role {name} without FQCN"


@pytest.mark.parametrize("playbook", ["railforge.cluster.site", str(ROOT / "playbooks" / "site.yml")])
def test_site_yml_runs_from_another_folder(installed, playbook):
    env = {"ANSIBLE_COLLECTIONS_PATH": str(installed["collections"])}
    inv = str(installed["inventory"])
    listed = _run(["ansible-playbook", "-i", inv, playbook, "--list-tasks"], installed["cwd"], env).stdout
    for role in ("host_tuning", "doca_ofed", "nvidia_gpu", "storage_bond", "rails"):
        assert f"railforge.cluster.{role} : " in listed, role
    # the first play for real, on this machine as one of the plan's nodes: facts, then the plan-variable check
    ran = _run(["ansible-playbook", "-i", inv, playbook, "--tags", "always", "--limit", "su001-gpu01",
                "-e", "ansible_connection=local", "-e", "ansible_python_interpreter=" + _python(),
                "--check"], installed["cwd"], env)
    assert re.search(r"su001-gpu01\s*:\s*ok=\d+\s+changed=0\s+unreachable=0\s+failed=0", ran.stdout), ran.stdout


def _python() -> str:
    import sys
    return sys.executable


def test_every_role_plugin_is_a_collection_plugin():
    """A role in a collection cannot load its own library/ or filter_plugins/: each file is linked under
    plugins/, where the collection's roles find it by short name."""
    kinds = {"library": "modules", "filter_plugins": "filter"}
    for role in ROLES:
        for folder, kind in kinds.items():
            for f in sorted((ROOT / "roles" / role / folder).glob("*.py")):
                link = ROOT / "plugins" / kind / f.name
                assert link.resolve() == f.resolve(), f"{role}: plugins/{kind}/{f.name} must link to {f}"


def test_validate_yml_with_its_module_runs_from_another_folder(installed):
    env = {"ANSIBLE_COLLECTIONS_PATH": str(installed["collections"])}
    inv = str(installed["inventory"])
    _run(["ansible-playbook", "-i", inv, "railforge.cluster.validate", "--syntax-check"], installed["cwd"], env)
    listed = _run(["ansible-playbook", "-i", inv, "railforge.cluster.validate", "--list-tasks"],
                  installed["cwd"], env).stdout
    assert "railforge.cluster.node_validate : Check the node against the plan" in listed
