"""A live Slurm cluster on this machine, started from a build's generated `slurm/` files, for tests.

Why hand-written: no library starts Slurm's daemons without systemd; the tests need real slurmctld, slurmdbd and
many slurmd on one host, each node on its own address, with nothing of the host's Slurm, munge or MariaDB touched.

What runs (all root, all stopped by PID in `stop()`):
  - munged with a private key and socket (`AuthInfo=socket=...` in both configs);
  - mariadbd on 127.0.0.1:`mariadb_port` with a private data dir, and slurmdbd on the bridge address
    (QOS and preemption need accounting): the cluster is registered, then the generated `qos.sh` and
    `accounts.sh` run against it;
  - slurmctld on the bridge address (`SlurmctldHost` = this host's short name, as Slurm demands);
  - one slurmd per GPU node of the plan, each in its own network namespace `<prefix>-<n>` wired by a veth to
    the bridge `<prefix>-br` (`nsenter --net=...`: `ip netns exec` remounts /sys without cgroups).

Each slurmd reports the hardware of the server it stands for (`NodeHardware`), not this machine's, through the
interfaces slurmd itself reads: hwloc's synthetic topology (`HWLOC_SYNTHETIC`, sockets x cores x threads) and
`sysconf(_SC_PHYS_PAGES)` answered by `slurmd_memory.c` (LD_PRELOAD, the memory Linux reports on that server).
No `SlurmdParameters=config_overrides`: slurmctld checks every registration against the node line as it would
on the real cluster (a node reporting less memory than RealMemory drains with "Low RealMemory").

The generated slurm.conf, gres.conf, topology.conf and cgroup.conf are used as written, except the keys that must
differ on a shared test host (`LOCAL_KEYS`: ports, paths, users, munge socket, addresses, and
proctrack/linuxproc + task/none because jobs here get no cgroups); GPU `File=` paths point at placeholder files
and every node line gets `NodeAddr=`. `overrides` replaces any further key (e.g. HealthCheckProgram). Users other
than root run Slurm commands too (`submit(user=...)`), so the work folder must be reachable by every user.

API (see each method):
    cluster = SlurmCluster(slurm_dir, workdir, SlurmClusterConfig(prefix="i27", subnet="10.227.0.0/24",
                                                                  node=NodeHardware(2, 56, 2, 2063205), ...))
    cluster.start()                          # returns when every node is idle; stop() always cleans up
    cluster.env                              # environment with SLURM_CONF for running Slurm commands yourself
    job = cluster.submit("-N2", "--exclusive", qos="p5", wrap="sleep 600")   # -> job id (int), as root (admin)
    cluster.submit("-p", "research", user="rf-alice", account="research")    # as a tenant's user
    cluster.restart_slurmd("su001-gpu01", memtotal_mib=1024)                 # re-register reporting other memory
    cluster.squeue()                         # -> [{"id", "name", "state", "reason", "nodes", "qos", ...}]
    cluster.sacct(job)                       # -> [{"JobID", "State", "NodeList", ...}] (all records, -D)
    cluster.scontrol("show", "node", "su001-gpu01")   # -> stdout; raises with stderr on failure
    cluster.node("su001-gpu01")              # -> {"State": "IDLE", "Reason": ...} from scontrol show node
    cluster.wait_for(lambda: ..., timeout=30, what="job 5 running")   # -> the first truthy value
    cluster.cancel_all()                     # scancel every job and wait until the queue is empty
Two users on one machine pass different `prefix`, `subnet` and ports. Node names come from the plan.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")
PLUGINS = Path("/usr/lib/x86_64-linux-gnu/slurm-wlm")
TOOLS = ("root", "slurmctld", "slurmd", "slurmdbd", "munged", "mungekey", "mariadbd", "mariadb-install-db",
         "mariadb", "sbatch", "squeue", "sacct", "sacctmgr", "scontrol", "nsenter", "ip", "cc", "runuser")
MEMORY_SHIM = Path(__file__).with_name("slurmd_memory.c")
SQUEUE_FIELDS = {"id": "%i", "name": "%j", "state": "%T", "reason": "%r", "nodes": "%N", "qos": "%q",
                 "partition": "%P", "start": "%S", "count": "%D", "priority": "%Q"}


class SlurmHarnessError(RuntimeError):
    """A daemon did not start or a Slurm command failed; the message carries its output or log tail."""


@dataclass(frozen=True)
class NodeHardware:
    """What each slurmd reports: the CPU topology and the memory Linux reports (MemTotal, MiB) of the server."""

    sockets: int
    cores_per_socket: int
    threads_per_core: int
    memtotal_mib: int


@dataclass
class SlurmClusterConfig:
    """Names and ports unique to one user of the machine, and the hardware every slurmd reports (default: exactly
    what its node line declares, so the registration check runs but says nothing about the plan's numbers).
    `overrides` sets slurm.conf keys after the local ones."""

    node: NodeHardware | None = None
    prefix: str = "i26"
    subnet: str = "10.226.0.0/24"
    slurmctld_port: int = 26817
    slurmd_port: int = 26818
    slurmdbd_port: int = 26819
    mariadb_port: int = 26306
    overrides: dict[str, str | None] = field(default_factory=dict)
    start_timeout: float = 180.0


def _run(cmd: list[str], env: dict | None = None, check: bool = True, timeout: float = 60,
         input: str | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, input=input)
    if check and proc.returncode != 0:
        raise SlurmHarnessError(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()}"
                                f"{proc.stdout.strip()}")
    return proc


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return f"(no {path})"


def set_keys(text: str, keys: dict[str, str | None]) -> str:
    """slurm.conf-style text with each `Key=` line replaced (None: removed); keys not present are appended."""
    out, seen = [], set()
    for line in text.splitlines():
        key = line.split("=", 1)[0] if "=" in line and not line.startswith("#") else None
        if key in keys:
            seen.add(key)
            if keys[key] is not None:
                out.append(f"{key}={keys[key]}")
            continue
        out.append(line)
    out.extend(f"{k}={v}" for k, v in keys.items() if k not in seen and v is not None)
    return "\n".join(out) + "\n"


def build_slurm_files(spec: Path, out: Path) -> Path:
    """`railforge build SPEC --out OUT` in a subprocess (this checkout's code); returns OUT/slurm."""
    import sys
    root = Path(__file__).resolve().parents[2]
    _run([sys.executable, "-m", "railforge", "build", str(spec), "--out", str(out)], timeout=300,
         env={**os.environ, "PYTHONPATH": str(root)})
    return out / "slurm"


class SlurmCluster:
    def __init__(self, slurm_dir: Path, workdir: Path, config: SlurmClusterConfig | None = None):
        self.source = Path(slurm_dir)
        self.dir = Path(workdir)
        self.cfg = config or SlurmClusterConfig()
        net = ipaddress.ip_network(self.cfg.subnet)
        self.hosts = list(net.hosts())
        self.bridge_ip = str(self.hosts[0])
        self.prefixlen = net.prefixlen
        self.short = socket.gethostname().split(".")[0]
        self.conf = self.dir / "etc" / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self.procs: dict[str, subprocess.Popen] = {}
        self.namespaces: list[str] = []
        self.nodes: list[str] = []
        self.cluster_name = ""
        self.admin_account = "root"
        self.hardware = self.cfg.node
        self.with_slurmd = True
        self.slurmctld_seconds = 0.0

    # ---- configuration ----------------------------------------------------------------------------------------

    def _node_names(self) -> list[str]:
        text = (self.source / "slurm.conf").read_text()
        names: list[str] = []
        for line in text.splitlines():
            if line.startswith("NodeName="):
                expr = line.split()[0].split("=", 1)[1]
                names += _run(["scontrol", "show", "hostnames", expr], env=self._source_env()).stdout.split()
        return names

    def _source_env(self) -> dict:
        return {**os.environ, "SLURM_CONF": str(self.source / "slurm.conf")}

    def _write_configs(self) -> None:
        etc, run = self.dir / "etc", self.dir / "run"
        for sub in ("etc", "run", "log", "state", "spool", "dev", "plugins", "db", "jobs", "tmp"):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        for so in sorted(PLUGINS.glob("*.so")):
            if not so.name.startswith("mpi_cray"):
                link = self.dir / "plugins" / so.name
                if not link.exists():
                    link.symlink_to(so)
        text = (self.source / "slurm.conf").read_text()
        self.cluster_name = re.search(r"^ClusterName=(\S+)", text, re.M).group(1)
        if self.hardware is None:
            line = re.search(r"^NodeName=.*", text, re.M).group(0)
            keys = dict(re.findall(r"(\w+)=(\S+)", line))
            self.hardware = NodeHardware(int(keys["Sockets"]), int(keys["CoresPerSocket"]),
                                         int(keys.get("ThreadsPerCore", "1")), int(keys["RealMemory"]))
        allowed = re.search(r"^PartitionName=\S+ .*Default=YES.* AllowAccounts=([^,\s]+)", text, re.M)
        self.admin_account = allowed.group(1) if allowed else "root"
        if len(self.nodes) > len(self.hosts) - 1:
            raise SlurmHarnessError(f"{len(self.nodes)} nodes do not fit in {self.cfg.subnet}")
        # every node gets an address, also without slurmd: a node without NodeAddr is looked up in DNS, for minutes
        self.addr = {n: str(self.hosts[i + 1]) for i, n in enumerate(self.nodes)}
        local: dict[str, str | None] = {
            "SlurmctldHost": f"{self.short}({self.bridge_ip})",
            "SlurmctldPort": str(self.cfg.slurmctld_port), "SlurmdPort": str(self.cfg.slurmd_port),
            "AuthInfo": f"socket={run / 'munge.socket'}", "SlurmUser": "root", "SlurmdUser": "root",
            "StateSaveLocation": str(self.dir / "state"), "SlurmdSpoolDir": str(self.dir / "spool" / "%n"),
            "SlurmctldPidFile": str(run / "slurmctld.pid"), "SlurmdPidFile": str(run / "slurmd-%n.pid"),
            "SlurmctldLogFile": str(self.dir / "log" / "slurmctld.log"),
            "SlurmdLogFile": str(self.dir / "log" / "slurmd-%n.log"),
            "PluginDir": str(self.dir / "plugins"), "MailProg": "/bin/true",
            # one /tmp per node, as each real node has: PMIx puts a step's rendezvous folder there
            "TmpFS": str(self.dir / "tmp" / "%n"),
            "ProctrackType": "proctrack/linuxproc", "TaskPlugin": "task/none",
            "JobAcctGatherType": "jobacct_gather/none",
            "AccountingStorageHost": self.bridge_ip, "AccountingStoragePass": str(run / "munge.socket"),
            "AccountingStoragePort": str(self.cfg.slurmdbd_port),
            "HealthCheckProgram": None, "HealthCheckInterval": None, "HealthCheckNodeState": None,
            **self.cfg.overrides,
        }
        text = set_keys(text, local)
        lines = []
        for line in text.splitlines():
            if line.startswith("NodeName=") and self.addr:
                expr = line.split()[0].split("=", 1)[1]
                names = _run(["scontrol", "show", "hostnames", expr], env=self._source_env()).stdout.split()
                line += " NodeAddr=" + ",".join(self.addr[n] for n in names)
            lines.append(line)
        self.conf.write_text("\n".join(lines) + "\n")
        gres = (self.source / "gres.conf").read_text()
        dev = self.dir / "dev"
        for i in range(64):
            (dev / f"nvidia{i}").touch()
        (etc / "gres.conf").write_text(gres.replace("File=/dev/", f"File={dev}/"))
        for name in ("topology.conf", "cgroup.conf"):
            shutil.copyfile(self.source / name, etc / name)
        for path in (self.dir, self.dir / "etc", run, self.dir / "plugins"):
            path.chmod(0o755)
        for name in ("slurm.conf", "gres.conf", "topology.conf", "cgroup.conf"):
            (etc / name).chmod(0o644)
        for sub in ("jobs", "tmp"):
            (self.dir / sub).chmod(0o1777)
        for node in self.nodes:
            (self.dir / "tmp" / node).mkdir(exist_ok=True)
            (self.dir / "tmp" / node).chmod(0o1777)
        dbd = etc / "slurmdbd.conf"
        dbd.write_text("\n".join([
            f"AuthInfo=socket={run / 'munge.socket'}", "AuthType=auth/munge",
            f"DbdHost={self.short}", f"DbdAddr={self.bridge_ip}", f"DbdPort={self.cfg.slurmdbd_port}",
            "SlurmUser=root", f"PidFile={run / 'slurmdbd.pid'}", f"LogFile={self.dir / 'log' / 'slurmdbd.log'}",
            f"PluginDir={self.dir / 'plugins'}", "StorageType=accounting_storage/mysql", "StorageHost=127.0.0.1",
            f"StoragePort={self.cfg.mariadb_port}", "StorageUser=slurm", "StoragePass=railforge-test",
            f"StorageLoc={self.cfg.prefix}_acct", ""]))
        dbd.chmod(0o600)

    # ---- daemons ----------------------------------------------------------------------------------------------

    def _spawn(self, name: str, cmd: list[str], log: Path, env: dict | None = None) -> subprocess.Popen:
        fh = open(log, "ab")  # noqa: SIM115 - the daemon owns it until stop()
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env or self.env, cwd=self.dir,
                                start_new_session=True)
        fh.close()
        self.procs[name] = proc
        return proc

    def _await(self, what: str, ok: Callable[[], bool], proc: subprocess.Popen | None, log: Path,
               timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not ok():
            if proc is not None and proc.poll() is not None:
                raise SlurmHarnessError(f"{what} exited ({proc.returncode}):\n{_tail(log)}")
            if time.monotonic() > deadline:
                raise SlurmHarnessError(f"{what} not up after {timeout:.0f} s:\n{_tail(log)}")
            time.sleep(0.3)

    def _munge(self) -> None:
        run = self.dir / "run"
        key = self.dir / "etc" / "munge.key"
        if not key.exists():
            _run(["mungekey", "--create", "--keyfile", str(key)])
        key.chmod(0o600)
        run.chmod(0o755)
        log = self.dir / "log" / "munged.log"
        proc = self._spawn("munged", ["munged", "-F", "--force", f"--socket={run / 'munge.socket'}",
                                      f"--key-file={key}", f"--pid-file={run / 'munged.pid'}",
                                      f"--log-file={log}", f"--seed-file={run / 'munged.seed'}"], log)
        self._await("munged", lambda: (run / "munge.socket").exists(), proc, log)

    def _mariadb(self) -> None:
        data = self.dir / "db"
        log = self.dir / "log" / "mariadb.log"
        sock = self.dir / "run" / "mariadb.sock"
        if not (data / "mysql").exists():
            _run(["mariadb-install-db", "--no-defaults", f"--datadir={data}", "--user=root",
                  "--auth-root-authentication-method=socket", "--skip-test-db"], timeout=180)
        proc = self._spawn("mariadbd", [
            "mariadbd", "--no-defaults", f"--datadir={data}", f"--socket={sock}", f"--port={self.cfg.mariadb_port}",
            "--bind-address=127.0.0.1", "--user=root", f"--pid-file={self.dir / 'run' / 'mariadb.pid'}",
            f"--log-error={log}", "--innodb-buffer-pool-size=64M", "--innodb-log-file-size=32M",
            "--innodb-lock-wait-timeout=900", "--skip-name-resolve"], log)

        def answers() -> bool:
            return sock.exists() and _run(["mariadb", f"--socket={sock}", "-e", "select 1"], check=False,
                                          env=self.env).returncode == 0
        self._await("mariadbd", answers, proc, log, timeout=120)
        _run(["mariadb", f"--socket={sock}", "-e",
              "CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'railforge-test'; "
              "GRANT ALL ON *.* TO 'slurm'@'127.0.0.1'; FLUSH PRIVILEGES;"])

    def _listening(self, port: int, host: str) -> bool:
        with socket.socket() as s:
            s.settimeout(0.5)
            return s.connect_ex((host, port)) == 0

    def _slurmdbd(self) -> None:
        log = self.dir / "log" / "slurmdbd.log"
        proc = self._spawn("slurmdbd", ["slurmdbd", "-D"], log)
        self._await("slurmdbd", lambda: self._listening(self.cfg.slurmdbd_port, self.bridge_ip), proc, log,
                    timeout=120)
        if self.cluster_name not in _run(["sacctmgr", "-n", "-P", "show", "cluster", "format=cluster"],
                                         env=self.env).stdout.split():
            _run(["sacctmgr", "-i", "add", "cluster", self.cluster_name], env=self.env)
        _run(["sh", str(self.source / "qos.sh")], env=self.env)
        if (self.source / "accounts.sh").exists():
            _run(["sh", str(self.source / "accounts.sh")], env=self.env)

    def _clean_leftovers(self) -> None:
        """Remove this prefix's namespaces and bridge left by a run that was killed, and the daemons inside them."""
        listed = _run(["ip", "netns", "list"], check=False).stdout.split("\n")
        for ns in (line.split()[0] for line in listed if line.startswith(f"{self.cfg.prefix}-")):
            for pid in _run(["ip", "netns", "pids", ns], check=False).stdout.split():
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid), signal.SIGKILL)
            _run(["ip", "netns", "del", ns], check=False)
        self._del_links()

    def _del_links(self) -> None:
        """The bridge and the host ends of this prefix's veths (a deleted namespace frees its end lazily)."""
        host_end = re.compile(rf"{re.escape(self.cfg.prefix)}h\d+")
        for line in _run(["ip", "-o", "link", "show"], check=False).stdout.splitlines():
            name = line.split(":")[1].strip().split("@")[0]
            if host_end.fullmatch(name) or name == f"{self.cfg.prefix}-br":
                _run(["ip", "link", "del", name], check=False)

    def _network(self) -> None:
        br = f"{self.cfg.prefix}-br"
        self._clean_leftovers()
        _run(["ip", "link", "add", br, "type", "bridge"])
        _run(["ip", "addr", "add", f"{self.bridge_ip}/{self.prefixlen}", "dev", br])
        _run(["ip", "link", "set", br, "up"])
        for i, node in enumerate(self.nodes if self.with_slurmd else []):
            ns = f"{self.cfg.prefix}-{node}"
            host_end, node_end = f"{self.cfg.prefix}h{i}", f"{self.cfg.prefix}n{i}"
            _run(["ip", "netns", "add", ns])
            self.namespaces.append(ns)
            _run(["ip", "link", "add", host_end, "type", "veth", "peer", "name", node_end, "netns", ns])
            _run(["ip", "link", "set", host_end, "master", br, "up"])
            _run(["ip", "-n", ns, "addr", "add", f"{self.addr[node]}/{self.prefixlen}", "dev", node_end])
            _run(["ip", "-n", ns, "link", "set", node_end, "up"])
            _run(["ip", "-n", ns, "link", "set", "lo", "up"])

    def _slurmctld(self) -> float:
        """Start slurmctld; the seconds until `scontrol ping` says UP."""
        log = self.dir / "log" / "slurmctld.log"
        started = time.monotonic()
        proc = self._spawn("slurmctld", ["slurmctld", "-D", "-i"], log)
        self._await("slurmctld", lambda: "UP" in _run(["scontrol", "ping"], env=self.env, check=False).stdout,
                    proc, log, timeout=self.cfg.start_timeout)
        return time.monotonic() - started

    def _memory_shim(self) -> Path:
        """slurmd_memory.c built for this run (a C compiler is part of the harness's tools)."""
        lib = self.dir / "run" / "slurmd_memory.so"
        if not lib.exists():
            _run(["cc", "-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-o", str(lib), str(MEMORY_SHIM), "-ldl"])
        return lib

    def node_env(self, memtotal_mib: int | None = None) -> dict:
        """The environment a slurmd (and `slurmd -C`) runs in: the configured server's CPU topology and memory."""
        hw = self.hardware
        return {**self.env, "LD_PRELOAD": str(self._memory_shim()),
                "RAILFORGE_NODE_MEMTOTAL_MIB": str(hw.memtotal_mib if memtotal_mib is None else memtotal_mib),
                "HWLOC_SYNTHETIC": f"pack:{hw.sockets} core:{hw.cores_per_socket} pu:{hw.threads_per_core}"}

    def slurmd_config(self, memtotal_mib: int | None = None) -> str:
        """What `slurmd -C` prints in a node's environment: the hardware a slurmd of this cluster reports."""
        return _run(["slurmd", "-C"], env=self.node_env(memtotal_mib)).stdout

    def _start_slurmd(self, node: str, memtotal_mib: int | None = None) -> None:
        log = self.dir / "log" / f"slurmd-{node}.out"
        self._spawn(f"slurmd:{node}", ["nsenter", f"--net=/run/netns/{self.cfg.prefix}-{node}",
                                       "slurmd", "-D", "-N", node], log, env=self.node_env(memtotal_mib))

    def restart_slurmd(self, node: str, memtotal_mib: int | None = None) -> None:
        """Stop `node`'s slurmd and start it again reporting `memtotal_mib` (default: the configured server's);
        it registers anew, and slurmctld checks the registration."""
        proc = self.procs.pop(f"slurmd:{node}")
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        self._start_slurmd(node, memtotal_mib)

    def _slurmds(self) -> None:
        for node in self.nodes:
            self._start_slurmd(node)

        def all_idle() -> bool:
            states = self.sinfo_states()
            return len(states) == len(self.nodes) and all(s.startswith("idle") for s in states.values())
        self._await(f"{len(self.nodes)} slurmd idle", all_idle, None, self.dir / "log" / "slurmctld.log",
                    timeout=self.cfg.start_timeout)

    def start(self, slurmd: bool = True) -> SlurmCluster:
        """Start everything; on any failure stop what started and raise SlurmHarnessError with the log tail.
        `slurmd=False` starts the controller side only (benchmarks: nodes stay unreachable, no namespaces)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        self.nodes = self._node_names()
        self.with_slurmd = slurmd
        try:
            self._write_configs()
            self._network()
            self._munge()
            self._mariadb()
            self._slurmdbd()
            self.slurmctld_seconds = self._slurmctld()
            if slurmd:
                self._slurmds()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """SIGTERM every daemon this harness started (slurmd first, munged last), by PID; then remove the network."""
        order = [n for n in self.procs if n.startswith("slurmd:")] + [
            n for n in ("slurmctld", "slurmdbd", "mariadbd", "munged") if n in self.procs]
        for name in order:
            proc = self.procs[name]
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.procs.clear()
        self._del_links()
        for ns in self.namespaces:
            _run(["ip", "netns", "del", ns], check=False)
        self.namespaces.clear()

    # ---- using it ---------------------------------------------------------------------------------------------

    def slurm(self, *cmd: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
        return _run(list(cmd), env=self.env, check=check, timeout=timeout)

    def submit(self, *args: str, qos: str | None = None, wrap: str = "sleep 3600", user: str | None = None,
               account: str | None = None) -> int:
        """sbatch with `args` (e.g. "-N2", "--gres=gpu:4"); returns the job id. As root under the admin account
        (the whole-cluster partition's), or as `user` (runuser) under `account` (default: the user's default)."""
        cmd = ["sbatch", "--parsable", f"--chdir={self.dir / 'jobs'}", "--output=%j.out", *args]
        if user is None:
            cmd.insert(2, f"--account={account or self.admin_account}")
        elif account is not None:
            cmd.insert(2, f"--account={account}")
        if qos:
            cmd.append(f"--qos={qos}")
        out = self.as_user(user, *cmd, "--wrap", wrap).stdout.strip()
        return int(out.split(";")[0])

    def as_user(self, user: str | None, *cmd: str, check: bool = True) -> subprocess.CompletedProcess:
        """A Slurm command as `user` (None: root), with this cluster's SLURM_CONF."""
        if user is None:
            return self.slurm(*cmd, check=check)
        return self.slurm("runuser", "-u", user, "--", "env", f"SLURM_CONF={self.conf}", *cmd, check=check)

    def squeue(self, *args: str) -> list[dict]:
        """Every job in the queue (pending and running) as a dict of SQUEUE_FIELDS; `nodes` is a list of names."""
        fmt = "|".join(SQUEUE_FIELDS.values())
        out = self.slurm("squeue", "-h", "-o", fmt, *args).stdout
        jobs = []
        for line in out.splitlines():
            row = dict(zip(SQUEUE_FIELDS, line.split("|"), strict=True))
            row["id"] = int(row["id"])
            row["nodes"] = self.hostnames(row["nodes"]) if row["nodes"] else []
            jobs.append(row)
        return jobs

    def job(self, job_id: int) -> dict | None:
        return next((j for j in self.squeue("-j", str(job_id))), None) if self._known(job_id) else None

    def _known(self, job_id: int) -> bool:
        return self.slurm("squeue", "-h", "-j", str(job_id), check=False).returncode == 0

    def sacct(self, job_id: int | None = None, fields: str = "JobID,JobName,State,NodeList,QOS,Start,End,Reason"
              ) -> list[dict]:
        """Accounting records (-X allocations, -D with the requeued ones) of one job or of all."""
        cmd = ["sacct", "-X", "-D", "-n", "-P", f"--format={fields}"]
        cmd += ["-j", str(job_id)] if job_id is not None else ["-a"]
        out = self.slurm(*cmd).stdout
        keys = fields.split(",")
        return [dict(zip(keys, line.split("|"), strict=True)) for line in out.splitlines()]

    def scontrol(self, *args: str) -> str:
        return self.slurm("scontrol", *args).stdout

    def node(self, name: str) -> dict[str, str]:
        """`scontrol show node -o` as key -> value (Reason may hold spaces: it runs to the next known key)."""
        text = self.scontrol("show", "node", "-o", name).strip()
        out: dict[str, str] = {}
        for m in re.finditer(r"(\w+(?:/\w+)?)=(.*?)(?= \w+(?:/\w+)?=|$)", text):
            out[m.group(1)] = m.group(2).strip()
        return out

    def hostnames(self, expr: str) -> list[str]:
        return self.slurm("scontrol", "show", "hostnames", expr).stdout.split()

    def sinfo_states(self) -> dict[str, str]:
        out = self.slurm("sinfo", "-h", "-N", "-o", "%N %t", check=False).stdout
        return dict(line.split() for line in out.splitlines() if line.strip())

    def wait_for(self, probe: Callable[[], T], timeout: float = 60, interval: float = 0.5, what: str = "") -> T:
        """Poll `probe` until it returns something truthy; AssertionError naming `what` and the last value."""
        deadline = time.monotonic() + timeout
        value = probe()
        while not value:
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what or probe}: last {value!r}")
            time.sleep(interval)
            value = probe()
        return value

    def cancel_all(self, timeout: float = 60) -> None:
        """scancel every job and wait until the queue is empty and every node is idle again."""
        jobs = [str(j["id"]) for j in self.squeue()]
        if jobs:
            self.slurm("scancel", *jobs, check=False)
        self.wait_for(lambda: not self.squeue(), timeout, what="an empty queue")
        self.wait_for(lambda: all(s.startswith(("idle", "drain", "down")) for s in self.sinfo_states().values()),
                      timeout, what="idle nodes")

    def reset(self, timeout: float = 60) -> None:
        """Between tests: cancel every job and return every drained or down node to service."""
        self.cancel_all(timeout)
        bad = [n for n, s in self.sinfo_states().items() if not s.startswith("idle")]
        if bad:
            self.scontrol("update", f"NodeName={','.join(bad)}", "State=RESUME")
            self.wait_for(lambda: all(s.startswith("idle") for s in self.sinfo_states().values()), timeout,
                          what="every node idle after resume")

    def log(self, name: str = "slurmctld") -> str:
        with contextlib.suppress(OSError):
            return (self.dir / "log" / f"{name}.log").read_text(errors="replace")
        return ""
