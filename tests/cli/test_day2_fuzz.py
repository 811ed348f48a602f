"""Property-based fuzzing of every file and argument a day-2 tool takes: `diff`'s plans, `ztp --macs` and
`--server`, `verify cabling --lldp` (both formats) and `--ibnetdiscover`, `verify fabric --frr`, `build --out`.

Each surface gets FUZZ_EXAMPLES cases (500 unless RAILFORGE_FUZZ_EXAMPLES says otherwise), derandomized so CI
runs the same cases every time. Inputs are a valid seed mutated at the byte level (markup, escapes, invalid
UTF-8, deep nesting, huge numbers, truncation) or at the JSON level (any value or key replaced by arbitrary JSON).
A case fails on an internal error (any exception but the CLI's exit), an exit status outside the documented
set, a hang (SIGALRM after 20 s) or an unescaped control character in what was printed. The CLI runs in-process
(typer's CliRunner), so a case costs milliseconds rather than an interpreter start.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from railforge.cli import show
from railforge.cli.args import ArgumentError, check_path, check_url
from railforge.formats.output import Output, OutputError
from railforge.plan.io import read_plan
from railforge.ztp.macs import TEMPLATE
from tests.conftest import ROOT, run_cli
from tests.helpers.hostile import check_output, invoke, json_mutation, markup_mutation, mutated, typed_mutation
from tests.verify.test_verify import ibnetdiscover_text, sonic_table

FUZZ_EXAMPLES = int(os.environ.get("RAILFORGE_FUZZ_EXAMPLES", "500"))
TINY = ROOT / "tests" / "specs" / "tiny-roce.yaml"
IB = ROOT / "tests" / "specs" / "configs-ib.yaml"
LEAF = "su001-leaf-r0"

fuzz = settings(max_examples=FUZZ_EXAMPLES, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])


def small_plan(full: dict) -> dict:
    """The seed for diff: a valid plan cut down to one leaf, one spine and one node and the cables among them."""
    keep = {LEAF, "spine01", "spine02", "su001-gpu01"}
    out = dict(full)
    out["devices"] = [d for d in full["devices"] if d["name"] in keep]
    out["links"] = [lk for lk in full["links"] if lk["a"]["device"] in keep and lk["b"]["device"] in keep]
    return out


@pytest.fixture(scope="module")
def roce(tmp_path_factory) -> Path:
    """A build of tiny-roce whose plan.json is cut to `small_plan`: every case reads it, so it is kept small."""
    out = tmp_path_factory.mktemp("roce") / "generated"
    run_cli("build", str(TINY), "--out", str(out))
    (out / "plan.json").write_text(json.dumps(small_plan(json.loads((out / "plan.json").read_bytes()))))
    read_plan(out / "plan.json")
    return out


@pytest.fixture(scope="module")
def ib(tmp_path_factory) -> Path:
    """configs-ib's plan cut to one leaf, its nodes and the spines it reaches."""
    out = tmp_path_factory.mktemp("ib") / "generated"
    run_cli("build", str(IB), "--out", str(out), "--only", "plan")
    full = json.loads((out / "plan.json").read_bytes())
    near = {e for lk in full["links"] for e in (lk["a"]["device"], lk["b"]["device"])
            if LEAF in (lk["a"]["device"], lk["b"]["device"])}
    cut = dict(full, devices=[d for d in full["devices"] if d["name"] in near])
    cut["links"] = [lk for lk in full["links"] if lk["a"]["device"] in near and lk["b"]["device"] in near]
    (out / "plan.json").write_text(json.dumps(cut))
    read_plan(out / "plan.json")
    return out


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


def _lldp_seed(roce: Path) -> bytes:
    """What su001-leaf-r0's lldpd reports for its first cables; half the ports carry no description, so a mutated
    port id is judged (a description would otherwise name the planned port)."""
    plan = read_plan(roce / "plan.json")
    interfaces = []
    for lk in plan.links:
        if LEAF in (lk.a.device, lk.b.device):
            mine, far = (lk.a, lk.b) if lk.a.device == LEAF else (lk.b, lk.a)
            port = {"id": {"type": "ifname", "value": far.port}, "auto-negotiation": {"current": "400GbaseCR8"}}
            if len(interfaces) % 2:
                port["descr"] = far.port
            chassis = {far.device: {"id": {"type": "mac", "value": "0c:42:a1:00:00:01"}}}
            interfaces.append({mine.port: {"chassis": chassis, "port": port}})
    return json.dumps({"lldp": {"interface": interfaces[:4]}}).encode()


@pytest.fixture(scope="module")
def plans(roce: Path, work: Path) -> tuple[Path, bytes]:
    seed = (roce / "plan.json").read_bytes()
    old = work / "old"
    old.mkdir()
    (old / "plan.json").write_bytes(seed)
    read_plan(old / "plan.json")
    return old, seed


def test_fuzz_diff_plans(plans: tuple[Path, bytes], work: Path) -> None:
    old, seed = plans

    @fuzz
    @given(mutated(seed))
    def case(data: bytes) -> None:
        new = work / "new.json"
        new.write_bytes(data)
        invoke("diff", str(old), str(new), "--work-order", str(work / "wo.xlsx"), "--details", "3")

    case()


def test_fuzz_ztp_macs(roce: Path, work: Path) -> None:
    rows = (roce / TEMPLATE).read_text().splitlines()
    filled = [rows[0]] + [r.replace(",,,,", f",0c:42:a1:00:00:0{i},,SN{i},", 1) for i, r in enumerate(rows[1:4], 1)]
    seed = ("\n".join(filled) + "\n").encode()

    @fuzz
    @given(mutated(seed))
    def case(data: bytes) -> None:
        f = work / "macs.csv"
        f.write_bytes(data)
        invoke("ztp", str(TINY), "--out", str(roce), "--server", "http://10.0.0.1:8080", "--macs", str(f),
               codes=(0, 2))

    case()


urls = st.one_of(
    st.text(max_size=40),
    st.builds(lambda scheme, host, port, path: f"{scheme}://{host}{port}{path}",
              st.sampled_from(["http", "https", "ftp", "HTTP", "", "javascript"]),
              st.text(max_size=15) | st.sampled_from(["10.0.0.1", "[::1]", "ztp.example", "a b", "[/x]"]),
              st.sampled_from(["", ":8080", ":0", ":99999", ":-1", ":x", ":65535"]) | st.text(max_size=6),
              st.text(max_size=15) | st.sampled_from(["/", "/ztp", "/\n", "/\x1b[31m", "?q", "#f", "/$(x)"])))


good_urls = st.builds(lambda scheme, host, port, path: f"{scheme}://{host}{port}{path}",
                      st.sampled_from(["http", "https"]),
                      st.sampled_from(["10.0.0.1", "[::1]", "[2001:db8::2]", "ztp.example", "a-b.c"]),
                      st.sampled_from(["", ":1", ":8080", ":65535"]),
                      st.text(st.sampled_from("abcXYZ019-._~/%:@!&()*+,;="), max_size=20).map(lambda p: "/" + p))


def test_fuzz_server_url(roce: Path) -> None:
    """Every URL: refused at the door through the CLI (exit 2, clean message), or accepted only when it is safe
    to write into Kea's configuration and the ZTP scripts; 50 accepted ones are written end to end."""
    @fuzz
    @given(urls)
    def case(url: str) -> None:
        try:
            good = check_url(url, "--server")
        except ArgumentError:
            good = None
        if good is None:
            invoke("ztp", str(TINY), "--out", str(roce), "--server", url, codes=(2,))
        else:
            assert all(c.isprintable() and not c.isspace() for c in good)
            assert not set(good) & set("\"'`$\\<>{}|^")
            assert urlsplit(good).hostname and 0 < (urlsplit(good).port or 80) < 65536

    @settings(fuzz, max_examples=min(50, FUZZ_EXAMPLES))
    @given(good_urls)
    def accepted(url: str) -> None:
        good = check_url(url, "--server")
        invoke("ztp", str(TINY), "--out", str(roce), "--server", url, codes=(0,))
        assert f'"{good}/ztp/{LEAF}/sonic-finish.sh"' in (roce / "ztp" / LEAF / "ztp.json").read_text()

    case()
    accepted()


def test_fuzz_lldp_json(roce: Path, work: Path) -> None:
    seed = _lldp_seed(roce)
    invoke("verify", "cabling", str(TINY), "--out", str(roce), "--lldp", str(_put(work / f"{LEAF}.json", seed)))

    @fuzz
    @given(mutated(seed))
    def case(data: bytes) -> None:
        invoke("verify", "cabling", str(TINY), "--out", str(roce), "--lldp", str(_put(work / f"{LEAF}.json", data)))

    case()


def test_fuzz_lldp_sonic_table(roce: Path, work: Path) -> None:
    seed = sonic_table([("Ethernet0", "spine01", "Ethernet0", "Ethernet0"),
                        ("Ethernet4", "spine02", "Ethernet0", "Ethernet0")]).encode()

    @fuzz
    @given(mutated(seed))
    def case(data: bytes) -> None:
        invoke("verify", "cabling", str(TINY), "--out", str(roce), "--lldp", str(_put(work / f"{LEAF}.txt", data)))

    case()


def test_fuzz_ibnetdiscover(ib: Path, work: Path) -> None:
    plan = read_plan(ib / "plan.json")
    compute = [lk for lk in plan.links if lk.fabric == "compute"]
    seed = ibnetdiscover_text(plan, compute, {}).encode()

    @fuzz
    @given(mutated(seed))
    def case(data: bytes) -> None:
        invoke("verify", "cabling", str(IB), "--out", str(ib), "--ibnetdiscover", str(_put(work / "ibnet.txt", data)))

    case()


def test_fuzz_frr_dumps(roce: Path, work: Path) -> None:
    bgp = json.dumps({"ipv4Unicast": {"as": 65100, "peers": {"Ethernet0": {"state": "Established", "remoteAs": 65001},
                                                             "10.0.0.1": {"state": "Idle", "remoteAs": 65002}}}})
    routes = json.dumps({"10.1.0.0/24": [{"protocol": "bgp", "selected": True, "nexthops": [
        {"interfaceName": "Ethernet0", "fib": True}, {"interfaceName": "Ethernet4", "active": True}]}]})
    which = st.sampled_from(["bgp-summary.json", "ip-route.json", "lldp.json"])
    seeds = {"bgp-summary.json": bgp.encode(), "ip-route.json": routes.encode(), "lldp.json": _lldp_seed(roce)}

    @fuzz
    @given(st.data())
    def case(data: st.DataObject) -> None:
        name = data.draw(which)
        frr = work / "frr"
        for f, seed in seeds.items():
            _put(frr / "spine01" / f, data.draw(mutated(seed)) if f == name else seed)
        invoke("verify", "fabric", str(TINY), "--out", str(roce), "--frr", str(frr))

    case()


def test_fuzz_tools_over_hand_edited_plans(roce: Path, work: Path) -> None:
    """A plan.json changed by hand (any value, or a value of the same type, so it can pass the model) under ztp and
    verify: refused with the place of the bad value, or used without an internal error."""
    seed = json.loads((roce / "plan.json").read_bytes())
    gen = work / "hand-edited"
    shutil.copytree(roce, gen)
    frr = _put(work / "frr-plain" / "spine01" / "bgp-summary.json", b'{"ipv4Unicast": {"as": 1, "peers": {}}}').parent
    _put(frr / "ip-route.json", b"{}")
    lldp = _put(work / "lldp-plain" / f"{LEAF}.json", _lldp_seed(roce))

    @settings(fuzz, max_examples=min(200, FUZZ_EXAMPLES))
    @given(st.one_of(typed_mutation(seed), json_mutation(seed), markup_mutation(seed)),
           st.sampled_from(["ztp", "fabric", "cabling"]))
    def case(data: bytes, tool: str) -> None:
        (gen / "plan.json").write_bytes(data)
        if tool == "ztp":
            invoke("ztp", str(TINY), "--out", str(gen), "--server", "http://10.0.0.1", codes=(0, 2))
        elif tool == "fabric":
            invoke("verify", "fabric", str(TINY), "--out", str(gen), "--frr", str(frr.parent))
        else:
            invoke("verify", "cabling", str(TINY), "--out", str(gen), "--lldp", str(lldp))

    case()


names = st.text(st.characters(codec="utf-8", exclude_characters="/"), min_size=1, max_size=300) | st.sampled_from(
    ["out[/x]", "o\x1b[31m", "a" * 256, "x\ny", ".", "..", "[bold]", "\u202eevil"])


def test_fuzz_build_out(work: Path) -> None:
    """The door and the atomic output for any --out name: either refused with ArgumentError/OutputError, or
    created, committed and named in a message without control characters."""
    base = work / "outs"
    base.mkdir()

    @fuzz
    @given(names)
    def case(name: str) -> None:
        target = base / name
        try:
            check_path(target, "--out")
            out = Output(target)
        except (ArgumentError, OutputError) as exc:
            check_output(show.plain(str(exc), newlines=True))
            return
        out.write_text("plan.json", "{}\n")
        out.commit()
        assert (out.target / "plan.json").read_text() == "{}\n"
        shutil.rmtree(out.target)

    case()


def _put(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def test_the_check_catches_a_crash_a_hang_and_an_escape(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fuzz's judge is not vacuous: an internal error, a raw escape in the output and a hang all fail a case."""
    import sys
    import time

    import typer

    from railforge.change import cli as change_cli
    from tests.helpers import hostile

    def crash(path: Path) -> None:
        raise KeyError("boom")

    monkeypatch.setattr(change_cli, "read_side", crash)
    with pytest.raises(AssertionError, match="(?s)internal error: .*KeyError: 'boom'"):
        invoke("diff", "a", "b")

    def escape(path: Path) -> None:
        sys.stdout.write("name \x1b[31mred\n")  # as rich writes: straight to the stream (click.echo strips ANSI)
        raise typer.Exit(2)

    monkeypatch.setattr(change_cli, "read_side", escape)
    with pytest.raises(AssertionError, match="unescaped '\\\\x1b'"):
        invoke("diff", "a", "b")

    monkeypatch.setattr(change_cli, "read_side", lambda path: time.sleep(30))
    monkeypatch.setattr(hostile, "HANG_S", 1)
    with pytest.raises(AssertionError, match="(?s)TimeoutError: hung for more than 1 s"):
        invoke("diff", "a", "b")
