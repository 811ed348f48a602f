"""The switch-OS registry: what each profile says, that the spec and planner take their OS facts from it,
and that no module outside the documented list names an OS."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from railforge import nos
from railforge.hardware.catalog import builtin_catalog
from railforge.nos.profile import NosProfile
from railforge.spec.models import OobFabric, StorageFabric

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "railforge"


def test_registry_names_and_lookup():
    assert nos.names() == ("sonic", "cumulus", "mlnx-os")
    assert nos.names("storage") == ("sonic", "cumulus")
    assert nos.names(kind="infiniband") == ("mlnx-os",)
    assert isinstance(nos.profile("cumulus"), NosProfile)
    assert nos.find(None) is None and nos.find("eos") is None
    with pytest.raises(KeyError, match="no switch OS profile 'eos' .known: sonic, cumulus, mlnx-os"):
        nos.profile("eos")


def test_defaults_per_fabric():
    assert nos.default("compute", "ethernet").name == "sonic"
    assert nos.default("compute", "infiniband").name == "mlnx-os"
    assert nos.default("storage").name == "cumulus"
    assert StorageFabric.model_validate({"leaf": {"model": "a"}, "spine": {"model": "b"}}).nos == "cumulus"


@pytest.mark.parametrize(("name", "cage", "sub", "split", "expected"), [
    ("cumulus", 0, 0, 1, "swp1"), ("cumulus", 3, 2, 4, "swp4s2"),
    ("mlnx-os", 0, 0, 1, "1"), ("mlnx-os", 31, 1, 2, "32/2"),
])
def test_port_names(name, cage, sub, split, expected):
    assert nos.profile(name).port_name(cage, sub, split, 8) == expected


def test_sonic_names_ports_from_its_platform():
    p = nos.profile("sonic")
    assert p.port_name is None
    catalog = builtin_catalog().switches
    model = "TH5-128x400G"
    switch = catalog[model].model_copy(update={"sonic": None})
    with pytest.raises(ValueError, match="names no SONiC platform"):
        p.platform_ref(model, switch)
    platform = p.platform(*p.platform_ref(model, catalog[model]))
    assert (platform.port(0, 1, 400000, 0).name, platform.port(1, 2, 200000, 1).name) == ("Ethernet1", "Ethernet7")


def test_spec_errors_list_the_registry():
    with pytest.raises(ValidationError, match=r"Input should be 'sonic' or 'cumulus'"):
        OobFabric.model_validate({"nos": "mlnx-os", "leaf": {"model": "a"}, "spine": {"model": "b"}})


def test_ztp_and_files():
    assert nos.profile("sonic").ztp.entry == "ztp.json"
    assert nos.profile("cumulus").ztp.option_code == 239
    assert nos.profile("mlnx-os").ztp is None
    assert nos.profile("cumulus").boot_config == "startup.yaml"
    assert nos.profile("mlnx-os").config_files == ()


# The words that name each OS in code: its profile name and the name of its own config system. A new OS adds its
# entry here (the test below fails until it does).
WORDS = {"sonic": ("sonic",), "cumulus": ("cumulus", "nvue"), "mlnx-os": ("mlnx_os", "mlnx-os")}
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def _os_words() -> dict[str, tuple[str, ...]]:
    assert set(WORDS) == set(nos.names()), "every registered OS needs its words in WORDS"
    return WORDS


def _word(text: str, words: tuple[str, ...]) -> bool:
    return any(re.search(rf"(?<![a-z0-9]){re.escape(w)}(?![a-z0-9])", text) for w in words)


def _identifier(name: str) -> str:
    return _CAMEL.sub("_", name).lower()


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of string constants that are documentation: a statement that is only a string (module, class, function
    and attribute docstrings, which typer and pydantic turn into help and reference text)."""
    return {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)}


def os_mentions(source: str, own: str | None = None) -> set[str]:
    """What in `source` names a switch OS other than `own`: `import:<module>` for an import of an OS's folder,
    `name:<identifier>` for an identifier (variable, attribute, function, class, argument, keyword, import alias)
    and `text:<string>` for a string constant that is not documentation."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    found: set[str] = set()
    for os_name, words in _os_words().items():
        if os_name == own:
            continue
        package = f"railforge.nos.{os_name.replace('-', '_')}"
        idents = tuple(w.replace("-", "_") for w in words)
        for node in ast.walk(tree):
            modules: list[str] = []
            if isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                modules = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            found |= {f"import:{m}" for m in modules if m == package or m.startswith(package + ".")}
            names = []
            if isinstance(node, ast.Name):
                names = [node.id]
            elif isinstance(node, ast.Attribute):
                names = [node.attr]
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names = [node.name]
            elif isinstance(node, ast.arg) or isinstance(node, ast.keyword) and node.arg:
                names = [node.arg]
            elif isinstance(node, ast.alias):
                names = [node.asname or node.name.rsplit(".", 1)[-1]]
            found |= {f"name:{n}" for n in names if _word(_identifier(n), idents)}
            if (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
                    and _word(node.value.lower(), words)):
                found.add(f"text:{node.value[:60]}")
    return found


def _own_os(rel: str) -> str | None:
    """The OS whose folder `rel` (a path under railforge/) is in."""
    parts = rel.split("/")
    if parts[0] == "nos" and len(parts) > 2:
        return next(n for n in nos.names() if n.replace("-", "_") == parts[1])
    return None


def _documented() -> set[str]:
    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = doc.split("<!-- nos-files -->", 1)[1].split("<!-- /nos-files -->", 1)[0]
    return {m.removeprefix("railforge/") for m in re.findall(r"^- `(railforge/[^`]+\.py)`", block, re.MULTILINE)}


def test_only_listed_files_name_an_os():
    """Outside its own folder nothing imports an OS's modules or names it, except the registry and the files
    docs/architecture.md lists (and says why)."""
    naming = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = str(path.relative_to(PACKAGE))
        if found := os_mentions(path.read_text(encoding="utf-8"), _own_os(rel)):
            naming[rel] = found
    assert set(naming) == _documented(), naming


def test_registry_is_the_only_importer_of_os_folders():
    importers = {str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
                 if any(m.startswith("import:") for m in os_mentions(p.read_text(encoding="utf-8"),
                                                                       _own_os(str(p.relative_to(PACKAGE)))))}
    assert importers == {"nos/__init__.py"}


@pytest.mark.parametrize(("source", "expected"), [
    ('def f(dev):\n    return "eth0" if dev.nos == "cumulus" else "mgmt0"\n', {"text:cumulus"}),
    ("from railforge.nos.sonic.portmap import load_platform\n", {"import:railforge.nos.sonic.portmap",
                                                                  "import:railforge.nos.sonic.portmap.load_platform"}),
    ("from railforge.nos import sonic\n", {"import:railforge.nos.sonic", "name:sonic"}),
    ("def parse_sonic_table(text):\n    pass\n", {"name:parse_sonic_table"}),
    ("class SonicRow:\n    pass\n", {"name:SonicRow"}),
    ("x = plan.nvue_release\n", {"name:nvue_release"}),
    ("def f(*, mlnx_os=1):\n    pass\nf(mlnx_os=2)\n", {"name:mlnx_os"}),
    ('raise ValueError(f"{x} with SONiC: {e}")\n', {"text: with SONiC: "}),
    ('"""A docstring may say SONiC."""\nclass A:\n    x: int = 1\n    """Cumulus too."""\n', set()),
    ("def f(dev):\n    return dev.profile.mgmt_port\n", set()),
    ("personic = 1\nsonically = 2\n", set()),
])
def test_the_scan_sees_every_form(source, expected):
    assert os_mentions(source) == expected


def test_an_os_folder_may_name_itself_but_no_other():
    assert os_mentions('PROFILE_NAME = "sonic"\n', own="sonic") == set()
    assert os_mentions('from railforge.nos.cumulus import lab\n', own="sonic") == {
        "import:railforge.nos.cumulus", "import:railforge.nos.cumulus.lab"}


def test_every_profile_has_its_folder():
    for name in nos.names():
        folder = PACKAGE / "nos" / name.replace("-", "_")
        assert (folder / "__init__.py").is_file() and not (PACKAGE / "nos" / f"{folder.name}.py").exists()
