"""What the command line runs: a GraphSpec file, or ``module:attribute`` naming a graph.

The target is chosen by the person typing the command, so importing the module it
names is theirs to allow. A spec file is data, though: the modules its references
import must be allowed with ``--allow`` (nothing is allowed by default); they are
imported from the working directory first, as ``python -m`` would.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from selectgraph.build._builder import AgentGraph
from selectgraph.build._input import graph_input
from selectgraph.core._errors import GraphSpecError

__all__ = [
    "DEFAULT_ATTRIBUTE",
    "LoadError",
    "Target",
    "load_attribute",
    "load_target",
]

_SPEC_SUFFIXES = (".yaml", ".yml", ".json")
DEFAULT_ATTRIBUTE = "graph"
"""What a bare ``path/to/file.py`` names: its module-level ``graph`` (every example has one)."""


class LoadError(Exception):
    """The GRAPH argument names nothing runnable; the message says what was wrong."""


@dataclass(frozen=True, slots=True)
class Target:
    """A loaded GRAPH: the graph to run, and the object it came from."""

    graph: AgentGraph
    source: Any
    """The AgentGraph, SupervisorAgent, DeepResearch... the argument named."""
    spec: str
    """The argument as given."""

    def input(self, value: Any) -> Any:
        """What a run starts from, given the input: text, or a JSON object (the state).

        See :func:`~selectgraph.build._input.graph_input`: the convention the studio and
        the served endpoints follow too.
        """
        return graph_input(self.graph, self.source, value)


def load_target(spec: str, *, allow: Sequence[str] = ()) -> Target:
    """Load the graph ``spec`` names.

    Args:
        spec: ``file.yaml`` / ``file.json`` (a GraphSpec), ``package.module:name``,
            ``path/to/file.py:name``, or ``path/to/file.py`` (its ``graph``).
        allow: Modules a spec file's references may import.

    Raises:
        LoadError: nothing runnable is there, saying why.
    """
    path = Path(spec)
    if path.suffix.lower() in _SPEC_SUFFIXES:
        if not path.is_file():
            raise LoadError(f"{spec}: no such spec file")
        try:
            with _working_directory_importable(bool(allow)):
                graph = AgentGraph.from_spec(path, allowed_modules=list(allow))
        except GraphSpecError as error:
            hint = "" if allow else " (modules a spec imports must be allowed: --allow MODULE)"
            raise LoadError(f"{spec}: {error}{hint}") from None
        return Target(graph, graph, spec)
    module_part, sep, attribute = spec.rpartition(":")
    if not sep and spec.endswith(".py"):
        module_part, attribute = spec, DEFAULT_ATTRIBUTE  # a bare file: its `graph`
    elif not sep or not module_part or not attribute:
        raise LoadError(
            f"{spec!r} is neither a spec file (.yaml, .yml, .json), a path/to/file.py nor "
            "module:attribute (e.g. myapp.graphs:support or examples/12_studio.py:graph)"
        )
    source = _attribute(spec, module_part, attribute)
    found = source if isinstance(source, AgentGraph) else getattr(source, "graph", None)
    if not isinstance(found, AgentGraph):
        raise LoadError(
            f"{spec}: {attribute} is a {type(source).__name__}, not an AgentGraph (or an object "
            "with a .graph, like a SupervisorAgent or DeepResearch)"
        )
    return Target(found, source, spec)


def load_attribute(spec: str) -> Any:
    """The value ``module:attribute`` (``path/to/file.py:name`` too) names.

    Raises:
        LoadError: the module cannot be imported or has no such attribute.
    """
    module_part, sep, attribute = spec.rpartition(":")
    if not sep or not module_part or not attribute:
        raise LoadError(f"{spec!r} is not module:attribute (e.g. myapp.evals:cases)")
    return _attribute(spec, module_part, attribute)


def _attribute(spec: str, module_part: str, attribute: str) -> Any:
    module = _import(module_part)
    source: Any = module
    for part in attribute.split("."):
        if part.startswith("__"):
            raise LoadError(f"{spec}: {part!r} is not an attribute a graph can be named by")
        try:
            source = getattr(source, part)
        except AttributeError:
            raise LoadError(
                f"{spec}: {module_part} has no attribute {attribute!r}" + _available(module)
            ) from None
    return source


@contextmanager
def _working_directory_importable(needed: bool) -> Iterator[None]:
    """The working directory on the import path while a spec's references are imported.

    Only the ``--allow``ed modules are imported then (the spec refuses any other), so
    ``--allow nodes`` finds ``./nodes.py`` as ``python -m`` would, and nothing else
    the command imports later comes from the working directory.
    """
    cwd = str(Path.cwd())
    if not needed or cwd in sys.path:
        yield
        return
    sys.path.insert(0, cwd)
    try:
        yield
    finally:
        sys.path.remove(cwd)


def _import(name: str) -> Any:
    if name.endswith(".py") or "/" in name or "\\" in name:
        path = Path(name)
        if not path.is_file():
            raise LoadError(f"{name}: no such Python file")
        module_name = f"_selectgraph_cli_{path.stem.replace('-', '_')}"
        loader = importlib.util.spec_from_file_location(module_name, path)
        if loader is None or loader.loader is None:
            raise LoadError(f"{name}: cannot be imported as a Python module")
        module = importlib.util.module_from_spec(loader)
        sys.path.insert(0, str(path.resolve().parent))  # its own imports, like python file.py
        sys.modules[module_name] = module
        try:
            loader.loader.exec_module(module)
        except Exception as error:
            raise LoadError(
                f"{name}: importing it raised {type(error).__name__}: {error}"
            ) from error
        return module
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))  # like python -m: the working directory first
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as error:
        raise LoadError(f"cannot import {name!r}: {error}") from None
    except Exception as error:
        raise LoadError(f"importing {name!r} raised {type(error).__name__}: {error}") from error


def _available(module: Any) -> str:
    found = [
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and (isinstance(value, AgentGraph) or isinstance(getattr(value, "graph", None), AgentGraph))
    ]
    return f"; graphs there: {', '.join(sorted(found))}" if found else ""
