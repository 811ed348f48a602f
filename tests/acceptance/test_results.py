"""Reading results: the parsers on real tool outputs (tests/acceptance/samples, see PROVENANCE.md), the strict
reader (other clusters, unknown hosts, truncated output: skipped and counted), the analysis (suspects on
several slow paths and on no healthy one), the work order, and fuzz tests."""

from __future__ import annotations

import contextlib
import json
import os
import re
from pathlib import Path

import openpyxl
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from railforge.acceptance import parsers
from railforge.acceptance.analysis import analyse
from railforge.acceptance.document import build, dumps
from railforge.acceptance.results import (
    AcceptanceDoc,
    Reader,
    ReadError,
    parse_header,
    read_acceptance_plan,
)
from railforge.acceptance.retest import plan_retest
from tests.conftest import plan_of, run_cli

SAMPLES = Path(__file__).parent / "samples"
NAME = "roce-a800-4nic"


def sample(name: str) -> str:
    return (SAMPLES / name).read_text()


def test_perftest_on_real_output() -> None:
    bw = parsers.perftest_bw(sample("perftest-write-bw-gbits.txt"))
    assert (bw.gbps, bw.peak_gbps, bw.msg_bytes) == (0.48, 0.0, 8)
    with pytest.raises(parsers.Truncated):
        parsers.perftest_bw(sample("perftest-write-bw-mbytes-truncated.txt"))
    with pytest.raises(parsers.ToolFailed, match="Couldn't connect"):
        parsers.perftest_bw(" Couldn't connect to 10.0.0.2:18515\nUnable to open file descriptor for socket connection")


def test_perftest_mb_per_second_is_mebibytes() -> None:
    """The truncated MB/sec sample's header with its first row completed the way perftest closes a table."""
    text = sample("perftest-write-bw-mbytes-truncated.txt") + "          0.00               11728.47\t\t   0.187655\n" \
        + "-" * 87 + "\n"
    assert parsers.perftest_bw(text).gbps == pytest.approx(11728.47 * 1048576 * 8 / 1e9)


def test_nccl_on_real_output() -> None:
    r = parsers.nccl_tests(sample("nccl-all-reduce-tail.txt"))
    assert (r.avg_busbw, r.max_busbw, r.wrong) == (84.8558, 96.45, 0)
    for truncated in ("nccl-all-reduce-header-truncated.txt", "nccl-all-reduce-mpirun-tagged-truncated.txt"):
        with pytest.raises(parsers.Truncated):
            parsers.nccl_tests(sample(truncated))
    tagged = "".join(f"[1,0]<stdout>:{line}\n" for line in sample("nccl-all-reduce-tail.txt").splitlines())
    head = sample("nccl-all-reduce-header-truncated.txt").rsplit("\n", 1)[0] + "\n"
    both = parsers.nccl_tests(head + tagged)
    assert both.hosts == ("worker-1", "worker-0") and both.avg_busbw == 84.8558


def test_dcgm_on_real_output() -> None:
    rows = parsers.dcgm_rows(sample("dcgmi-diag-fail-fragment.txt"))
    assert parsers.Dcgm(rows).failed == ["GPU Memory", "Diagnostic", "Targeted Stress"]
    assert rows["Warning"].startswith("GPU 0 Error using CUDA API cuCtxCreate Check DCGM and system logs")
    assert "Reset GPU. Restart DCGM." in rows["Warning"]
    for truncated in ("dcgmi-diag-r3-truncated.txt", "dcgmi-diag-r3-metadata-truncated.txt",
                      "dcgmi-diag-fail-fragment.txt"):
        with pytest.raises(parsers.Truncated):
            parsers.dcgmi_diag(sample(truncated))
    # complete-table path: the real r3 deployment rows, closed the way dcgmi closes its table (see PROVENANCE.md)
    complete = sample("dcgmi-diag-r3-truncated.txt").rsplit("\n", 2)[0] + "\n" + "+" + "-" * 27 + "+" + "-" * 48 + "+\n"
    assert parsers.dcgmi_diag(complete).failed == []
    assert parsers.dcgmi_diag(complete).results["Inforom"] == "Pass"


@pytest.fixture(scope="module")
def accepted(tmp_path_factory) -> tuple[Path, dict]:
    folder = tmp_path_factory.mktemp("acc")
    data = dumps(build(plan_of(NAME)).doc)
    (folder / "plan.json").write_bytes(data)
    return folder, orjson.loads(data)


PERF_TEMPLATE = sample("perftest-write-bw-gbits.txt")


def perftest_output(gbps: float) -> str:
    """The real sample's table with another average (the parser is proven on the sample itself above)."""
    return re.sub(r"0\.48", f"{gbps:.2f}", PERF_TEMPLATE)


def write_results(root: Path, doc: dict, slow: set[str], gbps_ok: float = 390.0, cluster: str = NAME,
                  tool_body=None, rounds: set[int] | None = None) -> dict[str, dict]:
    """perftest -b outputs for the rounds (all, or `rounds`): a test is slow (40 Gb/s, both directions summed)
    when it crosses a cable of `slow`, else `gbps_ok` (390: two 200G directions at 97.5 %)."""
    tests = {t["id"]: t for r in doc["rounds"] for t in r["tests"]}
    for r in doc["rounds"]:
        if rounds is not None and r["round"] not in rounds:
            continue
        d = root / f"round-{r['round']:02d}"
        d.mkdir(parents=True, exist_ok=True)
        for t in r["tests"]:
            slow_here = bool(slow & set(t["cables"]))
            body = tool_body(t) if tool_body else perftest_output(40.0 if slow_here else gbps_ok)
            (d / f"{t['id']}.txt").write_text(
                f"# railforge-acceptance cluster={cluster} test={t['id']} round={r['round']} tool=ib_write_bw "
                f"a={t['a']['node']}:{t['a']['hca']} b={t['b']['node']}:{t['b']['hca']} rc=0\n{body}")
    return tests


def node_cable(doc: dict, node: str, rail: int) -> str:
    return next(t["a"]["cable"] for r in doc["rounds"] for t in r["tests"]
                if t["a"]["node"] == node and t["a"]["rail"] == rail)


def test_one_bad_node_cable_is_the_only_suspect(accepted, tmp_path: Path) -> None:
    folder, doc = accepted
    bad = node_cable(doc, "su001-gpu03", 1)
    write_results(tmp_path, doc, {bad})
    acc = read_acceptance_plan(folder / "plan.json")
    res = Reader(acc).read(tmp_path)
    a = analyse(acc, res)
    assert [s.cable for s in a.suspects] == [bad] and a.suspects[0].slow_paths == 2
    assert a.slow == 2 and a.unexplained == [] and res.skipped == []


def test_skipped_results_never_make_a_wrong_suspect(accepted, tmp_path: Path) -> None:
    """A bad cable whose second test is truncated is on one slow path only: reported, not named; results of
    another cluster and of hosts the plan does not pair are skipped and counted."""
    folder, doc = accepted
    bad = node_cable(doc, "su002-gpu05", 2)
    tests = write_results(tmp_path, doc, {bad})
    slow_ids = sorted(t for t, v in tests.items() if bad in v["cables"])
    second = next(tmp_path.glob(f"round-*/{slow_ids[1]}.txt"))
    head = second.read_text().split("\n", 1)[0]
    second.write_text(head + "\n" + sample("perftest-write-bw-mbytes-truncated.txt"))
    other = tmp_path / "round-01" / "t900001.txt"
    other.write_text(second.read_text().replace(f"cluster={NAME}", "cluster=elsewhere"))
    stranger = tmp_path / "round-02" / "t900002.txt"
    first = next(tmp_path.glob(f"round-*/{slow_ids[0]}.txt")).read_text()
    stranger.write_text(re.sub(r" a=\S+", " a=intruder:mlx5_0", first, count=1))
    os.symlink(second, tmp_path / "round-01" / "link.txt")
    acc = read_acceptance_plan(folder / "plan.json")
    res = Reader(acc).read(tmp_path)
    assert dict(res.skipped_counts()) == {"truncated": 1, "other-cluster": 1, "unknown-host": 1, "not-readable": 1}
    a = analyse(acc, res)
    assert a.suspects == [] and a.slow == 1 and a.missing == 1
    assert [u.test for u in a.unexplained] == [slow_ids[0]] and bad in a.unexplained[0].weak


def test_upper_ecmp_slowness_points_at_the_bundle_not_a_cable(accepted, tmp_path: Path) -> None:
    """Every test through a leaf's uplinks slow: the uplink bundle is named, never its node cables. With two SUs
    the two leaves' bundles are on the same tests: reported as unexplained, naming neither."""
    folder, doc = accepted
    leaf = "su001-leaf-r2"
    slow = {t["id"] for r in doc["rounds"] for t in r["tests"] if f"{leaf} up" in t["bundles"]}
    write_results(tmp_path, doc, set(), tool_body=lambda t: perftest_output(40.0 if t["id"] in slow else 390.0))
    acc = read_acceptance_plan(folder / "plan.json")
    a = analyse(acc, Reader(acc).read(tmp_path))
    assert a.suspects == [] and a.bundles == [] and {u.test for u in a.unexplained} == slow
    assert all(set(u.bundles) == {f"{leaf} up", "su002-leaf-r2 up"} for u in a.unexplained)

    four = tmp_path / "four"
    four.mkdir()
    (four / "plan.json").write_bytes(dumps(build(plan_of("dgx-h100-4su")).doc))
    doc4 = orjson.loads((four / "plan.json").read_bytes())
    slow4 = {t["id"] for r in doc4["rounds"] for t in r["tests"] if f"{leaf} up" in t["bundles"]}
    write_results(four / "res", doc4, set(), cluster="dgx-h100-4su",
                  tool_body=lambda t: perftest_output(40.0 if t["id"] in slow4 else 780.0))
    acc4 = read_acceptance_plan(four / "plan.json")
    a4 = analyse(acc4, Reader(acc4).read(four / "res"))
    assert a4.suspects == [] and a4.unexplained == [] and [b.cable for b in a4.bundles] == [f"{leaf} up"]
    assert set(a4.bundles[0].tests) == slow4


def retest_rounds(doc: dict) -> set[int]:
    return {r["round"] for r in doc["rounds"] if r.get("retest")}


def test_cli_retests_before_it_names_the_cable_and_writes_the_work_order(built, tmp_path: Path) -> None:
    """A bad node cable: the first analysis blames nothing and asks for the re-test; `retest` plans the two slow
    pairs again and the NIC with two new healthy partners on other leaves; after that round the cable is named
    with both ends, on six slow paths, and the work order inspects it."""
    out, acc = built(NAME), tmp_path / "acc"
    run_cli("acceptance", "plan", f"inventory/{NAME}", "--out", str(out), "--to", str(acc))
    doc = orjson.loads((acc / "plan.json").read_bytes())
    bad = node_cable(doc, "su001-gpu07", 3)
    res, wo, js = tmp_path / "res", tmp_path / "wo.xlsx", tmp_path / "a.json"
    write_results(res, doc, {bad})
    args = ("acceptance", "analyze", f"inventory/{NAME}", str(res), "--out", str(out), "--acceptance", str(acc),
            "--work-order", str(wo), "--json", str(js))
    first = run_cli(*args, check=False)
    assert first.returncode == 1, first.stdout + first.stderr
    result = json.loads(js.read_text())
    assert result["suspects"] == [] and [s["cable"] for s in result["to_retest"]] == [bad]
    assert "re-test first" in first.stdout and not wo.exists()
    again = run_cli("acceptance", "retest", f"inventory/{NAME}", str(res), "--out", str(out), "--acceptance", str(acc))
    assert "re-test round" in again.stdout, again.stdout
    doc2 = orjson.loads((acc / "plan.json").read_bytes())
    added = [t for r in doc2["rounds"] if r.get("retest") for t in r["tests"]]
    slow_first = sorted(t["id"] for r in doc["rounds"] for t in r["tests"] if bad in t["cables"])
    assert sorted(t["retest_of"] for t in added if t.get("retest_of")) == slow_first
    nic = ("su001-gpu07", next(t["a"]["hca"] for r in doc["rounds"] for t in r["tests"] if t["a"]["cable"] == bad))
    met = {(n["node"], n["hca"]) for r in doc["rounds"] for t in r["tests"] for n in (t["a"], t["b"])
           if nic in ((t["a"]["node"], t["a"]["hca"]), (t["b"]["node"], t["b"]["hca"]))} - {nic}
    fresh = [t for t in added if not t.get("retest_of")]
    partners = {(n["node"], n["hca"]) for t in fresh for n in (t["a"], t["b"])} - {nic}
    assert len(fresh) == 2 and len(partners) == 2 and not partners & met
    assert all(bad in t["cables"] and t["a"]["leaf"] != t["b"]["leaf"] for t in fresh)
    assert (acc / "jobs" / f"pairs-round-{max(retest_rounds(doc2)):02d}.tsv").exists()
    write_results(res, doc2, {bad}, rounds=retest_rounds(doc2))
    proc = run_cli(*args, check=False, env={"COLUMNS": "80"})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    result = json.loads(js.read_text())
    plan = plan_of(NAME)
    link = plan.link_index()[bad]
    node = plan.device_index()[link.a.device]
    assert [s["cable"] for s in result["suspects"]] == [bad] and result["suspects"][0]["slow_paths"] == 6
    assert result["to_retest"] == [] and result["unexplained"] == []
    assert result["suspects"][0]["a"] == {"rack": node.rack, "u": node.u, "device": node.name,
                                          "port": link.a.port, "label": next(p.label for p in node.ports
                                                                             if p.name == link.a.port)}
    assert bad in proc.stdout and node.rack in proc.stdout
    assert "…" not in proc.stdout  # piped with COLUMNS=80: both ends whole, not `su001-gpu…`
    assert link.a.device in proc.stdout and link.b.device in proc.stdout
    book = openpyxl.load_workbook(wo, read_only=True)
    rows = [r for r in book["work-order"].iter_rows(values_only=True)]
    assert rows[0][:3] == ("step", "phase", "action")
    col = {name: i for i, name in enumerate(rows[0])}
    inspect = [r for r in rows if r[col["action"]] == "inspect"]
    assert len(inspect) == 1
    assert (inspect[0][col["cable"]], inspect[0][col["rack"]], inspect[0][col["to_device"]]) == (
        bad, node.rack, link.b.device)
    assert rows[-1][2] == "re-test"
    clean = tmp_path / "clean"
    write_results(clean, doc, set())
    ok = run_cli("acceptance", "analyze", f"inventory/{NAME}", str(clean), "--out", str(out), "--acceptance", str(acc),
                 check=False)
    assert ok.returncode == 0, ok.stdout
    nothing = run_cli("acceptance", "retest", f"inventory/{NAME}", str(clean), "--out", str(out), "--acceptance",
                      str(acc))
    assert "nothing to re-test" in nothing.stdout
    bad_plan = tmp_path / "acc2"
    bad_plan.mkdir()
    (bad_plan / "plan.json").write_text('{"kind": "railforge-acceptance-plan", "version": 1, "cluster": "x"}')
    err = run_cli("acceptance", "analyze", f"inventory/{NAME}", str(clean), "--out", str(out), "--acceptance",
                  str(bad_plan), check=False)
    assert err.returncode == 2 and "plan.json" in err.stderr and "Traceback" not in err.stderr


def test_a_slow_test_its_retest_does_not_reproduce_is_not_blamed(accepted, tmp_path: Path) -> None:
    """A healthy cable slow in the first rounds only (a loaded round): its NIC's two tests are slow, so its
    cable is suspicious; on the re-test round everything passes, and nothing is blamed: both tests are
    `not_reproduced`, the analysis is clean."""
    folder, doc = accepted
    cable = node_cable(doc, "su002-gpu04", 0)
    raw = json.loads((folder / "plan.json").read_text())
    write_results(tmp_path, raw, {cable})
    acc = read_acceptance_plan(folder / "plan.json")
    res = Reader(acc).read(tmp_path)
    before = analyse(acc, res, require_retest=True)
    assert before.suspects == [] and [s.cable for s in before.to_retest] == [cable] and not before.clean
    summary = plan_retest(plan_of(NAME), raw, acc, res)
    assert summary["reruns"] == 2 and summary["tests"] == 4 and summary["not_retested"] == {}
    (tmp_path / "plan2.json").write_bytes(dumps(raw))
    acc2 = read_acceptance_plan(tmp_path / "plan2.json")
    write_results(tmp_path, raw, set(), rounds=retest_rounds(raw))
    after = analyse(acc2, Reader(acc2).read(tmp_path), require_retest=True)
    assert after.clean and after.suspects == [] and after.to_retest == []
    assert len(after.not_reproduced) == 2 and after.slow == 2


def test_acceptance_plan_reader_names_the_place(tmp_path: Path, accepted) -> None:
    folder, doc = accepted
    broken = json.loads((folder / "plan.json").read_text())
    broken["rounds"][1]["tests"][3]["a"]["rail"] = "x"
    p = tmp_path / "plan.json"
    p.write_text(json.dumps(broken))
    with pytest.raises(ReadError, match=r"rounds\.1\.tests\.3\.a\.rail"):
        read_acceptance_plan(p)
    p.write_text("[1, 2")
    with pytest.raises(ReadError, match="not JSON"):
        read_acceptance_plan(p)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=2000))
def test_parsers_fuzz(text: str) -> None:
    for parse in (parsers.perftest_bw, parsers.iperf3_bw, parsers.nccl_tests, parsers.dcgmi_diag):
        with contextlib.suppress(parsers.Truncated, parsers.Malformed, parsers.ToolFailed):
            parse(text)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_header_fuzz(line: str) -> None:
    try:
        h = parse_header("# railforge-acceptance " + line)
    except ValueError:
        return
    assert h.cluster and h.test


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(["ok", "slow", "failed", "skip", "garbage"]), min_size=128, max_size=128),
       st.binary(max_size=200))
def test_analysis_fuzz_keeps_the_rule(accepted, tmp_path_factory, statuses: list[str], junk: bytes) -> None:
    """Any mix of outcomes and junk files: every suspect is on >= 2 slow or failed paths and on no healthy
    one, and no file makes the reader raise."""
    folder, doc = accepted
    root = tmp_path_factory.mktemp("fuzz")
    order = [t["id"] for r in doc["rounds"] if r["kind"] == "compute" for t in r["tests"]]
    status = dict(zip(order, statuses, strict=True))

    def body(t: dict) -> str:
        s = status.get(t["id"], "ok")
        return {"ok": perftest_output(390.0), "slow": perftest_output(12.0), "failed": "Couldn't connect to peer\n",
                "skip": sample("perftest-write-bw-mbytes-truncated.txt"),
                "garbage": junk.decode("latin-1")}[s]

    write_results(root, doc, set(), tool_body=body)
    (root / "round-01" / "junk.txt").write_bytes(junk)
    acc: AcceptanceDoc = read_acceptance_plan(folder / "plan.json")
    res = Reader(acc).read(root)
    a = analyse(acc, res)
    tests = {t.id: t for r in acc.rounds for t in r.tests}
    healthy = {c for tid, p in res.pairs.items() if p.status == "ok" for c in tests[tid].cables}
    for s in a.suspects:
        assert s.cable not in healthy and s.slow_paths >= 2 and not s.bundle
        assert all(res.pairs[t].status != "ok" and s.cable in tests[t].cables for t in s.tests)
