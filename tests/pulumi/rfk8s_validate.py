"""Strict validation of what the Pulumi program emits.

Custom resources: the CRD openAPIV3Schema in tests/reference, with additionalProperties: false added
wherever the schema does not allow unknown fields, then the CRD's CEL rules (rfk8s_cel).
Built-in kinds: kubernetes-validate --strict.
Helm values: the keys of the pinned chart's values.yaml. A resource with no schema is an error.
"""

from __future__ import annotations

import copy
import json
import os
import re
from functools import cache
from pathlib import Path

import jsonschema
import kubernetes_validate
import yaml
from kubernetes_validate import utils as kv_utils
from referencing import Registry, Resource
from rfk8s_cel import check_cel_rules

REPO = Path(__file__).resolve().parents[2]
# The pinned upstream CRDs carried in tests/reference (provenance in its README); RAILFORGE_REFERENCE_DIR overrides.
REFERENCE = Path(os.environ.get("RAILFORGE_REFERENCE_DIR", REPO / "tests" / "reference")).resolve()
TESTS = Path(__file__).resolve().parent
KUBERNETES_VERSION = "1.34"
WHEREABOUTS_VERSION = "v0.9.4"
# Keys the network-operator values.yaml documents only in a comment; the text proves the chart reads them.
NETWORK_OPERATOR_COMMENTED_KEYS = {"operator.tag": "# tag, if defined will use the given image tag"}
# CNI keys per plugin type (reference/README.md lists the whereabouts IPAM keys).
CNI_KEYS = {
    "macvlan": {"cniVersion", "name", "type", "master", "mode", "mtu", "ipam"},
    "ipoib": {"cniVersion", "name", "type", "master", "ipam"},
}
WHEREABOUTS_IPAM_KEYS = {
    "type", "range", "range_start", "range_end", "exclude", "gateway", "ipRanges", "routes",
    "network_name", "enable_overlapping_ranges", "node_slice_size",
}  # fmt: skip
RDMA_PLUGIN_KEYS = {"periodicUpdateInterval", "configList"}
RDMA_RESOURCE_KEYS = {"resourceName", "resourcePrefix", "rdmaHcaMax", "devices", "selectors"}
RDMA_SELECTOR_KEYS = {"vendors", "deviceIDs", "drivers", "ifNames", "linkTypes"}


class SchemaMissing(AssertionError):
    """No schema exists for an emitted resource."""


def reference_dir() -> Path:
    if not REFERENCE.is_dir():
        raise SchemaMissing(f"reference schemas not found at {REFERENCE}")
    return REFERENCE


def strictify(schema):
    """Close every object schema that neither lists additionalProperties nor preserves unknown fields."""
    if isinstance(schema, list):
        return [strictify(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: strictify(value) for key, value in schema.items()}
    if (
        "properties" in out
        and "additionalProperties" not in out
        and not out.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


@cache
def crd_schemas() -> dict[tuple[str, str], dict]:
    """(apiVersion, kind) -> strict openAPIV3Schema for every served version of every reference CRD."""
    schemas = {}
    for path in sorted(reference_dir().glob("*/*.yaml")):
        doc = yaml.safe_load(path.read_text())
        if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
            continue
        group, kind = doc["spec"]["group"], doc["spec"]["names"]["kind"]
        for version in doc["spec"]["versions"]:
            if version.get("served", True):
                schema = strictify(copy.deepcopy(version["schema"]["openAPIV3Schema"]))
                schemas[(f"{group}/{version['name']}", kind)] = schema
    return schemas


@cache
def object_meta_validator() -> jsonschema.Validator:
    """CRD schemas leave metadata open; check it against the strict ObjectMeta of kubernetes-validate."""
    definitions = kv_utils.schema_contents(
        f"kubernetes-json-schema/v{_kv_schema_version()}-local-strict/_definitions.json", KUBERNETES_VERSION
    )
    schema = {"$ref": "#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "$defs": definitions["$defs"]}
    return jsonschema.Draft202012Validator(schema)


def _kv_schema_version() -> str:
    return [v for v in kv_utils.all_versions() if kv_utils.major_minor(v) <= KUBERNETES_VERSION][-1]


def validate_custom(obj: dict) -> None:
    key = (obj.get("apiVersion"), obj.get("kind"))
    schema = crd_schemas().get(key)
    if schema is None:
        raise SchemaMissing(f"no CRD schema in {REFERENCE} for {key[0]} {key[1]}")
    jsonschema.Draft7Validator(schema).validate(obj)
    check_cel_rules(schema, obj)
    object_meta_validator().validate(obj.get("metadata", {}))


@cache
def builtin_validator(api_version: str, kind: str) -> jsonschema.Validator:
    """kubernetes-validate's strict schema for a built-in kind, loaded once (its validate() reloads per call)."""
    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    schema_dir = f"kubernetes-json-schema/v{_kv_schema_version()}-local-strict"
    try:
        schema = kv_utils.schema_contents(f"{schema_dir}/{kind.lower()}-{group_version}.json", KUBERNETES_VERSION)
    except FileNotFoundError as exc:
        raise SchemaMissing(f"kubernetes-validate has no schema for {api_version} {kind}") from exc
    definitions = kv_utils.schema_contents(f"{schema_dir}/_definitions.json", KUBERNETES_VERSION)
    registry = Resource.from_contents(definitions) @ (Resource.from_contents(schema) @ Registry())
    return jsonschema.Draft202012Validator(schema, registry=registry)


def validate_builtin(obj: dict) -> None:
    builtin_validator(obj["apiVersion"], obj["kind"]).validate(obj)


def validate_builtin_with_library(obj: dict) -> None:
    """The library's own entry point (slow: reloads schemas per call); used to cross-check the cached path."""
    try:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
    except kv_utils.SchemaNotFoundError as exc:
        raise SchemaMissing(exc.message) from exc


def validate_object(obj: dict) -> None:
    if (obj.get("apiVersion"), obj.get("kind")) in crd_schemas():
        validate_custom(obj)
    else:
        validate_builtin(obj)


# ---- Helm values ------------------------------------------------------------------------------------


def key_skeleton(value):
    """Types only: nested dicts of keys, 'map' for a free-form (empty) map, 'list', or the scalar type name."""
    if isinstance(value, dict):
        return {k: key_skeleton(v) for k, v in value.items()} if value else "map"
    if isinstance(value, list):
        return "list"
    if value is None:
        return "any"
    return type(value).__name__


def unknown_values(values: dict, skeleton, path: str = "", extra: frozenset[str] = frozenset()) -> list[str]:
    """Every key in `values` the chart does not define, and every value of the wrong kind."""
    errors = []
    for key, value in values.items():
        where = f"{path}{key}"
        if where in extra:
            continue
        if skeleton == "map":
            continue
        if not isinstance(skeleton, dict) or key not in skeleton:
            errors.append(f"{where}: not a key of the chart's values.yaml")
            continue
        expected = skeleton[key]
        if isinstance(expected, dict) or expected == "map":
            if not isinstance(value, dict):
                errors.append(f"{where}: chart expects a map, got {type(value).__name__}")
            else:
                errors.extend(unknown_values(value, expected, f"{where}.", extra))
        elif expected != "any" and key_skeleton(value) != expected:
            errors.append(f"{where}: chart default is {expected}, got {key_skeleton(value)}")
    return errors


@cache
def network_operator_skeleton() -> dict:
    values_yaml = reference_dir() / "network-operator-v26.4.1" / "values.yaml"
    return key_skeleton(yaml.safe_load(values_yaml.read_text()))


def network_operator_commented_keys() -> frozenset[str]:
    text = (reference_dir() / "network-operator-v26.4.1" / "values.yaml").read_text()
    missing = [key for key, evidence in NETWORK_OPERATOR_COMMENTED_KEYS.items() if evidence not in text]
    if missing:
        raise SchemaMissing(f"values.yaml no longer documents {missing}")
    return frozenset(NETWORK_OPERATOR_COMMENTED_KEYS)


@cache
def gpu_operator_skeleton() -> dict:
    return yaml.safe_load((TESTS / "gpu_operator_v26.3.3_keys.yaml").read_text())


def validate_helm_release(inputs: dict) -> None:
    chart = inputs.get("chart")
    values = inputs.get("values") or {}
    if chart == "network-operator":
        errors = unknown_values(values, network_operator_skeleton(), extra=network_operator_commented_keys())
    elif chart == "gpu-operator":
        errors = unknown_values(values, gpu_operator_skeleton())
    else:
        raise SchemaMissing(f"no values schema for Helm chart {chart!r}")
    if errors:
        raise AssertionError(f"{chart} values: " + "; ".join(errors))


# ---- embedded JSON configs -----------------------------------------------------------------------


def validate_cni_config(text: str) -> dict:
    config = json.loads(text)
    allowed = CNI_KEYS.get(config.get("type"))
    if allowed is None:
        raise SchemaMissing(f"no key list for CNI plugin type {config.get('type')!r}")
    unknown = set(config) - allowed
    if unknown:
        raise AssertionError(f"CNI {config['type']}: unknown keys {sorted(unknown)}")
    ipam = config.get("ipam", {})
    if ipam.get("type") != "whereabouts" or set(ipam) - WHEREABOUTS_IPAM_KEYS:
        raise AssertionError(f"whereabouts IPAM: unknown keys {sorted(set(ipam) - WHEREABOUTS_IPAM_KEYS)}")
    return config


def validate_rdma_plugin_config(text: str) -> dict:
    config = json.loads(text)
    problems = sorted(set(config) - RDMA_PLUGIN_KEYS)
    for entry in config.get("configList", []):
        problems += sorted(set(entry) - RDMA_RESOURCE_KEYS)
        problems += sorted(set(entry.get("selectors", {})) - RDMA_SELECTOR_KEYS)
    if problems:
        raise AssertionError(f"RDMA shared device plugin config: unknown keys {problems}")
    return config


# ---- one recorded registration -----------------------------------------------------------------


def validate_registration(typ: str, custom: bool, inputs: dict) -> None:
    """Validate one resource the program registered; components are containers, not API objects."""
    if not custom and typ.startswith("railforge:k8s:"):
        return
    if typ == "kubernetes:helm.sh/v3:Release":
        validate_helm_release(inputs)
    elif typ == "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition":
        validate_pinned_crd(inputs)
    elif typ.startswith("kubernetes:") and custom:
        check_type_token(typ, inputs)
        validate_object(inputs)
        if inputs.get("kind") == "NetworkAttachmentDefinition" and "config" in inputs["spec"]:
            validate_cni_config(inputs["spec"]["config"])  # without one, Multus reads the node-local file
        if inputs.get("kind") == "NicClusterPolicy":
            validate_rdma_plugin_config(inputs["spec"]["rdmaSharedDevicePlugin"]["config"])
    else:
        raise SchemaMissing(f"no schema for resource type {typ}")


@cache
def reference_crds() -> dict[str, dict]:
    """metadata.name -> CustomResourceDefinition of every reference CRD (tests/reference, provenance in its README)."""
    out = {}
    for path in sorted(reference_dir().glob("*/*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                out[doc["metadata"]["name"]] = doc
    return out


def validate_pinned_crd(inputs: dict) -> None:
    """A CRD the program installs must be one of the pinned reference CRDs, spec for spec."""
    name = inputs.get("metadata", {}).get("name", "")
    pinned = reference_crds().get(name)
    if pinned is None:
        raise SchemaMissing(f"CustomResourceDefinition {name}: not a pinned reference CRD")
    if inputs.get("spec") != pinned["spec"]:
        raise AssertionError(f"CustomResourceDefinition {name}: spec differs from the pinned reference CRD")


def check_type_token(typ: str, inputs: dict) -> None:
    """The Pulumi type token names the API object: kubernetes:<group>/<version>:<Kind>[Patch]."""
    _, group_version, kind = typ.split(":")
    api_version = group_version.removeprefix("core/")
    if "apiVersion" not in inputs or "kind" not in inputs:
        raise SchemaMissing(f"{typ}: not a Kubernetes object (no apiVersion/kind)")
    if (inputs["apiVersion"], inputs["kind"]) != (api_version, kind.removesuffix("Patch")):
        raise AssertionError(f"{typ}: inputs say {inputs['apiVersion']} {inputs['kind']}")
