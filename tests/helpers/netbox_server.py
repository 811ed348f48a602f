"""A real NetBox for the tests: PostgreSQL 15 and Redis (Debian) on loopback, NetBox from PyPI in its own
Python 3.12 virtual environment, served by gunicorn on 127.0.0.1.

Slow steps are cached under /var/cache/railforge, keyed on what they are made from: the virtual environment on
the NetBox version, the migrated empty database (a `pg_dump`) on the NetBox version. A fresh machine pays for
both once (~10 min on this 2-core machine); afterwards a start takes seconds. Everything runs in one temporary
folder and is stopped by PID.
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
from dataclasses import dataclass
from pathlib import Path

import requests

NETBOX_VERSION = "4.7.3"
PYTHON_VERSION = "3.12"
CACHE = Path(os.environ.get("RAILFORGE_CACHE", "/var/cache/railforge"))
PG_BIN = Path("/usr/lib/postgresql/15/bin")
CONFIG = """\
ALLOWED_HOSTS = ["*"]
DATABASE = {{"NAME": "netbox", "USER": "postgres", "PASSWORD": "", "HOST": "127.0.0.1", "PORT": {pg_port},
            "CONN_MAX_AGE": 300}}
REDIS = {{"tasks": {{"HOST": "127.0.0.1", "PORT": {redis_port}, "DATABASE": 0, "SSL": False}},
         "caching": {{"HOST": "127.0.0.1", "PORT": {redis_port}, "DATABASE": 1, "SSL": False}}}}
SECRET_KEY = "railforge-test-only-secret-key-0123456789-abcdefghijklmnopqrstuvwxyz"
API_TOKEN_PEPPERS = {{1: "railforge-test-only-pepper-0123456789-abcdefghijklmnopqrstuvwxyz"}}
CENSUS_REPORTING_ENABLED = False
MAX_PAGE_SIZE = 5000
"""
ADMIN, PASSWORD = "railforge", "railforge-test-password"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _python312() -> str:
    found = shutil.which(f"python{PYTHON_VERSION}")
    if found:
        return found
    proc = subprocess.run(["pyenv", "which", f"python{PYTHON_VERSION}"], capture_output=True, text=True,
                          env={**os.environ, "PYENV_VERSION": "3.12.1"})
    if proc.returncode == 0 and proc.stdout.strip():
        return proc.stdout.strip()
    raise RuntimeError(f"NetBox {NETBOX_VERSION} needs Python {PYTHON_VERSION}: none found (pyenv or PATH)")


def netbox_venv() -> Path:
    """The cached virtual environment with NetBox installed (made once per NetBox version)."""
    venv = CACHE / f"netbox-{NETBOX_VERSION}-venv"
    done = venv / ".railforge-complete"
    if done.exists():
        return venv
    shutil.rmtree(venv, ignore_errors=True)
    venv.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([_python312(), "-m", "venv", str(venv)], check=True)
    for attempt in range(4):
        proc = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", f"netbox=={NETBOX_VERSION}"],
                              capture_output=True, text=True)
        if proc.returncode == 0:
            done.write_text(NETBOX_VERSION)
            return venv
        time.sleep(15 * (attempt + 1))
    raise RuntimeError(f"pip install netbox=={NETBOX_VERSION} failed:\n{proc.stderr[-2000:]}")


@dataclass
class NetBoxServer:
    url: str
    token: str
    work: Path
    pg: Path
    pids: list[int]
    venv: Path
    env: dict

    def manage(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
        return subprocess.run([str(self.venv / "bin" / "netbox"), *args], capture_output=True, text=True,
                              env=self.env, cwd=self.work, timeout=timeout)

    def stop(self) -> None:
        for pid in reversed(self.pids):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        subprocess.run(["su", "postgres", "-c", f"{PG_BIN}/pg_ctl -D {self.pg}/data -m immediate stop"],
                       capture_output=True)
        shutil.rmtree(self.pg, ignore_errors=True)
        for pid in self.pids:
            for _ in range(50):
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.1)


def _wait(url: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if requests.get(url, timeout=5).status_code < 500:
                return
        except requests.RequestException:
            pass
        time.sleep(1)
    raise RuntimeError(f"NetBox did not answer at {url} within {timeout:.0f} s")


def start(work: Path) -> NetBoxServer:
    """PostgreSQL, Redis and NetBox in `work`, on free loopback ports; the database restored from the cache."""
    venv = netbox_venv()
    work.mkdir(parents=True, exist_ok=True)
    pg = Path(tempfile.mkdtemp(prefix="railforge-pg-"))  # pytest's folders are private to root: PostgreSQL's own
    shutil.chown(pg, "postgres")
    pg_port, redis_port, http_port = free_port(), free_port(), free_port()
    pids: list[int] = []
    subprocess.run(["su", "postgres", "-c", f"{PG_BIN}/initdb -D {pg}/data -A trust -U postgres"], check=True,
                   capture_output=True)
    opts = (f"-k {pg} -p {pg_port} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off "
            f"-c full_page_writes=off")
    subprocess.run(["su", "postgres", "-c", f"{PG_BIN}/pg_ctl -D {pg}/data -o '{opts}' -l {pg}/pg.log -w start"],
                   check=True, capture_output=True)
    redis = subprocess.Popen(["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "",
                              "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pids.append(redis.pid)
    root = work / "netbox"
    (root / "conf").mkdir(parents=True)
    (root / "conf" / "__init__.py").write_text("")
    (root / "conf" / "configuration.py").write_text(CONFIG.format(pg_port=pg_port, redis_port=redis_port))
    env = {**os.environ, "NETBOX_ROOT": str(root), "DJANGO_SUPERUSER_PASSWORD": PASSWORD,
           "DJANGO_SUPERUSER_USERNAME": ADMIN, "DJANGO_SUPERUSER_EMAIL": "railforge@localhost"}
    env.pop("PYTHONPATH", None)
    server = NetBoxServer(f"http://127.0.0.1:{http_port}", "", work, pg, pids, venv, env)
    psql = ["psql", "-h", "127.0.0.1", "-p", str(pg_port), "-U", "postgres", "-q"]
    subprocess.run([*psql, "-c", "create database netbox"], check=True, capture_output=True)
    dump = CACHE / f"netbox-{NETBOX_VERSION}-migrated.sql"
    if dump.exists():
        subprocess.run([*psql, "-d", "netbox", "-f", str(dump)], check=True, capture_output=True)
    else:
        proc = server.manage("migrate", "--no-input", timeout=3000)
        if proc.returncode != 0:
            server.stop()
            raise RuntimeError(f"netbox migrate failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
        tmp = dump.with_suffix(f".tmp-{os.getpid()}")
        subprocess.run(["pg_dump", "-h", "127.0.0.1", "-p", str(pg_port), "-U", "postgres", "-f", str(tmp),
                        "netbox"], check=True)
        tmp.rename(dump)
    proc = server.manage("createsuperuser", "--no-input")
    if proc.returncode != 0:
        server.stop()
        raise RuntimeError(f"netbox createsuperuser failed: {proc.stderr[-1000:]}")
    with open(work / "gunicorn.log", "wb") as log:
        gunicorn = subprocess.Popen([str(venv / "bin" / "gunicorn"), "--bind", f"127.0.0.1:{http_port}",
                                     "--workers", "3", "--threads", "2", "--timeout", "300", "netbox.wsgi"],
                                    env=env, cwd=work, stdout=log, stderr=subprocess.STDOUT)
    pids.append(gunicorn.pid)
    try:
        _wait(f"{server.url}/api/status/", 180)
        resp = requests.post(f"{server.url}/api/users/tokens/provision/",
                             json={"username": ADMIN, "password": PASSWORD}, timeout=60)
        resp.raise_for_status()
        body = resp.json()
        server.token = f"nbt_{body['key']}.{body['token']}" if body.get("version") == 2 else body["key"]
    except Exception:
        server.stop()
        raise
    return server
