"""Validate SONiC config_db.json files against SONiC's own YANG models with yanglint (libyang).

config_db.json is a dict of tables; table `T` lives in YANG module `sonic-x` as
`/sonic-x:sonic-x/T/T_LIST` (or a container per fixed key, e.g. `DEVICE_METADATA/localhost`).
A key `A|B` fills the key leaves of the list with as many keys, in order. Fields that are not
leaves of the list go into a nested single-key list when the model has one (`DSCP_TO_TC_MAP`:
field "26" -> entry {dscp: 26, tc: ...}); anything else is written as it is and left for
libyang to reject. A table no model defines is an error here, never dropped.

The instance data is written as XML, where every value is text and libyang types it from the
schema (JSON would need the number/string encoding of every leaf type). The schema shape (which
table is in which module, lists and their keys) is read from `yanglint -f tree` of the models.

Usage: python -m tests.helpers.sonic_yang [--models DIR] [--hwsku HWSKU] [--merge FILE] CONFIG_DB.json...
(--hwsku merges the buffer and QoS tables that SKU's own templates write, railforge/nos/sonic/buffers, under
each file for its own DEVICE_METADATA.type, PORT and DEVICE_NEIGHBOR: the file as the switch holds it after
`config qos reload` and `config load`.)
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import escape

MODELS = Path(__file__).resolve().parents[1] / "reference" / "sonic-buildimage-086b03bd" / "yang"
_NODE = re.compile(r"^(?P<indent>[ |]*)[+xo]--(?:rw|ro|-w|-x|-n|mp)? (?P<name>\S+?)(?P<flag>[?*!]?)"
                   r"(?:\s+\[(?P<keys>[^\]]+)\])?(?:\s+.*)?$")
_NAMESPACE = re.compile(r'^\s*namespace\s+"?([^";\s]+)"?\s*;', re.M)
_FAILED = re.compile(r'Failed to parse input data file "([^"]+)"')
_MODULE = re.compile(r"^\s*module\s+(\S+)\s*\{", re.M)


class UnknownTable(ValueError):
    pass


@dataclass
class Node:
    name: str
    kind: str  # container | list | leaf | leaf-list
    keys: list[str] = field(default_factory=list)
    children: dict[str, Node] = field(default_factory=dict)


@dataclass
class Table:
    module: str
    namespace: str
    node: Node


def _parse_tree(text: str) -> dict[str, Node]:
    """Top containers of every module from `yanglint -f tree` (choices and cases are transparent)."""
    modules: dict[str, Node] = {}
    stack: list[tuple[int, Node]] = []
    for line in text.splitlines():
        if line.startswith("module: "):
            stack = [(-1, modules.setdefault(line.split()[1], Node(line.split()[1], "module")))]
            continue
        m = _NODE.match(line)
        if m is None or not stack:
            continue
        depth = len(m["indent"])
        while stack and stack[-1][0] >= depth:
            stack.pop()
        parent = stack[-1][1]
        name = m["name"]
        if name.startswith(("(", ":(")):
            stack.append((depth, parent))  # choice / case: children belong to the enclosing node
            continue
        if m["keys"] is not None:
            node = Node(name, "list", m["keys"].split())
        elif m["flag"] == "*":
            node = Node(name, "leaf-list")
        elif line.rstrip().endswith(name + m["flag"]) and m["flag"] != "?":
            node = Node(name, "container")
        else:
            node = Node(name, "leaf")
        parent.children[name] = node
        stack.append((depth, node))
    return modules


class SonicYang:
    """The SONiC models in `models`, loaded once; `validate` checks config_db dicts against them."""

    def __init__(self, models: Path = MODELS):
        self.models = Path(models)
        self.files = sorted(str(p) for p in self.models.glob("*.yang"))
        if not self.files:
            raise FileNotFoundError(f"no YANG models in {self.models}")
        tree = subprocess.run(["yanglint", "-f", "tree", "-p", str(self.models), *self.files],
                              capture_output=True, text=True, check=True).stdout
        namespaces = {}
        for f in self.files:
            text = Path(f).read_text(encoding="utf-8")
            namespaces[_MODULE.search(text)[1]] = _NAMESPACE.search(text)[1]
        self.tables: dict[str, Table] = {}
        for name, module in _parse_tree(tree).items():
            for top in module.children.values():
                for table in top.children.values():
                    if table.kind == "container":
                        self.tables.setdefault(table.name, Table(name, namespaces[name], table))

    def to_xml(self, db: dict) -> str:
        """YANG instance data (XML) of one config_db; UnknownTable for a table no model defines."""
        unknown = sorted(t for t in db if t not in self.tables)
        if unknown:
            raise UnknownTable(f"no SONiC YANG model defines table(s) {', '.join(unknown)}")
        by_module: dict[str, list[str]] = {}
        for name in sorted(db):
            table = self.tables[name]
            by_module.setdefault(table.module, []).append(_table_xml(name, table.node, db[name]))
        out = []
        for module, tables in by_module.items():
            ns = self.tables[next(t for t in db if self.tables[t].module == module)].namespace
            out.append(f'<{module} xmlns="{escape(ns)}">' + "".join(tables) + f"</{module}>")
        return "\n".join(out) + "\n"

    def validate(self, dbs: dict[str, dict]) -> dict[str, str]:
        """name -> libyang's error text for every config_db that fails (empty: all valid).

        One yanglint run takes all files (each validated on its own, models loaded once); it stops at
        the first invalid file and names it, so the run resumes after that file."""
        failures: dict[str, str] = {}
        with tempfile.TemporaryDirectory(prefix="sonic-yang-") as tmp:
            paths: dict[str, str] = {}
            for n, (name, db) in enumerate(dbs.items()):
                try:
                    xml = self.to_xml(db)
                except UnknownTable as e:
                    failures[name] = str(e)
                    continue
                path = Path(tmp) / f"{n:05d}.xml"
                path.write_text(xml, encoding="utf-8")
                paths[str(path)] = name
            todo = list(paths)
            while todo:
                proc = subprocess.run(["yanglint", "-Q", "-t", "config", "-p", str(self.models), *self.files, *todo],
                                      capture_output=True, text=True)
                text = (proc.stdout + proc.stderr).strip()
                if proc.returncode == 0 and not text:
                    break
                bad = _FAILED.search(text)
                if bad is None or bad[1] not in paths:
                    raise RuntimeError(f"yanglint failed without naming a file: {text[:2000]}")
                failures[paths[bad[1]]] = text
                todo = todo[todo.index(bad[1]) + 1:]
        return failures


def _value(v) -> str:
    return escape(str(v).lower() if isinstance(v, bool) else str(v))


def _fields(node: Node, fields: dict) -> str:
    out = []
    for f, v in fields.items():
        child = node.children.get(f)
        if child is None:
            nested = [c for c in node.children.values() if c.kind == "list" and len(c.keys) == 1]
            leaves = [c for c in nested[0].children if c not in nested[0].keys] if len(nested) == 1 else []
            if len(leaves) == 1:
                n = nested[0]
                out.append(f"<{n.name}><{n.keys[0]}>{_value(f)}</{n.keys[0]}><{leaves[0]}>{_value(v)}</{leaves[0]}>"
                           f"</{n.name}>")
                continue
        if isinstance(v, str) and child is not None and child.kind == "leaf-list":
            v = v.split(",")  # config_db writes a leaf-list as one comma-separated string
        if isinstance(v, list):
            out.extend(f"<{f}>{_value(x)}</{f}>" for x in v)
        else:
            out.append(f"<{f}>{_value(v)}</{f}>")
    return "".join(out)


def _table_xml(name: str, table: Node, entries: dict) -> str:
    out = []
    for key, fields in entries.items():
        if key in table.children and table.children[key].kind == "container":
            out.append(f"<{key}>{_fields(table.children[key], fields)}</{key}>")
            continue
        parts = key.split("|")
        lists = [c for c in table.children.values() if c.kind == "list" and len(c.keys) == len(parts)]
        if len(lists) != 1:
            raise UnknownTable(f"{name}: no single list of the model takes the key {key!r} "
                               f"({len(parts)} part(s); lists: "
                               f"{', '.join(f'{c.name}{c.keys}' for c in table.children.values())})")
        lst = lists[0]
        keys = "".join(f"<{k}>{_value(p)}</{k}>" for k, p in zip(lst.keys, parts, strict=True))
        out.append(f"<{lst.name}>{keys}{_fields(lst, fields)}</{lst.name}>")
    return f"<{name}>" + "".join(out) + f"</{name}>"


_BRKOUT = re.compile(r"(\d{1,6})x(\d{1,6}G?)(\[(\d{1,6}G?,?)*\])?(\((\d{1,6})\))?")  # as SONiC's portconfig reads modes


def _speed(text: str) -> int:
    return int(text[:-1]) * 1000 if text.endswith("G") else int(text)


def port_map_findings(db: dict, platform_json: Path) -> list[str]:
    """PORT and BREAKOUT_CFG of one config_db against the platform's platform.json, derived the way SONiC
    derives child ports of a breakout mode (name = parent number + lane offset, lanes, index of the first
    lane, the mode's alias list). Every PORT must be a child of a BREAKOUT_CFG cage."""
    cages = json.loads(platform_json.read_text(encoding="utf-8"))["interfaces"]
    ports = dict(db.get("PORT", {}))
    findings = []
    for parent, cfg in sorted(db.get("BREAKOUT_CFG", {}).items()):
        mode = cfg.get("brkout_mode", "")
        cage = cages.get(parent)
        if cage is None or mode not in cage["breakout_modes"]:
            findings.append(f"BREAKOUT_CFG {parent}: mode {mode!r} is not one of the platform's modes "
                            f"{sorted(cage['breakout_modes']) if cage else '(no such cage)'}")
            continue
        m = _BRKOUT.match(mode)
        lanes, indexes = cage["lanes"].split(","), cage["index"].split(",")
        count = int(m[1])
        per = int(m[6] or len(lanes)) // count
        speeds = {_speed(m[2])} | {_speed(x) for x in (m[3] or "[]")[1:-1].split(",") if x}
        for k in range(count):
            name = f"Ethernet{int(parent.removeprefix('Ethernet')) + k * per}"
            want = {"lanes": ",".join(lanes[k * per:(k + 1) * per]), "index": indexes[k * per],
                    "alias": cage["breakout_modes"][mode][k]}
            got = ports.pop(name, None)
            if got is None:
                findings.append(f"PORT {name} ({mode} of {parent}) is missing")
                continue
            for f, v in want.items():
                if got.get(f) != v:
                    findings.append(f"PORT {name}: {f} {got.get(f)!r}, the platform says {v!r}")
            if int(got.get("speed", 0)) not in speeds:
                findings.append(f"PORT {name}: speed {got.get('speed')} is not one of {mode}")
    findings += [f"PORT {name} is not a port of any BREAKOUT_CFG cage" for name in sorted(ports)]
    return findings


def merged(*dbs: dict) -> dict:
    """config_db documents merged the way `config load` applies them: later tables/keys/fields win."""
    out: dict = {}
    for db in dbs:
        for table, entries in db.items():
            t = out.setdefault(table, {})
            for key, fields in entries.items():
                t.setdefault(key, {}).update(fields)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=Path, default=MODELS)
    ap.add_argument("--merge", type=Path, action="append", default=[],
                    help="config_db.json merged under every file first (e.g. platform defaults)")
    ap.add_argument("--hwsku", help="merge this SONiC SKU's rendered buffer/QoS defaults under every file")
    ap.add_argument("files", type=Path, nargs="+")
    args = ap.parse_args(argv)
    base = [json.loads(p.read_text(encoding="utf-8")) for p in args.merge]
    start = time.monotonic()
    dbs = {str(p): json.loads(p.read_text(encoding="utf-8")) for p in args.files}
    failures: dict[str, str] = {}
    if args.hwsku:
        from railforge.nos.sonic.buffer_defaults import BufferDataError, BufferTemplateMissing
        from tests.helpers.sonic_buffers import platform_defaults

        for k, db in list(dbs.items()):
            try:
                dbs[k] = merged(platform_defaults(db, args.hwsku), db)
            except (BufferDataError, BufferTemplateMissing) as exc:
                failures[k] = str(exc)
                del dbs[k]
    failures.update(SonicYang(args.models).validate({k: merged(*base, db) for k, db in dbs.items()}))
    for name, text in failures.items():
        print(f"{name}:\n  " + text.replace("\n", "\n  "))
    print(f"{len(args.files) - len(failures)}/{len(args.files)} valid ({time.monotonic() - start:.1f} s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
