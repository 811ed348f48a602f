"""Stack config: pinned defaults match the upstream reference, mirrors reach every image and chart."""

from __future__ import annotations

import pytest
import rfk8s_validate as v
import yaml
from railforge_k8s.config import ConfigError, config_from_mapping
from railforge_k8s.versions import Versions
from rfk8s_harness import run_program

# stack image key -> component key in network-operator hack/release.yaml
RELEASE_KEYS = {
    "networkOperator": "NetworkOperator",
    "networkOperatorInitContainer": "NetworkOperatorInitContainer",
    "nodeFeatureDiscovery": "nodeFeatureDiscovery",
    "rdmaSharedDevicePlugin": "RdmaSharedDevicePlugin",
    "multus": "Multus",
    "cniPlugins": "CniPlugins",
    "ipoib": "Ipoib",
    "docaDriver": "Mofed",
}
UPSTREAM_LOCATIONS = ("nvcr.io", "ghcr.io", "helm.ngc.nvidia.com", "raw.githubusercontent.com")


def _reference(name: str) -> dict:
    return yaml.safe_load((v.reference_dir() / "network-operator-v26.4.1" / name).read_text())


def test_default_images_are_the_release_set():
    release = _reference("release.yaml")
    images = Versions().images
    for key, release_key in RELEASE_KEYS.items():
        expected = release[release_key]
        assert (images[key].repository, images[key].image, images[key].version) == (
            expected["repository"],
            expected["image"],
            expected["version"],
        ), key


def test_default_chart_is_the_reference_chart():
    chart = _reference("Chart.yaml")
    pinned = Versions().chart("networkOperator")
    assert (pinned.chart, pinned.version) == (chart["name"], chart["version"])
    assert Versions().image("networkOperator").version == chart["appVersion"]


def test_nfd_image_matches_chart_default():
    nfd = _reference("values.yaml")["node-feature-discovery"]["image"]
    img = Versions().image("nodeFeatureDiscovery")
    assert (f"{img.repository}/{img.image}", img.version) == (nfd["repository"], nfd["tag"])


def _strings(value):
    if isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, str):
        yield value


def test_private_mirror_reaches_every_image_and_chart(built):
    rec = run_program(
        {
            "plan": str(built("dgx-h100-4su") / "plan.json"),
            "installDocaDriver": True,
            "registryMirrors": {"nvcr.io": "mirror.internal/nvcr", "ghcr.io": "mirror.internal/ghcr"},
            "charts": {
                "networkOperator": {"repo": "https://charts.internal/nvidia"},
                "gpuOperator": {"repo": "https://charts.internal/nvidia"},
            },
        }
    )
    texts = [s for reg in rec.resources for s in _strings(reg.inputs)]
    leaks = sorted({s for s in texts for host in UPSTREAM_LOCATIONS if host in s})
    assert leaks == []
    assert any(s.startswith("mirror.internal/nvcr/nvidia/mellanox") for s in texts)
    assert any(s.startswith("mirror.internal/ghcr/k8snetworkplumbingwg/whereabouts:") for s in texts)
    releases = rec.of_type("kubernetes:helm.sh/v3:Release")
    assert {r.inputs["repositoryOpts"]["repo"] for r in releases} == {"https://charts.internal/nvidia"}


def test_component_version_override():
    config = config_from_mapping({"plan": "p", "images": {"multus": {"version": "v9.9.9"}}})
    assert config.versions.image("multus").version == "v9.9.9"
    assert config.versions.image("multus").repository == Versions().image("multus").repository


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({}, "'plan'"),
        ({"plan": "p", "rdmamode": "host"}, "unknown config keys"),
        ({"plan": "p", "rdmaMode": "sriov"}, "rdmaMode 'sriov'"),
        ({"plan": "p", "rdmaHcaMax": 0}, "rdmaHcaMax"),
        ({"plan": "p", "rdmaHcaMax": "many"}, "rdmaHcaMax must be an integer"),
        ({"plan": "p", "volcano": "yes"}, "volcano"),
        ({"plan": "p", "images": {"multuss": {"version": "x"}}}, "images.multuss"),
        ({"plan": "p", "images": {"multus": {"tag": "x"}}}, "images.multus"),
        ({"plan": "p", "charts": {"gpuOperator": {"versions": "x"}}}, "charts.gpuOperator"),
        ({"plan": "p", "charts": {"gpuOperator": {"path": "/nonexistent/gpu-operator.tgz"}}},
         "charts.gpuOperator.path '/nonexistent/gpu-operator.tgz': no such chart"),
        ({"plan": "p", "helmReleases": "maybe"}, "helmReleases: expected true or false"),
        ({"plan": "p", "whereaboutsCrdBaseUrl": "https://x/crds"}, "installed from the repository"),
    ],
)
def test_invalid_config_is_refused(values, message):
    with pytest.raises(ConfigError, match=message):
        config_from_mapping(values)


def test_missing_plan_file_is_a_clear_error(tmp_path):
    from railforge_k8s.plan_input import PlanError

    with pytest.raises(PlanError, match="cannot read plan"):
        run_program({"plan": str(tmp_path / "missing.json")})


def test_plan_with_inconsistent_rail_names_is_refused(built):
    import json

    from railforge_k8s.plan_input import PlanError, parse_plan

    plan = json.loads((built("roce-a800-4nic") / "plan.json").read_text())
    node = next(d for d in plan["devices"] if d["role"] == "node")
    node["rails"][1]["ifname"] = "eth5"
    with pytest.raises(PlanError, match=f"node {node['name']} rail 1 is eth5"):
        parse_plan(plan)
    plan["schema_version"] = 4
    with pytest.raises(PlanError, match="schema_version 4: this stack reads 1 or 2 or 3"):
        parse_plan(plan)
