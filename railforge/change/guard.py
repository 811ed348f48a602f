"""The renumbering guard of `railforge build`: an output folder holding an earlier plan is only replaced by a
plan that keeps every existing device, cable label, port, address and ASN (adding is fine)."""

from __future__ import annotations

import io
from collections import Counter
from pathlib import Path

from railforge.change.compare import compare
from railforge.change.sides import ChangeInputError, read_side
from railforge.plan import outdir
from railforge.plan.io import write_plan
from railforge.plan.model import Plan

EXAMPLES = 5


class Refused(Exception):
    pass


KIND_ORDER = ("cable", "device", "asn", "address", "pool", "rack", "port")


def _plural(kind: str, n: int) -> str:
    return kind if n == 1 else kind + ("es" if kind.endswith("s") else "s")


def summarise(counts: Counter) -> str:
    return ", ".join(f"{n:,} {_plural(kind, n)} {action}" for (kind, action), n in sorted(
        counts.items(), key=lambda kv: (KIND_ORDER.index(kv[0][0]) if kv[0][0] in KIND_ORDER else 9, kv[0])))


def check_growth(plan: Plan, target: Path, spec: Path, option: str) -> None:
    """Raise Refused when `target/plan.json` exists and `plan` would change what it describes."""
    previous = target / outdir.PLAN
    if not previous.is_file():
        return
    hint = f"pass {option} to replace it anyway"
    if _same_bytes(plan, previous):
        return
    try:
        old = read_side(previous).plan
    except ChangeInputError as exc:
        raise Refused(f"{target} holds a plan this build cannot compare with ({exc}); {hint}") from None
    if old.cluster.name != plan.cluster.name:
        raise Refused(f"{target} holds the plan of cluster {old.cluster.name!r}, not {plan.cluster.name!r}; "
                      f"choose another --out or {hint}")
    breaking = compare(old, plan).breaking()
    if not breaking:
        return
    counts = Counter((i.kind, i.action) for i in breaking)
    examples = "\n".join(f"  {i.kind} {i.action}: {i.subject}: {i.old} -> {i.new or '(gone)'}"
                         for i in _spread(breaking))
    raise Refused(
        f"this build would change what already exists in {target} (the plan of {old.cluster.sus} SUs, designed for "
        f"{old.cluster.max_sus}; the new one has {plan.cluster.sus} of {plan.cluster.max_sus}): "
        f"{summarise(counts)}. For example:\n{examples}\n"
        f"Nothing was written. See every change and the work order with:\n"
        f"  railforge build {spec} --out NEW && railforge diff {target} NEW\n"
        f"Grow within scalable_units.max to only add; {hint}.")


def _same_bytes(plan: Plan, previous: Path) -> bool:
    """The common rebuild: the plan serialises to the very bytes already there (no parse, no compare)."""
    buf = io.BytesIO()
    write_plan(plan, buf)
    return buf.getvalue() == previous.read_bytes()


def _spread(items: list) -> list:
    """A few examples, one per kind of change first."""
    seen, first = set(), []
    for i in sorted(items, key=lambda i: KIND_ORDER.index(i.kind) if i.kind in KIND_ORDER else 9):
        if (i.kind, i.action) not in seen:
            seen.add((i.kind, i.action))
            first.append(i)
    return (first + [i for i in items if i not in first])[:EXAMPLES]
