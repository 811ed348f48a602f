"""The stateless image recipe without building it (the build and the boot are in tests/boot/test_stateless.py): its
package list covers every Debian package the node roles install by name, its initramfs script and hook are valid
shell, and its cache key follows the recipe's inputs."""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

import yaml

from railforge.baremetal import image
from tests.conftest import ROOT


def _node_roles() -> list[str]:
    plays = yaml.safe_load((ROOT / "playbooks" / "site.yml").read_text())
    roles = [r["role"].split(".")[-1] for p in plays if p.get("hosts") == "nodes" for r in p.get("roles", [])]
    assert {"host_tuning", "slurm_node", "storage_bond"} <= set(roles), roles
    return roles


def _named_packages(role: str) -> set[str]:
    """Packages a role installs by a literal name: its *_packages defaults and apt tasks with a plain name."""
    names: set[str] = set()
    defaults = ROOT / "roles" / role / "defaults" / "main.yml"
    for key, value in (yaml.safe_load(defaults.read_text()) or {}).items() if defaults.exists() else ():
        if key.endswith("_packages") and isinstance(value, list):
            names |= {v for v in value if isinstance(v, str) and "{" not in v}
    for tasks in (ROOT / "roles" / role / "tasks").glob("*.yml"):
        for task in yaml.safe_load(tasks.read_text()) or []:
            apt = task.get("ansible.builtin.apt") if isinstance(task, dict) else None
            wanted = apt.get("name") if isinstance(apt, dict) else None
            for n in wanted if isinstance(wanted, list) else [wanted]:
                if isinstance(n, str) and "{" not in n:
                    names.add(n)
    return names


def test_the_image_has_every_package_the_node_roles_name() -> None:
    wanted = {p: role for role in _node_roles() for p in _named_packages(role)}
    assert len(wanted) >= 10, wanted
    missing = {p: r for p, r in wanted.items() if p not in image.PACKAGES}
    assert missing == {}, f"add to railforge/baremetal/image.py ROLE_PACKAGES: {missing}"


def test_the_initramfs_script_and_hook_are_valid_shell() -> None:
    here = ROOT / "railforge" / "baremetal" / "image"
    for name in ("railforge.boot", "railforge.hook"):
        proc = subprocess.run(["sh", "-n", str(here / name)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
    boot = (here / "railforge.boot").read_text()
    assert "mountroot()" in boot and 'overlay "${rootmnt:?}"' in boot


def test_the_cache_key_follows_the_recipe(tmp_path: Path, monkeypatch) -> None:
    opts = image.ImageOptions(tmp_path)
    key = image.cache_key(opts)
    assert key == image.cache_key(image.ImageOptions(tmp_path / "elsewhere"))
    assert key != image.cache_key(dataclasses.replace(opts, extra_packages=("iperf3",)))
    assert key != image.cache_key(dataclasses.replace(opts, ssh_authorized_keys=("ssh-ed25519 AAAA x",)))
    recipe = image.recipe_files()
    monkeypatch.setattr(image, "recipe_files", lambda: {**recipe, "image/railforge.boot": b"changed"})
    assert image.cache_key(opts) != key
