"""A live Kubernetes control plane on loopback, for tests: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and the KWOK controller, all built from the Go modules pinned in tests/tools/k8s (tests/tools/k8s-build).

Why hand-written: kind, k3d and minikube need container images (no registry is reachable here) and kwokctl's binary
runtime downloads its binaries; the tests need the processes under their own control (free ports, flags a test can
change, PIDs, logs kept for failures) and nothing of the host's configuration touched.

What runs (all as this user, on 127.0.0.1 with free ports, all stopped by PID in `stop()`):
  - etcd with TLS and client-certificate authentication (only the API server holds a client certificate);
  - kube-apiserver with TLS, client-certificate authentication, `--authorization-mode=Node,RBAC`, the default
    admission plugins and service-account tokens signed with a key made here (so `TokenRequest` works);
  - kube-controller-manager (`--use-service-account-credentials`: each controller acts as its own service account)
    and kube-scheduler, each with its own client certificate (the built-in RBAC roles of those users);
  - KWOK's controller, standing in for kubelets: it makes the nodes it manages (annotation
    `kwok.x-k8s.io/node=fake`) Ready, keeps their leases, and moves pods bound to them to Running, with upstream's
    default Stage objects (copied by k8s-build from the kwok module) and upstream's ClusterRole for its user.
No kubelet, no container runtime, no images: pods never run a process.

The PKI (`cryptography`, ECDSA P-256): one CA for everything; server certificates for etcd and the API server;
client certificates: the admin (group system:masters), the API server to etcd, the controller manager, the scheduler,
kwok, and any user a test asks for (`client_for`).

API (see each method):
    cluster = K8sCluster(bin_dir, workdir, K8sClusterConfig(prefix="rfk8s"))
    cluster.start()                      # returns when /readyz is ok, the controllers run and default/default exists
    cluster.api                          # KubeApi as the admin: get/list/create/apply/patch/delete on JSON objects
    cluster.client_for("alice", groups=("dev",))   # KubeApi as another user (client certificate)
    cluster.token_client(token)          # KubeApi with a bearer token (e.g. from api.create_token(ns, sa))
    cluster.kubeconfig                   # admin kubeconfig file (for kubectl, pulumi-kubernetes, Kueue ...)
    cluster.kubeconfig_for("kueue", groups=("system:masters",))   # a kubeconfig file for another user
    cluster.kubectl("get", "nodes", "-o", "json")   # CompletedProcess; raises K8sHarnessError on failure
    cluster.wait_for(lambda: ..., timeout=30, what="pod Running")   # the first truthy value
    cluster.log_tail("kube-scheduler")   # the last lines of a component's log
    cluster.spawn("kueue", [bin/"kueue", ...])      # a further process, logged and stopped like the others
    cluster.start_seconds                # seconds from start() to ready
Two users on one machine pass different `prefix` (used in the work folder only: ports are free ones).
"""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import json
import os
import signal
import socket
import subprocess
import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import requests
import urllib3
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

T = TypeVar("T")
ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "tests" / "tools" / "k8s-build"
CONTROL_PLANE = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "kubectl")
KWOK_ANNOTATION = "kwok.x-k8s.io/node"
SERVICE_CIDR = "10.96.0.0/16"


class K8sHarnessError(RuntimeError):
    """A component did not start or a request failed; the message carries its output or log tail."""


class KubeApiError(K8sHarnessError):
    """The API server answered with an error status; `status` and `reason` are the HTTP code and the Status reason."""

    def __init__(self, method: str, path: str, status: int, body: dict | str):
        self.status = status
        self.reason = body.get("reason", "") if isinstance(body, dict) else ""
        self.message = body.get("message", "") if isinstance(body, dict) else str(body)[:500]
        super().__init__(f"{method} {path}: {status} {self.reason}: {self.message}")


# ---- binaries -----------------------------------------------------------------------------------------------------

def toolchain_bin() -> Path | None:
    """The folder of the built toolchain: $RAILFORGE_K8S_BIN, else what tests/tools/k8s-build built for the pinned
    go.mod/go.sum (None when it is not built; this never builds)."""
    env = os.environ.get("RAILFORGE_K8S_BIN")
    if env:
        return Path(env)
    proc = subprocess.run([str(BUILD), "--bin-dir"], capture_output=True, text=True, timeout=60)
    return Path(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 and proc.stdout.strip() else None


def missing_binaries(bin_dir: Path | None, names: Iterable[str] = CONTROL_PLANE) -> list[str]:
    if bin_dir is None:
        return list(names)
    return [n for n in names if not os.access(bin_dir / n, os.X_OK)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- PKI ----------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class KeyPair:
    cert: Path
    key: Path


class Pki:
    """A CA and the certificates signed by it, as PEM files in one folder."""

    def __init__(self, folder: Path):
        self.dir = folder
        self.dir.mkdir(parents=True, exist_ok=True)
        self._ca_key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "railforge-test-ca")])
        now = datetime.datetime.now(datetime.UTC)
        self._ca_cert = (
            x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(self._ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False),
                           critical=True)
            .sign(self._ca_key, hashes.SHA256())
        )
        self.ca = self.dir / "ca.crt"
        self.ca.write_bytes(self._ca_cert.public_bytes(serialization.Encoding.PEM))

    def issue(self, name: str, common_name: str, groups: tuple[str, ...] = (), server: bool = False,
              client: bool = True, hosts: tuple[str, ...] = ()) -> KeyPair:
        key = ec.generate_private_key(ec.SECP256R1())
        subject = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups]
        subject.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
        usages = ([ExtendedKeyUsageOID.SERVER_AUTH] if server else []) + ([ExtendedKeyUsageOID.CLIENT_AUTH]
                                                                         if client else [])
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder().subject_name(x509.Name(subject)).issuer_name(self._ca_cert.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        )
        if hosts:
            sans: list[x509.GeneralName] = []
            for h in hosts:
                try:
                    sans.append(x509.IPAddress(ipaddress.ip_address(h)))
                except ValueError:
                    sans.append(x509.DNSName(h))
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self._ca_key, hashes.SHA256())
        pair = KeyPair(self.dir / f"{name}.crt", self.dir / f"{name}.key")
        pair.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        pair.key.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
        pair.key.chmod(0o600)
        return pair

    def signing_key(self, name: str) -> KeyPair:
        """A service-account signing key pair: `cert` is the public key (PEM), `key` the private key."""
        key = ec.generate_private_key(ec.SECP256R1())
        pair = KeyPair(self.dir / f"{name}.pub", self.dir / f"{name}.key")
        pair.cert.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                            serialization.PublicFormat.SubjectPublicKeyInfo))
        pair.key.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
        pair.key.chmod(0o600)
        return pair


def write_kubeconfig(path: Path, server: str, ca: Path, user: str, pair: KeyPair | None = None,
                     token: str | None = None) -> Path:
    creds: dict[str, str] = {"token": token} if token else {"client-certificate": str(pair.cert),
                                                            "client-key": str(pair.key)}
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": user,
        "clusters": [{"name": "railforge-test", "cluster": {"server": server, "certificate-authority": str(ca)}}],
        "users": [{"name": user, "user": creds}],
        "contexts": [{"name": user, "context": {"cluster": "railforge-test", "user": user}}],
    }, sort_keys=False))
    path.chmod(0o600)
    return path


# ---- REST client --------------------------------------------------------------------------------------------------

class KubeApi:
    """The API server's REST interface on JSON objects (dicts), through `requests` with TLS.

    Why not the `kubernetes` package: the tests handle generic objects (nodes, pods, custom resources of Kueue or
    whereabouts) as plain JSON and need a client per user; its typed models would only be converted back to dicts.
    Paths come from the API server's own discovery (`/api/v1`, `/apis/<group>/<version>`), so custom resources work
    as soon as their CRD is established."""

    def __init__(self, server: str, ca: Path, pair: KeyPair | None = None, token: str | None = None,
                 field_manager: str = "railforge-tests"):
        self.server = server.rstrip("/")
        self.session = requests.Session()
        self.session.trust_env = False  # REQUESTS_CA_BUNDLE would replace `verify`, and no proxy is wanted
        self.session.verify = str(ca)
        if pair is not None:
            self.session.cert = (str(pair.cert), str(pair.key))
        if token is not None:
            self.session.headers["Authorization"] = f"Bearer {token}"
        self.field_manager = field_manager
        self._resources: dict[str, dict[str, tuple[str, bool]]] = {}

    def request(self, method: str, path: str, body: dict | None = None, params: dict | None = None,
                content_type: str = "application/json", timeout: float = 30) -> dict:
        resp = self.session.request(method, self.server + path, params=params, timeout=timeout,
                                    data=None if body is None else json.dumps(body),
                                    headers={"Content-Type": content_type, "Accept": "application/json"})
        try:
            data = resp.json() if resp.content else {}
        except ValueError:
            data = resp.text
        if resp.status_code >= 400:
            raise KubeApiError(method, path, resp.status_code, data)
        return data

    # discovery: kind -> (plural, namespaced) per apiVersion
    def _kinds(self, api_version: str) -> dict[str, tuple[str, bool]]:
        if api_version not in self._resources:
            base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
            found = self.request("GET", base)
            self._resources[api_version] = {r["kind"]: (r["name"], r["namespaced"])
                                            for r in found.get("resources", []) if "/" not in r["name"]}
        return self._resources[api_version]

    def path(self, api_version: str, kind: str, name: str | None = None, namespace: str | None = None) -> str:
        """The REST path of a kind (its collection, or one object when `name` is given)."""
        kinds = self._kinds(api_version)
        if kind not in kinds:
            self._resources.pop(api_version, None)
            kinds = self._kinds(api_version)
        if kind not in kinds:
            raise K8sHarnessError(f"the API server serves no kind {kind} in {api_version}")
        plural, namespaced = kinds[kind]
        base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        if namespaced:
            base += f"/namespaces/{namespace or 'default'}"
        return f"{base}/{plural}" + (f"/{name}" if name else "")

    def _obj_path(self, obj: dict, with_name: bool = True) -> str:
        meta = obj.get("metadata", {})
        return self.path(obj["apiVersion"], obj["kind"], meta.get("name") if with_name else None,
                         meta.get("namespace"))

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict:
        return self.request("GET", self.path(api_version, kind, name, namespace))

    def find(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict | None:
        """The object, or None when it does not exist."""
        try:
            return self.get(api_version, kind, name, namespace)
        except KubeApiError as exc:
            if exc.status == 404:
                return None
            raise

    def list(self, api_version: str, kind: str, namespace: str | None = None, label_selector: str | None = None,
             field_selector: str | None = None) -> list[dict]:
        params = {k: v for k, v in (("labelSelector", label_selector), ("fieldSelector", field_selector)) if v}
        return self.request("GET", self.path(api_version, kind, None, namespace), params=params)["items"]

    def create(self, obj: dict) -> dict:
        return self.request("POST", self._obj_path(obj, with_name=False), obj)

    def apply(self, obj: dict, force: bool = True) -> dict:
        """Server-side apply (create or update) as `field_manager`."""
        return self.request("PATCH", self._obj_path(obj), obj, content_type="application/apply-patch+yaml",
                            params={"fieldManager": self.field_manager, "force": str(force).lower()})

    def patch(self, api_version: str, kind: str, name: str, patch: dict, namespace: str | None = None,
              subresource: str | None = None, kind_of_patch: str = "merge") -> dict:
        path = self.path(api_version, kind, name, namespace) + (f"/{subresource}" if subresource else "")
        return self.request("PATCH", path, patch, content_type=f"application/{kind_of_patch}-patch+json")

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None,
               grace_seconds: int | None = None) -> None:
        body = None if grace_seconds is None else {"gracePeriodSeconds": grace_seconds}
        with contextlib.suppress(KubeApiError):
            self.request("DELETE", self.path(api_version, kind, name, namespace), body)

    def create_token(self, namespace: str, service_account: str, seconds: int = 3600) -> str:
        """A token for a service account through the TokenRequest API (signed with the cluster's SA key)."""
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                "spec": {"expirationSeconds": seconds}}
        path = f"/api/v1/namespaces/{namespace}/serviceaccounts/{service_account}/token"
        return self.request("POST", path, body)["status"]["token"]

    def whoami(self) -> dict:
        """SelfSubjectReview: the user and groups the API server authenticated this client as."""
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
        return self.request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", body)["status"]["userInfo"]


# ---- the cluster --------------------------------------------------------------------------------------------------

@dataclass
class K8sClusterConfig:
    """`extra_args[component]` adds or replaces `--flag=value` of a component (e.g. feature gates for Kueue's
    topology-aware scheduling, or a scheduler config file); `kwok=False` runs no kwok controller."""

    prefix: str = "rfk8s"
    extra_args: dict[str, dict[str, str]] = field(default_factory=dict)
    kwok: bool = True
    kwok_skip_stages: tuple[str, ...] = ()  # upstream Stage files left out, e.g. "pod-complete" (Job pods run on)
    start_timeout: float = 180.0
    verbosity: int = 1


class K8sCluster:
    def __init__(self, bin_dir: Path, workdir: Path, config: K8sClusterConfig | None = None):
        self.bin = Path(bin_dir)
        self.dir = Path(workdir)
        self.cfg = config or K8sClusterConfig()
        self.procs: dict[str, subprocess.Popen] = {}
        self.logs = self.dir / "log"
        self.start_seconds = 0.0
        self.nodes_ready_seconds = 0.0  # set by whoever registers nodes (tests/k8s/conftest.py)
        self.server = ""
        self.kubeconfig = self.dir / "admin.kubeconfig"
        self.pki: Pki | None = None
        self.api: KubeApi | None = None

    # ---- processes ------------------------------------------------------------------------------------------------

    def _spawn(self, name: str, args: dict[str, str]) -> None:
        merged = {**args, **self.cfg.extra_args.get(name, {})}
        self.spawn(name, [str(self.bin / name), *(f"--{k}={v}" for k, v in merged.items())])

    def spawn(self, name: str, cmd: list[str], env: dict[str, str] | None = None) -> subprocess.Popen:
        """Run a further process (Kueue, Volcano, a webhook ...) like the control plane's own: its output in
        log/<name>.log, its command line in <name>.cmdline, stopped by PID in `stop()`; `wait_for` fails as soon
        as it exits."""
        if name in self.procs and self.procs[name].poll() is None:
            raise K8sHarnessError(f"{name} is already running (pid {self.procs[name].pid})")
        (self.dir / f"{name}.cmdline").write_text(" ".join(cmd) + "\n")
        with (self.logs / f"{name}.log").open("ab") as log:
            self.procs[name] = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                                cwd=self.dir, start_new_session=True,
                                                env=None if env is None else {**os.environ, **env})
        return self.procs[name]

    def log_tail(self, name: str, lines: int = 40) -> str:
        try:
            return "\n".join((self.logs / f"{name}.log").read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return f"(no log for {name})"

    def _check_alive(self) -> None:
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                raise K8sHarnessError(f"{name} exited with {proc.returncode}:\n{self.log_tail(name)}")

    def wait_for(self, check: Callable[[], T], timeout: float = 30, what: str = "condition",
                 interval: float = 0.2) -> T:
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            self._check_alive()
            try:
                value = check()
            except (requests.RequestException, K8sHarnessError) as exc:
                if isinstance(exc, K8sHarnessError) and not isinstance(exc, KubeApiError):
                    raise
                last, value = exc, None
            if value:
                return value
            time.sleep(interval)
        raise K8sHarnessError(f"timed out after {timeout:.0f} s waiting for {what}" + (f" (last: {last})" if last
                                                                                         else ""))

    # ---- start / stop ---------------------------------------------------------------------------------------------

    def start(self) -> None:
        started = time.monotonic()
        for sub in ("log", "etcd-data", "pki", "run"):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.monotonic() - started

    def _start(self) -> None:
        pki = self.pki = Pki(self.dir / "pki")
        loopback = ("127.0.0.1", "localhost")
        etcd_port, etcd_peer, api_port = free_port(), free_port(), free_port()
        cm_port, sched_port = free_port(), free_port()
        svc_ip = str(next(ipaddress.ip_network(SERVICE_CIDR).hosts()))
        etcd_srv = pki.issue("etcd-server", "etcd", server=True, hosts=loopback)
        etcd_client = pki.issue("apiserver-etcd-client", "kube-apiserver-etcd-client")
        api_srv = pki.issue("apiserver", "kube-apiserver", server=True, client=False,
                            hosts=(*loopback, svc_ip, "kubernetes", "kubernetes.default", "kubernetes.default.svc",
                                   "kubernetes.default.svc.cluster.local"))
        admin = pki.issue("admin", "railforge-admin", groups=("system:masters",))
        # the aggregation layer's front proxy (kubeadm's layout: a CA of its own), for aggregated API servers
        # such as Kueue's visibility API
        front = Pki(self.dir / "pki" / "front-proxy")
        proxy_client = front.issue("front-proxy-client", "front-proxy-client")
        sa = pki.signing_key("service-account")
        self.server = f"https://127.0.0.1:{api_port}"
        write_kubeconfig(self.kubeconfig, self.server, pki.ca, "admin", admin)
        cm_kc = write_kubeconfig(self.dir / "controller-manager.kubeconfig", self.server, pki.ca,
                                 "system:kube-controller-manager",
                                 pki.issue("controller-manager", "system:kube-controller-manager"))
        sched_kc = write_kubeconfig(self.dir / "scheduler.kubeconfig", self.server, pki.ca, "system:kube-scheduler",
                                    pki.issue("scheduler", "system:kube-scheduler"))
        v = str(self.cfg.verbosity)

        self._spawn("etcd", {
            "name": f"{self.cfg.prefix}-etcd", "data-dir": str(self.dir / "etcd-data"),
            "listen-client-urls": f"https://127.0.0.1:{etcd_port}",
            "advertise-client-urls": f"https://127.0.0.1:{etcd_port}",
            "listen-peer-urls": f"http://127.0.0.1:{etcd_peer}",
            "initial-advertise-peer-urls": f"http://127.0.0.1:{etcd_peer}",
            "initial-cluster": f"{self.cfg.prefix}-etcd=http://127.0.0.1:{etcd_peer}",
            "cert-file": str(etcd_srv.cert), "key-file": str(etcd_srv.key), "trusted-ca-file": str(pki.ca),
            "client-cert-auth": "true", "log-level": "warn",
            "quota-backend-bytes": str(4 << 30), "unsafe-no-fsync": "true",
        })
        self._spawn("kube-apiserver", {
            "etcd-servers": f"https://127.0.0.1:{etcd_port}", "etcd-cafile": str(pki.ca),
            "etcd-certfile": str(etcd_client.cert), "etcd-keyfile": str(etcd_client.key),
            "bind-address": "127.0.0.1", "advertise-address": "127.0.0.1", "secure-port": str(api_port),
            "tls-cert-file": str(api_srv.cert), "tls-private-key-file": str(api_srv.key),
            "client-ca-file": str(pki.ca), "authorization-mode": "Node,RBAC", "anonymous-auth": "false",
            "service-cluster-ip-range": SERVICE_CIDR, "allow-privileged": "true",
            "service-account-issuer": "https://kubernetes.default.svc.cluster.local",
            "service-account-key-file": str(sa.cert), "service-account-signing-key-file": str(sa.key),
            "enable-admission-plugins": "NodeRestriction", "profiling": "false", "v": v,
            "requestheader-client-ca-file": str(front.ca), "requestheader-allowed-names": "front-proxy-client",
            "requestheader-username-headers": "X-Remote-User", "requestheader-group-headers": "X-Remote-Group",
            "requestheader-extra-headers-prefix": "X-Remote-Extra-",
            "proxy-client-cert-file": str(proxy_client.cert), "proxy-client-key-file": str(proxy_client.key),
            # no kube-proxy here: the aggregator dials an APIService's endpoints, not its service IP
            "enable-aggregator-routing": "true",
            "cert-dir": str(self.dir / "run"),
            # a loopback advertise address is refused by the endpoint reconciler; nothing runs in-cluster here
            "endpoint-reconciler-type": "none",
        })
        self.api = KubeApi(self.server, pki.ca, admin)
        self.wait_for(self._readyz, timeout=self.cfg.start_timeout, what="kube-apiserver /readyz")
        common = {"leader-elect": "false", "bind-address": "127.0.0.1", "v": v}
        self._spawn("kube-controller-manager", {
            **common, "kubeconfig": str(cm_kc), "authentication-kubeconfig": str(cm_kc),
            "authorization-kubeconfig": str(cm_kc), "secure-port": str(cm_port),
            "cert-dir": str(self.dir / "run" / "cm"),
            "service-account-private-key-file": str(sa.key), "root-ca-file": str(pki.ca),
            "use-service-account-credentials": "true",
        })
        self._spawn("kube-scheduler", {
            **common, "kubeconfig": str(sched_kc), "authentication-kubeconfig": str(sched_kc),
            "authorization-kubeconfig": str(sched_kc), "secure-port": str(sched_port),
            "cert-dir": str(self.dir / "run" / "scheduler"),
        })
        if self.cfg.kwok:
            self._start_kwok()
        self.wait_for(lambda: self._healthz(cm_port) and self._healthz(sched_port), timeout=self.cfg.start_timeout,
                      what="controller-manager and scheduler /healthz")
        # pods need the namespace's default service account, which the controller manager creates
        self.wait_for(lambda: self.api.find("v1", "ServiceAccount", "default", "default"),
                      timeout=self.cfg.start_timeout, what="service account default/default")

    def _start_kwok(self) -> None:
        share = self.bin.parent / "share" / "kwok"
        role = yaml.safe_load((share / "rbac" / "role.yaml").read_text())
        user = "kwok-controller"
        self.api.apply(role)
        self.api.apply({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                        "metadata": {"name": user},
                        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                    "name": role["metadata"]["name"]},
                        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]})
        stages = sorted(s for s in (share / "stages").glob("*.yaml") if s.stem not in self.cfg.kwok_skip_stages)
        config = self.dir / "kwok.yaml"
        config.write_text("".join("---\n" + s.read_text() for s in stages))
        kc = self.kubeconfig_for(user)
        self._spawn("kwok", {
            "kubeconfig": str(kc), "config": str(config),
            "manage-nodes-with-annotation-selector": f"{KWOK_ANNOTATION}=fake",
            "node-lease-duration-seconds": "40", "cidr": "10.0.0.1/16", "node-ip": "10.0.0.1",
        })

    def _readyz(self) -> bool:
        try:
            resp = self.api.session.get(self.server + "/readyz", timeout=5)
        except requests.RequestException:
            return False
        return resp.status_code == 200

    def _healthz(self, port: int) -> bool:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", urllib3.exceptions.InsecureRequestWarning)
                # self-signed serving certificate made by the component itself: only its health is read here
                with requests.Session() as session:
                    session.trust_env = False
                    return session.get(f"https://127.0.0.1:{port}/healthz", verify=False, timeout=5).status_code == 200
        except requests.RequestException:
            return False

    def stop(self) -> None:
        for name in reversed(list(self.procs)):
            self.terminate(name, wait=False)
        for name in reversed(list(self.procs)):
            self.terminate(name)
        self.procs.clear()

    def terminate(self, name: str, wait: bool = True) -> None:
        """Stop one process by its PID (SIGTERM to its process group, SIGKILL after 15 s), e.g. kwok to make
        every node stop heartbeating; `spawn` or a new cluster starts it again."""
        proc = self.procs.get(name)
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        if not wait:
            return
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=15)
        del self.procs[name]

    # ---- clients --------------------------------------------------------------------------------------------------

    def _user_pair(self, user: str, groups: tuple[str, ...]) -> KeyPair:
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in user)
        return self.pki.issue("user-" + "-".join((safe, *groups)).replace(":", "_"), user, groups=groups)

    def client_for(self, user: str, groups: tuple[str, ...] = ()) -> KubeApi:
        """A client authenticated by a client certificate as `user` in `groups` (no rights unless RBAC gives some)."""
        return KubeApi(self.server, self.pki.ca, self._user_pair(user, groups))

    def token_client(self, token: str) -> KubeApi:
        return KubeApi(self.server, self.pki.ca, token=token)

    def kubeconfig_for(self, user: str, groups: tuple[str, ...] = ()) -> Path:
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in user)
        return write_kubeconfig(self.dir / f"{safe}.kubeconfig", self.server, self.pki.ca, user,
                                self._user_pair(user, groups))

    def kubectl(self, *args: str, check: bool = True, input: str | None = None,
                timeout: float = 60) -> subprocess.CompletedProcess:
        proc = subprocess.run([str(self.bin / "kubectl"), f"--kubeconfig={self.kubeconfig}", *args],
                              capture_output=True, text=True, input=input, timeout=timeout)
        if check and proc.returncode != 0:
            raise K8sHarnessError(f"kubectl {' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}")
        return proc
