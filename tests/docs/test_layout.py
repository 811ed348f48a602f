"""docs/layout.md and docs/architecture.md held to the tree: every package of `railforge/` is on the layout page, and
no page of the docs (nor a README) names a repository path that does not exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import ROOT

PACKAGE = ROOT / "railforge"
LAYOUT = ROOT / "docs" / "layout.md"
LOCAL_ROOTS = ("railforge", "tests", "benchmarks", "docs", "pulumi", "roles", "playbooks", "inventory")
# the Ansible collection's folder under .collections/ (made at install) and the site variables a user writes
NOT_PATHS = {"railforge/cluster", "playbooks/group_vars/all/site.yml"}
_CODE = re.compile(r"`([A-Za-z0-9_./-]+)`")


def packages() -> list[str]:
    return sorted(f"railforge/{p.parent.relative_to(PACKAGE)}/" for p in PACKAGE.rglob("__init__.py")
                  if p.parent != PACKAGE)


def modules() -> list[str]:
    return sorted(f"railforge/{p.name}" for p in PACKAGE.glob("*.py") if p.name != "__init__.py")


def pages() -> list[Path]:
    return sorted(ROOT.glob("docs/**/*.md")) + [ROOT / "README.md"] + sorted(PACKAGE.rglob("README.md"))


def _first_table(text: str) -> str:
    return text.split("## The `railforge` package", 1)[1].split("\n## ", 1)[0]


def named_paths(text: str) -> list[str]:
    """Backticked repository paths: under one of LOCAL_ROOTS (not a build's `generated/` output), or a module
    under a package of `railforge/` (`render/x.py`; `ztp/kea-dhcp4.conf` is a generated file). Placeholders
    (`<os>`) and globs are not paths."""
    top = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    out = []
    for m in _CODE.finditer(text):
        token = m.group(1)
        first = token.split("/", 1)[0]
        if "/" not in token or token in NOT_PATHS or "/generated" in token:
            continue
        if first in LOCAL_ROOTS or (first in top and token.endswith(".py")):
            out.append(token)
    return out


def _exists(token: str) -> bool:
    return (ROOT / token).exists() or (PACKAGE / token).exists()


def test_every_package_and_module_is_on_the_layout_page():
    text = LAYOUT.read_text(encoding="utf-8")
    table = set(_CODE.findall(_first_table(text)))
    assert [p for p in packages() if p not in table] == []
    assert [m for m in modules() if f"`{m}`" not in text] == []


def test_the_layout_table_lists_only_packages():
    listed = {t for t in _CODE.findall(_first_table(LAYOUT.read_text(encoding="utf-8")))
              if t.startswith("railforge/") and t.endswith("/")}
    assert listed == set(packages())


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_page_names_a_path_that_is_gone(page):
    stale = [t for t in named_paths(page.read_text(encoding="utf-8")) if not _exists(t)]
    assert stale == []


def test_the_scan_sees_a_stale_path():
    text = "see `railforge/render/sonic.py`, `render/nvue.py`, `tests/golden/plans/`, `nos/<os>/` and `config/x.py`"
    assert named_paths(text) == ["railforge/render/sonic.py", "render/nvue.py", "tests/golden/plans/"]
    assert [t for t in named_paths(text) if not _exists(t)] == ["railforge/render/sonic.py", "render/nvue.py"]
