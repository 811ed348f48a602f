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


# ---- ValidatingAdmissionPolicy expressions --------------------------------------------------------------------------
# The Kubernetes CEL libraries a policy may call, as far as integer GPU counts need them: quantity() of a plain
# integer (a GPU count is whole; anything else is refused here rather than guessed) and the lists library's sum() and
# max(). The API server's own libraries are exercised by tests/k8s/test_kueue.py against kube-apiserver.

def _quantity(value):
    text = str(value)
    if not text.isdigit():
        raise CelRuleFailed(f"quantity({text!r}): only whole numbers are evaluated here")
    return celpy.celtypes.IntType(int(text))


K8S_FUNCTIONS = {
    "quantity": _quantity,
    "asInteger": lambda q: celpy.celtypes.IntType(int(q)),
    "sum": lambda items: celpy.celtypes.IntType(sum(int(x) for x in items)),
    "max": lambda items: celpy.celtypes.IntType(max(int(x) for x in items)),
}


@cache
def _policy_program(expression: str):
    env = celpy.Environment()
    try:
        return env.program(env.compile(expression), functions=K8S_FUNCTIONS)
    except celpy.CELParseError as exc:
        raise CelRuleFailed(f"policy expression does not compile with cel-python: {expression!r}: {exc}") from exc


def evaluate_policy(spec: dict, obj: dict, old: dict | None = None, operation: str = "CREATE") -> str | None:
    """What the policy says about `obj`: None when it does not match or allows it, else the refusal's message.
    Variables are evaluated in order; one that fails (an `oldObject` variable on a CREATE) stays an error value,
    which CEL's && and || absorb when their other side decides, as the API server's lazy variables do."""
    activation = {
        "object": celpy.json_to_cel(obj),
        "oldObject": celpy.json_to_cel(old),
        "request": celpy.json_to_cel({"operation": operation}),
    }
    for cond in spec.get("matchConditions", []):
        if not bool(_policy_program(cond["expression"]).evaluate(activation)):
            return None
    variables: dict = {}
    for var in spec.get("variables", []):
        activation["variables"] = celpy.celtypes.MapType(variables)
        try:
            value = _policy_program(var["expression"]).evaluate(activation)
        except celpy.CELEvalError as exc:
            value = exc
        variables[celpy.celtypes.StringType(var["name"])] = value
    activation["variables"] = celpy.celtypes.MapType(variables)
    for rule in spec["validations"]:
        result = _policy_program(rule["expression"]).evaluate(activation)
        if isinstance(result, celpy.CELEvalError):
            raise CelRuleFailed(f"policy expression fails to evaluate: {rule['expression']!r}: {result}")
        if not bool(result):
            return str(_policy_program(rule["messageExpression"]).evaluate(activation))
    return None
