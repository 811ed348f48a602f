"""With no rdmaMode set, the stack picks a mode the plan's fabric routes (macvlan was the RoCE default and is
refused on every multi-SU RoCE plan, so the documented `pulumi up` failed for RoCE users); and its errors are
Pulumi RunErrors, which the Pulumi CLI reports as one line without a traceback."""

from __future__ import annotations

import json

import pytest
import rfk8s_plans as plans
from pulumi.errors import RunError
from railforge_k8s.config import ConfigError
from railforge_k8s.plan_input import PlanError
from railforge_k8s.routing import RoutabilityError
from rfk8s_harness import run_program

NAD = "kubernetes:k8s.cni.cncf.io/v1:NetworkAttachmentDefinition"


def _nad_names(rec) -> list[str]:
    return sorted(n.inputs["metadata"]["name"] for n in rec.of_type(NAD))


@pytest.mark.parametrize(("name", "suffix"), [("roce-a800-4nic", "routed"), ("dgx-h100-4su", "ipoib")])
def test_default_mode_is_one_the_fabric_routes(built, name, suffix):
    path = built(name) / "plan.json"
    plan = plans.load(path)
    rec = run_program({"plan": str(path)})
    rails = sorted({n["rail"] for n in plan["pod_networks"]})
    assert rails and all(n.endswith(f"-{suffix}") for n in _nad_names(rec)), _nad_names(rec)
    assert len(_nad_names(rec)) == len(rails)


def test_default_is_macvlan_on_one_leaf_per_rail(built, tmp_path):
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plans.first_su_only(plans.load(built("roce-a800-4nic") / "plan.json"))))
    rec = run_program({"plan": str(path)})
    assert _nad_names(rec) and all(n.endswith("-macvlan") for n in _nad_names(rec))


def test_default_is_host_when_nothing_routes(built, tmp_path):
    plan = plans.load(built("roce-a800-4nic") / "plan.json")
    for net in plan["pod_networks"]:
        net["gateway"] = None  # no routed pod range: neither macvlan (several leaves) nor routed fits
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    rec = run_program({"plan": str(path)})
    assert _nad_names(rec) == []


def test_stack_errors_are_run_errors_with_one_line(tmp_path):
    for cls in (ConfigError, PlanError, RoutabilityError):
        assert issubclass(cls, RunError) and issubclass(cls, ValueError)
    with pytest.raises(ConfigError) as exc:
        run_program({"plan": str(tmp_path / "p.json"), "rdmaMode": "sriov"})
    assert isinstance(exc.value, RunError) and "\n" not in str(exc.value)


def test_the_provider_version_is_semver_as_the_engine_parses_it():
    """The engine refused PEP 440's `4.25.0a1768448096` on a live `pulumi up` ("Invalid character(s) found in patch
    number"): resources that name the provider version themselves must send the semver form the SDK's own send."""
    from railforge_k8s.plan_input import PlanError
    from railforge_k8s.priority import provider_version

    assert provider_version("4.25.0a1768448096") == "4.25.0-alpha.1768448096"
    assert provider_version("4.1.0rc2") == "4.1.0-rc.2"
    assert provider_version("4.34.2") == "4.34.2"
    with pytest.raises(PlanError, match="not a release version"):
        provider_version("4.34.2.post1")
