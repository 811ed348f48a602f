"""Every Cumulus `startup.yaml` checked against NVIDIA's NVUE object model for its target release.

The models are those the `nvueschema` package generated from NVIDIA's OpenAPI specs (one module per
Cumulus Linux release); `tests.helpers.nvue_schema` walks each file along them so that an unknown key,
a wrong value type or a value outside the schema's enum/range fails (see that module for why the
pydantic classes are not used as-is)."""

from __future__ import annotations

import os
import re
from functools import cache
from pathlib import Path

import pytest
import yaml

from railforge.nos.cumulus.render import release_of, startup_yaml, syntax
from railforge.plan.switch_model import build_models
from railforge.planner import build_plan
from railforge.spec import load_spec
from railforge.spec.models import CUMULUS_RELEASES, DEFAULT_CUMULUS_RELEASE
from tests.conftest import EXAMPLES, ROOT, example_spec, plan_of
from tests.helpers.nvue_schema import NvueLoader, validate_document, validate_file

try:
    import nvueschema  # noqa: F401
except ImportError:
    if os.environ.get("CI") == "true":
        raise RuntimeError("nvueschema (dev extra) is missing, and CI=true forbids skipping") from None
    pytest.skip("needs nvueschema (pip install -e '.[dev]')", allow_module_level=True)

SPECS = ROOT / "tests" / "specs"
CUMULUS_SPECS = [SPECS / "configs-cumulus.yaml", SPECS / "configs-ib.yaml"]


def _failures(reports: dict[str, object]) -> list[str]:
    return [f"{name}: {e}" for name, r in reports.items() for e in r.errors[:3]]


def _spec_plan(path: Path, **changes):
    spec, lines = load_spec(path)
    if changes:
        spec = spec.model_copy(update=changes)
    return build_plan(spec, lines, str(path))


@pytest.mark.parametrize("name", [n for n in EXAMPLES if "cumulus" in example_spec(n).read_text()])
def test_every_startup_yaml_of_the_examples_fits_its_release(built, name):
    configs = built(name) / "configs"
    plan = plan_of(name)
    files = sorted(configs.glob("*/startup.yaml"))
    assert len(files) == len(list(build_models(plan, nos="cumulus")))
    release = release_of(plan)
    reports = {f.parent.name: validate_file(f, release) for f in files}
    assert not _failures(reports), "\n".join(_failures(reports)[:20])
    assert sum(r.checked_leaves for r in reports.values()) > 20 * len(files)


@pytest.mark.parametrize("spec", CUMULUS_SPECS, ids=lambda p: p.stem)
def test_every_startup_yaml_of_the_test_specs_fits_its_release(spec):
    plan = _spec_plan(spec)
    release = release_of(plan)
    reports = {m.hostname: validate_document(yaml.load(startup_yaml(m, release), Loader=NvueLoader), release)
               for m in build_models(plan, nos="cumulus")}
    assert reports
    assert not _failures(reports), "\n".join(_failures(reports)[:20])


@cache
def _variant(attach: str, uplinks: str) -> list:
    base, _ = load_spec(SPECS / "configs-cumulus.yaml")
    storage = base.storage.model_copy(update={"attach": attach})
    compute = base.compute.model_copy(update={"uplinks": uplinks})
    return list(build_models(_spec_plan(SPECS / "configs-cumulus.yaml", storage=storage, compute=compute),
                             nos="cumulus"))


@pytest.mark.parametrize("release", CUMULUS_RELEASES)
def test_every_supported_release_validates(release):
    """Both syntax families and every supported release, with MLAG and EVPN-MH pairs, (un)numbered BGP."""
    for attach, uplinks in (("mlag", "unnumbered"), ("evpn-mh", "numbered")):
        reports = {m.hostname: validate_document(yaml.load(startup_yaml(m, release), Loader=NvueLoader), release)
                   for m in _variant(attach, uplinks)}
        assert not _failures(reports), f"{attach}, {uplinks}:\n" + "\n".join(_failures(reports)[:20])


def test_the_release_changes_the_syntax():
    old, new = _leaf_doc("5.14")[1]["set"], _leaf_doc("5.18")[1]["set"]
    assert "bfd" not in old["router"] and old["router"]["bgp"]["enable"] == "on"
    assert old["interface"]["lo"]["ip"]["address"] and "ipv4" not in old["interface"]["lo"]
    group = old["vrf"]["default"]["router"]["bgp"]["peer-group"]["SPINE"]
    assert group["bfd"] == {"enable": "on", "detect-multiplier": 3, "min-rx-interval": 300, "min-tx-interval": 300}
    assert new["router"]["bfd"]["state"] == "enabled"
    assert new["router"]["bfd"]["profile"]["RF-BFD"]["min-rx-interval"] == 300
    assert new["vrf"]["default"]["router"]["bgp"]["peer-group"]["SPINE"]["bfd"] == {"profile": "RF-BFD"}
    assert new["router"]["bgp"]["state"] == "enabled" and "enable" not in new["router"]["bgp"]
    assert new["interface"]["lo"]["ipv4"]["address"] and "ip" not in new["interface"]["lo"]
    assert syntax(DEFAULT_CUMULUS_RELEASE).bfd_profiles


def _leaf_doc(release: str):
    leaf = next(m for m in _variant("mlag", "unnumbered") if m.hostname == "su001-leaf-r0")
    return yaml.load(startup_yaml(leaf, release), Loader=NvueLoader)


def test_the_validator_rejects_a_path_no_release_has():
    """The file railforge wrote before: `router bfd enable on` exists in no 5.x model."""
    doc = _leaf_doc("5.14")
    doc[1]["set"]["router"]["bfd"] = {"enable": "on"}
    for release in ("5.14", "5.15"):
        errors = validate_document(doc, release).errors
        assert any(e.startswith("/1/set/router/bfd") for e in errors), errors


def test_the_validator_rejects_the_other_families_syntax_and_wrong_types():
    assert validate_document(_leaf_doc("5.14"), "5.18").errors
    assert validate_document(_leaf_doc("5.18"), "5.14").errors
    doc = _leaf_doc("5.18")
    link = doc[1]["set"]["interface"]["swp1s0"]["link"]
    link["mtu"] = "9216"
    errors = validate_document(doc, "5.18").errors
    assert errors == ["/1/set/interface/swp1s0/link/mtu: '9216' is not valid: Input should be a valid integer "
                      "(expected int)"], errors
    link["mtu"] = 9217
    assert "less than or equal to 9216" in validate_document(doc, "5.18").errors[0]
    link["mtu"] = 9216
    link["speed"] = "300G"
    assert "/link/speed" in validate_document(doc, "5.18").errors[0]
    link["speed"] = "200G"
    doc[1]["set"]["router"]["bgp"]["state"] = "on"
    assert validate_document(doc, "5.18").errors[0].startswith("/1/set/router/bgp/state: 'on' is not valid")
    doc[1]["set"]["router"]["bgp"]["state"] = "enabled"
    doc[1]["set"]["interface"]["swp1s0"]["link"]["spede"] = "200G"
    assert "no such key" in validate_document(doc, "5.18").errors[0]


def test_on_and_off_stay_strings_as_nvue_reads_them():
    assert yaml.load("a: on\nb: off\nc: true\n", Loader=NvueLoader) == {"a": "on", "b": "off", "c": True}


def test_only_the_free_form_collections_go_unchecked():
    """nvueschema types some collections as Dict[str, Any]; the check must say so and skip nothing else."""
    free_form = re.compile(r"/(address|gateway|member|vlan|switch-priority)/[^/]+(/\d+)?$")
    unchecked = set()
    for release in ("5.14", "5.18"):
        for models in (_variant("mlag", "unnumbered"), _variant("evpn-mh", "numbered")):
            for m in models:
                doc = yaml.load(startup_yaml(m, release), Loader=NvueLoader)
                unchecked |= validate_document(doc, release).unchecked
    assert unchecked
    assert all(free_form.search(p) for p in unchecked), sorted(p for p in unchecked if not free_form.search(p))
