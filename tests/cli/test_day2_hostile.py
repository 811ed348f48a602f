"""Issue 30's minimal reproducers, one per class, each with the message it must now give: markup and escapes in
data, encodings and shapes, hand-edited plan.json, files that are not files, sizes, URLs, leftovers of killed
builds, workers outliving their parent, the umask, a full disk during diff."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pydantic import BaseModel, TypeAdapter

from railforge.cli import show
from railforge.cli.args import ArgumentError, check_path, check_url
from railforge.cli.parallel import die_with_parent
from railforge.formats.output import STAGE_MARK, sweep_stale_stages
from railforge.inputs import InputError, Name, check_json, load_json, parse_json, read_bytes
from railforge.plan.io import read_plan
from tests.conftest import ROOT, require_tool, run_cli
from tests.helpers.hostile import invoke, one_line, write
from tests.verify.test_verify import ibnetdiscover_text, sonic_table

TINY = ROOT / "tests" / "specs" / "tiny-roce.yaml"
IB = ROOT / "tests" / "specs" / "configs-ib.yaml"
LEAF = "su001-leaf-r0"


@pytest.fixture(scope="module")
def roce(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("roce") / "generated"
    run_cli("build", str(TINY), "--out", str(out))
    return out


@pytest.fixture(scope="module")
def ib(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("ib") / "generated"
    run_cli("build", str(IB), "--out", str(out))
    return out


def lldpcli(sysname: str, port: str = "Ethernet0", local: str = "Ethernet0") -> bytes:
    return json.dumps({"lldp": {"interface": {local: {"chassis": {sysname: {"id": {"value": "x"}}},
                                                      "port": {"id": {"value": port}}}}}}).encode()


def plan_data(folder: Path) -> dict:
    return json.loads((folder / "plan.json").read_bytes())


def save_plan(path: Path, data: dict) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "plan.json").write_text(json.dumps(data))
    return path


# --- markup and terminal escapes in data ---

def test_markup_in_lldp_port_and_sysname_is_printed_as_text(roce: Path, tmp_path: Path) -> None:
    f = write(tmp_path / f"{LEAF}.json", lldpcli("spine01", port="[/x]"))
    code, text = invoke("verify", "cabling", str(TINY), "--out", str(roce), "--lldp", str(f))
    assert code == 1 and "[/x]" in text
    f = write(tmp_path / f"{LEAF}.json", lldpcli("evil[/x]\x1b[31m"))
    code, text = invoke("verify", "cabling", str(TINY), "--out", str(roce), "--lldp", str(f))
    assert code == 2
    assert ("lldp.interface[0].Ethernet0.chassis.'evil[/x]\\x1b[31m' (the key): 'evil[/x]\\x1b[31m': holds the "
            "control character '\\x1b'") in one_line(text), text


def test_markup_in_hca_description_is_printed_as_text(ib: Path, tmp_path: Path) -> None:
    plan = read_plan(ib / "plan.json")
    text = ibnetdiscover_text(plan, [lk for lk in plan.links if lk.fabric == "compute"], {})
    f = write(tmp_path / "ibnet.txt", (text + '\nCa\t1 "H-00000000000000aa"\t\t# "bad[/x] host\x1b[2J"\n').encode())
    code, out = invoke("verify", "cabling", str(IB), "--out", str(ib), "--ibnetdiscover", str(f))
    assert "'bad[/x] host\\x1b[2J' is not a planned device" in out


def test_markup_in_frr_peer_key_is_printed_as_text(roce: Path, tmp_path: Path) -> None:
    write(tmp_path / "spine01" / "bgp-summary.json",
          json.dumps({"ipv4Unicast": {"as": 1, "peers": {"10.9.9.9[/x]": {"state": "Idle"}}}}).encode())
    write(tmp_path / "spine01" / "ip-route.json", b"{}")
    code, text = invoke("verify", "fabric", str(TINY), "--out", str(roce), "--frr", str(tmp_path))
    assert code == 1 and "10.9.9.9[/x]" in one_line(text)


def test_build_into_a_folder_named_like_markup_exits_0(tmp_path: Path) -> None:
    out = tmp_path / "out[/x]"
    code, text = invoke("build", str(TINY), "--out", str(out), codes=(0,))
    assert re.search(rf"wrote \d+ files to {re.escape(str(out))}", text) and (out / "plan.json").is_file()


def test_diff_work_order_named_like_markup_exits_0(roce: Path, tmp_path: Path) -> None:
    (tmp_path / "x[").mkdir()
    wo = tmp_path / "x[/x].xlsx"
    code, text = invoke("diff", str(roce), str(roce), "--work-order", str(wo), codes=(0,))
    assert wo.is_file() and f"work order: {wo}" in text


def test_ztp_out_named_like_markup_exits_0(roce: Path, tmp_path: Path) -> None:
    gen = tmp_path / "gen[/x]"
    shutil.copytree(roce, gen)
    code, text = invoke("ztp", str(TINY), "--out", str(gen), "--server", "http://10.0.0.1:8080", codes=(0,))
    assert f"files to {gen}/ztp" in text


def test_escapes_in_paths_are_shown_escaped() -> None:
    code, text = invoke("diff", "a\x1b[2Jb", "c", codes=(2,))
    assert "error OLD 'a\\x1b[2Jb': holds the control character '\\x1b'; a path is printable text" in text


def test_show_escapes_control_and_bidi_characters() -> None:
    assert show.plain("a\x1bb\rc\u202ed\x7f") == "a\\x1bb\\rc\\u202ed\\x7f"
    assert show.plain("one\ntwo", newlines=True) == "one\ntwo"
    assert show.plain("[/x] ok") == "[/x] ok"


# --- encodings, shapes, depth, big integers ---

@pytest.mark.parametrize(("data", "message"), [
    (b'{"lldp": \xff}', "not UTF-8 text: byte 0xff at offset 9 cannot be decoded"),
    (b'{"lldp": {"interface": [1]}}', "not lldpcli JSON (`lldpcli -f json show neighbors details`): "
                                      "lldp.interface[0]: 1: input should be a valid dictionary"),
    (b'{"lldp": {"interface": {"Ethernet0": {"port": {"id": {"value": 5}}}}}}',
     "lldp.interface[0].Ethernet0.port.id.value: 5: input should be a valid string"),
    (b'{"lldp": ' + b"[" * 40 + b"]" * 40 + b"}", "JSON nested deeper than 32 levels"),
    (b'{"lldp": ' + b"[" * 5000 + b"]" * 5000 + b"}", "nested deeper than 32 levels"),
    (b'{"lldp": ' + b"9" * 5000 + b"}", "a number too large"),
])
def test_lldp_encodings_and_shapes(roce: Path, tmp_path: Path, data: bytes, message: str) -> None:
    f = write(tmp_path / f"{LEAF}.json", data)
    code, text = invoke("verify", "cabling", str(TINY), "--out", str(roce), "--lldp", str(f), codes=(2,))
    assert message in one_line(text), text


def test_sonic_table_with_control_characters(roce: Path, tmp_path: Path) -> None:
    table = sonic_table([("Ethernet0", "spine\x1b[31m01", "Ethernet0", "x")])
    f = write(tmp_path / f"{LEAF}.txt", table.encode())
    code, text = invoke("verify", "cabling", str(TINY), "--out", str(roce), "--lldp", str(f), codes=(2,))
    assert f"{f}:4: not an LLDP row: sysname: 'spine\\x1b[31m01': holds the control character '\\x1b'" in one_line(text)


def test_ibnetdiscover_not_utf8_and_long_lines(ib: Path, tmp_path: Path) -> None:
    f = write(tmp_path / "ibnet.txt", b"Switch 36 \"S-1\" # \"x\xe9\"\n")
    code, text = invoke("verify", "cabling", str(IB), "--out", str(ib), "--ibnetdiscover", str(f), codes=(2,))
    assert f"{f}:1: not UTF-8 text: byte 0xe9 at offset 20 cannot be decoded" in text
    f = write(tmp_path / "long.txt", b"x" * 20_000_000 + b"\n")
    code, text = invoke("verify", "cabling", str(IB), "--out", str(ib), "--ibnetdiscover", str(f), codes=(2,))
    assert "line 1: 20,000,000 characters; an ibnetdiscover line is at most 4,096" in text and len(text) < 1000


@pytest.mark.parametrize(("bgp", "message"), [
    (b'{"ipv4Unicast": {"peers": []}}', "ipv4Unicast.peers: []: input should be a valid dictionary"),
    (b'{"ipv4Unicast": {"peers": {"p": {"state": 5}}}}',
     "ipv4Unicast.peers.p.state: 5: input should be a valid string"),
    (b'{"ipv4Unicast": {"as": ' + b"1" * 5000 + b', "peers": {}}}', "a number too large"),
    (b'{"a": ' + b"[" * 100 + b"]" * 100 + b"}", "JSON nested deeper than 32 levels"),
    (b'\xfe{}', "not UTF-8 text: byte 0xfe at offset 0"),
])
def test_frr_dump_shapes(roce: Path, tmp_path: Path, bgp: bytes, message: str) -> None:
    write(tmp_path / "spine01" / "bgp-summary.json", bgp)
    write(tmp_path / "spine01" / "ip-route.json", b'{"10.0.0.0/24": [{"protocol": "bgp", "selected": true, '
                                                   b'"nexthops": [{"interfaceName": 7}]}]}')
    code, text = invoke("verify", "fabric", str(TINY), "--out", str(roce), "--frr", str(tmp_path), codes=(1,))
    flat = one_line(text)
    assert message in flat, flat
    assert "nexthops[0].interfaceName: 7: input should be a valid string" in flat


# --- hand-edited or foreign plan.json ---

def test_plan_with_wrong_types_is_refused_by_diff(roce: Path, tmp_path: Path) -> None:
    data = plan_data(roce)
    data["devices"][0]["u"] = "3"
    data["links"][0]["speed_mbps"] = None
    data["devices"][1]["extra"] = 1
    bad = save_plan(tmp_path / "bad", data)
    code, text = invoke("diff", str(roce), str(bad), codes=(2,))
    flat = one_line(text)
    assert f"{bad}/plan.json: not a valid railforge plan: devices[0].u: '3': input should be a valid integer" in flat
    assert "links[0].speed_mbps: None: input should be a valid integer" in flat
    assert "devices[1].extra is not a known field" in flat


def test_plan_with_a_link_to_a_missing_device_is_refused(roce: Path, tmp_path: Path) -> None:
    data = plan_data(roce)
    data["links"][0]["b"]["device"] = "ghost"
    bad = save_plan(tmp_path / "bad", data)
    code, text = invoke("diff", str(roce), str(bad), codes=(2,))
    assert (f"{bad}/plan.json: links[0].b: link 'CMP-000001' ends on 'ghost', which is not a device of the plan"
            in one_line(text))
    data = plan_data(roce)
    data["links"][0]["b"]["port"] = "Ethernet999"
    save_plan(bad, data)
    code, text = invoke("diff", str(roce), str(bad), codes=(2,))
    assert "ends on port 'Ethernet999', which 'su001-leaf-r0' does not have" in one_line(text)


def test_plan_with_a_bad_address_is_refused(roce: Path, tmp_path: Path) -> None:
    data = plan_data(roce)
    data["devices"][0]["loopback"] = "10.0.0.300/32"
    bad = save_plan(tmp_path / "bad", data)
    code, text = invoke("verify", "fabric", str(TINY), "--out", str(bad), "--frr", str(tmp_path), codes=(2,))
    assert f"{bad}/plan.json: devices[0].loopback: '10.0.0.300/32' is not an IP address or prefix" in text


@pytest.mark.parametrize(("where", "name"), [("cluster", "c[/x]"), ("device", "leaf[/x]"), ("device", "x\x1b[2J")])
def test_plan_with_markup_or_escapes_in_names_is_refused(roce: Path, tmp_path: Path, where: str, name: str) -> None:
    data = plan_data(roce)
    if where == "cluster":
        data["cluster"]["name"] = name
    else:
        data["devices"][0]["name"] = name
    bad = save_plan(tmp_path / "bad", data)
    for args in (["diff", str(roce), str(bad)], ["ztp", str(TINY), "--out", str(bad), "--server", "http://10.0.0.1"]):
        code, text = invoke(*args, codes=(2,))
        field = "cluster.name" if where == "cluster" else "devices[0].name"
        assert f"{bad}/plan.json: {field} {name!r} is not a {where} name" in text


def test_plan_with_a_path_as_device_name_is_refused(roce: Path, tmp_path: Path) -> None:
    data = plan_data(roce)
    data["devices"][0]["name"] = "../../etc"
    bad = save_plan(tmp_path / "bad", data)
    with pytest.raises(InputError, match=r"devices\[0\].name '../../etc' is not a device name"):
        read_plan(bad / "plan.json")


def test_build_over_a_hand_edited_plan_is_refused_cleanly(roce: Path, tmp_path: Path) -> None:
    data = plan_data(roce)
    data["links"][0]["a"]["device"] = "ghost"
    out = save_plan(tmp_path / "out", data)
    code, text = invoke("build", str(TINY), "--out", str(out), codes=(1,))
    assert "holds a plan this build cannot compare with" in one_line(text)
    assert "which is not a device of the plan); pass --allow-renumber to replace it anyway" in one_line(text)


def test_plan_of_another_schema_version(roce: Path, tmp_path: Path) -> None:
    data = plan_data(roce)
    data["schema_version"] = 99
    bad = save_plan(tmp_path / "bad", data)
    code, text = invoke("verify", "cabling", str(TINY), "--out", str(bad), "--lldp", str(bad), codes=(2,))
    assert "plan schema_version 99; this railforge reads schema_version 2" in text


# --- files that are not files ---

@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "folder"])
@pytest.mark.parametrize("surface", ["macs", "lldp", "ibnetdiscover", "frr"])
def test_files_that_are_not_files(roce: Path, ib: Path, tmp_path: Path, kind: str, surface: str) -> None:
    target = tmp_path / "input"
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "dev-zero":
        target.symlink_to("/dev/zero")
    else:
        target.mkdir()
    spec, gen = (IB, ib) if surface == "ibnetdiscover" else (TINY, roce)
    if surface == "frr":
        (tmp_path / "frr" / "spine01").mkdir(parents=True)
        for name in ("bgp-summary.json", "ip-route.json"):
            p = tmp_path / "frr" / "spine01" / name
            os.mkfifo(p) if kind == "fifo" else p.symlink_to("/dev/zero") if kind == "dev-zero" else p.mkdir()
        args = ["verify", "fabric", str(spec), "--out", str(gen), "--frr", str(tmp_path / "frr")]
    elif surface == "macs":
        args = ["ztp", str(spec), "--out", str(gen), "--server", "http://10.0.0.1", "--macs", str(target)]
    elif surface == "lldp":
        if kind == "folder":  # a folder is a valid --lldp (one file per device): put the FIFO inside it
            os.mkfifo(target / f"{LEAF}.json")
            kind = "fifo"
        else:
            target = target.rename(tmp_path / f"{LEAF}.json")
        args = ["verify", "cabling", str(spec), "--out", str(gen), "--lldp", str(target)]
    else:
        args = ["verify", "cabling", str(spec), "--out", str(gen), "--ibnetdiscover", str(target)]
    start = time.monotonic()
    code, text = invoke(*args, codes=(1, 2))
    assert time.monotonic() - start < 10
    why = "it is a directory" if kind == "folder" else "it is not a regular file (a FIFO, device or socket)"
    assert f"cannot read: {why}" in one_line(text), text


# --- sizes ---

def test_mac_file_sizes(roce: Path, tmp_path: Path) -> None:
    base = ["ztp", str(TINY), "--out", str(roce), "--server", "http://10.0.0.1"]
    f = write(tmp_path / "cell.csv", b"switch,mac\n" + LEAF.encode() + b"," + b"a" * 131_073 + b"\n")
    code, text = invoke(*base, "--macs", str(f), codes=(2,))
    assert f"{f}:2: not CSV: field larger than field limit (131072)" in text
    f = write(tmp_path / "rows.csv", b"switch,mac\n" + b"nope,x\n" * 600_000)
    start = time.monotonic()
    code, text = invoke(*base, "--macs", str(f), codes=(2,))
    assert f"{f}: more than 100,000 rows" in text and time.monotonic() - start < 10
    f = write(tmp_path / "errs.csv", b"switch,mac\n" + b"nope,x\n" * 5000)
    code, text = invoke(*base, "--macs", str(f), codes=(2,))
    assert text.count("\n") == 51 and "stopped after 50 errors" in text
    f = write(tmp_path / "ctl.csv", b"switch,mac\n" + LEAF.encode() + b",0c:42:a1:00:00:01\x1b[2J\n")
    code, text = invoke(*base, "--macs", str(f), codes=(2,))
    assert f"{f}:2: not a row of switch names and MACs: mac: '0c:42:a1:00:00:01\\x1b[2J'" in one_line(text)


@pytest.mark.parametrize(("path", "message"), [
    ("a" * 256, "is 256 bytes; a file or folder name is at most 255 bytes"),
    ("x/" * 2100, "bytes long; at most 4,095"),
    ("a\nb", "holds the control character '\\n'; a path is printable text"),
    ("", "an empty path"),
])
def test_paths_checked_at_the_door(path: str, message: str, tmp_path: Path) -> None:
    with pytest.raises(ArgumentError, match=None) as exc:
        check_path(path, "--out")
    assert message in str(exc.value)
    if path:
        code, text = invoke("build", str(TINY), "--out", str(tmp_path / path), codes=(2,))
        assert message in one_line(text)


# --- --server ---

@pytest.mark.parametrize(("url", "message"), [
    ("http://10.0.0.1:8080\n", "holds '\\n'"),
    ("http://10.0.0.1:80/a b", "holds ' '"),
    ("http://10.0.0.1\x1b[31m", "holds '\\x1b'"),
    ("http://10.0.0.1:99999", "the port is not a number from 1 to 65535"),
    ("http://10.0.0.1:0", "port 0"),
    ("ftp://10.0.0.1", "want the HTTP(S) URL, e.g. http://10.250.0.10:8080"),
    ("http://u:p@10.0.0.1", "no user, query or fragment"),
    ("http://10.0.0.1/$(reboot)", "shell/template character"),
    ("http://10.0.0.1/\u202e", "holds '\\u202e'"),
])
def test_server_url_checked_at_the_door(roce: Path, url: str, message: str) -> None:
    with pytest.raises(ArgumentError) as exc:
        check_url(url, "--server")
    assert message in str(exc.value)
    code, text = invoke("ztp", str(TINY), "--out", str(roce), "--server", url, codes=(2,))
    assert message in text
    assert not (roce / "ztp" / "kea-dhcp4.conf").exists() or url not in (roce / "ztp" / "kea-dhcp4.conf").read_text()


def test_good_urls_pass() -> None:
    assert check_url("https://[2001:db8::1]:8443/ztp/", "--server") == "https://[2001:db8::1]:8443/ztp"
    assert check_url("http://ztp.example.com", "--server") == "http://ztp.example.com"


# --- the reader itself ---

def test_reader_limits(tmp_path: Path) -> None:
    f = write(tmp_path / "big", b"x" * 101)
    with pytest.raises(InputError, match="the file is 101 bytes; at most 100 are read"):
        read_bytes(f, 100)
    with pytest.raises(InputError, match="No such file or directory"):
        read_bytes(tmp_path / "missing", 100)
    assert parse_json(b'{"a": [1, 2.5, "x", null]}', "f") == {"a": [1, 2.5, "x", None]}
    with pytest.raises(InputError, match="f: an integer of more than 30 digits"):
        check_json({"a": [10**35]}, "f")

    class Result(BaseModel):
        node: Name
        passed: bool

    adapter = TypeAdapter(list[Result])
    f = write(tmp_path / "r.json", b'[{"node": "gpu01", "passed": true}]')
    assert load_json(f, adapter, "a result file", 100)[0].node == "gpu01"
    write(f, b'[{"node": "gpu\\u001b01", "passed": "maybe"}]')
    with pytest.raises(InputError) as exc:
        load_json(f, adapter, "a result file", 100)
    assert str(exc.value) == (f"{f}: not a result file: [0].node: 'gpu\\x1b01': holds the control character "
                              "'\\x1b'; a name is one line of printable text; [0].passed: 'maybe': input should "
                              "be a valid boolean, unable to interpret input")


# --- clean-up, workers, umask, full disk ---

def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_old_tree_of_a_killed_build_is_swept(tmp_path: Path) -> None:
    old = tmp_path / f".out.old-{_dead_pid()}"
    (old / "configs").mkdir(parents=True)
    (old / "plan.json").write_text("{}")
    foreign = tmp_path / f".out.old-{_dead_pid()}-x"
    foreign.mkdir()
    unmarked = tmp_path / f".other.old-{_dead_pid()}"
    unmarked.mkdir()
    stage = tmp_path / f".out.staging-{_dead_pid()}"
    stage.mkdir()
    (stage / STAGE_MARK).touch()
    removed = sweep_stale_stages(tmp_path, "out")
    assert sorted(removed) == sorted([old, stage]) and not old.exists() and foreign.exists() and unmarked.exists()
    code, text = invoke("build", str(TINY), "--out", str(tmp_path / "out"), codes=(0,))
    old2 = tmp_path / f".out.old-{_dead_pid()}"
    old2.mkdir()
    (old2 / "plan.json").write_text("{}")
    invoke("build", str(TINY), "--out", str(tmp_path / "out"), codes=(0,))
    assert not old2.exists()


def test_partial_build_sweeps_folders_a_killed_merge_moved_aside(tmp_path: Path) -> None:
    out = tmp_path / "out"
    invoke("build", str(TINY), "--out", str(out), codes=(0,))
    aside = out / f".ansible.old-{_dead_pid()}"
    (aside / "x").mkdir(parents=True)
    invoke("build", str(TINY), "--out", str(out), "--only", "inventory", codes=(0,))
    assert not aside.exists() and (out / "ansible").is_dir()


def test_forked_worker_dies_with_its_parent(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    code = (f"import os, time\nfrom railforge.cli.parallel import die_with_parent\nparent = os.getpid()\n"
            f"pid = os.fork()\nif pid == 0:\n    die_with_parent(parent)\n"
            f"    open({str(pidfile)!r}, 'w').write(str(os.getpid()))\n"
            f"    time.sleep(60)\n    os._exit(0)\ntime.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    deadline = time.monotonic() + 20
    while not pidfile.exists() or not pidfile.read_text():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    child = int(pidfile.read_text())
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        os.kill(child, signal.SIGKILL)
        pytest.fail("the forked worker outlived its parent")
    assert callable(die_with_parent)


def test_ztp_folders_do_not_follow_the_umask(roce: Path, tmp_path: Path) -> None:
    gen = tmp_path / "gen"
    shutil.copytree(roce, gen)
    old = os.umask(0)
    try:
        invoke("ztp", str(TINY), "--out", str(gen), "--server", "http://10.0.0.1:8080", codes=(0,))
    finally:
        os.umask(old)
    modes = {oct(p.stat().st_mode & 0o777) for p in [gen / "ztp", *(gen / "ztp").rglob("*")] if p.is_dir()}
    assert modes == {"0o755"}


def test_build_modes_do_not_follow_a_permissive_umask(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for umask, files, dirs in (("000", "0o644", "0o755"), ("077", "0o600", "0o700")):
        out = tmp_path / f"out{umask}"
        subprocess.run(["sh", "-c", f'umask {umask} && exec "$0" -m railforge build "$1" --out "$2"', sys.executable,
                        str(TINY), str(out)], check=True, env=env, cwd=ROOT, capture_output=True, timeout=300)
        found = {(p.is_dir(), oct(p.stat().st_mode & 0o777)) for p in [out, *out.rglob("*")] if not p.is_symlink()}
        assert found == {(False, files), (True, dirs)}, (umask, found)


def test_full_disk_during_diff_gives_one_clean_error(roce: Path, tmp_path: Path) -> None:
    require_tool("root", "mount")
    small = tmp_path / "small"
    small.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "i30-full", str(small)], check=True)
    try:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        filler = small / "filler"
        with filler.open("wb", buffering=0) as fh, pytest.raises(OSError):
            for _ in range(64):
                fh.write(b"x" * 4096)
                fh.flush()
        data = plan_data(roce)
        older = save_plan(tmp_path / "older", {**data, "links": data["links"][:-40]})
        proc = subprocess.run([sys.executable, "-m", "railforge", "diff", str(older), str(roce), "--work-order",
                               str(small / "wo.xlsx")], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
        assert proc.returncode == 2, proc.stderr
        assert "cannot write the work order" in proc.stderr and "No space left on device" in proc.stderr
        assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr, proc.stderr
        assert os.listdir(small) == ["filler"]
    finally:
        subprocess.run(["umount", str(small)], check=False)


def test_make_root_guids_refuses_what_is_not_a_file(ib: Path, tmp_path: Path) -> None:
    """The stdlib script shipped for the SM host: FIFO, device, huge number and non-UTF-8 are one line, exit 2."""
    script = ib / "configs" / "opensm" / "make-root-guids"
    roots = ib / "configs" / "opensm" / "root-switches.txt"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    cases = {str(fifo): f"{fifo}: not a regular file", "/dev/zero": "/dev/zero: not a regular file",
             str(write(tmp_path / "n.txt", b'Switch ' + b"9" * 5000 + b' "S-1"\n')): "Exceeds the limit (4300 digits)",
             str(write(tmp_path / "u.txt", b"Switch 1 \xff\n")): "not UTF-8 text (byte 0xff at offset 9)"}
    for path, message in cases.items():
        proc = subprocess.run([sys.executable, str(script), str(roots), path], capture_output=True, text=True,
                              timeout=30)
        assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
