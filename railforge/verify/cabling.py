"""Compare observed adjacencies with the planned links, cable by cable.

Findings name the printed cable labels: a swapped pair names both cables, a cable on the wrong port or
switch names the cable and where its far end really landed, a planned cable nobody reports is missing,
a reported cable the plan does not have is unexpected, and a matching cable at another speed is flagged.
Planned cables are judged where the observation covers one of their ends (a device we have a view of),
or with `partial` only where it covers both.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from railforge.plan.model import Link
from railforge.verify.observed import End, Observation

KINDS = ("swapped", "wrong-switch", "wrong-port", "missing", "unexpected", "wrong-speed")


@dataclass(slots=True)
class Finding:
    kind: str
    cables: list[str]
    message: str


@dataclass(slots=True)
class CablingReport:
    checked: int = 0
    matched: int = 0
    findings: list[Finding] = field(default_factory=list)
    unresolved: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.findings

    def count(self, kind: str) -> int:
        return sum(1 for f in self.findings if f.kind == kind)


def _fmt(end: End) -> str:
    return f"{end[0]}:{end[1]}"


def _edge(a: End, b: End) -> frozenset[End]:
    return frozenset((a, b))


def compare(links: list[Link], obs: Observation, check_speed: bool = True, partial: bool = False) -> CablingReport:
    """`partial`: the observation covers part of the fabric; judge only cables with both ends observed."""
    planned: dict[frozenset[End], Link] = {}
    at: dict[End, tuple[Link, End]] = {}
    for link in links:
        a, b = (link.a.device, link.a.port), (link.b.device, link.b.port)
        planned[_edge(a, b)] = link
        at[a] = (link, b)
        at[b] = (link, a)
    seen: dict[frozenset[End], int | None] = {}
    for adj in obs.adjacencies:
        e = _edge(adj.local, adj.remote)
        if seen.get(e) is None:
            seen[e] = adj.speed_mbps
    report = CablingReport(unresolved=list(obs.unresolved))
    if partial:
        in_scope = [lk for lk in links if lk.a.device in obs.devices and lk.b.device in obs.devices]
    else:
        in_scope = [lk for lk in links if lk.a.device in obs.devices or lk.b.device in obs.devices]
    report.checked = len(in_scope)
    touched: set[End] = set()
    extra = sorted((e for e in seen if e not in planned), key=lambda e: sorted(e))
    done: set[frozenset[End]] = set()
    for e in extra:
        if e in done:
            continue
        p, q = sorted(e)
        lp, lq = at.get(p), at.get(q)
        touched.update((p, q))
        if lp and lq and lp[0] is not lq[0]:
            mirror = _edge(lp[1], lq[1])
            if mirror in seen and mirror not in planned:
                done.add(mirror)
                touched.update(mirror)
                l1, l2 = sorted((lp[0], lq[0]), key=lambda x: x.id)
                report.findings.append(Finding("swapped", [l1.id, l2.id], (
                    f"cables {l1.id} and {l2.id} are swapped: {l1.id} is planned {_fmt((l1.a.device, l1.a.port))}"
                    f" - {_fmt((l1.b.device, l1.b.port))} and {l2.id} {_fmt((l2.a.device, l2.a.port))} - "
                    f"{_fmt((l2.b.device, l2.b.port))}, but {_fmt(p)} sees {_fmt(q)} and {_fmt(lp[1])} sees "
                    f"{_fmt(lq[1])}")))
                continue
        blamed = [(here, there, end) for here, there, end in ((p, q, lp), (q, p, lq))
                  if end and _edge(here, end[1]) not in seen]
        if not blamed:
            report.findings.append(Finding("unexpected", [], f"unexpected cable {_fmt(p)} - {_fmt(q)}: not planned"))
        for here, there, (link, want) in blamed:
            kind = "wrong-port" if want[0] == there[0] else "wrong-switch"
            report.findings.append(Finding(kind, [link.id], (
                f"cable {link.id} from {_fmt(here)} should reach {_fmt(want)} but reaches {_fmt(there)}")))
    for link in in_scope:
        a, b = (link.a.device, link.a.port), (link.b.device, link.b.port)
        e = _edge(a, b)
        if e in seen:
            report.matched += 1
            speed = seen[e]
            if check_speed and speed is not None and speed != link.speed_mbps:
                report.matched -= 1
                report.findings.append(Finding("wrong-speed", [link.id], (
                    f"cable {link.id} {_fmt(a)} - {_fmt(b)} runs at {speed // 1000}G, planned "
                    f"{link.speed_mbps // 1000}G")))
        elif a not in touched and b not in touched:
            report.findings.append(Finding("missing", [link.id], f"cable {link.id} {_fmt(a)} - {_fmt(b)} not seen"))
    order = {k: i for i, k in enumerate(KINDS)}
    report.findings.sort(key=lambda f: (order[f.kind], f.cables, f.message))
    return report
