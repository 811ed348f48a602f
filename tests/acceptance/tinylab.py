"""The burn-in labs' fabric: tiny-roce grown to 3 SUs, 2 hosts per SU, one cable per leaf-spine pair, up in
network namespaces under `prefix` with its acceptance plan written; `lab down` however the tests end."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

from tests.conftest import ROOT, run_cli


@contextlib.contextmanager
def tiny_roce_lab(folder: Path, prefix: str, spines: int) -> Iterator[tuple[Path, Path, Path]]:
    spec = folder / "cluster.yaml"
    text = (ROOT / "tests" / "specs" / "tiny-roce.yaml").read_text()
    assert "  count: 2\n" in text
    spec.write_text(text.replace("  count: 2\n", "  count: 3\n"))
    out = folder / "generated"
    run_cli("build", str(spec), "--out", str(out))
    args = (str(spec), "--out", str(out), "--prefix", prefix)
    t0 = time.monotonic()
    try:
        run_cli("lab", "up", *args, "--sus", "3", "--spines", str(spines), "--parallel", "1", "--hosts-per-su", "2")
        run_cli("acceptance", "plan", str(spec), "--out", str(out), "--lab", prefix, "--to", str(folder / "acc"))
        print(f"lab up and acceptance plan: {time.monotonic() - t0:.1f} s")
        yield spec, out, folder / "acc"
    finally:
        run_cli("lab", "down", *args, check=False)
