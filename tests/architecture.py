"""The package's shape, measured from its source: layers, import circles, sizes.

``python -m tests.architecture`` prints a report; ``tests/test_architecture.py``
holds the package to it. Imports are read with ``ast``, so every kind counts:
those a module makes when it loads, those under ``if TYPE_CHECKING:`` and those
made inside functions.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

PACKAGE = Path(__file__).resolve().parent.parent / "selectgraph"

LAYERS: tuple[tuple[str, ...], ...] = (
    ("selectgraph",),
    ("cli",),
    ("studio", "serve", "executors"),
    ("evals",),
    ("research", "supervisor"),
    ("build",),
    ("agents",),
    ("compile",),
    ("runtime",),
    ("nodes",),
    ("routing",),
    ("state",),
    ("observe", "persistence", "providers", "guardrails"),
    ("core",),
)
"""Top to bottom: a module imports its own folder or a folder of a lower layer, never a
folder beside it (same layer) or above it. The first layer is the public facade: the
package's ``__init__`` and its top-level modules (``graph``, ``testing``...)."""

MAX_MODULE_LINES = 800
MAX_FUNCTION_LINES = 100

ImportKind = Literal["load", "typing", "lazy"]


@dataclass(frozen=True, slots=True)
class Import:
    """One import of a selectgraph module by another."""

    source: str
    target: str
    kind: ImportKind
    line: int

    def __str__(self) -> str:
        return f"{self.source} -> {self.target} ({self.kind}, line {self.line})"


def modules() -> dict[str, Path]:
    """Every module of the package, by dotted name."""
    found: dict[str, Path] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def folder(module: str) -> str:
    """The folder (layer member) a module belongs to: ``selectgraph.state._merge`` -> state."""
    parts = module.split(".")
    if len(parts) == 1 or (PACKAGE / f"{parts[1]}.py").exists():
        return "selectgraph"  # the package and its top-level modules: the facade
    return parts[1]


def layer_of(module: str) -> int:
    """The layer's index, 0 at the top."""
    name = folder(module)
    for index, members in enumerate(LAYERS):
        if name in members:
            return index
    raise LookupError(f"{module}: folder {name!r} is in no layer of tests/architecture.py")


def imports() -> list[Import]:
    """Every import between selectgraph modules."""
    known = modules()
    found: list[Import] = []
    for name, path in known.items():
        tree = ast.parse(path.read_text(), str(path))
        is_package = path.name == "__init__.py"
        for node, kind in _walk(tree.body, "load"):
            for target in _targets(name, is_package, node, known):
                if target != name:
                    found.append(Import(name, target, kind, node.lineno))
    return sorted(set(found), key=str)


def _walk(
    body: list[ast.stmt], kind: ImportKind
) -> Iterator[tuple[ast.Import | ast.ImportFrom, ImportKind]]:
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node, kind
        elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from _walk(node.body, "typing")
            yield from _walk(node.orelse, kind)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield from _walk(node.body, "lazy")
        else:
            for field in ("body", "orelse", "finalbody"):
                yield from _walk(getattr(node, field, None) or [], kind)
            for handler in getattr(node, "handlers", None) or []:
                yield from _walk(handler.body, kind)


def _targets(
    module: str, is_package: bool, node: ast.Import | ast.ImportFrom, known: dict[str, Path]
) -> list[str]:
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:
            parts = module.split(".") if is_package else module.split(".")[:-1]
            parts = parts[: len(parts) - (node.level - 1)]
            base = ".".join([*parts, base] if base else parts)
        names = [f"{base}.{alias.name}" for alias in node.names]
        names = [n if n in known else base for n in names]
    targets = []
    for name in names:
        while name and name not in known:
            name = name.rpartition(".")[0]
        if name.startswith("selectgraph"):
            targets.append(name)
    return targets


def circles(found: list[Import]) -> list[list[str]]:
    """Groups of two or more modules that import each other, directly or around a circle."""
    graph: dict[str, set[str]] = defaultdict(set)
    for item in found:
        graph[item.source].add(item.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    counter = 0
    # Tarjan's algorithm, iteratively: the package's import graph is deep enough to
    # make a recursive walk a matter of luck.
    for root in sorted(modules()):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return groups


def upward(found: list[Import]) -> list[Import]:
    """Imports that go up the layers, or sideways into another folder of the same layer."""
    wrong = []
    for item in found:
        if folder(item.source) == folder(item.target):
            continue
        if layer_of(item.target) <= layer_of(item.source):
            wrong.append(item)
    return wrong


def long_modules() -> list[tuple[str, int]]:
    """Modules over MAX_MODULE_LINES lines."""
    sizes = ((name, len(path.read_text().splitlines())) for name, path in modules().items())
    return [(name, size) for name, size in sizes if size > MAX_MODULE_LINES]


def long_functions() -> list[tuple[str, int]]:
    """Functions (and methods) over MAX_FUNCTION_LINES lines, docstrings included."""
    found = []
    for name, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                size = (node.end_lineno or node.lineno) - node.lineno + 1
                if size > MAX_FUNCTION_LINES:
                    found.append((f"{name}:{node.name} (line {node.lineno})", size))
    return found


def report() -> str:
    """What the checks find, one section each."""
    found = imports()
    lines = [f"{len(modules())} modules, {len(found)} imports between them"]
    groups = circles(found)
    lines.append(f"import circles: {len(groups)}")
    lines += [f"  {len(group)}: {', '.join(group)}" for group in groups]
    wrong = upward(found)
    lines.append(f"imports against the layers: {len(wrong)}")
    lines += [f"  {item}" for item in wrong]
    big = long_modules()
    lines.append(f"modules over {MAX_MODULE_LINES} lines: {len(big)}")
    lines += [f"  {name}: {size}" for name, size in big]
    longest = long_functions()
    lines.append(f"functions over {MAX_FUNCTION_LINES} lines: {len(longest)}")
    lines += [f"  {name}: {size}" for name, size in longest]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(report() + "\n")
