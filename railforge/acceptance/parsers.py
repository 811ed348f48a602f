"""Parsers for the text the burn-in tools print: perftest (`ib_write_bw`), nccl-tests (`all_reduce_perf`),
`dcgmi diag`, and iperf3's JSON (the lab's stand-in for ib_write_bw).

Hand-written: none of these tools has a machine-readable mode in the versions deployed (perftest has no JSON
output; nccl-tests prints a commented table; `dcgmi diag -j` exists but sites run the table form). Each parser
either returns a result or raises `Truncated` (the output stops before its summary: the run is unknown, never
healthy or slow), `ToolFailed` (the tool reported an error: the test failed) or `Malformed` (not this tool's
output).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

MEBIBYTE_BITS = 1048576 * 8  # perftest's MB/sec is 2^20 bytes per second


class Truncated(ValueError):
    pass


class Malformed(ValueError):
    pass


class ToolFailed(ValueError):
    """The tool ran and reported an error instead of a result (cannot connect, QP failed): the pair failed."""


@dataclass(frozen=True, slots=True)
class Bandwidth:
    gbps: float
    peak_gbps: float | None = None
    msg_bytes: int | None = None
    retransmits: int | None = None


_PERF_HEAD = re.compile(r"#bytes\s+#iterations\s+BW peak\[(Gb|MB)/sec\]\s+BW average\[(Gb|MB)/sec\]")
_NUM = re.compile(r"^-?\d+(\.\d+)?$")


def perftest_bw(text: str) -> Bandwidth:
    """The last result row of ib_write_bw / ib_read_bw / ib_send_bw (the largest message size with -a)."""
    lines = text.splitlines()
    head = next((i for i, line in enumerate(lines) if _PERF_HEAD.search(line)), None)
    if head is None:
        if any("Couldn't" in x or "Failed to" in x or "Unable to" in x for x in lines):
            raise ToolFailed("perftest printed an error and no result table: " + _first_error(lines))
        raise Truncated("no perftest result header (#bytes #iterations BW peak ...)")
    unit = _PERF_HEAD.search(lines[head]).group(2)
    rows = []
    closed = False
    for line in lines[head + 1:]:
        fields = line.split()
        if set(line.strip()) == {"-"}:
            closed = True
            break
        if len(fields) >= 4 and all(_NUM.match(f) for f in fields[:4]):
            rows.append(fields)
        elif line.strip():
            break
    if not rows or not closed:
        raise Truncated("perftest result table ends before its closing line")
    size, _, peak, avg = rows[-1][:4]
    scale = 1.0 if unit == "Gb" else MEBIBYTE_BITS / 1e9
    return Bandwidth(gbps=float(avg) * scale, peak_gbps=float(peak) * scale, msg_bytes=int(size))


def _first_error(lines: list[str]) -> str:
    return next((x.strip() for x in lines if "Couldn't" in x or "Failed" in x or "Unable" in x), "")[:200]


def iperf3_bw(text: str) -> Bandwidth:
    """iperf3 --json: bits per second the receiver counted, and the sender's retransmits."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise Truncated(f"iperf3 JSON ends or breaks at line {exc.lineno}: {exc.msg}") from None
    if not isinstance(data, dict):
        raise Malformed("iperf3 JSON is not an object")
    if data.get("error"):
        raise ToolFailed(f"iperf3 error: {str(data['error'])[:200]}")
    end = data.get("end")
    try:
        received = end["sum_received"]["bits_per_second"]
        retrans = end["sum_sent"].get("retransmits")
    except (KeyError, TypeError):
        raise Truncated("iperf3 JSON has no end.sum_received") from None
    if not isinstance(received, (int, float)) or isinstance(received, bool) or received < 0:
        raise Malformed(f"iperf3 bits_per_second is {received!r}")
    return Bandwidth(gbps=received / 1e9, retransmits=retrans if isinstance(retrans, int) else None)


_TAG = re.compile(r"^\[\d+,\d+\]<std(out|err)>:")
_RANK = re.compile(r"^#\s+Rank\s+\d+\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(\S+)\s+device")
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*([0-9.]+)")
_OOB = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)\s+(OK|FAILED)")


@dataclass(frozen=True, slots=True)
class Nccl:
    avg_busbw: float
    max_busbw: float
    wrong: int
    hosts: tuple[str, ...] = field(default=())


def nccl_tests(text: str) -> Nccl:
    """all_reduce_perf (any nccl-tests binary): the average and best out-of-place bus bandwidth, data errors,
    and the hosts named in the rank list. `mpirun --tag-output` prefixes are removed."""
    avg = oob = None
    best = 0.0
    wrong = 0
    hosts: list[str] = []
    for raw in text.splitlines():
        line = _TAG.sub("", raw).strip()
        if m := _RANK.match(line):
            hosts.append(m.group(1))
        elif m := _AVG.match(line):
            avg = float(m.group(1))
        elif m := _OOB.match(line):
            oob = int(m.group(1))
        elif line and not line.startswith("#"):
            f = line.split()
            if len(f) in (12, 13) and f[0].isdigit() and f[1].isdigit():
                busbw, errs = f[-6], f[-5]
                if _NUM.match(busbw):
                    best = max(best, float(busbw))
                    wrong += int(errs) if errs.isdigit() else 0
    if avg is None or oob is None:
        raise Truncated("no '# Avg bus bandwidth' and '# Out of bounds values' summary")
    return Nccl(avg_busbw=avg, max_busbw=best, wrong=wrong + oob, hosts=tuple(dict.fromkeys(hosts)))


DCGM_WRAP = 45


@dataclass(frozen=True, slots=True)
class Dcgm:
    results: dict[str, str]

    @property
    def failed(self) -> list[str]:
        return [k for k, v in self.results.items() if any(p.startswith("Fail") for p in v.split("; "))]


def dcgm_rows(text: str) -> dict[str, str]:
    """Test name -> result text of a `dcgmi diag` table. dcgmi wraps a cell's text every DCGM_WRAP characters,
    mid-word or not: a continuation row joins without a space after a full-width row, with one after a shorter. A test
    with results per GPU (`Pass - GPU: 1`, `Fail - GPU: 0`) keeps them joined by '; '. Repeated names
    (Warning, Error, Info notes) are numbered."""
    rows: dict[str, str] = {}
    last = None
    blank = False
    for line in text.splitlines():
        line = line.rstrip()
        if not (line.startswith("|") and line.endswith("|")) or line.startswith("|-----"):
            continue
        cells = line[1:-1].split("|")
        if len(cells) != 2:
            continue
        name, raw = cells[0].strip(), cells[1][1:] if cells[1].startswith(" ") else cells[1]
        value = raw.strip()
        if (name, value) == ("Diagnostic", "Result"):
            continue
        if name:
            if name in rows:
                name = f"{name} #{sum(1 for k in rows if k.split(' #')[0] == name) + 1}"
            rows[name] = value
            last = name
        elif last is not None and value:
            if value.startswith(("Pass", "Fail", "Skip", "Warn")):
                rows[last] = f"{rows[last]}; {value}"
            else:
                rows[last] += (" " if blank else "") + value
        blank = len(value) < DCGM_WRAP
    return rows


def dcgmi_diag(text: str) -> Dcgm:
    lines = [x.rstrip() for x in text.splitlines() if x.strip()]
    if not lines or not lines[0].startswith("Successfully ran diagnostic"):
        if any("Error" in x for x in lines[:3]) and not any(x.startswith("|") for x in lines):
            raise Malformed(f"dcgmi failed: {lines[0][:200]}")
        raise Truncated("no 'Successfully ran diagnostic' line: not the start of a dcgmi diag table")
    if not (lines[-1].startswith("+") and lines[-1].endswith("+") and set(lines[-1]) <= {"+", "-"}):
        raise Truncated("dcgmi diag table has no closing border")
    rows = dcgm_rows(text)
    if not rows:
        raise Truncated("dcgmi diag table has no rows")
    return Dcgm(rows)
