"""The test's stateless image, from Debian packages: the kernel of `debian-installer-12-netboot-amd64`, its e1000 and
virtio-net modules (taken from the same package's initrd, so kernel and modules match), static busybox
(`busybox-static`) and the /init in init.sh. Built once and cached under /var/cache/railforge/boot-image/<hash of
every input>."""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

DI = Path("/usr/lib/debian-installer/images/12/amd64/text/debian-installer/amd64")
KERNEL, DI_INITRD = DI / "linux", DI / "initrd.gz"
BUSYBOX = Path("/bin/busybox")
HERE = Path(__file__).parent
SCRIPTS = {"init": HERE / "init.sh", "udhcpc.sh": HERE / "udhcpc.sh"}
MODULES = tuple(f"kernel/drivers/{m}.ko" for m in (  # in load order: e1000 (legacy BIOS machine), virtio-net (UEFI)
    "net/ethernet/intel/e1000/e1000", "virtio/virtio_ring", "virtio/virtio", "virtio/virtio_pci_legacy_dev",
    "virtio/virtio_pci_modern_dev", "virtio/virtio_pci")) + ("kernel/net/core/failover.ko",) + tuple(
    f"kernel/drivers/net/{m}.ko" for m in ("net_failover", "virtio_net"))
CACHE = Path(os.environ.get("RAILFORGE_CACHE", "/var/cache/railforge")) / "boot-image"


def _key() -> str:
    h = hashlib.sha256()
    for p in (KERNEL, DI_INITRD, BUSYBOX, *SCRIPTS.values()):
        h.update(p.name.encode() + b"\0" + p.read_bytes())
    h.update(repr(MODULES).encode())
    return h.hexdigest()[:16]


def _extract_modules(dest: Path, work: Path) -> None:
    raw = work / "di-initrd.cpio"
    with gzip.open(DI_INITRD) as src, raw.open("wb") as out:
        shutil.copyfileobj(src, out)
    listing = subprocess.run(["cpio", "-t", "--quiet"], stdin=raw.open("rb"), capture_output=True, text=True,
                             check=True).stdout.split()
    wanted = [n for n in listing if any(n.endswith("/" + m) for m in MODULES)]
    if len(wanted) != len(MODULES):
        raise RuntimeError(f"{DI_INITRD} lacks {MODULES}: found {wanted}")
    unpack = work / "di"
    unpack.mkdir()
    subprocess.run(["cpio", "-i", "-d", "--quiet", *wanted], stdin=raw.open("rb"), cwd=unpack, check=True)
    for name in wanted:
        shutil.copy(unpack / name, dest / Path(name).name)
    (dest.parent.parent / "modules.order").write_text("".join(f"{Path(m).name}\n" for m in MODULES))


def build_image() -> tuple[Path, Path]:
    """(vmlinuz, initrd.img) of the cached image, building it when its inputs changed."""
    final = CACHE / _key()
    if (final / "initrd.img").is_file():
        return final / "vmlinuz", final / "initrd.img"
    work = CACHE / f".build-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    root = work / "root"
    try:
        for d in ("bin", "dev", "proc", "sys", "tmp", "lib/modules"):
            (root / d).mkdir(parents=True)
        shutil.copy(BUSYBOX, root / "bin" / "busybox")
        (root / "bin" / "sh").symlink_to("busybox")
        for name, src in SCRIPTS.items():
            shutil.copy(src, root / name)
            (root / name).chmod(0o755)
        os.mknod(root / "dev" / "console", 0o600 | 0o020000, os.makedev(5, 1))
        _extract_modules(root / "lib" / "modules", work)
        names = sorted(str(p.relative_to(root)) for p in root.rglob("*"))
        cpio = subprocess.run(["cpio", "-o", "-H", "newc", "--quiet", "--owner", "0:0", "--reproducible"],
                              input="\n".join(names).encode(), cwd=root, capture_output=True, check=True).stdout
        out = work / "out"
        out.mkdir()
        (out / "initrd.img").write_bytes(gzip.compress(cpio, mtime=0))
        shutil.copy(KERNEL, out / "vmlinuz")
        CACHE.mkdir(parents=True, exist_ok=True)
        try:
            os.rename(out, final)
        except OSError:
            if not (final / "initrd.img").is_file():
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return final / "vmlinuz", final / "initrd.img"
