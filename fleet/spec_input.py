"""Reading a spec file and turning its YAML into plain data, safely against hostile input.

Contracts (each failure is a ``SpecError`` with one short line, never another exception):

* ``read_spec_text(path)`` reads only a regular file (a FIFO, device or ``/dev/zero`` is
  refused without blocking), at most ``MAX_SPEC_BYTES``, and only UTF-8 text;
* ``load_yaml(text)`` returns ``(root node, data)``: the YAML is composed once, then checked
  before anything is built from it: nesting deeper than ``MAX_DEPTH``, more than
  ``MAX_NODES`` values after alias expansion (alias "billion laughs" bombs), an alias that
  contains itself, and duplicate keys in one mapping (both lines named) are refused;
* ``short(value)`` is the bounded repr every error message quotes.
"""

from __future__ import annotations

import os
import reprlib
import stat
from pathlib import Path
from typing import Any

import yaml

from fleet.errors import SpecError

#: A spec is a few KB; this is generous but finite (``/dev/zero`` must not grow without limit).
MAX_SPEC_BYTES = 256 * 1024
#: Values (scalars, lists, mappings) after expanding every alias.
MAX_NODES = 50_000
#: Nesting of lists and mappings (the spec's own schema needs 4).
MAX_DEPTH = 32
#: Longest single message line an error quotes a value in.
MAX_QUOTE = 60

_repr = reprlib.Repr()
_repr.maxstring = MAX_QUOTE
_repr.maxother = MAX_QUOTE
_repr.maxlevel = 2
_repr.maxlist = _repr.maxtuple = _repr.maxdict = _repr.maxset = 4


def short(value: Any) -> str:
    """A repr of ``value`` of bounded size, whatever its size or depth."""
    try:
        text = _repr.repr(value)
    except (ValueError, RecursionError):  # e.g. ints past Python's digit limit
        text = f"<{type(value).__name__}>"
    return text if len(text) <= MAX_QUOTE + 10 else text[:MAX_QUOTE] + "...'"


def read_spec_text(path: Path) -> str:
    """The text of the spec at ``path``; see the module contract."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise SpecError([("", f"no such file: {path}")]) from None
    except OSError as err:
        raise SpecError([("", f"cannot read {path}: {err.strerror}")]) from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file (a pipe, device or socket)"
            raise SpecError([("", f"{path} is {kind}; give the path of a YAML spec file")])
        chunks, size = [], 0
        while size <= MAX_SPEC_BYTES:
            chunk = os.read(fd, MAX_SPEC_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as err:
        raise SpecError([("", f"cannot read {path}: {err.strerror}")]) from None
    finally:
        os.close(fd)
    if size > MAX_SPEC_BYTES:
        raise SpecError([("", f"{path} is larger than {MAX_SPEC_BYTES // 1024} KiB; a spec is a few KB of YAML")])
    raw = b"".join(chunks)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        raise SpecError(
            [("", f"{path} is not UTF-8 text (byte 0x{raw[err.start]:02x} on line {line}); save it as UTF-8")]
        ) from None


def load_yaml(text: str, source: str) -> tuple[yaml.Node | None, Any]:
    """Compose ``text``, check the node graph (module contract), then build plain data from it."""
    if len(text) > MAX_SPEC_BYTES:
        raise SpecError([("", f"the spec is larger than {MAX_SPEC_BYTES // 1024} KiB; a spec is a few KB")], source)
    loader = _Loader(text)
    try:
        try:
            root = loader.get_single_node()
        except _TooDeep as deep:
            raise SpecError(
                [("", f"the YAML is nested more than {MAX_DEPTH} levels deep (line {deep.line})")], source
            ) from None
        if root is None:
            return None, None
        _check_graph(root, source)
        try:
            return root, loader.construct_document(root)
        except yaml.YAMLError:
            raise
        except Exception as err:  # PyYAML's constructors raise ValueError, AttributeError... on odd tagged values
            raise SpecError(
                [
                    (
                        "",
                        f"a value cannot be read ({type(err).__name__}: {short(str(err))[1:-1]}); "
                        "check explicit tags such as !!timestamp and very long numbers",
                    )
                ],
                source,
            ) from None
    finally:
        loader.dispose()


class _TooDeep(Exception):
    def __init__(self, line: int):
        self.line = line


class _Loader(yaml.SafeLoader):
    """A safe loader whose composer stops at ``MAX_DEPTH`` instead of recursing into a stack overflow."""

    _depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:  # type: ignore[override]
        if self._depth >= MAX_DEPTH:
            raise _TooDeep(self.peek_event().start_mark.line + 1)
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _check_graph(root: yaml.Node, source: str) -> None:
    """Refuse deep nesting, self-containing aliases, alias bombs and duplicate keys, without
    recursion: sizes and heights are counted once per node, as if every alias were expanded."""
    sizes: dict[int, tuple[int, int]] = {}  # id(node) -> (expanded values, expanded height)
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            below = [sizes[id(c)] for c in _children(node)]
            size, height = 1 + sum(s for s, _ in below), 1 + max((h for _, h in below), default=0)
            line = node.start_mark.line + 1
            if size > MAX_NODES:
                raise SpecError(
                    [
                        (
                            "",
                            f"the YAML expands to more than {MAX_NODES:,} values (aliases repeating "
                            f"aliases, line {line}); a spec needs a few hundred",
                        )
                    ],
                    source,
                )
            if height > MAX_DEPTH:
                raise SpecError([("", f"the YAML is nested more than {MAX_DEPTH} levels deep (line {line})")], source)
            sizes[key] = (size, height)
            continue
        if key in sizes:
            continue
        if key in on_path:
            raise SpecError(
                [
                    (
                        "",
                        f"an alias on line {node.start_mark.line + 1} contains itself; "
                        "YAML aliases must not refer to an enclosing value",
                    )
                ],
                source,
            )
        if isinstance(node, yaml.MappingNode):
            _no_duplicate_keys(node, source)
        on_path.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node))


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def _no_duplicate_keys(node: yaml.MappingNode, source: str) -> None:
    seen: dict[tuple[str, str], int] = {}
    for key, _value in node.value:
        if not isinstance(key, yaml.ScalarNode) or key.tag == "tag:yaml.org,2002:merge":
            continue
        line = key.start_mark.line + 1
        first = seen.get((key.tag, key.value))
        if first is not None:
            where = f"twice on line {line}" if first == line else f"on lines {first} and {line}"
            raise SpecError(
                [("", f"duplicate key {short(key.value)} {where}; keep one (YAML would silently use the last)")], source
            )
        seen[(key.tag, key.value)] = line
