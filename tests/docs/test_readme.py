"""The README as a front door: its quick start runs as written, its links resolve, the site's getting-started
page says the same, and its picture is what the build writes today."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT, example_spec

README = ROOT / "README.md"
NOT_RUN = {  # quick-start lines that need a clone, root or a shell; what they set up is this test's environment
    "git clone <this repository> railforge && cd railforge",
    "./tasks example",
    ". .venv/bin/activate",
}


def _quickstart(text: str) -> list[str]:
    block = re.search(r"<!-- quickstart[^>]*-->\n```sh\n(.*?)```\n<!-- /quickstart -->", text, re.S)
    assert block, "README has no quick-start block"
    return [line.split("#")[0].strip() for line in block.group(1).splitlines() if line.split("#")[0].strip()]


def test_quickstart_runs_as_written_from_an_empty_folder(tmp_path):
    lines = _quickstart(README.read_text())
    commands = [line for line in lines if line not in NOT_RUN]
    assert set(lines) - set(commands) == NOT_RUN
    assert [c.split()[:2] for c in commands] == [["railforge", "init"], ["railforge", "validate"],
                                                 ["railforge", "build"]]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for command in commands:
        argv = shlex.split(command)
        proc = subprocess.run([sys.executable, "-m", "railforge", *argv[1:]], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, f"{command}: {proc.stderr}"
    built = tmp_path / "inventory" / "my-cluster" / "generated"
    assert (built / "plan.json").stat().st_size > 0
    assert sorted(p.name for p in (built / "configs").iterdir())  # switch configs for the starter's switches


def test_getting_started_page_has_the_same_quickstart():
    assert _quickstart((ROOT / "docs" / "getting-started.md").read_text().replace(
        "```sh\ngit clone", "<!-- quickstart -->\n```sh\ngit clone", 1).replace(
        "my-cluster/cluster.yaml\n```\n", "my-cluster/cluster.yaml\n```\n<!-- /quickstart -->\n", 1)) == \
        _quickstart(README.read_text())


def test_readme_is_a_front_door_and_its_links_resolve():
    text = README.read_text()
    assert len(text.splitlines()) <= 160
    assert "./tasks example" in text and "./tasks test" in text
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    assert len(targets) >= 20
    missing = [t for t in targets if not t.startswith("http") and not (ROOT / t).exists()]
    assert missing == []


def test_readme_picture_is_what_the_build_writes(tmp_path):
    picture = re.search(r"!\[[^\]]*\]\((docs/img/[^)]+\.svg)\)", README.read_text()).group(1)
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "railforge", "build", str(example_spec("dgx-h100-4su")), "--out",
                           str(out), "--only", "svg"], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert (ROOT / picture).read_bytes() == (out / "fabric.svg").read_bytes(), (
        f"{picture} is stale: copy the build's fabric.svg of inventory/dgx-h100-4su there")


def test_no_fact_of_the_old_readme_sections_is_lost():
    """Every README section that moved is a docs page holding its key facts (spot checks of each page)."""
    facts = {
        "proven-by.md": "every file of every example and test spec (119 switches on 5 platforms)",
        "spec/build.md": "58 such specs with their expected messages",
        "artifacts/slurm-topology.md": "Multiple leaf switches contain nodes",
        "tools/ibsim.md": "ibsim",
        "scale.md": "131,072 GPUs",
        "scale-history.md": "round 7, after, clean",
        "ansible.md": "ansible-pull",
        "pulumi.md": "NicClusterPolicy",
    }
    for page, fact in facts.items():
        assert fact in (ROOT / "docs" / page).read_text(), page


def test_spec_reference_and_getting_started_are_in_the_site_nav():
    nav = (ROOT / "mkdocs.yml").read_text()
    for page in ("getting-started.md", "spec/reference.md", "proven-by.md", "scale.md", "scale-history.md"):
        assert re.search(rf":\s+{re.escape(page)}\s*$", nav, re.M), page
    assert Path(ROOT / "docs" / "img").is_dir()
