"""Which switch OS the storage and OOB fabrics run when the spec names none: the compute fabric's OS where their
models run it (one OS for the whole Ethernet estate), else the registry's default for the fabric, else the first OS
the leaf model runs; a spec's own `storage.nos` / `oob.nos` always wins."""

from __future__ import annotations

import pytest
import yaml

from railforge.planner import build_plan
from railforge.spec.loader import validate
from tests.conftest import ROOT, example_spec

TINY = ROOT / "tests" / "specs" / "tiny-roce.yaml"


def _nos(data: dict) -> dict[str, set[str]]:
    plan = build_plan(validate(data, {}, "nos"))
    out: dict[str, set[str]] = {}
    for d in plan.devices:
        if d.nos:
            out.setdefault(d.fabric, set()).add(d.nos)
    return out


def _tiny(**compute) -> dict:
    data = yaml.safe_load(TINY.read_text())
    data["storage"].pop("nos")
    data["oob"].pop("nos")
    data["compute"].update(compute)
    return data


@pytest.mark.parametrize("compute", ["sonic", "cumulus"])
def test_storage_and_oob_follow_the_compute_os(compute):
    assert _nos(_tiny(nos=compute)) == {"compute": {compute}, "storage": {compute}, "oob": {compute}}


def test_the_minimal_example_runs_sonic_everywhere():
    """inventory/minimal names only compute.nos: sonic; its storage and OOB switches ran Cumulus before."""
    data = yaml.safe_load(example_spec("minimal").read_text())
    assert "nos" not in data["storage"] and "nos" not in data["oob"]
    assert _nos(data) == {"compute": {"sonic"}, "storage": {"sonic"}, "oob": {"sonic"}}


def test_an_infiniband_cluster_gets_the_registry_default_for_its_ethernet_fabrics():
    data = yaml.safe_load(example_spec("dgx-h100-4su").read_text())
    data["storage"].pop("nos")
    data["oob"].pop("nos")
    assert _nos(data) == {"compute": {"mlnx-os"}, "storage": {"cumulus"}, "oob": {"cumulus"}}


def test_a_model_that_does_not_run_the_compute_os_falls_back_to_one_it_runs():
    """A storage model that runs only Cumulus under a SONiC compute fabric: Cumulus, not a refusal."""
    data = _tiny(nos="sonic")
    data["catalog"] = {"switches": {"CUMULUS-ONLY": {
        "vendor": "NVIDIA", "kind": "ethernet", "height_u": 2, "nos": ["cumulus"],
        "groups": [{"cages": 64, "lanes": 4, "modes": [{"speed": "100G", "split": 1}]}]}}}
    data["storage"]["leaf"] = data["storage"]["spine"] = {"model": "CUMULUS-ONLY"}
    assert _nos(data) == {"compute": {"sonic"}, "storage": {"cumulus"}, "oob": {"sonic"}}


def test_the_spec_s_own_choice_wins():
    data = _tiny(nos="sonic")
    data["storage"]["nos"] = "cumulus"
    data["oob"]["nos"] = "cumulus"
    assert _nos(data) == {"compute": {"sonic"}, "storage": {"cumulus"}, "oob": {"cumulus"}}
