"""Write the generated boot files under generated/boot without touching boot/images (the user's images): the
scripts and preseeds are staged completely first, then each generated entry (boot.ipxe, hosts/, preseed/) is swapped
in by rename, so a failure leaves the previous files in place."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from railforge.provision.served import ServedFile

GENERATED = ("boot.ipxe", "hosts", "preseed")


def write_boot_tree(generated: Path, files: list[ServedFile]) -> None:
    root = generated / "boot"
    root.mkdir(parents=True, exist_ok=True)
    stage = root / f".staging-{os.getpid()}"
    shutil.rmtree(stage, ignore_errors=True)
    try:
        for name in ("hosts", "preseed"):
            (stage / name).mkdir(parents=True)
        for f in files:
            dest = stage / Path(f.path).relative_to("boot")
            fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL, f.mode)
            with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
                fh.write(f.text)
            os.chmod(dest, f.mode)
        old = root / f".old-{os.getpid()}"
        old.mkdir()
        for name in GENERATED:
            if (root / name).exists():
                os.rename(root / name, old / name)
            os.rename(stage / name, root / name)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
