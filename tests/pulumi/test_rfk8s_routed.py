"""rdmaMode routed: one NetworkAttachmentDefinition per rail without `config`, named as the rails role's
node-local CNI configuration, validated strictly against the pinned CRDs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import rfk8s_plans as plans
import rfk8s_validate as v
import yaml
from railforge_k8s.config import ConfigError
from railforge_k8s.routing import RoutabilityError
from rfk8s_harness import Recording, run_program

NAD = "kubernetes:k8s.cni.cncf.io/v1:NetworkAttachmentDefinition"
DAEMONSET = "kubernetes:apps/v1:DaemonSet"
ROLE_DEFAULTS = "roles/rails/defaults/main.yml"


@pytest.mark.parametrize("name", ["roce-a800-4nic", "roce-16k-railplane"])
def test_one_configless_attachment_per_rail(built, name):
    path = built(name) / "plan.json"
    plan = plans.load(path)
    rec = run_program({"plan": str(path), "rdmaMode": "routed"})
    nads = rec.of_type(NAD)
    rails = sorted({n["rail"] for n in plan["pod_networks"]})
    assert sorted(n.inputs["metadata"]["name"] for n in nads) == sorted(f"rail{r}-routed" for r in rails)
    for nad in nads:
        assert nad.inputs["spec"] == {}  # Multus then reads the node-local file with this network name
        rail = nad.inputs["metadata"]["name"].removesuffix("-routed")
        assert nad.inputs["metadata"]["annotations"]["k8s.v1.cni.cncf.io/resourceName"] == f"rdma/{rail}"
    assert not [d for d in rec.of_type(DAEMONSET) if "whereabouts" in json.dumps(d.inputs)]
    for reg in rec.resources:
        v.validate_registration(reg.type, reg.custom, reg.inputs)


def test_network_name_matches_the_rails_role(built):
    defaults = yaml.safe_load((Path(__file__).resolve().parents[2] / ROLE_DEFAULTS).read_text())
    rec = run_program({"plan": str(built("roce-a800-4nic") / "plan.json"), "rdmaMode": "routed"})
    suffix = defaults["rails_pod_network_suffix"]
    assert all(n.inputs["metadata"]["name"].endswith(f"-{suffix}") for n in rec.of_type(NAD))


def test_routed_refused_on_infiniband_and_without_pod_ranges(built, tmp_path):
    with pytest.raises(ConfigError, match="rdmaMode routed needs a RoCE fabric"):
        run_program({"plan": str(built("dgx-h100-4su") / "plan.json"), "rdmaMode": "routed"})
    plan = plans.load(built("roce-a800-4nic") / "plan.json")
    for net in plan["pod_networks"]:
        if net["rail"] == 1:
            net["gateway"] = None
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    recording = Recording()
    with pytest.raises(RoutabilityError, match=r"rail 1 \(rail1\) needs a pod range with a gateway in every leaf"):
        run_program({"plan": str(path), "rdmaMode": "routed"}, recording)
    assert recording.resources == []
