"""Slow and failed pair tests -> suspect cables.

Candidates: every cable a slow or failed test is certain to cross that lies on no healthy test's path, and every
ECMP bundle (a leaf's uplinks, a pod's spine uplinks) a slow test spreads over (a healthy test through a bundle
does not clear it: its flows may have missed the bad cable). Suspects are the fewest candidates that explain
every slow test, chosen greedily: the candidate on the most still-unexplained slow tests, ties broken by the
share of its tests that are slow (a bad node cable: 2 of 2; the uplink bundle above it: 2 of 32). A candidate is
named only when it explains at least two slow tests ("on several slow paths and on no healthy one") and no
other candidate explains exactly as much as well; otherwise the slow tests are reported as unexplained with
their candidates. Every NIC is in two tests with different partners on other leaves, so a bad node cable is on
two slow paths while its partners' cables are cleared by their other test. Skipped results (truncated, unknown)
count as neither healthy nor slow.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from railforge.acceptance.results import AcceptanceDoc, Results

MIN_SLOW_PATHS = 2


@dataclass(frozen=True, slots=True)
class Suspect:
    cable: str
    slow_paths: int
    tests: tuple[str, ...]
    lowest_gbps: float | None
    bundle: bool = False


@dataclass(frozen=True, slots=True)
class Unexplained:
    test: str
    status: str
    bundles: tuple[str, ...]
    weak: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Analysis:
    suspects: list[Suspect]
    bundles: list[Suspect]
    unexplained: list[Unexplained]
    ok: int
    slow: int
    failed: int
    missing: int


def analyse(doc: AcceptanceDoc, results: Results) -> Analysis:
    tests = {t.id: t for r in doc.rounds for t in r.tests}
    healthy: set[str] = set()
    counts = {"ok": 0, "slow": 0, "failed": 0}
    seen: dict[str, int] = defaultdict(int)
    for tid, res in results.pairs.items():
        counts[res.status] += 1
        for b in tests[tid].bundles:
            seen[b] += 1
        if res.status == "ok":
            healthy.update(tests[tid].cables)
    bad = {tid: res for tid, res in results.pairs.items() if res.status != "ok"}
    covers: dict[tuple[bool, str], set[str]] = defaultdict(set)
    for tid in bad:
        for c in tests[tid].cables:
            if c not in healthy:
                covers[(False, c)].add(tid)
        for b in tests[tid].bundles:
            covers[(True, b)].add(tid)
    left = set(bad)
    named: list[Suspect] = []
    while left:
        scored = sorted(((len(ts & left), len(ts) / max(1, seen[item[1]] if item[0] else len(ts)), item)
                         for item, ts in covers.items() if ts & left), key=lambda x: (-x[0], -x[1], x[2]))
        if not scored or scored[0][0] < MIN_SLOW_PATHS:
            break
        best = scored[0]
        if len(scored) > 1 and scored[1][:2] == best[:2]:
            break
        item = best[2]
        ts = covers.pop(item)
        low = [bad[t].gbps for t in ts if bad[t].gbps is not None]
        named.append(Suspect(item[1], len(ts), tuple(sorted(ts)), min(low) if len(low) == len(ts) else None,
                             bundle=item[0]))
        left -= ts
    unexplained = [Unexplained(tid, bad[tid].status, tuple(tests[tid].bundles),
                               tuple(c for c in tests[tid].cables if c not in healthy)) for tid in sorted(left)]
    return Analysis([s for s in named if not s.bundle], [s for s in named if s.bundle], unexplained,
                    counts["ok"], counts["slow"], counts["failed"], len(tests) - len(results.pairs))
