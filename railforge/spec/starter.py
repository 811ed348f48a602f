"""`railforge init`: the starter spec (templates/minimal.yaml, the same bytes as inventory/minimal/cluster.yaml)
written into a new folder under the user's cluster name. The editor-schema line is left out: its relative path
only holds inside this repository."""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

from railforge.spec.models import NAME_RE

SCHEMA_LINE = "# yaml-language-server:"


class StarterError(Exception):
    """Why the starter spec was not written: one line naming the path or value."""


def starter_text(name: str) -> str:
    text = resources.files("railforge.spec").joinpath("templates/minimal.yaml").read_text()
    lines = [line for line in text.splitlines(keepends=True) if not line.startswith(SCHEMA_LINE)]
    out = "".join(lines)
    if "\nname: my-cluster\n" not in out:
        raise StarterError("the packaged starter spec has no 'name: my-cluster' line; reinstall railforge")
    return out.replace("\nname: my-cluster\n", f"\nname: {name}\n", 1)


def write_starter(folder: Path, name: str | None = None) -> Path:
    name = name if name is not None else folder.resolve().name
    if not NAME_RE.fullmatch(name):
        raise StarterError(f"{name!r} is not a valid cluster name: use 1-32 lowercase letters, digits and '-', "
                           "starting and ending with a letter or digit; pass --name NAME")
    target = folder / "cluster.yaml"
    if target.exists() or target.is_symlink():
        raise StarterError(f"{target} already exists; nothing was written (choose another folder)")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        with os.fdopen(fd, "w") as fh:
            fh.write(starter_text(name))
    except OSError as exc:
        raise StarterError(f"cannot write {target}: {exc.strerror or exc}") from None
    return target
