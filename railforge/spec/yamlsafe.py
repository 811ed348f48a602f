"""A strict, bounded YAML reader for specs: plain data only, with limits on size, depth and alias expansion.

What it refuses (each with the file's line): a file that is not a regular file or is larger than MAX_BYTES,
text that is not UTF-8, nesting deeper than MAX_DEPTH, a document that expands (aliases included) to more than
MAX_NODES nodes, a recursive alias, a duplicate key, a key that is not a plain scalar, any tag outside plain
YAML data (str, int, float, bool, null, seq, map, merge), an integer of more than MAX_INT_DIGITS digits, a string
longer than MAX_SCALAR_CHARS or one holding a control character (a newline included).
Dates stay strings and `2:1` stays a string (no YAML 1.1 timestamps or base-60 numbers)."""

from __future__ import annotations

import re
from pathlib import Path

from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.error import MarkedYAMLError
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import Resolver
from yaml.scanner import Scanner

from railforge import inputs

MAX_BYTES = 256 << 10
MAX_DEPTH = 32
MAX_NODES = 50_000
MAX_INT_DIGITS = 30
MAX_SCALAR_CHARS = 4096

T = "tag:yaml.org,2002:"
ALLOWED_TAGS = {T + t for t in ("str", "int", "float", "bool", "null", "seq", "map", "merge")}
INT_RE = re.compile(r"""^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+)$""")
FLOAT_RE = re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?
    |[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$""", re.X)


class SpecYAMLError(MarkedYAMLError):
    """A refusal by the strict reader; `problem` is the message, `problem_mark` the place."""

    def __init__(self, problem: str, node_or_mark: object = None):
        mark = getattr(node_or_mark, "start_mark", node_or_mark)
        super().__init__(problem=problem, problem_mark=mark)


class SpecFileError(Exception):
    """The spec file itself cannot be read (missing, a directory, a FIFO, too large, not UTF-8)."""

    def __init__(self, message: str, line: int | None = None):
        super().__init__(message)
        self.message = message
        self.line = line


class StrictResolver(Resolver):
    yaml_implicit_resolvers = {
        first: [(tag, rx) for tag, rx in resolvers if tag not in (T + "timestamp", T + "int", T + "float")]
        for first, resolvers in Resolver.yaml_implicit_resolvers.items()
    }


StrictResolver.add_implicit_resolver(T + "int", INT_RE, list("-+0123456789"))
StrictResolver.add_implicit_resolver(T + "float", FLOAT_RE, list("-+0123456789."))


class BoundedComposer(Composer):
    def __init__(self) -> None:
        super().__init__()
        self._depth = 0

    def compose_node(self, parent: Node | None, index: object) -> Node:
        if self.check_event(AliasEvent):
            return super().compose_node(parent, index)
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise SpecYAMLError(f"nested deeper than {MAX_DEPTH} levels", self.peek_event().start_mark)
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


class StrictConstructor(SafeConstructor):
    def construct_yaml_int(self, node: ScalarNode) -> int:
        digits = sum(ch.isalnum() for ch in node.value)
        if digits > MAX_INT_DIGITS:
            raise SpecYAMLError(f"an integer of {digits} digits; at most {MAX_INT_DIGITS} are read", node)
        try:
            return super().construct_yaml_int(node)
        except ValueError:
            raise SpecYAMLError(f"{node.value[:40]!r} is not an integer", node) from None

    def construct_yaml_float(self, node: ScalarNode) -> float:
        try:
            return super().construct_yaml_float(node)
        except ValueError:
            raise SpecYAMLError(f"{node.value[:40]!r} is not a number", node) from None

    def construct_yaml_bool(self, node: ScalarNode) -> bool:
        if node.value.lower() not in self.bool_values:
            raise SpecYAMLError(f"{node.value[:40]!r} is not true or false", node)
        return super().construct_yaml_bool(node)

    def construct_yaml_null(self, node: ScalarNode) -> None:
        return None


StrictConstructor.add_constructor(T + "int", StrictConstructor.construct_yaml_int)
StrictConstructor.add_constructor(T + "float", StrictConstructor.construct_yaml_float)
StrictConstructor.add_constructor(T + "bool", StrictConstructor.construct_yaml_bool)
StrictConstructor.add_constructor(T + "null", StrictConstructor.construct_yaml_null)


class PyStrictLoader(Reader, Scanner, Parser, BoundedComposer, StrictConstructor, StrictResolver):
    def __init__(self, stream: str) -> None:
        Reader.__init__(self, stream)
        Scanner.__init__(self)
        Parser.__init__(self)
        BoundedComposer.__init__(self)
        StrictConstructor.__init__(self)
        StrictResolver.__init__(self)


try:
    from yaml._yaml import CParser
except ImportError:  # pragma: no cover - PyYAML without libyaml
    StrictLoader: type = PyStrictLoader
else:
    class StrictLoader(BoundedComposer, CParser, StrictConstructor, StrictResolver):
        """libyaml's event parser (fast) under the Python composer above (bounded, checkable)."""

        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            BoundedComposer.__init__(self)
            StrictConstructor.__init__(self)
            StrictResolver.__init__(self)


_bad_char = inputs.control_char


def _check_scalar(node: ScalarNode) -> None:
    if node.tag not in ALLOWED_TAGS:
        raise SpecYAMLError(f"the tag {_short(node.tag)} is not allowed; a spec holds plain strings, numbers, "
                            "booleans, lists and mappings", node)
    if node.tag == T + "int" and (digits := sum(ch.isalnum() for ch in node.value)) > MAX_INT_DIGITS:
        raise SpecYAMLError(f"an integer of {digits} digits; at most {MAX_INT_DIGITS} are read", node)
    if len(node.value) > MAX_SCALAR_CHARS:
        raise SpecYAMLError(f"a value of {len(node.value)} characters; at most {MAX_SCALAR_CHARS} are read", node)
    if node.tag == T + "str" and (ch := _bad_char(node.value)) is not None:
        raise SpecYAMLError(f"{_clip(node.value)} holds the control character {ch!r}; every value is one line of "
                            "printable text", node)


def _short(tag: str) -> str:
    return "!!" + tag[len(T):] if tag.startswith(T) else tag


def _clip(text: str, n: int = 40) -> str:
    return repr(text) if len(text) <= n else repr(text[:n]) + "..."


def _check_mapping(node: MappingNode) -> None:
    if node.tag != T + "map":
        raise SpecYAMLError(f"the tag {_short(node.tag)} is not allowed on a mapping", node)
    seen: dict[tuple[str, str], int] = {}
    for key, _ in node.value:
        if not isinstance(key, ScalarNode):
            raise SpecYAMLError("a key must be a plain name or number, not a list or mapping", key)
        ident = (key.tag, key.value)
        if ident in seen:
            raise SpecYAMLError(f"duplicate key {_clip(key.value)} (first on line {seen[ident]}); each key may "
                                "appear once in a mapping", key)
        seen[ident] = key.start_mark.line + 1


def check_tree(root: Node) -> None:
    """Tags, keys and values of every node; the expanded size and depth with aliases followed; no cycles.
    Iterative, memoized by node, so neither a deep nor an aliased document recurses or blows up."""
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        ident = id(node)
        if done:
            kids = _children(node)
            size[ident] = 1 + sum(size[id(k)] for k in kids)
            depth[ident] = 1 + max((depth[id(k)] for k in kids), default=0)
            on_path.discard(ident)
            if size[ident] > MAX_NODES:
                raise SpecYAMLError(f"the document expands to more than {MAX_NODES:,} values (through aliases or "
                                    "sheer size)", node)
            if depth[ident] > MAX_DEPTH:
                raise SpecYAMLError(f"nested deeper than {MAX_DEPTH} levels (through aliases)", node)
            continue
        if ident in size:
            continue
        if ident in on_path:
            raise SpecYAMLError("an alias refers to a mapping or list that contains it (a recursive alias)", node)
        if isinstance(node, ScalarNode):
            _check_scalar(node)
            size[ident], depth[ident] = 1, 1
            continue
        if isinstance(node, MappingNode):
            _check_mapping(node)
        elif node.tag != T + "seq":
            raise SpecYAMLError(f"the tag {_short(node.tag)} is not allowed on a list", node)
        on_path.add(ident)
        stack.append((node, True))
        for kid in _children(node):
            if id(kid) in on_path:
                raise SpecYAMLError("an alias refers to a mapping or list that contains it (a recursive alias)", kid)
            if id(kid) not in size:
                stack.append((kid, False))


def _children(node: Node) -> list[Node]:
    if isinstance(node, MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, SequenceNode):
        return list(node.value)
    return []


def read_text(path: Path) -> str:
    """The spec's text, through the strict file reader every input shares (no blocking, at most MAX_BYTES)."""
    try:
        raw = inputs.read_bytes(path, MAX_BYTES, what="the spec", hint="give the path of a cluster.yaml")
    except inputs.InputError as exc:
        raise SpecFileError(exc.message) from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise SpecFileError(f"not UTF-8 text (byte 0x{raw[exc.start]:02x})", line=line) from None


def load(text: str) -> tuple[object, Node | None]:
    """The data and its node tree; raises yaml.YAMLError (SpecYAMLError for the strict checks)."""
    loader = StrictLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, None
        check_tree(node)
        return loader.construct_document(node), node
    finally:
        loader.dispose()
