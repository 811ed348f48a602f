"""Slow and failed pair tests -> suspect cables, named only after a re-test round.

Candidates: every cable a slow or failed test is certain to cross that lies on no healthy test's path, and every
ECMP bundle (a leaf's uplinks, a pod's spine uplinks, a storage bond's members) a slow test spreads over (a
healthy test through a bundle does not clear it: its flows may have missed the bad cable). Suspects are the
fewest candidates that explain every slow test, chosen greedily: the candidate on the most still-unexplained
slow tests, ties broken by the share of its tests that are slow (a bad node cable: 2 of 2; the uplink bundle
above it: 2 of 32). A candidate is named only when it explains at least two slow tests ("on several slow paths
and on no healthy one") and no other candidate explains exactly as much as well; otherwise the slow tests are
reported as unexplained with their candidates. Every NIC is in two tests with different partners on other
leaves, so a bad node cable is on two slow paths while its partners' cables are cleared by their other test.
Skipped results (truncated, unknown) count as neither healthy nor slow.

Re-test before blame (`require_retest`), as burn-ins are run: one loaded round, a flaky optic or a partner's
own trouble can make a healthy cable look bad once, so the first rounds' evidence only makes a candidate
suspicious. `acceptance retest` plans a re-test round from it (`retest`): every slow or failed pair again, each
suspicious NIC with two new, healthy partners, and two healthy pairs over each suspicious upper cable or bundle.
Then a candidate is blamed only when one of its slow paths is a re-test's; until its re-test has results it is
`to_retest`. A first-round slow test whose own re-run passed and that no blamed cable explains is
`not_reproduced`: reported, never blamed. A candidate the re-test round could not pair (the doc's
`not_retested`, with the reason) is judged on the first rounds' evidence alone.
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
    to_retest: list[Suspect] = ()
    not_reproduced: tuple[str, ...] = ()
    retested: bool = False

    @property
    def clean(self) -> bool:
        """Nothing to blame, nothing left to re-test, nothing unexplained (a slow test not reproduced on its
        re-test is no fault)."""
        return not (self.suspects or self.bundles or self.unexplained or self.to_retest)


def analyse(doc: AcceptanceDoc, results: Results, require_retest: bool = False) -> Analysis:
    tests = {t.id: t for r in doc.rounds for t in r.tests}
    in_retest = {t.id for r in doc.rounds if r.retest for t in r.tests}
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
    blamed, pending = named, []
    if require_retest:
        exempt = set(doc.not_retested)
        blamed = [s for s in named if s.cable in exempt or any(t in in_retest for t in s.tests)]
        pending = [s for s in named if s not in blamed]
    explained = {t for s in blamed + pending for t in s.tests}
    reran_ok = {t.retest_of for r in doc.rounds if r.retest for t in r.tests
                if t.retest_of and results.pairs.get(t.id) is not None and results.pairs[t.id].status == "ok"}
    not_reproduced = tuple(sorted(t for t in left if t in reran_ok and t not in explained))
    left -= set(not_reproduced)
    unexplained = [Unexplained(tid, bad[tid].status, tuple(tests[tid].bundles),
                               tuple(c for c in tests[tid].cables if c not in healthy)) for tid in sorted(left)]
    return Analysis([s for s in blamed if not s.bundle], [s for s in blamed if s.bundle], unexplained,
                    counts["ok"], counts["slow"], counts["failed"], len(tests) - len(results.pairs),
                    to_retest=pending, not_reproduced=not_reproduced, retested=bool(in_retest))
