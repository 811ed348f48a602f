"""The stateless node image that `railforge boot image` builds (debootstrap, initramfs-tools, squashfs), for the PXE
test. Building takes minutes, so it is cached under /var/cache/railforge/stateless-image/<key>, the key taken over
the recipe's files and options (railforge.baremetal.image.cache_key): CI builds it once per recipe change, like the
Molecule image. A lock file keeps two test runs from building it at once; older keys are removed.
RAILFORGE_STATELESS_IMAGE=<folder> boots an image built elsewhere instead (while working on the test)."""

from __future__ import annotations

import fcntl
import os
import shutil
from pathlib import Path

from railforge.baremetal.image import ImageOptions, cache_key
from tests.conftest import run_cli

CACHE = Path(os.environ.get("RAILFORGE_CACHE", "/var/cache/railforge")) / "stateless-image"


def stateless_image() -> Path:
    """The folder holding vmlinuz, initrd.img, filesystem.squashfs and manifest.json, built if not cached."""
    if os.environ.get("RAILFORGE_STATELESS_IMAGE"):
        return Path(os.environ["RAILFORGE_STATELESS_IMAGE"])
    final = CACHE / cache_key(ImageOptions(CACHE))
    if (final / "manifest.json").is_file():
        return final
    CACHE.mkdir(parents=True, exist_ok=True)
    with (CACHE / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (final / "manifest.json").is_file():
            run_cli("boot", "image", "--out", str(final))
            for old in CACHE.iterdir():
                if old.is_dir() and old != final and not old.name.startswith("."):
                    shutil.rmtree(old, ignore_errors=True)
    return final


def link_into(src: Path, dest: Path, names: dict[str, str]) -> None:
    """Hard-link (or copy, across file systems) src/<name> to dest/<new name>."""
    dest.mkdir(parents=True, exist_ok=True)
    for name, new in names.items():
        (dest / new).unlink(missing_ok=True)
        try:
            os.link(src / name, dest / new)
        except OSError:
            shutil.copyfile(src / name, dest / new)
