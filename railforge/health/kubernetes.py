"""Drains on Kubernetes: cordon the node and taint it NoSchedule with the cable's name; resume undoes both.

`KubeNodes` speaks the receiver's scheduler interface (node / drain / resume, like `Scontrol`), so the receiver
drains Kubernetes nodes without knowing about them; `SlurmAndKube` does both for a cluster that runs Slurm and
Kubernetes on the same nodes (the Slurm drain stays exactly as it was). The full reason goes in the annotation
`railforge.io/drain-reason`; the taint `railforge.io/drain=<cable>:NoSchedule` names the cable (or the alert when
no cable is involved), cut to a valid label value.

Hand-written over `requests`: the official `kubernetes` client (37.x) requires pydantic>=2.14.2, which the project's
pin does not allow, and the receiver needs four calls (GET and PATCH of one Node) with a kubeconfig's certificate or
token. Each PATCH carries the resourceVersion read just before, so a node changed meanwhile is a conflict the next
reconcile retries, never a blind overwrite.
"""

from __future__ import annotations

import base64
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

import requests
import yaml

from railforge.health.slurm import NodeState, Scontrol, SlurmError

TAINT_KEY = "railforge.io/drain"
REASON_ANNOTATION = "railforge.io/drain-reason"
CORDONED = "CORDONED+DRAIN"  # NodeState.state of a node railforge cordoned (NodeState.drained is true)
_LABEL_VALUE_BAD = re.compile(r"[^A-Za-z0-9_.-]+")


class KubernetesError(SlurmError):
    """A cordon, uncordon or read failed; the receiver treats it like a failed Slurm drain or resume (logged,
    retried on the next reconcile)."""


def taint_value(reason: str, cables: frozenset[str] = frozenset()) -> str:
    """The cable the reason names (a planned cable among its words), else its alert name, as a label value."""
    words = reason.split()
    named = next((w for w in reversed(words) if w in cables), None)
    if named is None:
        named = next((w for w in words if w.startswith("Railforge")), words[-1] if words else "railforge")
    value = _LABEL_VALUE_BAD.sub(".", named)[:63].strip("._-")
    return value or "railforge"


@dataclass(frozen=True)
class KubeConfig:
    server: str
    verify: str | bool
    cert: tuple[str, str] | None
    token: str | None


def load_kubeconfig(path: Path, secrets_dir: Path) -> KubeConfig:
    """The current context's server and credentials; inline certificate data is written to `secrets_dir`."""
    try:
        doc = yaml.safe_load(path.read_text())
        ctx_name = doc["current-context"]
        ctx = next(c["context"] for c in doc["contexts"] if c["name"] == ctx_name)
        cluster = next(c["cluster"] for c in doc["clusters"] if c["name"] == ctx["cluster"])
        user = next(u["user"] for u in doc["users"] if u["name"] == ctx["user"])
        server = cluster["server"]
    except (OSError, yaml.YAMLError, KeyError, TypeError, StopIteration) as exc:
        raise KubernetesError(f"kubeconfig {path}: not a usable kubeconfig ({type(exc).__name__}: {exc})") from None

    def material(item: dict, key: str) -> str | None:
        if item.get(f"{key}-data"):
            out = secrets_dir / key
            out.write_bytes(base64.b64decode(item[f"{key}-data"]))
            out.chmod(0o600)
            return str(out)
        return item.get(key)

    ca = material(cluster, "certificate-authority")
    verify: str | bool = False if cluster.get("insecure-skip-tls-verify") else (ca or True)
    cert, key = material(user, "client-certificate"), material(user, "client-key")
    return KubeConfig(server.rstrip("/"), verify, (cert, key) if cert and key else None, user.get("token"))


class KubeNodes:
    """Cordon/taint and uncordon Kubernetes nodes, as the receiver's scheduler."""

    def __init__(self, kubeconfig: Path, cables: frozenset[str] = frozenset(), timeout: float = 20):
        self._secrets = tempfile.TemporaryDirectory(prefix="railforge-kube-")
        self.config = load_kubeconfig(kubeconfig, Path(self._secrets.name))
        self.cables, self.timeout = cables, timeout
        self.session = requests.Session()
        # the kubeconfig says everything: REQUESTS_CA_BUNDLE or proxy variables must not replace its CA (requests
        # lets the environment's bundle override Session.verify when trust_env is on)
        self.session.trust_env = False
        self.session.verify = self.config.verify
        self.session.cert = self.config.cert
        if self.config.token:
            self.session.headers["Authorization"] = f"Bearer {self.config.token}"

    def _call(self, method: str, name: str, body: dict | None = None) -> dict:
        url = f"{self.config.server}/api/v1/nodes/{name}"
        headers = {"Content-Type": "application/merge-patch+json"} if body is not None else {}
        try:
            resp = self.session.request(method, url, json=body, headers=headers, timeout=self.timeout)
        except requests.RequestException as exc:
            raise KubernetesError(f"{method} node {name} at {self.config.server}: {exc}") from None
        if resp.status_code >= 400:
            detail = resp.json().get("message", resp.text[:300]) if resp.headers.get("Content-Type", "").startswith(
                "application/json") else resp.text[:300]
            raise KubernetesError(f"{method} node {name}: HTTP {resp.status_code}: {detail}")
        return resp.json()

    def node(self, name: str) -> NodeState:
        obj = self._call("GET", name)
        ours = any(t.get("key") == TAINT_KEY for t in obj["spec"].get("taints") or [])
        reason = (obj["metadata"].get("annotations") or {}).get(REASON_ANNOTATION, "")
        if obj["spec"].get("unschedulable") and ours:
            return NodeState(CORDONED, reason)
        return NodeState("SCHEDULABLE" if not obj["spec"].get("unschedulable") else "CORDONED", reason)

    def drain(self, name: str, reason: str) -> None:
        def change(obj: dict) -> dict:
            taints = [t for t in obj["spec"].get("taints") or [] if t.get("key") != TAINT_KEY]
            taints.append({"key": TAINT_KEY, "value": taint_value(reason, self.cables), "effect": "NoSchedule"})
            return {"metadata": {"annotations": {REASON_ANNOTATION: reason}},
                    "spec": {"unschedulable": True, "taints": taints}}

        self._update(name, change)

    def resume(self, name: str) -> None:
        def change(obj: dict) -> dict:
            taints = [t for t in obj["spec"].get("taints") or [] if t.get("key") != TAINT_KEY]
            return {"metadata": {"annotations": {REASON_ANNOTATION: None}},
                    "spec": {"unschedulable": None, "taints": taints or None}}

        self._update(name, change)

    def _update(self, name: str, change, tries: int = 3) -> None:
        """Read, change, write with the resourceVersion read; on a conflict (the node changed meanwhile, e.g. its
        status) read again and recompute, at most `tries` times."""
        for attempt in range(tries):
            obj = self._call("GET", name)
            body = change(obj)
            body["metadata"]["resourceVersion"] = obj["metadata"]["resourceVersion"]
            try:
                self._call("PATCH", name, body)
                return
            except KubernetesError as exc:
                if "HTTP 409" not in str(exc) or attempt == tries - 1:
                    raise


@dataclass
class SlurmAndKube:
    """Slurm and Kubernetes on the same nodes: drain and resume both. A node Slurm shows drained by railforge but
    Kubernetes does not show cordoned reads as not drained, so the receiver's next reconcile finishes the cordon."""

    slurm: Scontrol
    kube: KubeNodes

    def node(self, name: str) -> NodeState:
        slurm = self.slurm.node(name)
        if slurm.drained and slurm.reason.startswith("railforge:"):
            kube = self.kube.node(name)
            if not (kube.drained and kube.reason == slurm.reason):
                return NodeState(slurm.state.replace("DRAIN", "").strip("+") or "IDLE", slurm.reason)
        return slurm

    def drain(self, name: str, reason: str) -> None:
        self.slurm.drain(name, reason)
        self.kube.drain(name, reason)

    def resume(self, name: str) -> None:
        self.slurm.resume(name)
        self.kube.resume(name)


def scheduler(slurm: Scontrol | None, kubeconfig: Path | None, cables: frozenset[str] = frozenset()):
    """What the receiver drains: Slurm, Kubernetes, or both."""
    if kubeconfig is None:
        if slurm is None:
            raise KubernetesError("--no-slurm needs --kubeconfig: there would be nothing to drain")
        return slurm
    kube = KubeNodes(kubeconfig, cables)
    return kube if slurm is None else SlurmAndKube(slurm, kube)
