"""`--only` and `--limit` regenerate part of an existing build, byte-identical to a full build,
and leave every other file of the previous output alone."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from tests.conftest import example_spec, run_cli

SPEC = str(example_spec("roce-a800-4nic"))


def _digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_limit_and_only_regenerate_identically(tmp_path: Path) -> None:
    out = tmp_path / "out"
    run_cli("build", SPEC, "--out", str(out))
    full = _digest(out)
    assert "configs/su001-leaf-r0/config_db.json" in full and "ansible/host_vars/su001-gpu01.json" in full

    shutil.rmtree(out / "configs" / "su001-leaf-r0")
    (out / "ansible" / "host_vars" / "su001-gpu01.json").unlink()
    (out / "configs" / "spine01" / "frr.conf").write_text("damaged\n")
    (out / "cabling.csv").write_text("damaged\n")

    run_cli("build", SPEC, "--out", str(out), "--limit", "su001-*")
    after = _digest(out)
    assert after["configs/su001-leaf-r0/config_db.json"] == full["configs/su001-leaf-r0/config_db.json"]
    assert after["configs/su001-leaf-r0/frr.conf"] == full["configs/su001-leaf-r0/frr.conf"]
    assert after["ansible/host_vars/su001-gpu01.json"] == full["ansible/host_vars/su001-gpu01.json"]
    assert (out / "configs" / "spine01" / "frr.conf").read_text() == "damaged\n", "outside --limit: untouched"
    assert (out / "cabling.csv").read_text() == "damaged\n", "--limit only runs per-device families"
    assert set(after) == set(full)

    run_cli("build", SPEC, "--out", str(out), "--only", "sonic,cabling")
    assert _digest(out) == full
    assert not any(p.name.startswith(".out.") for p in tmp_path.iterdir()), "no staging folder left behind"


def test_partial_build_errors(tmp_path: Path) -> None:
    out = tmp_path / "out"
    run_cli("build", SPEC, "--out", str(out), "--only", "sonic")
    assert {p.name for p in out.iterdir()} == {"configs"}, "a partial build into a new folder writes just that"
    proc = run_cli("build", SPEC, "--out", str(out), "--limit", "nothing-like-this-*", check=False)
    assert proc.returncode == 2 and "no device matches" in proc.stderr
    proc = run_cli("build", SPEC, "--out", str(out), "--only", "sonic,pictures", check=False)
    assert proc.returncode == 2 and "unknown families pictures" in proc.stderr
