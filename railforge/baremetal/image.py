"""`railforge boot image`: the stateless node image, built here from Debian 12 packages.

    vmlinuz              the Debian kernel (linux-image-amd64 from the mirror)
    initrd.img           initramfs-tools' initramfs (MODULES=netboot: every network driver) with railforge's boot
                         script (image/railforge.boot, `boot=railforge`): DHCP on the BOOTIF NIC, fetch
                         filesystem.squashfs over HTTP into RAM, mount it read-only under a tmpfs overlay
    filesystem.squashfs  the root file system: debootstrap (minbase) with PACKAGES (the host packages the node roles
                         install that exist without a GPU, and what a node needs to boot, be reached by Ansible and
                         report in), the report-in client and its unit (enabled), SSH host keys made on each boot,
                         root locked, the given SSH public keys for root
    manifest.json        kernel, package versions, sizes and SHA-256 of the three files

`railforge boot files` points stateless hosts at `<server>/boot/images/stateless/{vmlinuz,initrd.img,
filesystem.squashfs}`, so `--out` is usually `<generated>/boot/images/stateless`. Needs root (debootstrap, chroot)
and squashfs-tools. The output folder is staged beside `--out` and swapped in by rename.

Why glue here and not a tool: debootstrap, initramfs-tools and mksquashfs do the work; Debian's live-build and
live-boot would too, but build ISO-shaped images configured through a tree of hooks and bring live-config's
first-boot changes, while a node here needs only "fetch, mount, boot" plus railforge's identity on the command line.
No GPU driver, DOCA/OFED or CUDA package is in it: those come from vendor repositories the roles install from.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

from railforge.baremetal.files import CLIENT

SUITE = "bookworm"
# The node roles' host packages (roles/*/defaults/main.yml, a test holds the list to them), then what the node needs.
ROLE_PACKAGES = (
    "pciutils",                                          # host_tuning
    "python3-venv", "python3-packaging", "lldpd", "iproute2",  # node_health (lldpd also node_validate)
    "netplan.io", "procps",                              # rails
    "slurmd", "slurm-client", "munge", "libpmix2", "libpmix-dev",  # slurm_node (PMIx: i38-slurm)
    "iputils-ping",                                      # storage_bond
)
NODE_PACKAGES = (
    "linux-image-amd64", "initramfs-tools", "busybox", "zstd", "systemd-sysv", "udev", "kmod",  # boot
    "openssh-server", "python3", "sudo",                 # Ansible reaches it
    "rdma-core", "ibverbs-utils", "infiniband-diags", "perftest", "ethtool",  # RDMA from Debian (DOCA comes later)
)
PACKAGES = ROLE_PACKAGES + NODE_PACKAGES
# Installed by apt inside the new root after debootstrap: debootstrap's one-pass resolver cannot configure
# libpmix-dev's -dev chain (libltdl-dev fails "configuring base packages" five times); apt orders it.
APT_PACKAGES = ("libpmix-dev",)
# Kept out of the squashfs: the kernel and initramfs (served beside it), caches, documentation, and kernel module
# trees no GPU node loads (sound, media, wireless, Bluetooth, staging, other vendors' GPU drivers).
EXCLUDE = ("boot", "var/cache/apt", "var/lib/apt/lists", "usr/share/doc", "usr/share/man", "usr/share/info",
           "usr/share/locale")
MODULE_TREES = ("kernel/sound", "kernel/drivers/media", "kernel/drivers/net/wireless", "kernel/drivers/bluetooth",
                "kernel/drivers/staging", "kernel/drivers/gpu/drm/amd", "kernel/drivers/gpu/drm/radeon",
                "kernel/drivers/gpu/drm/nouveau", "kernel/drivers/gpu/drm/i915", "kernel/drivers/infiniband/hw/hfi1",
                "kernel/drivers/isdn", "kernel/drivers/input/joystick", "kernel/drivers/iio")
OUTPUT = ("vmlinuz", "initrd.img", "filesystem.squashfs", "manifest.json")


class ImageError(RuntimeError):
    pass


@dataclass(slots=True, frozen=True)
class ImageOptions:
    out: Path
    mirror: str = "http://deb.debian.org/debian"
    ssh_authorized_keys: tuple[str, ...] = ()
    extra_packages: tuple[str, ...] = ()
    compression: str = "zstd"


def recipe_files() -> dict[str, bytes]:
    """Every file of the recipe, by name: what a cache of the image is keyed on (with the options)."""
    here = files("railforge.baremetal")
    got = {"image.py": Path(__file__).read_bytes()}
    for name in ("railforge.boot", "railforge.hook"):
        got[f"image/{name}"] = (here / "image" / name).read_bytes()
    for name in CLIENT:
        got[f"client/{name}"] = (here / "client" / name).read_bytes()
    return got


def cache_key(opts: ImageOptions) -> str:
    h = hashlib.sha256()
    for name, data in sorted(recipe_files().items()):
        h.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    h.update(json.dumps([opts.mirror, list(opts.ssh_authorized_keys), list(opts.extra_packages), opts.compression,
                         SUITE]).encode())
    return h.hexdigest()[:16]


def _run(*cmd: str) -> str:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as exc:
        raise ImageError(f"{cmd[0]}: cannot run ({exc.strerror or exc.__class__.__name__})") from None
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-15:]
        raise ImageError(f"{' '.join(cmd[:4])}... failed ({proc.returncode}):\n" + "\n".join(tail))
    return proc.stdout


def _write(path: Path, text: str, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    path.chmod(mode)


def _configure(root: Path, opts: ImageOptions) -> None:
    here = files("railforge.baremetal")
    _write(root / "etc/hostname", "railforge-stateless\n")
    _write(root / "etc/hosts", "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
    _write(root / "etc/fstab", "# railforge stateless: the root is a tmpfs overlay over a squashfs in RAM\n")
    _write(root / "etc/machine-id", "")  # made on each boot: every node its own
    for key in root.glob("etc/ssh/ssh_host_*"):
        key.unlink()
    _write(root / "etc/systemd/system/ssh.service.d/railforge-host-keys.conf",
           "# railforge: the image carries no SSH host keys; each node makes its own on boot\n"
           "[Service]\nExecStartPre=\nExecStartPre=/usr/bin/ssh-keygen -A\nExecStartPre=/usr/sbin/sshd -t\n")
    if opts.ssh_authorized_keys:
        _write(root / "root/.ssh/authorized_keys", "".join(f"{k}\n" for k in opts.ssh_authorized_keys), 0o600)
        (root / "root/.ssh").chmod(0o700)
    _run("chroot", str(root), "passwd", "--lock", "root")
    client = here / "client"
    _write(root / "usr/local/sbin" / CLIENT[0], (client / CLIENT[0]).read_text(encoding="utf-8"), 0o755)
    _write(root / "etc/systemd/system" / CLIENT[1], (client / CLIENT[1]).read_text(encoding="utf-8"))
    wants = root / "etc/systemd/system/multi-user.target.wants" / CLIENT[1]
    wants.parent.mkdir(parents=True, exist_ok=True)
    wants.unlink(missing_ok=True)
    wants.symlink_to(f"/etc/systemd/system/{CLIENT[1]}")
    image = here / "image"
    _write(root / "etc/initramfs-tools/scripts/railforge", (image / "railforge.boot").read_text(encoding="utf-8"))
    _write(root / "etc/initramfs-tools/hooks/railforge", (image / "railforge.hook").read_text(encoding="utf-8"),
           0o755)
    _write(root / "etc/initramfs-tools/conf.d/railforge.conf",
           "# railforge stateless: every network driver (the boot NIC's is not known here), busybox for wget\n"
           "MODULES=netboot\nBUSYBOX=y\nCOMPRESS=zstd\n")


def _kernel(root: Path) -> tuple[str, Path, Path]:
    kernels = sorted((root / "boot").glob("vmlinuz-*"))
    if len(kernels) != 1:
        raise ImageError(f"want one kernel in the image's /boot, found {[k.name for k in kernels]}")
    version = kernels[0].name.removeprefix("vmlinuz-")
    return version, kernels[0], root / "boot" / f"initrd.img-{version}"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def build(opts: ImageOptions, log=print) -> dict:
    """Build the image into `opts.out` (replaced as a whole); the manifest."""
    if os.geteuid() != 0:
        raise ImageError("building the image needs root (debootstrap, chroot)")
    for tool in ("debootstrap", "mksquashfs", "chroot"):
        if shutil.which(tool) is None:
            raise ImageError(f"{tool} not found (apt-get install debootstrap squashfs-tools)")
    out = opts.out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    work = out.parent / f".{out.name}.building-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    root, stage = work / "root", work / "out"
    started = time.monotonic()
    try:
        stage.mkdir(parents=True)
        packages = PACKAGES + opts.extra_packages
        log(f"debootstrap {SUITE} from {opts.mirror} with {len(packages)} packages")
        for attempt in range(3):  # the mirror's name resolution fails now and then for a minute
            try:
                first = [p for p in packages if p not in APT_PACKAGES]
                _run("debootstrap", "--variant=minbase", f"--include={','.join(first)}", SUITE, str(root),
                     opts.mirror)
                later = [p for p in packages if p in APT_PACKAGES]
                if later:
                    resolv = root / "etc/resolv.conf"
                    if not resolv.exists() and Path("/etc/resolv.conf").is_file():
                        shutil.copyfile("/etc/resolv.conf", resolv)
                    _run("chroot", str(root), "apt-get", "update", "-q")
                    _run("chroot", str(root), "env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y",
                         "-q", "--no-install-recommends", *later)
                    _run("chroot", str(root), "apt-get", "clean")
                break
            except ImageError as exc:
                if attempt == 2:
                    raise
                log(f"debootstrap failed, again in {30 * (attempt + 1)} s: {str(exc).splitlines()[-1]}")
                shutil.rmtree(root, ignore_errors=True)
                time.sleep(30 * (attempt + 1))
        _configure(root, opts)
        version, kernel, _ = _kernel(root)
        for tree in MODULE_TREES:
            shutil.rmtree(root / "lib/modules" / version / tree, ignore_errors=True)
        _run("chroot", str(root), "depmod", version)
        log(f"update-initramfs for {version}")
        _run("chroot", str(root), "update-initramfs", "-u", "-k", version)
        version, kernel, initrd = _kernel(root)
        shutil.copyfile(kernel, stage / "vmlinuz")
        shutil.copyfile(initrd, stage / "initrd.img")
        versions = _run("chroot", str(root), "dpkg-query", "-W", "-f", "${Package}=${Version}\\n")
        log(f"mksquashfs ({opts.compression})")
        _run("mksquashfs", str(root), str(stage / "filesystem.squashfs"), "-noappend", "-comp", opts.compression,
             "-no-progress", "-wildcards", "-e", *EXCLUDE)
        manifest = {
            "suite": SUITE, "mirror": opts.mirror, "kernel": version, "packages_asked": list(packages),
            "packages": sorted(versions.split()),
            "files": {name: {"bytes": (stage / name).stat().st_size, "sha256": _sha256(stage / name)}
                      for name in OUTPUT[:3]},
            "build_seconds": round(time.monotonic() - started, 1),
        }
        (stage / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        old = work / "previous"
        if out.exists():
            os.rename(out, old)
        os.rename(stage, out)
        return manifest
    finally:
        shutil.rmtree(work, ignore_errors=True)
