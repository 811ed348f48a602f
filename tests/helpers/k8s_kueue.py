"""Kueue v0.19.2 (built from sigs.k8s.io/kueue by tests/tools/k8s-build) against the live control plane of
tests/helpers/k8s_cluster.py.

- CRDs: tests/reference/kueue-v0.19.2 (copied unchanged from the module the binary is built from).
- Webhooks: the API server has no Service network here (no kube-proxy), so the upstream webhook configurations
  (webhook/manifests.yaml, same module) are registered with `clientConfig.url: https://127.0.0.1:<port>/<path>`
  instead of `clientConfig.service`, and Kueue serves them with a certificate from the harness CA for 127.0.0.1
  (Kueue's internal cert rotation, which writes certificates for the Service's DNS name, is off). Only the
  webhooks of the kinds this harness uses are registered (batch/v1 Job and Kueue's own objects): the others
  would name kinds (JobSet, RayJob ...) this API server does not have.
- RBAC: Kueue runs with the harness's admin credentials, not upstream's ClusterRole (not proven here).
- Leader election, metrics and the visibility API server are off; the health probe listens on a free port.
- With its own cert rotation off, Kueue v0.19.2 reads a metrics certificate from the fixed path
  /etc/kueue/metrics/certs (cmd/kueue/main.go) even with metrics off. Rather than write into the machine's /etc,
  Kueue runs in a mount namespace of its own (`unshare -m`, root) where an overlay on /etc adds that folder.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import requests
import yaml

from .k8s_cluster import K8sCluster, free_port

REFERENCE = Path(__file__).resolve().parents[1] / "reference" / "kueue-v0.19.2"
KUEUE_VERSION = "v0.19.2"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
# the webhooks registered (paths of webhook/manifests.yaml): Jobs, and Kueue's own kinds
WEBHOOK_KINDS = ("batch-v1-job", "kueue-x-k8s-io-v1beta2-")


@dataclass
class KueueRun:
    namespace: str
    webhook_port: int
    health_port: int


def crd_objects() -> list[dict]:
    return [yaml.safe_load(p.read_text()) for p in sorted(REFERENCE.glob("kueue.x-k8s.io_*.yaml"))]


def webhook_objects(port: int, ca_pem: bytes) -> list[dict]:
    import base64

    bundle = base64.b64encode(ca_pem).decode()
    out = []
    for doc in yaml.safe_load_all((REFERENCE / "webhook" / "manifests.yaml").read_text()):
        kept = []
        for hook in doc["webhooks"]:
            path = hook["clientConfig"]["service"]["path"]
            if not any(kind in path for kind in WEBHOOK_KINDS):
                continue
            hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": bundle}
            kept.append(hook)
        doc["metadata"]["name"] = "railforge-kueue-" + doc["metadata"]["name"]
        doc["webhooks"] = kept
        out.append(doc)
    return out


def kueue_config(namespace: str, webhook_port: int, health_port: int, cert_dir: Path) -> dict:
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
        "namespace": namespace,
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
        "metrics": {"bindAddress": "0"},
        "webhook": {"port": webhook_port, "host": "127.0.0.1", "certDir": str(cert_dir)},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "manageJobsWithoutQueueName": False,
        "integrations": {"frameworks": ["batch/job"]},
        # the program's ClusterQueues cover nvidia.com/gpu only (a tenant's quota is GPUs); pods also ask for
        # cpu, memory and rdma/railN, which Kueue must then leave to the nodes (TAS still counts them)
        "resources": {"quotaCheckStrategy": "IgnoreUndeclared"},
        "featureGates": {"VisibilityOnDemand": False},
    }


def start_kueue(cluster: K8sCluster, namespace: str = "kueue-system") -> KueueRun:
    api = cluster.api
    for crd in crd_objects():
        api.apply(crd)

    def established() -> bool:
        for crd in crd_objects():
            got = api.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", crd["metadata"]["name"])
            conds = {c["type"]: c["status"] for c in (got.get("status") or {}).get("conditions") or []}
            if conds.get("Established") != "True":
                return False
        return True

    cluster.wait_for(established, timeout=60, what="Kueue CRDs established")
    if api.find("v1", "Namespace", namespace) is None:
        api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    cert_dir = cluster.dir / "kueue-certs"
    cert_dir.mkdir(exist_ok=True)
    pair = cluster.pki.issue("kueue-webhook", "kueue-webhook", server=True, client=False, hosts=("127.0.0.1",))
    (cert_dir / "tls.crt").write_bytes(pair.cert.read_bytes())
    (cert_dir / "tls.key").write_bytes(pair.key.read_bytes())
    (cert_dir / "tls.key").chmod(0o600)
    overlay = cluster.dir / "kueue-etc"
    metrics = overlay / "upper" / "kueue" / "metrics" / "certs"
    metrics.mkdir(parents=True, exist_ok=True)
    (overlay / "work").mkdir(exist_ok=True)
    for name in ("tls.crt", "tls.key"):
        (metrics / name).write_bytes((cert_dir / name).read_bytes())
    run = KueueRun(namespace, free_port(), free_port())
    config = cluster.dir / "kueue-config.yaml"
    config.write_text(yaml.safe_dump(kueue_config(namespace, run.webhook_port, run.health_port, cert_dir)))
    mount = (f"mount -t overlay overlay -o lowerdir=/etc,upperdir={overlay / 'upper'},workdir={overlay / 'work'} "
             f"/etc && exec {cluster.bin / 'kueue'} --config={config} --zap-log-level=2")
    cluster.spawn("kueue", ["unshare", "--mount", "--propagation", "private", "sh", "-c", mount],
                  env={"KUBECONFIG": str(cluster.kubeconfig)})

    def ready() -> bool:
        try:
            return requests.get(f"http://127.0.0.1:{run.health_port}/readyz", timeout=2).status_code == 200
        except requests.RequestException:
            return False

    cluster.wait_for(ready, timeout=120, what="kueue readyz", interval=0.5)
    for hook in webhook_objects(run.webhook_port, cluster.pki.ca.read_bytes()):
        api.apply(hook)
    return run
