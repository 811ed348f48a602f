"""`railforge init`: the starter spec (templates/minimal.yaml, the same bytes as inventory/minimal/cluster.yaml)
written into a new folder under the user's cluster name, with the editor-schema line pointing at
cluster.schema.json beside it: the JSON schema of this railforge's spec models, written there too (the bundled
examples' line points into docs/schemas/, which only a checkout of the repository has)."""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

from railforge.spec.models import NAME_RE

SCHEMA_LINE = "# yaml-language-server:"
SCHEMA_FILE = "cluster.schema.json"


class StarterError(Exception):
    """Why the starter spec was not written: one line naming the path or value."""


def starter_text(name: str) -> str:
    text = resources.files("railforge.spec").joinpath("templates/minimal.yaml").read_text()
    lines = [line for line in text.splitlines(keepends=True) if not line.startswith(SCHEMA_LINE)]
    out = f"{SCHEMA_LINE} $schema={SCHEMA_FILE}\n" + "".join(lines)
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
    from railforge.plan.schema import CLUSTER_FILE, rendered

    schema = folder / SCHEMA_FILE
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        with os.fdopen(fd, "w") as fh:
            fh.write(starter_text(name))
        if not schema.exists():
            schema.write_text(rendered()[CLUSTER_FILE], encoding="utf-8")
    except OSError as exc:
        raise StarterError(f"cannot write {exc.filename or target}: {exc.strerror or exc}") from None
    return target


def reference_doc() -> str:
    """Where the spec reference is: the file in a checkout, else where it lives in the railforge sources."""
    here = Path(__file__).resolve().parents[2] / "docs" / "spec" / "reference.md"
    return str(here) if here.is_file() else "docs/spec/reference.md in the railforge sources"
