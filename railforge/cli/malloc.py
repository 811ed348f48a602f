"""glibc malloc settings for `railforge build`: keep freed memory in the process instead of handing it back.

A 131K-GPU build allocates and frees ~2.5 GB of output text, one string or bytes object of 100 KB to a few MB
per file. By default glibc serves blocks over its mmap threshold with fresh mappings and trims the heap top
once 128 KiB are free, so the same memory goes back to the kernel and is faulted in, zeroed, again and again.
A fixed 64 MiB mmap threshold, 256 MiB trim threshold and 64 MiB top pad cut the 131K build's minor faults
from 1.28 M to 0.90 M and its CPU by 2-12% (`--jobs 2`, side by side, two pairs). This is one libc call per
setting, which no library wraps; where the C library has no `mallopt` (macOS) nothing changes.
"""

from __future__ import annotations

import ctypes

M_TRIM_THRESHOLD = -1
M_TOP_PAD = -2
M_MMAP_THRESHOLD = -3
SETTINGS = ((M_MMAP_THRESHOLD, 64 << 20), (M_TRIM_THRESHOLD, 256 << 20), (M_TOP_PAD, 64 << 20))


def keep_freed_memory() -> bool:
    """Apply SETTINGS; True when the C library accepted every one."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return all(mallopt(param, value) == 1 for param, value in SETTINGS)
