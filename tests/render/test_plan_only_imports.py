"""Renderers and day-2 tools read only the plan and the OS profiles: none imports the planner or the built-in
hardware catalog (the import graph is parsed, so a lazy import inside a function counts too)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "railforge"
DAY2 = ("verify", "lab", "change", "ztp", "baremetal")
CONSUMERS = ("render", *DAY2, "plan", "provision", "formats")
FORBIDDEN = ("railforge.planner", "railforge.hardware")


def imported(source: str) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names |= {f"{node.module}.{a.name}" for a in node.names}
    return names


def _bad(names: set[str]) -> list[str]:
    return sorted(n for n in names if any(n == f or n.startswith(f + ".") for f in FORBIDDEN))


@pytest.mark.parametrize("package", CONSUMERS)
def test_consumers_do_not_import_the_planner(package):
    found = {str(p.relative_to(PACKAGE)): bad for p in sorted((PACKAGE / package).rglob("*.py"))
             if (bad := _bad(imported(p.read_text(encoding="utf-8"))))}
    assert found == {}


def test_the_parser_sees_every_form():
    src = ("import railforge.planner.ports\nfrom railforge import planner\nfrom railforge.planner.ports import x\n"
           "def f():\n    from railforge.hardware.catalog import builtin_catalog\n")
    assert {"railforge.planner", "railforge.planner.ports", "railforge.hardware.catalog"} <= set(_bad(imported(src)))
    assert _bad(imported("from railforge.plan.model import Plan\nfrom railforge import nos\n")) == []


def test_no_family_registry_imports_a_day2_tool():
    registry = imported((PACKAGE / "render" / "__init__.py").read_text(encoding="utf-8"))
    assert [n for n in registry if n.split(".")[:2] in (["railforge", t] for t in DAY2)] == []
    assert not any(n.startswith("railforge.ztp") for n in registry)


def test_ztp_does_not_borrow_from_verify():
    for path in (PACKAGE / "ztp").rglob("*.py"):
        assert not [n for n in imported(path.read_text(encoding="utf-8")) if n.startswith("railforge.verify")], path


def _imports_of(package: str) -> dict[str, set[str]]:
    return {str(p.relative_to(PACKAGE)): imported(p.read_text(encoding="utf-8"))
            for p in sorted((PACKAGE / package).rglob("*.py"))}


@pytest.mark.parametrize(("package", "forbidden"), [
    ("baremetal", ("railforge.ztp",)),
    ("provision", ("railforge.ztp", "railforge.baremetal")),
])
def test_provisioning_has_no_cycle(package, forbidden):
    """ztp may use baremetal (host reservations in its Kea file); baremetal and the shared core never use ztp."""
    found = {f: bad for f, names in _imports_of(package).items()
             if (bad := sorted(n for n in names if n.startswith(forbidden)))}
    assert found == {}
