"""The CEL rules (`x-kubernetes-validations`) of a CRD schema, evaluated on an object with cel-python.

The API server runs these after the openAPIV3Schema check; jsonschema ignores them. cel-python implements the CEL
language, not the Kubernetes extension libraries (quantity, url, ...), so a rule that calls one of those does not
compile and is reported as such, never skipped silently. Transition rules (those that read `oldSelf`) apply only to
updates and are left out. Defaults are not applied first, as the API server would.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache

import celpy


class CelRuleFailed(AssertionError):
    """An object breaks a CEL rule of its CRD, or a rule cannot be evaluated here."""


@cache
def _program(rule: str):
    env = celpy.Environment()
    try:
        return env.program(env.compile(rule))
    except celpy.CELParseError as exc:
        raise CelRuleFailed(f"CEL rule does not compile with cel-python: {rule!r}: {exc}") from exc


def rules_at(schema: dict, value, path: str = "") -> Iterator[tuple[str, dict, object]]:
    """(path, rule, the value the rule sees as `self`) for every rule whose node is present in `value`."""
    for rule in schema.get("x-kubernetes-validations", []):
        if "oldSelf" not in rule["rule"]:
            yield path, rule, value
    if isinstance(value, dict):
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for key, child in value.items():
            sub = props.get(key, extra if isinstance(extra, dict) else None)
            if sub is not None:
                yield from rules_at(sub, child, f"{path}.{key}")
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, child in enumerate(value):
            yield from rules_at(schema["items"], child, f"{path}[{i}]")


def check_cel_rules(schema: dict, obj: dict) -> int:
    """Evaluate every applicable rule; returns how many ran, raises CelRuleFailed on the first that fails."""
    count = 0
    for path, rule, value in rules_at(schema, obj):
        where = f"{obj.get('kind')} {path or '.'}"
        try:
            result = _program(rule["rule"]).evaluate({"self": celpy.json_to_cel(value)})
        except celpy.CELEvalError as exc:
            raise CelRuleFailed(f"{where}: rule {rule['rule']!r} fails to evaluate: {exc}") from exc
        if isinstance(result, celpy.CELEvalError) or not bool(result):
            raise CelRuleFailed(f"{where}: {rule.get('message', 'CEL rule failed')} (rule {rule['rule']!r})")
        count += 1
    return count
