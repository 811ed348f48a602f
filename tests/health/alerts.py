"""Alertmanager webhook bodies (payload version 4, as Alertmanager 0.25 posts them) for the receiver tests."""

from __future__ import annotations

import hashlib
import json


def alert(name: str, status: str = "firing", **labels: str) -> dict:
    labels = {"alertname": name, **labels}
    fp = hashlib.sha256(json.dumps(labels, sort_keys=True).encode()).hexdigest()[:16]
    return {"status": status, "labels": labels, "annotations": {"summary": f"{name} test"},
            "startsAt": "2026-11-25T21:00:00.000Z",
            "endsAt": "0001-01-01T00:00:00Z" if status == "firing" else "2026-11-25T21:05:00.000Z",
            "generatorURL": "http://127.0.0.1:9090/graph?g0.expr=x", "fingerprint": fp}


def webhook(*alerts: dict) -> dict:
    status = "firing" if any(a["status"] == "firing" for a in alerts) else "resolved"
    common = {k: v for k, v in alerts[0]["labels"].items()
              if all(a["labels"].get(k) == v for a in alerts)} if alerts else {}
    return {"version": "4", "groupKey": '{}:{alertname="x"}', "truncatedAlerts": 0, "status": status,
            "receiver": "railforge", "groupLabels": {"alertname": alerts[0]["labels"]["alertname"]} if alerts else {},
            "commonLabels": common, "commonAnnotations": {}, "externalURL": "http://127.0.0.1:9093",
            "alerts": list(alerts)}


def body(*alerts: dict) -> bytes:
    return json.dumps(webhook(*alerts)).encode()
