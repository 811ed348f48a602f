"""Checks of the scheduling objects beyond one object's CRD schema: the Volcano scheduler configuration against the
names Volcano v1.14.1 registers, and the priority levels across PriorityClasses, WorkloadPriorityClasses and the
plan's Slurm QOS. Each raises AssertionError naming the object and the value."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import jsonschema
import yaml

FACTS = Path(__file__).resolve().parent / "volcano_v1.14.1_scheduler.yaml"


@cache
def volcano_facts() -> dict:
    return yaml.safe_load(FACTS.read_text())


@cache
def volcano_conf_schema() -> dict:
    """JSON schema of volcano-scheduler.conf from the yaml tags of Volcano's conf structs (strict: no other keys)."""
    facts = volcano_facts()
    plugin = {
        "type": "object",
        "required": ["name"],
        "additionalProperties": False,
        "properties": {
            "name": {"type": "string", "enum": facts["plugins"]},
            "arguments": {"type": "object"},
            **{key: {"type": "boolean"} for key in facts["plugin_bool_keys"]},
        },
    }
    return {
        "type": "object",
        "required": ["actions", "tiers"],
        "additionalProperties": False,
        "properties": {
            "actions": {"type": "string"},
            "tiers": {"type": "array", "minItems": 1, "items": {
                "type": "object", "additionalProperties": False, "required": ["plugins"],
                "properties": {"plugins": {"type": "array", "minItems": 1, "items": plugin}},
            }},
            "configurations": {"type": "array"},
            "metrics": {"type": "object", "additionalProperties": {"type": "string"}},
        },
    }


def volcano_actions(conf: dict) -> list[str]:
    """As Volcano's UnmarshalSchedulerConf reads them: split at ',' and trimmed."""
    return [name.strip() for name in conf["actions"].split(",")]


def validate_volcano_conf(text: str) -> dict:
    conf = yaml.safe_load(text)
    jsonschema.Draft7Validator(volcano_conf_schema()).validate(conf)
    facts = volcano_facts()
    unknown = [a for a in volcano_actions(conf) if a not in facts["actions"]]
    if unknown:
        raise AssertionError(f"volcano-scheduler.conf actions {unknown}: Volcano v1.14.1 registers {facts['actions']}")
    for i, tier in enumerate(conf["tiers"]):
        names = [p["name"] for p in tier["plugins"]]
        if len(set(names)) != len(names):
            raise AssertionError(f"volcano-scheduler.conf tier {i}: a plugin appears twice in {names}")
        if "proportion" in names and any(p["name"] == "drf" and p.get("enableHierarchy") for p in tier["plugins"]):
            raise AssertionError(f"tier {i}: proportion and drf with hierarchy enabled conflict (Volcano refuses)")
        for plugin in tier["plugins"]:
            known = facts["arguments"].get(plugin["name"], [])
            prefix = facts["argument_prefixes"].get(plugin["name"])
            for key, value in plugin.get("arguments", {}).items():
                if key not in known and not (prefix and key.startswith(prefix)):
                    raise AssertionError(f"volcano-scheduler.conf plugin {plugin['name']}: argument {key!r} is not "
                                         f"one it reads (known: {known}, prefix {prefix!r})")
                if key in facts["bool_arguments"].get(plugin["name"], []) and not isinstance(value, bool):
                    raise AssertionError(f"volcano-scheduler.conf plugin {plugin['name']}: argument {key!r} is "
                                         f"{value!r}; Volcano reads only a YAML boolean there (else it is ignored)")
    return conf


def check_priority_levels(priority_classes: list[dict], workload_classes: list[dict], qos: list[dict]) -> None:
    """One level per Slurm QOS, highest first, in both kinds: same names and values, strictly decreasing, and a
    PriorityClass preempts exactly when its QOS preempts the levels below it."""
    expected = [f"railforge-{q['name']}" for q in qos]
    by_name = {pc["metadata"]["name"]: pc for pc in priority_classes}
    for kind, objs in (("PriorityClass", priority_classes), ("WorkloadPriorityClass", workload_classes)):
        unknown = sorted({o["metadata"]["name"] for o in objs} - set(expected))
        if unknown:
            raise AssertionError(f"{kind} {unknown}: not a level of the plan's QOS {[q['name'] for q in qos]}")
        missing = [n for n in expected if n not in {o["metadata"]["name"] for o in objs}]
        if missing:
            raise AssertionError(f"{kind}: levels {missing} are missing")
    values = [by_name[n]["value"] for n in expected]
    if any(a <= b for a, b in zip(values, values[1:], strict=False)):
        raise AssertionError(f"priority values {dict(zip(expected, values, strict=True))} do not fall from P0 to P5")
    for wpc in workload_classes:
        name = wpc["metadata"]["name"]
        if wpc["value"] != by_name[name]["value"]:
            raise AssertionError(f"WorkloadPriorityClass {name} value {wpc['value']} != PriorityClass "
                                 f"{by_name[name]['value']}")
    for i, q in enumerate(qos):
        lower = [x["name"] for x in qos[i + 1:]]
        policy = by_name[expected[i]]["preemptionPolicy"]
        want = "PreemptLowerPriority" if q["preempts"] else "Never"
        if q["preempts"] and q["preempts"] != lower:
            raise AssertionError(f"QOS {q['name']} preempts {q['preempts']}, not every lower level {lower}")
        if policy != want:
            raise AssertionError(f"PriorityClass {expected[i]} preemptionPolicy {policy}: Slurm QOS {q['name']} "
                                 f"preempts {q['preempts']}, so {want}")
