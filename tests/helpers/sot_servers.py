"""A real NetBox and a real Nautobot for the tests: PostgreSQL 15 and Redis (Debian) on loopback, each product
from PyPI in its own virtual environment (NetBox on Python 3.12, Nautobot on 3.11), served on 127.0.0.1.

Slow steps are cached under /var/cache/railforge, keyed on what they are made from: the virtual environment on
the product's version, the migrated empty database (a `pg_dump`) on the same. A fresh machine pays for both once
(~15 min per product on this loaded 2-core machine); afterwards a start takes a minute or two. Everything runs in
temporary folders and is stopped by PID.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import requests

NETBOX_VERSION = "4.7.3"
NAUTOBOT_VERSION = "3.2.7"
BGP_MODELS_VERSION = "3.2.0"
"""nautobot-bgp-models, Network to Code's Nautobot app with the AutonomousSystem and BGP routing-instance models
(Nautobot's core has no ASN model); 3.2.0 requires nautobot>=3.1,<4."""
NAUTOBOT_APPS = ["nautobot_bgp_models"]
CACHE = Path(os.environ.get("RAILFORGE_CACHE", "/var/cache/railforge"))
PG_BIN = Path("/usr/lib/postgresql/15/bin")
SECRET = "railforge-test-only-secret-key-0123456789-abcdefghijklmnopqrstuvwxyz"
NETBOX_CONFIG = """\
ALLOWED_HOSTS = ["*"]
DATABASE = {{"NAME": "sot", "USER": "postgres", "PASSWORD": "", "HOST": "127.0.0.1", "PORT": {pg_port},
            "CONN_MAX_AGE": 300}}
REDIS = {{"tasks": {{"HOST": "127.0.0.1", "PORT": {redis_port}, "DATABASE": 0, "SSL": False}},
         "caching": {{"HOST": "127.0.0.1", "PORT": {redis_port}, "DATABASE": 1, "SSL": False}}}}
SECRET_KEY = "{secret}"
API_TOKEN_PEPPERS = {{1: "{secret}"}}
CENSUS_REPORTING_ENABLED = False
MAX_PAGE_SIZE = 5000
"""
GUNICORN = """\
bind = "127.0.0.1:{port}"
workers = {workers}
threads = 3
timeout = 900
max_requests = 5000
max_requests_jitter = 500
"""
"""NetBox's own contrib/gunicorn.py (workers 2n+1, 3 threads, recycled after 5,000 requests), with a longer timeout:
a bulk request of 100 cables takes minutes on this loaded machine."""
UWSGI = """\
[uwsgi]
http = 127.0.0.1:{port}
strict = true
master = true
enable-threads = true
vacuum = true
single-interpreter = true
die-on-term = true
need-app = true
disable-logging = true
log-4xx = true
log-5xx = true
http-keepalive = 1
processes = {workers}
threads = 2
harakiri = 900
http-timeout = 900
buffer-size = 32768
"""
"""Nautobot's documented uwsgi.ini (processes 2n+1), served by `nautobot-server start` as in production."""
WORKERS = 2 * (os.cpu_count() or 1) + 1
ADMIN, PASSWORD = "railforge", "railforge-test-password"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _python(version: str) -> str:
    proc = subprocess.run(["pyenv", "which", f"python{version}"], capture_output=True, text=True,
                          env={**os.environ, "PYENV_VERSION": {"3.12": "3.12.1", "3.11": "3.11.7"}[version]})
    if proc.returncode == 0 and proc.stdout.strip():
        return proc.stdout.strip()
    found = shutil.which(f"python{version}")
    if found:
        return found
    raise RuntimeError(f"no Python {version} found (pyenv or PATH)")


def product_venv(package: str, version: str, python: str, extras: tuple[str, ...] = ()) -> Path:
    """The cached virtual environment with `package==version` and the pinned `extras` installed (made once per
    set of versions: the folder's name carries them all)."""
    key = "".join(f"+{e.replace('==', '-')}" for e in extras)
    venv = CACHE / f"{package}-{version}{key}-venv"
    done = venv / ".railforge-complete"
    if done.exists():
        return venv
    shutil.rmtree(venv, ignore_errors=True)
    venv.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([_python(python), "-m", "venv", str(venv)], check=True)
    for attempt in range(4):
        proc = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", f"{package}=={version}", *extras],
                              capture_output=True, text=True)
        if proc.returncode == 0:
            done.write_text(version)
            return venv
        time.sleep(15 * (attempt + 1))
    raise RuntimeError(f"pip install {package}=={version} failed:\n{proc.stderr[-2000:]}")


@dataclass
class Server:
    url: str
    token: str
    work: Path
    pg: Path
    pg_port: int
    redis_port: int
    pids: list[int] = field(default_factory=list)
    env: dict = field(default_factory=dict)

    def run(self, *cmd: str, timeout: float = 600) -> subprocess.CompletedProcess:
        return subprocess.run(list(cmd), capture_output=True, text=True, env=self.env, cwd=self.work,
                              timeout=timeout)

    def stop(self) -> None:
        for pid in reversed(self.pids):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        postmaster = self.pg / "data" / "postmaster.pid"
        pg_pid = int(postmaster.read_text().split()[0]) if postmaster.exists() else None
        subprocess.run(["su", "postgres", "-c", f"{PG_BIN}/pg_ctl -D {self.pg}/data -m immediate stop"],
                       capture_output=True)
        if pg_pid is not None:  # seen once on the loaded machine: pg_ctl returned and the postmaster stayed
            with contextlib.suppress(ProcessLookupError):
                os.kill(pg_pid, signal.SIGKILL)
            self.pids.append(pg_pid)
        for pid in self.pids:
            for _ in range(50):
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.1)
        shutil.rmtree(self.pg, ignore_errors=True)


def _databases(work: Path) -> Server:
    """PostgreSQL with an empty `sot` database and Redis, on free loopback ports."""
    work.mkdir(parents=True, exist_ok=True)
    pg = Path(tempfile.mkdtemp(prefix="railforge-pg-"))  # pytest's folders are private to root: PostgreSQL's own
    shutil.chown(pg, "postgres")
    server = Server(f"http://127.0.0.1:{free_port()}", "", work, pg, free_port(), free_port())
    subprocess.run(["su", "postgres", "-c", f"{PG_BIN}/initdb -D {pg}/data -A trust -U postgres"], check=True,
                   capture_output=True)
    opts = (f"-k {pg} -p {server.pg_port} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off "
            f"-c full_page_writes=off -c shared_preload_libraries=pg_stat_statements")
    subprocess.run(["su", "postgres", "-c", f"{PG_BIN}/pg_ctl -D {pg}/data -o '{opts}' -l {pg}/pg.log -w start"],
                   check=True, capture_output=True)
    redis = subprocess.Popen(["redis-server", "--port", str(server.redis_port), "--bind", "127.0.0.1", "--save",
                              "", "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    server.pids.append(redis.pid)
    server.run("psql", "-h", "127.0.0.1", "-p", str(server.pg_port), "-U", "postgres", "-q", "-c",
               "create database sot")
    server.run("psql", "-h", "127.0.0.1", "-p", str(server.pg_port), "-U", "postgres", "-q", "-d", "sot", "-c",
               "create extension pg_stat_statements")
    return server


def _migrated(server: Server, name: str, migrate: list[str], base: str | None = None) -> None:
    """The product's empty schema: restored from the cached dump, or migrated once and dumped. With `base` (the
    dump of the same product without its apps), a cache miss starts from that dump, so adding an app migrates
    only the app's tables."""
    psql = ["psql", "-h", "127.0.0.1", "-p", str(server.pg_port), "-U", "postgres", "-q", "-d", "sot"]
    dump = CACHE / f"{name}-migrated.sql"
    if dump.exists():
        proc = server.run(*psql, "-f", str(dump))
        if proc.returncode == 0:
            return
        _recreate(server)
    base_dump = CACHE / f"{base}-migrated.sql" if base is not None else None
    if base_dump is not None and base_dump.exists() and server.run(*psql, "-f", str(base_dump)).returncode != 0:
        _recreate(server)
    proc = server.run(*migrate, timeout=3600)
    if proc.returncode != 0:
        server.stop()
        raise RuntimeError(f"{name}: migrate failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    tmp = dump.with_suffix(f".tmp-{os.getpid()}")
    server.run("pg_dump", "-h", "127.0.0.1", "-p", str(server.pg_port), "-U", "postgres", "-f", str(tmp), "sot")
    tmp.rename(dump)


def _recreate(server: Server) -> None:
    """An empty `sot` database again, after a restore that failed half-way."""
    for sql in ("drop database if exists sot", "create database sot"):
        server.run("psql", "-h", "127.0.0.1", "-p", str(server.pg_port), "-U", "postgres", "-q", "-c", sql)


def _wait(url: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if requests.get(url, timeout=5).status_code < 500:
                return
        except requests.RequestException:
            pass
        time.sleep(1)
    raise RuntimeError(f"no answer at {url} within {timeout:.0f} s")


def _serve(server: Server, cmd: list[str], log_name: str, status_path: str) -> None:
    with open(server.work / log_name, "wb") as log:
        proc = subprocess.Popen(cmd, env=server.env, cwd=server.work, stdout=log, stderr=subprocess.STDOUT)
    server.pids.append(proc.pid)
    _wait(f"{server.url}{status_path}", 300)


def start_netbox(work: Path) -> Server:
    """NetBox with an admin user and a v2 API token."""
    venv = product_venv("netbox", NETBOX_VERSION, "3.12")
    server = _databases(work)
    try:
        root = work / "netbox"
        (root / "conf").mkdir(parents=True)
        (root / "conf" / "__init__.py").write_text("")
        (root / "conf" / "configuration.py").write_text(NETBOX_CONFIG.format(
            pg_port=server.pg_port, redis_port=server.redis_port, secret=SECRET))
        server.env = _env("NETBOX_ROOT", root)
        netbox = str(venv / "bin" / "netbox")
        _migrated(server, f"netbox-{NETBOX_VERSION}", [netbox, "migrate", "--no-input"])
        _superuser(server, [netbox, "createsuperuser", "--no-input"])
        port = server.url.rsplit(":", 1)[1]
        (root / "gunicorn.py").write_text(GUNICORN.format(port=port, workers=WORKERS))
        _serve(server, [str(venv / "bin" / "gunicorn"), "-c", str(root / "gunicorn.py"), "netbox.wsgi"],
               "gunicorn.log", "/api/status/")
        resp = requests.post(f"{server.url}/api/users/tokens/provision/",
                             json={"username": ADMIN, "password": PASSWORD}, timeout=60)
        resp.raise_for_status()
        body = resp.json()
        server.token = f"nbt_{body['key']}.{body['token']}" if body.get("version") == 2 else body["key"]
    except Exception:
        server.stop()
        raise
    return server


def start_nautobot(work: Path) -> Server:
    """Nautobot with an admin user and an API token."""
    venv = product_venv("nautobot", NAUTOBOT_VERSION, "3.11", (f"nautobot-bgp-models=={BGP_MODELS_VERSION}",))
    server = _databases(work)
    try:
        root = work / "nautobot"
        root.mkdir(parents=True)
        nautobot = str(venv / "bin" / "nautobot-server")
        server.env = _env("NAUTOBOT_ROOT", root)
        server.env.update({"NAUTOBOT_DB_USER": "postgres", "NAUTOBOT_DB_HOST": "127.0.0.1",
                           "NAUTOBOT_DB_PORT": str(server.pg_port), "NAUTOBOT_DB_NAME": "sot",
                           "NAUTOBOT_REDIS_HOST": "127.0.0.1", "NAUTOBOT_REDIS_PORT": str(server.redis_port),
                           "NAUTOBOT_ALLOWED_HOSTS": "*", "NAUTOBOT_SECRET_KEY": SECRET,
                           "NAUTOBOT_INSTALLATION_METRICS_ENABLED": "false",
                           "NAUTOBOT_CONFIG": str(root / "nautobot_config.py")})
        proc = server.run(nautobot, "init", str(root / "nautobot_config.py"))
        if proc.returncode != 0:
            raise RuntimeError(f"nautobot-server init failed: {proc.stderr[-1000:]}")
        with open(root / "nautobot_config.py", "a") as config:
            config.write(f"\nPLUGINS = {NAUTOBOT_APPS!r}\n")
        _migrated(server, f"nautobot-{NAUTOBOT_VERSION}-bgp-models-{BGP_MODELS_VERSION}", [nautobot, "migrate"],
                  base=f"nautobot-{NAUTOBOT_VERSION}")
        _superuser(server, [nautobot, "createsuperuser", "--no-input"])
        port = server.url.rsplit(":", 1)[1]
        (root / "uwsgi.ini").write_text(UWSGI.format(port=port, workers=WORKERS))
        _serve(server, [nautobot, "start", "--ini", str(root / "uwsgi.ini")], "nautobot.log",
               "/api/status/")
        resp = requests.post(f"{server.url}/api/users/tokens/", auth=(ADMIN, PASSWORD), json={}, timeout=60)
        resp.raise_for_status()
        server.token = resp.json()["key"]
    except Exception:
        server.stop()
        raise
    return server


def _env(root_var: str, root: Path) -> dict:
    env = {**os.environ, root_var: str(root), "DJANGO_SUPERUSER_PASSWORD": PASSWORD,
           "DJANGO_SUPERUSER_USERNAME": ADMIN, "DJANGO_SUPERUSER_EMAIL": "railforge@localhost"}
    env.pop("PYTHONPATH", None)
    env.pop("VIRTUAL_ENV", None)
    return env


def _superuser(server: Server, cmd: list[str]) -> None:
    proc = server.run(*cmd)
    if proc.returncode != 0:
        raise RuntimeError(f"createsuperuser failed: {proc.stderr[-1000:]}")
