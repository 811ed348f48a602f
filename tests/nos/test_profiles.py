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
RENDERERS = {"render/sonic.py", "render/nvue.py", "render/opensm.py"}


def test_registry_names_and_lookup():
    assert nos.names() == ("sonic", "cumulus", "eos", "mlnx-os")
    assert nos.names("storage") == ("sonic", "cumulus", "eos")
    assert nos.names(kind="infiniband") == ("mlnx-os",)
    assert isinstance(nos.profile("cumulus"), NosProfile)
    assert nos.find(None) is None and nos.find("junos") is None
    with pytest.raises(KeyError, match="no switch OS profile 'junos' .known: sonic, cumulus, eos, mlnx-os"):
        nos.profile("junos")


def test_defaults_per_fabric():
    assert nos.default("compute", "ethernet").name == "sonic"
    assert nos.default("compute", "infiniband").name == "mlnx-os"
    assert nos.default("storage").name == "cumulus"
    assert StorageFabric.model_validate({"leaf": {"model": "a"}, "spine": {"model": "b"}}).nos == "cumulus"


@pytest.mark.parametrize(("name", "cage", "sub", "split", "lanes", "expected"), [
    ("cumulus", 0, 0, 1, 8, "swp1"), ("cumulus", 3, 2, 4, 8, "swp4s2"),
    ("mlnx-os", 0, 0, 1, 8, "1"), ("mlnx-os", 31, 1, 2, 8, "32/2"),
    ("eos", 0, 0, 1, 8, "Ethernet1/1"), ("eos", 0, 1, 2, 8, "Ethernet1/5"), ("eos", 63, 3, 4, 8, "Ethernet64/7"),
    ("eos", 9, 5, 8, 8, "Ethernet10/6"), ("eos", 48, 1, 4, 4, "Ethernet49/2"), ("eos", 64, 0, 1, 1, "Ethernet65"),
])
def test_port_names(name, cage, sub, split, lanes, expected):
    assert nos.profile(name).port_name(cage, sub, split, lanes) == expected


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
    with pytest.raises(ValidationError, match=r"Input should be 'sonic', 'cumulus' or 'eos'"):
        OobFabric.model_validate({"nos": "mlnx-os", "leaf": {"model": "a"}, "spine": {"model": "b"}})


def test_ztp_and_files():
    assert nos.profile("sonic").ztp.entry == "ztp.json"
    assert nos.profile("cumulus").ztp.option_code == 239
    assert nos.profile("mlnx-os").ztp is None
    assert nos.profile("cumulus").boot_config == "startup.yaml"
    assert nos.profile("mlnx-os").config_files == ()


def _names_an_os(path: Path) -> bool:
    words = set(nos.names())
    attrs = {w.replace("-", "_") for w in words}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Constant) and node.value in words:
            return True
        if isinstance(node, ast.Attribute) and node.attr in attrs:
            return True
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id in attrs:
            return True
    return False


def _documented() -> set[str]:
    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = doc.split("<!-- nos-files -->", 1)[1].split("<!-- /nos-files -->", 1)[0]
    return {m.removeprefix("railforge/") for m in re.findall(r"^- `(railforge/[^`]+\.py)`", block, re.MULTILINE)}


def test_only_listed_files_name_an_os():
    naming = {str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if _names_an_os(p)}
    outside = {p for p in naming if not p.startswith("nos/") and p not in RENDERERS}
    assert outside == _documented() - {"nos/__init__.py"}


def test_the_scan_sees_a_branch(tmp_path):
    branch = tmp_path / "m.py"
    branch.write_text('def f(dev):\n    return "eth0" if dev.nos == "cumulus" else "mgmt0"\n')
    assert _names_an_os(branch)
    branch.write_text('def f(dev):\n    return dev.profile.mgmt_port\n')
    assert not _names_an_os(branch)


def test_every_profile_has_its_module():
    """A module `nos/<os>.py`, or a folder `nos/<os>/` that holds everything of that OS."""
    for name in nos.names():
        module = name.replace("-", "_")
        assert (PACKAGE / "nos" / f"{module}.py").is_file() or (PACKAGE / "nos" / module / "__init__.py").is_file()
