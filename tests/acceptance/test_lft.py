"""The forwarding-table reader and the path tracer on a real `dump_fts` of the configs-ib fabric (ibsim +
OpenSM, see samples/PROVENANCE.md): the trace agrees with the real `ibtracert` of the same fabric, bad dumps are
named by file and line, routes that leave the plan are named by switch and port, and the greedy cover puts every
upper cable on two paths from no tests at all."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from railforge.acceptance.fabric import read_fabric
from railforge.acceptance.ibroutes import Router, TraceError, cover
from railforge.acceptance.lft import LftError, parse_lfts, read_lfts
from railforge.planner import build_plan
from railforge.spec import load_spec
from tests.conftest import ROOT, run_cli
from tests.helpers.ibtracert import upper_cables

SAMPLES = Path(__file__).parent / "samples"
DUMP = (SAMPLES / "dump_fts-configs-ib.txt").read_text()


@pytest.fixture(scope="module")
def plan():
    spec = ROOT / "tests" / "specs" / "configs-ib.yaml"
    s, lines = load_spec(spec)
    return build_plan(s, lines, str(spec))


def nic(fabric, node: str, hca: str):
    return next(n for n in fabric.all_nics() if (n.node, n.hca) == (node, hca))


def test_reads_every_switch_table_of_the_real_dump() -> None:
    lfts = parse_lfts(DUMP, "dump")
    assert len(lfts.switches) == 6 == DUMP.count("Unicast lids")
    assert sorted(len(t.routes) for t in lfts.switches.values()) == [21, 21, 22, 22, 22, 22]  # spines: 21
    leaf = lfts.switches[0xFC6A1C0300000006]
    assert leaf.description == "MF0;su002-leaf-r1:LAB-IB-16/U1"
    assert (leaf.routes[0x14], leaf.routes[0x8], leaf.routes[0x1]) == (1, 0, 5)
    assert lfts.hcas[0x14] == "su002-gpu01 mlx5_1" and len(lfts.hcas) == 16


def test_trace_agrees_with_real_ibtracert(plan) -> None:
    fabric = read_fabric(plan)
    r = Router(plan, fabric, parse_lfts(DUMP, "dump"))
    want = upper_cables((SAMPLES / "ibtracert-configs-ib.txt").read_text(), plan)
    assert len(want) == 2
    got = r.upper(nic(fabric, "su001-gpu01", "mlx5_0"), nic(fabric, "su002-gpu04", "mlx5_1"))
    assert list(got) == want


BAD = [
    ("Unicast lids [0x0-0x16] of switch x guid 0x1 (a):\n0x0001 005 : (Switch portguid 0x2: 'b')\n",
     r"dump: the table of 'a' \(line 1\) has no 'N valid lids dumped' line: truncated"),
    ("Unicast lids [0x0-0x16] of switch x guid 0x1 (a):\n0x0001 005\n3 valid lids dumped\n",
     r"dump:3: says 3 LIDs, the table of 'a' \(line 1\) has 1"),
    ("Unicast lids [0x0-0x2] of switch x guid 0x1 (a):\n0x0003 005\n", r"dump:2: LID 0x0003 is outside"),
    ("Unicast lids [0x0-0x2] of switch x guid 0x1 (a):\n0x0001 300\n", r"dump:2: out port 300"),
    ("Unicast lids [0x0-0x2] of switch x guid 0x1 (a):\n0x0001 001\n0x0001 002\n", r"dump:3: LID 0x0001 listed twice"),
    ("0x0001 001\n", r"dump:1: LID row before any"),
    ("Multicast mlids [0xc000-0xc3ff] of switch x guid 0x1 (a):\n", r"dump:1: a multicast table"),
    ("hello\n", r"dump:1: not a line of a dump_fts/ibroute unicast dump: 'hello'"),
    ("", r"dump: no switch table"),
    ("Unicast lids [0x0-0x2] of switch x guid 0x1 (a):\n0x0001 001 : (Channel Adapter portguid 0x2: 'h mlx5_0')\n"
     "1 valid lids dumped\nUnicast lids [0x0-0x2] of switch y guid 0x3 (b):\n"
     "0x0001 001 : (Channel Adapter portguid 0x4: 'g mlx5_0')\n", r"dump:5: LID 0x0001 is 'g mlx5_0' here and"),
    (DUMP + DUMP.split("22 valid lids dumped")[0] + "22 valid lids dumped\n", r"dump:15[56]: switch guid 0x"),
]


@pytest.mark.parametrize(("text", "message"), BAD)
def test_bad_dumps_are_named_by_line(text: str, message: str) -> None:
    with pytest.raises(LftError, match=message):
        parse_lfts(text, "dump")


def test_reader_refuses_what_is_not_a_regular_utf8_file(tmp_path: Path) -> None:
    with pytest.raises(LftError, match="not a regular file"):
        read_lfts(tmp_path)
    (tmp_path / "x").write_bytes(b"\xff\xfe")
    with pytest.raises(LftError, match="not UTF-8"):
        read_lfts(tmp_path / "x")
    with pytest.raises(LftError, match="cannot read"):
        read_lfts(tmp_path / "missing")
    os.symlink(SAMPLES / "dump_fts-configs-ib.txt", tmp_path / "link")
    assert len(read_lfts(tmp_path / "link").switches) == 6  # a link to a regular file is read like the file


def _edit(lid: int, port: int, switch: str = "su001-leaf-r0") -> str:
    """The dump with one route of `switch` changed."""
    head, _, rest = DUMP.partition(f"({'MF0;' + switch}:LAB-IB-16/U1):\n")
    row = re.compile(rf"^0x{lid:04x} \d{{3}}", re.M)
    return head + f"(MF0;{switch}:LAB-IB-16/U1):\n" + row.sub(f"0x{lid:04x} {port:03d}", rest, count=1)


def test_routes_that_leave_the_plan_are_named(plan) -> None:
    fabric = read_fabric(plan)
    a, b = nic(fabric, "su001-gpu01", "mlx5_0"), nic(fabric, "su002-gpu04", "mlx5_1")
    with pytest.raises(TraceError, match=r"su001-leaf-r0 sends LID 0x0003 \(su002-gpu04 mlx5_1\) out of port 16, "
                                         "which has no planned cable"):
        Router(plan, fabric, parse_lfts(_edit(3, 16), "d")).upper(a, b)
    with pytest.raises(TraceError, match=r"su001-leaf-r0 port 2 \(CMP-000002\) leads to su001-gpu02"):
        Router(plan, fabric, parse_lfts(_edit(3, 2), "d")).upper(a, b)
    with pytest.raises(TraceError, match="su001-leaf-r0 has no route to LID 0x0003"):
        Router(plan, fabric, parse_lfts(_edit(3, 255), "d")).upper(a, b)
    loop = _edit(3, 2, "spine02")  # spine02 port 2 goes back down to su001-leaf-r0, which sends it up again
    with pytest.raises(TraceError, match="more than 8 hops: a loop"):
        Router(plan, fabric, parse_lfts(loop, "d")).upper(a, b)
    without = DUMP.split("Unicast lids")
    with pytest.raises(TraceError, match=r"no forwarding table for 1 planned switches \(su002-leaf-r1\)"):
        Router(plan, fabric, parse_lfts("Unicast lids".join(without[:1] + without[2:]), "d"))


def test_greedy_cover_from_no_tests_puts_every_upper_cable_on_two_paths(plan) -> None:
    fabric = read_fabric(plan)
    c = cover(plan, fabric, [], parse_lfts(DUMP, "d"))
    upper = {lk.id for lk in fabric.upper_links()}
    assert (c.upper, c.covered, c.uncovered) == (16, 16, ())
    on = {x: sum(x in p for p in c.paths.values()) for x in upper}
    assert min(on.values()) >= 2, on
    for ts in c.rounds:
        keys = [n.key for t in ts for n in (t.a, t.b)]
        assert len(keys) == len(set(keys))
    assert c.added_tests == sum(len(ts) for ts in c.rounds) == len(c.paths)
    # 16 upper cables, a test crosses at most 4 (2 each way): at least 16 * 2 / 4 tests
    assert 8 <= c.added_tests <= 16


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=400))
def test_reader_fuzz(text: str) -> None:
    try:
        lfts = parse_lfts(text, "f")
    except LftError as exc:
        assert str(exc).startswith("f")
    else:
        assert lfts.switches


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 153), st.sampled_from(["", "x", "0x0001", "0xzzzz 001", "12 valid lids dumped"]))
def test_reader_fuzz_on_edited_dump(line: int, replacement: str) -> None:
    lines = DUMP.split("\n")
    lines[line] = replacement
    try:
        parse_lfts("\n".join(lines), "f")
    except LftError as exc:
        assert re.match(r"f(:\d+)?: ", str(exc)), exc


def test_cli_names_a_bad_dump_and_a_fabric_without_forwarding_tables(tmp_path: Path) -> None:
    spec = ROOT / "tests" / "specs" / "configs-ib.yaml"
    out = tmp_path / "generated"
    run_cli("build", str(spec), "--out", str(out), "--only", "plan")
    cut = tmp_path / "cut.txt"
    cut.write_text(DUMP[: DUMP.index("22 valid lids dumped")])
    proc = run_cli("acceptance", "plan", str(spec), "--out", str(out), "--lfts", str(cut), check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"{cut}: the table of 'MF0;su002-leaf-r1:LAB-IB-16/U1' (line 1) has no" in " ".join(proc.stderr.split())
    assert not (out / "acceptance").exists()
    good = tmp_path / "lfts.txt"
    good.write_text(DUMP)
    proc = run_cli("acceptance", "plan", str(spec), "--out", str(out), "--lfts", str(good), check=False)
    assert proc.returncode == 0, proc.stderr
    assert "16 of 16 upper cables on a traced path" in " ".join(proc.stdout.split())
    assert "CMP-000017 cannot be named alone" in " ".join(proc.stdout.split())
    roce = ROOT / "tests" / "specs" / "tiny-roce.yaml"
    run_cli("build", str(roce), "--out", str(tmp_path / "roce"), "--only", "plan")
    proc = run_cli("acceptance", "plan", str(roce), "--out", str(tmp_path / "roce"), "--lfts", str(good), check=False)
    assert proc.returncode == 2 and "forwarding tables are InfiniBand's; tiny-roce has a roce" in proc.stderr
