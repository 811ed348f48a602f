"""Shared for the bare-metal tests: one build of the ZTP test spec (16 GPU nodes, 3 management hosts) and a
filled-in host MAC file."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli

SPEC = ROOT / "tests" / "specs" / "ztp-mixed.yaml"


def bmc_mac(i: int) -> str:
    return f"0c:42:b0:00:{i // 256:02x}:{i % 256:02x}"


def boot_mac(i: int) -> str:
    return f"52:54:00:12:{i // 256:02x}:{i % 256:02x}"


def fill_host_macs(template: Path, dest: Path, skip: tuple[str, ...] = ()) -> list[dict[str, str]]:
    """Fill every row of the template (BMC MAC, boot MAC where the host has a boot NIC, serial SN-<host>)."""
    rows = list(csv.DictReader(template.open()))
    for i, r in enumerate(rows):
        if r["host"] in skip:
            continue
        r["bmc_mac"] = bmc_mac(i)
        r["boot_mac"] = boot_mac(i) if r["boot_nic"] else ""
        r["serial"] = f"SN-{r['host']}"
    with dest.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    return rows


@pytest.fixture(scope="session")
def bm_build(tmp_path_factory) -> tuple[Path, Path]:
    """(cluster folder, generated folder) of the ZTP spec, with host-macs.csv filled in the cluster folder."""
    base = tmp_path_factory.mktemp("baremetal")
    out = base / "generated"
    run_cli("build", str(SPEC), "--out", str(out))
    fill_host_macs(out / "host-macs.csv", base / "host-macs.csv")
    return base, out
