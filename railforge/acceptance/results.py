"""The strict reader of burn-in results: the acceptance plan.json and a results folder.

A results folder holds what the jobs wrote: `round-NN/<test>.txt` (pair tests), `nccl/<scope>.txt`,
`dcgm/<node>.txt`. Each file starts with the header line the job wrote
(`# railforge-acceptance cluster=... test=... tool=... a=node:hca b=node:hca rc=N`), then the tool's output.
A file that is not a regular file, too large, not text, from another cluster, for a test or host the plan does
not have, a second result for one test, or truncated output, is skipped with its reason and counted; only
complete results of known tests reach the analysis, so none of them can make a wrong suspect.
"""

from __future__ import annotations

import os
import stat
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from railforge.acceptance import parsers
from railforge.acceptance.document import KIND

MAX_PLAN_BYTES = 1 << 30
MAX_RESULT_BYTES = 1 << 20
MAX_DEPTH = 2
MAX_ROUNDS = 128
MAX_FILES = 1_000_000
LATENCY_SUFFIX = ".lat.txt"
LLDP_DIR = "lldp"
HEADER = "# railforge-acceptance "


class ReadError(ValueError):
    """An input the analysis cannot use at all (the acceptance plan): names the file and the place."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class NicModel(_Strict):
    node: str = Field(min_length=1, max_length=253)
    rail: int | None = Field(ge=0, le=63)  # None: a host's storage bond
    hca: str = Field(min_length=1, max_length=64)
    ifname: str = Field(max_length=64)
    address: str = Field(max_length=64)
    leaf: str = Field(max_length=520)  # a storage bond's leaves joined by '+'
    cable: str | None = Field(min_length=1, max_length=64)  # None: a bond (its members are a bundle)
    appliance: bool = False

    @property
    def key(self) -> str:
        return f"{self.node}:{self.hca}"

    @property
    def own(self) -> str:
        """The cable that is this NIC's alone, or the bundle key of a bond's members (`fabric.Nic.bond`)."""
        return self.cable if self.cable is not None else f"{self.node} {self.ifname}"


class TestModel(_Strict):
    id: str = Field(pattern=r"^t\d{6,9}$")
    a: NicModel
    b: NicModel
    cables: list[str] = Field(max_length=16)
    bundles: list[str] = Field(max_length=8)
    ports: dict[Literal["control", "data", "server"], int] | None = None  # a lab test pinned by `ecmppin`
    retest_of: str | None = Field(default=None, pattern=r"^t\d{6,9}$")  # a re-test round's re-run of that test


class RoundModel(_Strict):
    round: int = Field(ge=1, le=MAX_ROUNDS)
    kind: Literal["compute", "storage"] = "compute"
    retest: bool = False  # planned by `acceptance retest` from earlier rounds' results
    tests: list[TestModel]


class ReachModel(_Strict):
    id: str = Field(pattern=r"^o\d{6,9}$")
    device: str = Field(min_length=1, max_length=253)
    port: str = Field(max_length=64)
    address: str = Field(min_length=1, max_length=64)
    cable: str = Field(min_length=1, max_length=64)
    switch: str = Field(max_length=253)


class LldpModel(_Strict):
    switches: list[str]
    cables: list[str]


class OobModel(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)
    reach: list[ReachModel]
    lldp: LldpModel


class RetestModel(_Strict):
    """What `acceptance retest` planned: its rounds, and the candidates it found no healthy pair for (why)."""

    rounds: list[int]
    not_retested: dict[str, str]


class BundleModel(_Strict):
    tier: str
    cables: list[str]


class PerDirection(BaseModel):
    leaf_local: float = Field(gt=0)
    across_fabric: float = Field(gt=0)


class PairThresholds(PerDirection):
    """Pass marks of `ib_write_bw -b` (both directions, reported as their sum) and of one direction (what the
    lab's iperf3 measures)."""

    per_direction: PerDirection | None = None


class ThresholdsModel(BaseModel):
    ib_write_bw_gbps: PairThresholds
    storage_ib_write_bw_gbps: PairThresholds | None = None


class AcceptanceDoc(BaseModel):
    """The fields of acceptance/plan.json the analysis reads (the rest is for people and jobs)."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    kind: Literal["railforge-acceptance-plan"]
    version: Literal[1, 2]
    cluster: str = Field(min_length=1, max_length=128)
    fabric: str
    thresholds: ThresholdsModel
    bundles: dict[str, BundleModel]
    rounds: list[RoundModel] = Field(max_length=MAX_ROUNDS)
    oob: OobModel | None = None
    retest: RetestModel | None = None

    @property
    def not_retested(self) -> dict[str, str]:
        return self.retest.not_retested if self.retest else {}

    def threshold(self, kind: str, a: NicModel, b: NicModel, one_direction: bool) -> float:
        """The pass mark of a test of round kind `kind` between `a` and `b` (leaf-local or across the fabric);
        `one_direction` for a tool that measures one (iperf3), else perftest -b's sum of both."""
        th = self.thresholds
        marks = th.ib_write_bw_gbps
        if kind == "storage" and th.storage_ib_write_bw_gbps is not None:
            marks = th.storage_ib_write_bw_gbps
        if one_direction and marks.per_direction is not None:
            marks = marks.per_direction
        return marks.leaf_local if a.leaf == b.leaf else marks.across_fabric


def _regular(path: Path, limit: int) -> bytes:
    """A missing file stays FileNotFoundError (the caller says what to run); any other failure to read (a file
    where a folder should be, no permission) is a ReadError naming the path."""
    try:
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode):
            raise ReadError(f"{path}: not a regular file")
        if st.st_size > limit:
            raise ReadError(f"{path}: {st.st_size:,} bytes, more than the {limit:,} allowed")
        return path.read_bytes()
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise ReadError(f"{path}: cannot read: {exc.strerror or exc}") from None


def read_acceptance_plan(path: Path) -> AcceptanceDoc:
    try:
        raw = orjson.loads(_regular(path, MAX_PLAN_BYTES))
    except FileNotFoundError:
        raise ReadError(f"{path}: not found: run `railforge acceptance plan` first") from None
    except orjson.JSONDecodeError as exc:
        raise ReadError(f"{path}: not JSON: {exc}") from None
    if not isinstance(raw, dict) or raw.get("kind") != KIND:
        raise ReadError(f"{path}: not an acceptance plan (kind must be {KIND!r})")
    try:
        return AcceptanceDoc.model_validate(raw)
    except ValidationError as exc:
        e = exc.errors()[0]
        where = ".".join(str(x) for x in e["loc"])
        raise ReadError(f"{path}: {where}: {e['msg']} (got {str(e.get('input'))[:80]!r}); "
                        f"{exc.error_count()} error(s)") from None


class Header(_Strict):
    cluster: str = Field(min_length=1, max_length=128)
    test: str = Field(min_length=1, max_length=300)
    tool: Literal["ib_write_bw", "iperf3", "all_reduce_perf", "dcgmi", "ping"]
    round: int | None = Field(default=None, ge=1, le=64)
    a: str | None = Field(default=None, max_length=320)
    b: str | None = Field(default=None, max_length=320)
    rc: int | None = None
    node: str | None = Field(default=None, max_length=253)
    nodes: int | None = Field(default=None, ge=1)
    threshold: float | None = Field(default=None, gt=0)


def parse_header(line: str) -> Header:
    if not line.startswith(HEADER):
        raise ValueError("the first line is not '# railforge-acceptance key=value ...'")
    fields: dict[str, str] = {}
    for token in line[len(HEADER):].split():
        key, sep, value = token.partition("=")
        if not sep or key in fields:
            raise ValueError(f"header token {token[:60]!r} is not a single key=value")
        fields[key] = value
    try:
        return Header.model_validate(fields)
    except ValidationError as exc:
        e = exc.errors()[0]
        raise ValueError(f"header {'.'.join(str(x) for x in e['loc'])}: {e['msg']}") from None


@dataclass(frozen=True, slots=True)
class Skipped:
    file: str
    reason: str
    detail: str


@dataclass(frozen=True, slots=True)
class PairResult:
    test: str
    file: str
    gbps: float | None
    status: Literal["ok", "slow", "failed"]
    detail: str = ""


@dataclass(slots=True)
class Results:
    pairs: dict[str, PairResult] = field(default_factory=dict)
    nccl: dict[str, tuple[str, float, float]] = field(default_factory=dict)
    dcgm: dict[str, list[str]] = field(default_factory=dict)
    skipped: list[Skipped] = field(default_factory=list)
    latency_files: int = 0
    reach: dict[str, bool] = field(default_factory=dict)  # OOB check id -> answered

    def skipped_counts(self) -> Counter:
        return Counter(s.reason for s in self.skipped)


def _files(root: Path) -> list[Path]:
    out: list[Path] = []
    root_depth = len(root.parts)
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        if len(Path(dirpath).parts) - root_depth >= MAX_DEPTH:
            dirnames[:] = []
        dirnames.sort()
        out += [Path(dirpath) / f for f in sorted(filenames)]
        if len(out) > MAX_FILES:
            raise ReadError(f"{root}: more than {MAX_FILES:,} files")
    return out


class Reader:
    def __init__(self, doc: AcceptanceDoc, min_gbps: float | None = None):
        self.doc = doc
        self.tests = {t.id: t for r in doc.rounds for t in r.tests}
        self.kind = {t.id: r.kind for r in doc.rounds for t in r.tests}
        self.nodes = {n.node for t in self.tests.values() for n in (t.a, t.b)}
        self.min_gbps = min_gbps
        self.out = Results()

    def skip(self, path: Path, reason: str, detail: str) -> None:
        self.out.skipped.append(Skipped(str(path), reason, detail[:300]))

    def read(self, root: Path) -> Results:
        if not root.is_dir():
            raise ReadError(f"{root}: not a folder of results")
        for path in _files(root):
            if path.parent == root / LLDP_DIR:
                continue  # switches' LLDP tables: read by `verify.lldp` (`lldp_findings`)
            if path.name.endswith(LATENCY_SUFFIX):
                self.out.latency_files += 1
                continue
            self.one(path)
        return self.out

    def one(self, path: Path) -> None:
        try:
            text = _regular(path, MAX_RESULT_BYTES).decode("utf-8")
        except ReadError as exc:
            return self.skip(path, "not-readable", str(exc))
        except UnicodeDecodeError as exc:
            return self.skip(path, "not-text", f"byte {exc.start} is not UTF-8")
        first, _, body = text.partition("\n")
        try:
            h = parse_header(first)
        except ValueError as exc:
            return self.skip(path, "no-header", str(exc))
        if h.cluster != self.doc.cluster:
            return self.skip(path, "other-cluster", f"cluster={h.cluster}, this plan is {self.doc.cluster}")
        if h.tool in ("ib_write_bw", "iperf3"):
            return self.pair(path, h, body)
        if h.tool == "ping":
            return self.reach(path, body)
        if h.tool == "all_reduce_perf":
            return self.nccl(path, h, body)
        return self.dcgm(path, h, body)

    def pair(self, path: Path, h: Header, body: str) -> None:
        t = self.tests.get(h.test)
        if t is None:
            return self.skip(path, "unknown-test", f"test {h.test} is not in the acceptance plan")
        want = (f"{t.a.node}:{t.a.hca}", f"{t.b.node}:{t.b.hca}")
        if (h.a, h.b) != want:
            return self.skip(path, "unknown-host", f"{h.a} <-> {h.b}, the plan's {h.test} is {want[0]} <-> {want[1]}")
        if h.test in self.out.pairs:
            return self.skip(path, "duplicate", f"{h.test} already read from {self.out.pairs[h.test].file}")
        parse = parsers.perftest_bw if h.tool == "ib_write_bw" else parsers.iperf3_bw
        try:
            bw = parse(body)
        except parsers.ToolFailed as exc:
            self.out.pairs[h.test] = PairResult(h.test, str(path), None, "failed", str(exc))
            return None
        except parsers.Truncated as exc:
            return self.skip(path, "truncated", str(exc))
        except parsers.Malformed as exc:
            return self.skip(path, "malformed", str(exc))
        mark = self.min_gbps
        if mark is None:
            mark = self.doc.threshold(self.kind[h.test], t.a, t.b, one_direction=h.tool == "iperf3")
        status = "ok" if bw.gbps >= mark else "slow"
        self.out.pairs[h.test] = PairResult(h.test, str(path), round(bw.gbps, 3), status,
                                            f"{bw.gbps:.2f} Gb/s, pass >= {mark:g}")
        return None

    def reach(self, path: Path, body: str) -> None:
        """`oob-reach.sh`'s lines, `CHECK ok|lost`, each check of the plan at most once; the whole file is
        skipped when one line is anything else (a truncated or foreign file)."""
        known = {c.id for c in self.doc.oob.reach} if self.doc.oob else set()
        got: dict[str, bool] = {}
        for n, line in enumerate(body.splitlines(), 2):
            check, _, state = line.strip().partition(" ")
            if check not in known or state not in ("ok", "lost") or check in got or check in self.out.reach:
                return self.skip(path, "malformed", f"line {n}: {line[:80]!r} is not `CHECK ok|lost` for a check "
                                                    "of the plan, once")
            got[check] = state == "ok"
        self.out.reach |= got
        return None

    def nccl(self, path: Path, h: Header, body: str) -> None:
        try:
            r = parsers.nccl_tests(body)
        except (parsers.Truncated, parsers.Malformed, parsers.ToolFailed) as exc:
            return self.skip(path, "truncated" if isinstance(exc, parsers.Truncated) else "malformed", str(exc))
        strangers = [x for x in r.hosts if x not in self.nodes]
        if strangers:
            return self.skip(path, "unknown-host", f"ranks on {', '.join(strangers[:3])}: not nodes of this plan")
        self.out.nccl[h.test] = (str(path), r.avg_busbw, h.threshold or 0.0)
        return None

    def dcgm(self, path: Path, h: Header, body: str) -> None:
        if h.node not in self.nodes:
            return self.skip(path, "unknown-host", f"node {h.node} is not a GPU node of this plan")
        try:
            r = parsers.dcgmi_diag(body)
        except (parsers.Truncated, parsers.Malformed, parsers.ToolFailed) as exc:
            return self.skip(path, "truncated" if isinstance(exc, parsers.Truncated) else "malformed", str(exc))
        self.out.dcgm[h.node] = r.failed
        return None
