"""The strict reader for Alertmanager's webhook body (payload version 4, as Alertmanager 0.25 sends it).

Hand-written around pydantic because the body comes from the network: the size is capped before parsing,
JSON nesting is bounded by the model (no free-form objects), label names and values are bounded, and every
refusal names the place in the body (`alerts[3].labels.cable`) and what would be valid.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from railforge.inputs import shown

MAX_BODY = 1 << 20
MAX_ALERTS = 2000
LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]{0,127}$")

LabelValue = Annotated[str, StringConstraints(max_length=1024)]
Labels = Annotated[dict[Annotated[str, StringConstraints(pattern=LABEL_NAME.pattern)], LabelValue],
                   Field(max_length=64)]


class WebhookError(ValueError):
    pass


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=False)


class Alert(_Strict):
    status: Literal["firing", "resolved"]
    labels: Labels
    annotations: Labels = Field(default_factory=dict)
    startsAt: datetime  # noqa: N815 (Alertmanager's field names)
    endsAt: datetime  # noqa: N815
    generatorURL: Annotated[str, StringConstraints(max_length=4096)] = ""  # noqa: N815
    fingerprint: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{1,32}$")]

    @property
    def name(self) -> str:
        return self.labels.get("alertname", "")


class Webhook(_Strict):
    version: Literal["4"]
    groupKey: Annotated[str, StringConstraints(max_length=8192)]  # noqa: N815
    truncatedAlerts: int = Field(ge=0)  # noqa: N815
    status: Literal["firing", "resolved"]
    receiver: Annotated[str, StringConstraints(max_length=256)]
    groupLabels: Labels  # noqa: N815
    commonLabels: Labels  # noqa: N815
    commonAnnotations: Labels  # noqa: N815
    externalURL: Annotated[str, StringConstraints(max_length=4096)]  # noqa: N815
    alerts: list[Alert] = Field(max_length=MAX_ALERTS)


def _place(loc: tuple) -> str:
    out = ""
    for part in loc:
        if part == "[key]":
            out += " (the label name)"
        else:
            out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(body)"


def parse_webhook(body: bytes, source: str = "webhook") -> Webhook:
    """A validated webhook, or WebhookError naming `source`, the place in the body and what is wrong."""
    if len(body) > MAX_BODY:
        raise WebhookError(f"{source}: body is {len(body):,} bytes; at most {MAX_BODY:,} are accepted")
    try:
        raw = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise WebhookError(f"{source}: not JSON: {exc}") from None
    except ValueError:  # Python refuses to parse an integer of over 4,300 digits
        raise WebhookError(f"{source}: a number of over 4,300 digits; no field takes one") from None
    except RecursionError:
        raise WebhookError(f"{source}: JSON nested too deeply") from None
    if not isinstance(raw, dict):
        raise WebhookError(f"{source}: the body must be a JSON object, not {type(raw).__name__}")
    try:
        return Webhook.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        value = shown(first.get("input"), 80)
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise WebhookError(f"{source}: {_place(first['loc'])}: {first['msg']} (got {value}){more}") from None
