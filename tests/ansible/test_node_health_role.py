"""The node_health role installs the node check as railforge modules plus a virtual environment with its
dependencies: the module list and the dependency pin must follow the code, or the check on the node fails to
import. (The installed check itself runs in the role's Molecule scenario: roles/node_health/molecule.)"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from importlib.metadata import PackageNotFoundError, packages_distributions, requires

import yaml

from tests.conftest import ROOT

ROLE = ROOT / "roles" / "node_health"
PROBE = """
import json, sys
before = set(sys.modules)
import railforge.health.nodecheck
new = set(sys.modules) - before
print(json.dumps({
    "railforge": sorted(sys.modules[m].__file__ for m in new if m.split(".")[0] == "railforge"),
    "others": sorted({m.split(".")[0] for m in new} - set(sys.stdlib_module_names) - {"railforge"}
                     - {m for m in new if m.startswith("_sysconfigdata_")}),
}))
"""


def _closure() -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True,
                          check=True, timeout=60)
    return json.loads(proc.stdout)


def _requirements() -> list[str]:
    return yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())["node_health_requirements"]


def test_the_role_copies_every_railforge_module_the_check_imports():
    modules = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())["node_health_modules"]
    imported = sorted(os.path.relpath(f, ROOT / "railforge") for f in _closure()["railforge"])
    assert sorted(modules) == imported


def test_the_venv_requirements_cover_every_other_import_and_match_pyproject():
    pins = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    pydantic_pin = next(p for p in pins if re.match(r"pydantic==", p))
    assert _requirements() == [pydantic_pin]
    dists: set[str] = set()
    todo = [r.split("==")[0] for r in _requirements()]
    while todo:
        name = todo.pop().lower().replace("_", "-")
        if name in dists:
            continue
        dists.add(name)
        try:
            reqs = requires(name) or []
        except PackageNotFoundError:
            continue
        todo += [re.split(r"[ ;<>=!~\[(]", r, maxsplit=1)[0] for r in reqs if "extra ==" not in r]
    provided = {mod for mod, owners in packages_distributions().items()
                if {o.lower().replace("_", "-") for o in owners} & dists}
    others = set(_closure()["others"])
    assert others, "the probe saw no third-party import at all (pydantic is one)"
    assert others <= provided, f"imported but not installed by the role: {sorted(others - provided)}"
