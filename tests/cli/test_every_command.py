"""Every command of the `railforge` app, found by walking the typer app (a command added later is fuzzed without
touching this file), invoked in-process with fuzzed arguments and fuzzed or corrupted input files.

What a parameter gets is read from its declaration: a Path gets the kind of file its name says (a built folder
or plan.json for CLUSTER/OLD/NEW/BUILD, the spec, a MAC list, LLDP/FRR dumps, burn-in results, credentials),
valid, mutated by `tests.helpers.hostile` (bytes, JSON shapes, markup, escapes) or replaced by a folder, a device
node or FIFO of its own, a missing file or a hostile name; numbers get any number, out-of-range ones included;
strings and URLs get hostile text. A case fails on an exception other than the CLI's own exit, status 70 or
"internal error", a traceback, an unescaped control character, a hang, or an error line that names nothing.

The run is a machine with nothing installed and no network: every subprocess start fails as a missing program
does, every connect and bind is refused, and names do not resolve. That is a state a user can be in, and it keeps
the commands that drive namespaces, BMCs, NetBox or a webhook server from touching this machine. What the
commands do past that point (a live lab, a real NetBox) is fuzzed by their own tests, not here.

RAILFORGE_CLI_FUZZ_EXAMPLES sets the cases per command (default 10: under a minute for the whole app here).
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import click
import pytest
import typer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from railforge.cli.main import app
from tests.baremetal.conftest import fill_host_macs
from tests.conftest import ROOT, run_cli
from tests.helpers.hostile import TOKENS, check_output, mutated, no_hang

EXAMPLES = int(os.environ.get("RAILFORGE_CLI_FUZZ_EXAMPLES", "10"))
TINY = ROOT / "tests" / "specs" / "tiny-roce.yaml"
SAMPLES = ROOT / "tests" / "acceptance" / "samples"
KEEP = {"su001-leaf-r0", "spine01", "spine02", "su001-gpu01"}

fuzz = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck))


def commands(group: click.Command, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], click.Command]]:
    """Every leaf command under `group`, as (words, command)."""
    subs = getattr(group, "commands", None)
    if subs is None:
        return [(path, group)]
    return [c for name in sorted(subs) for c in commands(subs[name], (*path, name))]


COMMANDS = commands(typer.main.get_command(app))


@pytest.fixture(scope="module")
def seeds(tmp_path_factory) -> dict[str, Path]:
    """One valid file or folder of every kind a command takes."""
    base = tmp_path_factory.mktemp("seeds")
    gen = base / "cluster" / "generated"
    run_cli("build", str(TINY), "--out", str(gen))
    full = json.loads((gen / "plan.json").read_bytes())
    full["devices"] = [d for d in full["devices"] if d["name"] in KEEP]
    full["links"] = [lk for lk in full["links"] if lk["a"]["device"] in KEEP and lk["b"]["device"] in KEEP]
    (gen / "plan.json").write_text(json.dumps(full))
    shutil.copy(TINY, base / "cluster" / "cluster.yaml")
    lldp = {"lldp": {"interface": [{"Ethernet0": {"chassis": {"spine01": {"id": {"type": "mac",
                                                                                   "value": "0c:42:a1:00:00:01"}}},
                                                  "port": {"id": {"type": "ifname", "value": "Ethernet0"}}}}]}}
    (base / "lldp.json").write_text(json.dumps(lldp))
    frr = base / "frr" / "spine01"
    frr.mkdir(parents=True)
    (frr / "bgp-summary.json").write_text(json.dumps({"ipv4Unicast": {"peers": {"10.0.0.1": {"state": "Established",
                                                                                           "pfxRcd": 1}}}}))
    (base / "macs.csv").write_text("switch,mac\nspine01,0c:42:a1:00:00:01\n")
    (base / "credentials.yml").write_text("username: admin\npassword: secret\n")
    (base / "token").write_text("0123456789abcdef0123456789abcdef01234567\n")
    host_macs = base / "cluster" / "host-macs.csv"
    fill_host_macs(gen / "host-macs.csv", host_macs)
    rows = host_macs.read_text().splitlines(keepends=True)
    host_macs.write_text("".join(rows[:1] + [r for r in rows[1:] if r.split(",")[0] in KEEP]))
    (base / "state").mkdir()
    (base / "state" / "state.json").write_text(json.dumps({"active": {}, "drained": {"su001-gpu01": "rail down"}}))
    results = base / "results" / "round-01" / "nccl"
    results.mkdir(parents=True)
    shutil.copy(SAMPLES / "nccl-all-reduce-tail.txt", results / "su001-gpu01.txt")
    return {"cluster": base / "cluster", "build": gen, "spec": base / "cluster" / "cluster.yaml",
            "link": full["links"][0]["id"],
            "lldp": base / "lldp.json", "frr": base / "frr", "macs": base / "macs.csv",
            "credentials": base / "credentials.yml", "token": base / "token", "results": base / "results",
            "state": base / "state", "host_macs": host_macs}


KIND_BY_NAME = {"cluster": "cluster", "build": "build", "old": "build", "new": "build", "spec": "spec", "to": "spec",
                "lldp": "lldp", "ibnetdiscover": "lldp", "frr": "frr", "macs": "macs", "host_macs": "host_macs",
                "credentials": "credentials", "bmc_credentials": "credentials", "token_file": "token",
                "results": "results", "ca_file": "token", "state_dir": "state"}
URL = "http://127.0.0.1:9"
VALID = {"server": URL, "report": URL, "netbox": URL, "listen": "127.0.0.1:9", "lab": "j30f", "switch": "spine01",
         "cable_a": "LINK", "cable_b": "LINK"}
"""Values that let a command get past its arguments: required ones, and --netbox (sot wants one of two)."""
HOSTILE = [t.decode("utf-8", "replace").replace("\x00", "") for t in TOKENS if len(t) < 100]
text = st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"), max_size=30)
hostile_text = st.sampled_from(HOSTILE) | text | st.builds("".join, st.lists(st.sampled_from(HOSTILE), max_size=4))
urls = st.sampled_from([URL, "https://127.0.0.1:9/x", "http://[::1]:9", "127.0.0.1:9", "0.0.0.0:0", "[::1]:99999",
                        "http://x y", "http://[/x]", "ftp://h", "http://h:99999", "ssh://u@h", ":", ""]) | hostile_text
numbers = st.sampled_from(["0", "-1", "1", "2", "1e999", "nan", "inf", "-inf", "99999999999999999999", "0x10",
                           "1.5", "3"]) | st.integers(-(2**40), 2**40).map(str)


def _annotation(param: click.Parameter) -> str:
    return str(getattr(getattr(param, "type_descriptor", None), "annotation", ""))


def _is_path(param: click.Parameter) -> bool:
    return "Path" in _annotation(param)


def _is_number(param: click.Parameter) -> bool:
    return any(t in _annotation(param) for t in ("int", "float"))


def _odd_path(work: Path) -> st.SearchStrategy[str]:
    """Odd paths, all under the work folder: the device node and FIFO are the test's own (a command that wrote
    to /dev/zero as root once replaced the system's node with a spreadsheet)."""
    return st.sampled_from(["", "missing/x.json", str(work), str(work / "zero"), str(work / "fifo"),
                            str(work / "[/x]"), str(work / "a\x1b[31mb"), str(work / ("n" * 300)), "-",
                            str(work / "a\nb")])


def special_files(work: Path) -> None:
    """`work/zero`, a character device like /dev/zero (a FIFO where mknod is not allowed), and `work/fifo`."""
    for name, make in (("zero", lambda p: os.mknod(p, stat.S_IFCHR | 0o666, os.makedev(1, 5))),
                       ("fifo", os.mkfifo)):
        path = work / name
        if not path.exists():
            try:
                make(path)
            except PermissionError:
                os.mkfifo(path)


def _fresh(work: Path) -> st.SearchStrategy[str]:
    return st.sampled_from(["out", "x.xlsx", "[/x]", "a b", "ü", "d/e.json"]).map(lambda n: str(work / "new" / n))


@st.composite
def mutated_copy(draw, seed: Path, work: Path, name: str) -> str:
    """A copy of `seed` with one file mutated: a folder's plan.json or spec most of the time, else any file."""
    target = work / f"m-{name}"
    shutil.rmtree(target, ignore_errors=True)
    if not seed.is_dir():
        target.write_bytes(draw(mutated(seed.read_bytes())))
        return str(target)
    shutil.copytree(seed, target)
    files = sorted(p for p in target.rglob("*") if p.is_file() and p.stat().st_size < 1_000_000)
    main = [p for p in files if p.name in ("plan.json", "cluster.yaml")]
    victim = draw(st.sampled_from(main) if main and draw(st.integers(0, 3)) else st.sampled_from(files))
    victim.write_bytes(draw(mutated(victim.read_bytes())))
    return str(target)


def valid_value(param: click.Parameter, seeds: dict[str, Path], work: Path) -> str | None:
    """A value the command accepts, or None to leave an optional parameter out."""
    if param.name in VALID:
        return seeds["link"] if VALID[param.name] == "LINK" else VALID[param.name]
    if not param.required:
        return None
    kind = KIND_BY_NAME.get(param.name)
    if _is_path(param):
        return str(seeds[kind]) if kind else str(work / "new" / param.name)
    return "1" if _is_number(param) else "x"


def hostile_value(param: click.Parameter, seeds: dict[str, Path], work: Path) -> st.SearchStrategy[str]:
    if _is_path(param):
        kind = KIND_BY_NAME.get(param.name)
        if kind in seeds:
            return st.one_of(mutated_copy(seeds[kind], work, param.name), mutated_copy(seeds[kind], work, param.name),
                             _odd_path(work), _fresh(work))
        return _odd_path(work) | _fresh(work)
    if _is_number(param):
        return numbers
    if any(w in param.name for w in ("url", "server", "netbox", "nautobot", "listen", "mirror", "report")):
        return urls
    return hostile_text


@st.composite
def invocation(draw, words: tuple[str, ...], command: click.Command, seeds: dict[str, Path], work: Path) -> list[str]:
    """The command with every parameter valid but one (or none), which gets a hostile value; flags at random."""
    params = [p for p in command.params if p.name != "help"]
    target = draw(st.sampled_from([None, *params]))
    args: list[str] = list(words)
    positional: list[str] = []
    for param in params:
        if getattr(param, "is_flag", False):
            if param is target or draw(st.booleans()):
                args.append(param.opts[0])
            continue
        value = draw(hostile_value(param, seeds, work)) if param is target else valid_value(param, seeds, work)
        if value is None:
            continue
        if param.param_type_name == "argument":
            positional.append(value)
        else:
            args += [param.opts[0], value]
    if positional:
        args += ["--", *positional]
    return args


def _no_popen(self, argv=None, *args, **kwargs):
    _no_program(argv if argv is not None else kwargs.get("args"))


def _no_program(argv=None, *args, **kwargs):
    name = argv if isinstance(argv, (str, bytes, os.PathLike)) else (argv[0] if argv else "?")
    raise FileNotFoundError(errno.ENOENT, "No such file or directory", name)


def _refused(*args, **kwargs):
    raise ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused")


def _in_use(*args, **kwargs):
    raise OSError(errno.EADDRINUSE, "Address already in use")


def _no_name(*args, **kwargs):
    raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")


@pytest.fixture
def no_tools_no_network(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The calls of this test's thread and of the threads its commands start fail as on a bare machine; threads
    that were running before (servers of other modules' session fixtures) keep the real calls."""
    before = {t.ident for t in threading.enumerate() if t is not threading.main_thread()}

    def bare(obj: object, name: str, fake) -> None:
        real = getattr(obj, name)

        def call(*args, **kwargs):
            return (real if threading.get_ident() in before else fake)(*args, **kwargs)

        monkeypatch.setattr(obj, name, call)

    bare(subprocess.Popen, "__init__", _no_popen)
    bare(os, "execvp", _no_program)
    bare(socket.socket, "connect", _refused)
    bare(socket.socket, "connect_ex", _refused)
    bare(socket.socket, "bind", _in_use)
    bare(socket, "getaddrinfo", _no_name)
    bare(socket, "gethostbyname", _no_name)
    bare(time, "sleep", lambda seconds: None)
    monkeypatch.chdir(tmp_path)
    return tmp_path


ERROR_LINE = re.compile(r"^\s*(?:error|railforge: )", re.IGNORECASE)


def names_something(line: str, args: list[str]) -> bool:
    """An error line names what is wrong: an argument it was given (as the line's subject, `ARG: ...`, or
    anywhere when it is three characters or more), an option, a file, a field or a value."""
    body = ERROR_LINE.sub("", line).strip()
    if len(body) < 12:
        return False
    if any(body.startswith(f"{a}:") or body.startswith(f"{a!r}") for a in args if a):
        return True
    given = [a for a in args if len(a) >= 3] + [Path(a).name for a in args if len(Path(a).name) >= 3]
    if any(g in body or repr(g)[1:-1] in body for g in given):
        return True
    return bool(re.search(r"--[a-z]|['\"`]|[A-Za-z_][\w.\-\[\]]*:\s|\d|/|\b[\w-]+\.[A-Za-z]\w*\b", body))


def judge(args: list[str], target: typer.Typer = app) -> str:
    with no_hang():
        result = CliRunner().invoke(target, args, env={"COLUMNS": "4000", "RAILFORGE_DEBUG": ""})
    text = result.stdout + result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        import traceback

        raise AssertionError(f"internal error for {args!r}: "
                             + "".join(traceback.format_exception(result.exception))[-3000:])
    assert result.exit_code != 70 and "internal error" not in text, (args, text[-2000:])
    check_output(text)
    for line in text.splitlines():
        if ERROR_LINE.match(line):
            assert names_something(line, args), f"error line names nothing: {line!r} for {args!r}"
    return text


@pytest.mark.parametrize(("words", "command"), COMMANDS, ids=[" ".join(w) for w, _ in COMMANDS])
def test_every_command_survives_hostile_input(words, command, seeds, no_tools_no_network) -> None:
    work = no_tools_no_network

    @fuzz
    @given(invocation(words, command, seeds, work))
    def case(args: list[str]) -> None:
        work.mkdir(exist_ok=True)  # `build --out WORK` replaces the folder this process stands in
        os.chdir(work)
        special_files(work)
        judge(args)

    case()


FOUND = {
    "usage error echoes a bidi override": (["lab", "swap", "{cluster}", "a", "b", "\u202e"], "(\\u202e)"),
    "a path component over 255 bytes": (["lab", "up", "--out", "{work}/" + "n" * 300, "--", "{cluster}"],
                                        "is 300 bytes; a file or folder name is at most 255 bytes"),
    "an escape in a path": (["acceptance", "analyze", "--out", "{work}/a\x1b[31mb", "--", "{cluster}", "{results}"],
                            "holds the control character '\\x1b'; a path is printable text"),
    "a file where a folder is expected": (["acceptance", "analyze", "--acceptance", "{work}/empty", "--",
                                           "{cluster}", "{results}"],
                                          "{work}/empty/plan.json: cannot read: Not a directory"),
    "a state folder that is a file": (["health", "serve", "--state-dir", "{work}/empty", "--", "{cluster}"],
                                      "--state-dir {work}/empty: cannot use it: File exists"),
    "a device as an output file": (["diff", "{build}", "{build}", "--work-order", "{work}/zero"],
                                   "{work}/zero: cannot read: it is not a regular file (a FIFO, device or socket), "
                                   "and no command writes over one (--work-order)"),
    "a hand-edited health state file": (["health", "serve", "--state-dir", "{work}/state", "--", "{cluster}"],
                                        "not a health state file: active: 3: input should be a valid dictionary"),
    "an infinite number": (["health", "serve", "--rate", "1e999", "--", "{cluster}"],
                           "--rate inf: want a finite number"),
    "a program that is not installed": (["lab", "down", "--", "{cluster}"], "ip: not found; the lab needs iproute2"),
    "a URL urllib cannot split": (["boot", "files", "--server", "http://[/x]", "--report", URL, "--", "{cluster}"],
                                  "--server 'http://[/x]': want an HTTP(S) URL"),
    "an escape in a free-text option": (["boot", "files", "--server", URL, "--report", URL, "--credentials",
                                         "\x1b[31m", "--", "{cluster}"], "--credentials \\x1b[31m: cannot read"),
    "ibnetdiscover output without a node": (["verify", "cabling", "--ibnetdiscover", "{work}/empty", "--", "{cluster}"],
                                            "{work}/empty: no Switch or Ca blocks found"),
    "an empty path, which typer reads as the current folder": (["verify", "cabling", "--lldp", "", "--",
                                                               "{cluster}"],
                                                              "Invalid value for '--lldp': an empty path"),
    "a YAML file nested 3,000 deep": (["bmc", "power", "--bmc-credentials", "{work}/deep.yml", "--", "{cluster}"],
                                      "--bmc-credentials {work}/deep.yml: cannot read ("),
    "a format field other than {bmc} and {host}": (["bmc", "inventory", "--url", "https://{bmc}{x}", "--",
                                                    "{cluster}"], "only {bmc} and {host} may stand in braces"),
}


@pytest.mark.parametrize("case", list(FOUND))
def test_every_class_the_fuzz_found_is_a_clean_error(case: str, seeds, no_tools_no_network) -> None:
    """The minimal case of each class of internal error or unescaped output the walk found, with its message."""
    work = no_tools_no_network
    (work / "state").mkdir()
    (work / "state" / "state.json").write_text('{"active": 3}')
    (work / "empty").write_text("")
    (work / "deep.yml").write_text("[" * 3000)
    args, expected = FOUND[case]
    special_files(work)
    fill = {"{cluster}": str(seeds["cluster"]), "{results}": str(seeds["results"]), "{work}": str(work),
            "{build}": str(seeds["build"])}
    for key, value in fill.items():
        args = [a.replace(key, value) for a in args]
        expected = expected.replace(key, value)
    text = judge(args)
    assert expected in " ".join(text.split()), text[-1500:]


def test_a_deleted_current_folder_is_one_line(tmp_path: Path) -> None:
    """`railforge build SPEC --out .` replaces the folder the shell stands in; the next command there is told so."""
    gone = tmp_path / "gone"
    gone.mkdir()
    script = f"cd {gone} && rmdir {gone} && exec {sys.executable} -m railforge diff a b"
    proc = subprocess.run(["sh", "-c", script], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == ("railforge: the current folder no longer exists (a build with --out . replaces it): cd to "
                           "a folder that exists\n")


def test_the_walk_finds_every_command() -> None:
    """The walk reaches the nested commands as well as the top-level ones (a walk that stopped at the first
    level would fuzz `lab`, not `lab up`)."""
    names = {" ".join(w) for w, _ in COMMANDS}
    assert {"build", "diff", "ztp", "verify cabling", "lab up", "health serve", "acceptance analyze"} <= names
    assert len(names) == len(COMMANDS) >= 25


def test_the_judge_catches_a_crash_an_exit_70_and_a_nameless_error() -> None:
    """The judge is not vacuous: a crash, status 70 and an error line that names nothing each fail it; a line that
    names its option and value passes."""
    probe = typer.Typer()

    @probe.command()
    def run(what: str) -> None:
        if what == "crash":
            raise KeyError("devices")
        if what == "named":
            typer.echo("error: --out: 'x' is not a folder", err=True)
            raise typer.Exit(2)
        typer.echo("error: failed" if what == "nameless" else "railforge: internal error: x", err=True)
        raise typer.Exit(2 if what == "nameless" else 70)

    for what in ("crash", "nameless", "seventy"):
        with pytest.raises(AssertionError):
            judge([what], probe)
    judge(["named"], probe)
