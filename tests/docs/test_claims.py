"""Statements in the docs that the planner decides, held to the planner."""

from __future__ import annotations

from railforge.planner import build_plan
from railforge.spec import load_spec
from tests.conftest import ROOT, example_spec


def _dgx(tmp_path, count: int, maximum: int):
    text = example_spec("dgx-h100-4su").read_text()
    assert "  count: 4\n" in text and "  max: 4 " in text
    spec = tmp_path / "cluster.yaml"
    spec.write_text(text.replace("  count: 4\n", f"  count: {count}\n").replace("  max: 4 ", f"  max: {maximum} "))
    loaded, lines = load_spec(spec)
    return build_plan(loaded, lines, str(spec))


def _spines_and_links_per_pair(plan) -> tuple[int, int]:
    spines = {d.name for d in plan.devices if d.fabric == "compute" and d.role == "spine"}
    pairs: dict[tuple[str, str], int] = {}
    for lk in plan.links:
        ends = {lk.a.device, lk.b.device}
        up = ends & spines
        if lk.fabric == "compute" and up and len(ends) == 2:
            pairs[tuple(sorted(ends))] = pairs.get(tuple(sorted(ends)), 0) + 1
    return len(spines), max(pairs.values())


def test_a_fifth_dgx_su_validates_with_32_spines_as_the_docs_say(tmp_path):
    assert _spines_and_links_per_pair(_dgx(tmp_path, 4, 4)) == (16, 2)
    assert _spines_and_links_per_pair(_dgx(tmp_path, 5, 5)) == (32, 1)
    doc = " ".join((ROOT / "docs" / "tools" / "change.md").read_text().split())
    assert "a 5th SU is not an error: it validates with 32 spines" in doc
    assert "a 5th SU is a spec error" not in doc


def test_bundled_specs_carry_the_editor_schema_line():
    """`# yaml-language-server: $schema=...` on the first line: editors with the YAML language server complete and
    check cluster.yaml against the published schema (docs/schemas/cluster.schema.json, generated from the models)."""
    for spec in sorted((ROOT / "inventory").glob("*/cluster.yaml")):
        first = spec.read_text().splitlines()[0]
        assert first == "# yaml-language-server: $schema=../../docs/schemas/cluster.schema.json", spec


def test_the_bom_and_report_pages_quote_the_builds_counts(built):
    """The optical-module and splitter figures quoted on the report and BOM pages are the examples' own."""
    import re

    report = " ".join((ROOT / "docs" / "artifacts" / "report.md").read_text().split())
    bom_page = " ".join((ROOT / "docs" / "artifacts" / "bom.md").read_text().split())
    r16 = (built("roce-16k-railplane") / "report.md").read_text()
    modules, xcvr, aoc = re.search(r"Optical modules: (\d+) \((\d+) transceivers \+ 2 ends of each of (\d+) AOCs",
                                   r16).groups()
    assert f"16K example has {int(modules):,} — {int(xcvr):,} transceivers" in report
    assert f"both ends of {int(aoc):,} AOCs" in report
    rows = (built("dgx-h100-4su") / "bom.csv").read_text().splitlines()
    quantity = {r.split(",")[2]: int(r.split(",")[5]) for r in rows if r.startswith(("transceiver,", "cable,ACC spl"))}
    assert f"{quantity['MMA4Z00-NS']:,} MMA4Z00-NS and {quantity['MMA4Z00-NS400']} MMA4Z00-NS400" in bom_page
    assert f"{quantity['MCA7J60-N005']} `ACC splitter 1:2` (MCA7J60-N005)" in bom_page


def test_the_slurm_mutation_in_the_docs_is_the_one_the_live_tests_name():
    """docs/slurm.md's RAILFORGE_SLURM_MUTATE example once lacked SelectTypeParameters=CR_Memory: select/linear
    then refuses the generated CR_Core_Memory and slurmctld never starts, so no test could fail for a reason."""
    from tests.slurm.conftest import DOCUMENTED_MUTATION

    doc = (ROOT / "docs" / "slurm.md").read_text()
    assert f'RAILFORGE_SLURM_MUTATE="{DOCUMENTED_MUTATION}"' in doc
    keys = dict(item.split("=", 1) for item in DOCUMENTED_MUTATION.split(";"))
    assert keys["TopologyPlugin"] == "topology/none"
    assert keys["SelectType"] != "select/linear" or keys.get("SelectTypeParameters") == "CR_Memory"
