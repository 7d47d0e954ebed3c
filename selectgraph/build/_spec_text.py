"""Spec text: read a GraphSpec's YAML or JSON into plain values, or say what is wrong with it.

Whatever the text holds, the outcome is plain data or a :class:`GraphSpecError`
naming the problem and, when the parser knows it, the line or the spec path:
duplicate keys, alias bombs, documents nested too deeply, integers longer than
Python reads, tagged scalars that do not parse (``!!int abc``), NUL characters
and lone surrogates. YAML timestamps are not constructed at all: no spec field
takes a date, so ``2001-12-14`` is text, as it is in JSON.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from selectgraph.core._errors import GraphSpecError

__all__ = ["check_text", "load_json", "load_yaml", "read_source"]

_MAX_ALIAS_NODES = 10_000
"""How many nodes YAML aliases may add to a document once expanded."""
_BAD_CHARACTER = re.compile(r"[\x00\ud800-\udfff]")
"""NUL (no store or terminal keeps it) and lone surrogates (UTF-8 cannot encode them)."""


def read_source(source: str | Path, suffixes: tuple[str, ...]) -> str:
    """The text of ``source``, reading it when it names a file.

    A Path, a name with a known suffix, or the name of an existing file is a
    file; anything else is the document itself.

    Raises:
        GraphSpecError: the file cannot be read, or is not UTF-8 text.
    """
    looks_like_path = (
        isinstance(source, str)
        and "\n" not in source
        and (source.endswith(suffixes) or _is_file(source))
    )
    if isinstance(source, Path) or looks_like_path:
        path = Path(source)
        try:
            return path.read_text(encoding="utf-8")
        except OSError as exc:
            raise GraphSpecError(f"cannot read {path}: {exc}") from None
        except UnicodeDecodeError as exc:
            raise GraphSpecError(
                f"cannot read {path}: not UTF-8 text ({exc.reason} at byte {exc.start})"
            ) from None
    return str(source)


def _is_file(name: str) -> bool:
    try:
        return Path(name).is_file()
    except (OSError, ValueError):  # not a usable path (too long, NUL...): it is text
        return False


def _too_many_digits(text: str) -> str | None:
    """Why Python would refuse to read ``text`` as an int, if it would."""
    digits = len(text.lstrip("+-").replace("_", ""))
    limit = sys.get_int_max_str_digits()
    if limit and digits > limit:
        return f"an integer of {digits:,} digits (at most {limit:,} are read)"
    return None


class _SpecYamlLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate mapping keys (a repeated node would drop the first)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        first_line: dict[Any, int] = {}
        for key_node, _ in node.value:
            # Merged keys (<<) may be overridden on purpose; only explicit keys count.
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag.endswith(":merge"):
                continue
            key = self.construct_object(key_node)
            if key in first_line:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    f"found duplicate key {key!r} (first at line {first_line[key]})",
                    key_node.start_mark,
                )
            first_line[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        # A tagged scalar that does not parse (``!!int abc``, ``!!float x``, a
        # 5,000-digit int) raises ValueError from PyYAML's constructors, with no
        # line; report it as YAML's own error, at the node.
        if isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:int":
            too_long = _too_many_digits(str(node.value))
            if too_long is not None:
                raise yaml.constructor.ConstructorError(None, None, too_long, node.start_mark)
        try:
            return super().construct_object(node, deep=deep)
        except (ValueError, OverflowError, TypeError) as exc:
            problem = f"cannot read {node.tag.rpartition(':')[2]} value: {exc}"
            raise yaml.constructor.ConstructorError(None, None, problem, node.start_mark) from None


# YAML 1.1 reads yes/no/on/off as booleans, so an edge's ``on: failure`` became
# ``True: failure``. Specs use YAML 1.2's rule: only true and false are booleans.
# Timestamps are left as text: no spec field is a date, and a bad one
# (2001-13-45) would otherwise fail inside the constructor.
_SpecYamlLoader.yaml_implicit_resolvers = {
    first: [
        (tag, regexp)
        for tag, regexp in resolvers
        if tag not in ("tag:yaml.org,2002:bool", "tag:yaml.org,2002:timestamp")
    ]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_SpecYamlLoader.add_implicit_resolver(
    "tag:yaml.org,2002:bool",
    re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
    list("tTfF"),
)


def load_yaml(text: str) -> Any:
    """Parse one YAML document, refusing duplicate keys, alias bombs and bad characters.

    Raises:
        GraphSpecError: saying what is wrong, and where when the parser knows.
    """
    loader: _SpecYamlLoader | None = None
    try:
        loader = _SpecYamlLoader(text)  # the reader refuses NUL in the raw text here
        root = loader.get_single_node()
        if root is None:
            return None
        distinct, expanded = _node_counts(root)
        if expanded > distinct + _MAX_ALIAS_NODES:
            raise GraphSpecError(
                f"invalid YAML: aliases expand the document from {distinct} to {expanded} "
                f"nodes; at most {_MAX_ALIAS_NODES:,} more are allowed"
            )
        data = loader.construct_document(root)
    except yaml.YAMLError as exc:
        raise GraphSpecError(f"invalid YAML: {_one_line(exc)}") from None
    except RecursionError:
        raise GraphSpecError("invalid YAML: nested too deeply") from None
    finally:
        if loader is not None:
            loader.dispose()
    return data


def _one_line(error: yaml.YAMLError) -> str:
    """PyYAML's error in one line: what is wrong, then where (its own text quotes the source)."""
    if isinstance(error, yaml.MarkedYAMLError):
        said = ", ".join(part for part in (error.context, error.problem) if part)
        mark = error.problem_mark or error.context_mark
        return said + (f" (line {mark.line + 1}, column {mark.column + 1})" if mark else "")
    return " ".join(str(error).split())


def _node_counts(root: yaml.Node) -> tuple[int, int]:
    """How many distinct nodes the composed document has, and how many once aliases expand.

    An alias is the same node object in several places, so the expanded size
    is counted once per node and summed up the tree: linear in the distinct
    nodes, however large the expansion. Iterative, as documents may be deep.

    Raises:
        GraphSpecError: an alias refers to a node that contains it (a cycle).
    """
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        children = _children(node)
        if children_done:
            open_nodes.discard(id(node))
            sizes[id(node)] = 1 + sum(sizes[id(child)] for child in children)
            continue
        if id(node) in sizes:
            continue
        if id(node) in open_nodes:
            line = node.start_mark.line + 1
            raise GraphSpecError(f"invalid YAML: the alias at line {line} contains itself")
        open_nodes.add(id(node))
        stack.append((node, True))
        stack.extend((child, False) for child in children if id(child) not in sizes)
    return len(sizes), sizes[id(root)]


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


class _DuplicateJsonKeys(dict[str, Any]):
    """A JSON object that repeated a key, marked so its place can be reported."""

    duplicate: str = ""


def _json_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            marked = _DuplicateJsonKeys(pairs)
            marked.duplicate = key
            return marked
        result[key] = value
    return result


def _json_int(text: str) -> int:
    too_long = _too_many_digits(text)
    if too_long is not None:
        raise ValueError(too_long)
    return int(text)


def load_json(text: str) -> Any:
    """Parse JSON, refusing duplicate keys (which json.loads lets the last one win).

    Raises:
        GraphSpecError: saying what is wrong, and where when known.
    """
    try:
        data = json.loads(text, object_pairs_hook=_json_object, parse_int=_json_int)
    except RecursionError:
        raise GraphSpecError("invalid JSON: nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError, or an int too long to read
        raise GraphSpecError(f"invalid JSON: {exc}") from None
    for value, loc in _walk(data):
        if isinstance(value, _DuplicateJsonKeys):
            raise GraphSpecError(f"invalid JSON: {_path(loc)}: duplicate key {value.duplicate!r}")
    return data


def check_text(data: Any) -> None:
    """Refuse a NUL character or a lone surrogate in any key or string of ``data``.

    Raises:
        GraphSpecError: naming the path of the first such string.
    """
    for value, loc in _walk(data):
        keys = value.keys() if isinstance(value, dict) else ()
        for text, where, part in [*((k, (*loc, k), "key") for k in keys), (value, loc, "text")]:
            if isinstance(text, str) and (found := _BAD_CHARACTER.search(text)):
                what = "a NUL character" if found.group() == "\x00" else "a lone surrogate"
                raise GraphSpecError(
                    f"{_path(where)}: {what} ({found.group()!r}) in the {part}; "
                    "a spec holds UTF-8 text without NUL"
                )


def _walk(data: Any) -> Iterator[tuple[Any, tuple[Any, ...]]]:
    """Every value of ``data`` with its place, in document order; iterative, for deep data."""
    stack: list[tuple[Any, tuple[Any, ...]]] = [(data, ())]
    while stack:
        value, loc = stack.pop()
        yield value, loc
        if isinstance(value, dict):
            stack.extend((child, (*loc, key)) for key, child in reversed(value.items()))
        elif isinstance(value, list):
            stack.extend((child, (*loc, i)) for i, child in reversed(list(enumerate(value))))


def _path(loc: tuple[Any, ...]) -> str:
    """A place as ``nodes.classify.call`` / ``edges[2].to``."""
    place = ""
    for part in loc:
        if isinstance(part, str):  # shown escaped: the place may hold what is refused
            part = _BAD_CHARACTER.sub(lambda found: repr(found.group())[1:-1], part)
        place += f"[{part}]" if isinstance(part, int) else (f".{part}" if place else str(part))
    return place or "<root>"
