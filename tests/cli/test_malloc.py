"""The build's malloc settings, checked against glibc itself: memory freed is reused without faulting it in."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt settings are glibc's")

# 40 MB is over glibc's largest dynamic mmap threshold (32 MiB): by default every such block is a new mapping
# whose pages fault in again; with the build's settings it comes from the heap that the last one left.
_CHURN = """
import resource, sys
from railforge.cli.malloc import keep_freed_memory
if sys.argv[1] == "tuned":
    assert keep_freed_memory()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    block = b"x" * (40 << 20)
    del block
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", _CHURN, mode], capture_output=True, text=True, check=True)
    return int(out.stdout)


def test_freed_blocks_are_reused_without_faulting_them_in_again():
    default, tuned = _faults("default"), _faults("tuned")
    pages = (40 << 20) // 4096
    assert default >= 9 * pages, (default, tuned)
    assert tuned <= 2 * pages, (default, tuned)
