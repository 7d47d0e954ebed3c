"""Conformance adapter: turn OpenArmature graph-engine fixtures into selectgraph graphs.

Implements the subset of the conformance-adapter directive vocabulary the
graph-engine fixtures use (state schemas, node behaviour, static and
conditional edges, subgraph projection, compile errors and warnings). Any
directive outside it raises ``fixture_directive_unknown`` so that nothing is
silently skipped.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import BaseModel, Field, create_model

import selectgraph as sg
from selectgraph import END, AgentGraph, GraphState

ADAPTER_VERSION = (0, 48, 0)
"""The conformance-adapter spec version this adapter targets."""

_CASE_KEYS = frozenset(
    {
        "name",
        "description",
        "state",
        "entry",
        "nodes",
        "edges",
        "initial_state",
        "expected",
        "expected_error",
        "expected_compile_error",
        "expected_compile_warning",
        "run_count",
        "subgraph",
        "subgraphs",
        "graph",
        "conformance_version",
    }
)
_NODE_BEHAVIOURS = frozenset({"update", "update_pure", "update_from_field", "raises"})
_SUBGRAPH_KEYS = frozenset({"subgraph", "inputs", "outputs", "projects_in", "projects_out"})


class AdapterError(Exception):
    """A fixture the adapter cannot run, with the conformance-adapter §9 category."""

    def __init__(self, category: str, message: str) -> None:
        super().__init__(f"{category}: {message}")
        self.category = category


def load_fixture(path: Path) -> dict[str, Any]:
    """The parsed fixture (mapping order preserved)."""
    with path.open() as handle:
        data = yaml.safe_load(handle)
    if not isinstance(data, dict):
        raise AdapterError("fixture_schema_invalid", f"{path.name} is not a mapping")
    return data


def cases_of(fixture: dict[str, Any]) -> list[dict[str, Any]]:
    """The fixture's cases, each a complete case mapping (shared subgraphs merged in)."""
    version = fixture.get("conformance_version")
    if version is not None:
        wanted = tuple(int(part) for part in str(version).split("."))
        if wanted > ADAPTER_VERSION:
            raise AdapterError("fixture_version_unsupported", f"fixture needs adapter {version}")
    if "cases" not in fixture:
        return [fixture]
    shared = {k: v for k, v in fixture.items() if k != "cases"}
    cases = []
    for case in fixture["cases"]:
        merged = dict(case)
        for key in ("subgraph", "subgraphs"):
            if key in shared and key not in merged:
                merged[key] = shared[key]
        cases.append(merged)
    return cases


# ------------------------------------------------------------------- state types
def _python_type(spec: str) -> Any:
    spec = spec.strip()
    scalars = {"string": str, "int": int, "float": float, "bool": bool, "any": Any}
    if spec in scalars:
        return scalars[spec]
    if spec == "list":
        return list[Any]
    if spec == "dict":
        return dict[Any, Any]
    if spec.startswith("list<") and spec.endswith(">"):
        return list[_python_type(spec[5:-1])]  # type: ignore[misc]
    if spec.startswith("dict<") and spec.endswith(">"):
        key, value = _split_pair(spec[5:-1])
        return dict[_python_type(key), _python_type(value)]  # type: ignore[misc]
    raise AdapterError("fixture_directive_unknown", f"state type {spec!r}")


def _split_pair(inner: str) -> tuple[str, str]:
    depth = 0
    for index, char in enumerate(inner):
        depth += char == "<"
        depth -= char == ">"
        if char == "," and depth == 0:
            return inner[:index], inner[index + 1 :]
    raise AdapterError("fixture_schema_invalid", f"dict type needs two parameters: {inner!r}")


def _reducer(spec: Any) -> sg.Reducer:
    if isinstance(spec, str):
        table = {
            "last_write_wins": sg.last_write_wins,
            "append": sg.append,
            "merge": sg.merge,
            "concat_flatten": sg.concat_flatten,
            "merge_all": sg.merge_all,
        }
        if spec not in table:
            raise AdapterError("fixture_directive_unknown", f"reducer {spec!r}")
        return table[spec]
    if isinstance(spec, dict) and len(spec) == 1:
        ((factory, kwargs),) = spec.items()
        kwargs = dict(kwargs or {})
        if factory == "bounded_append":
            return sg.bounded_append(kwargs.get("max_len"))  # type: ignore[arg-type]
        if factory == "dedupe_append":
            return sg.dedupe_append(kwargs.get("key"))
        if factory == "merge_by_key":
            return sg.merge_by_key(kwargs.get("key"))  # type: ignore[arg-type]
        raise AdapterError("fixture_directive_unknown", f"reducer factory {factory!r}")
    raise AdapterError("fixture_schema_invalid", f"reducer {spec!r}")


def build_schema(name: str, state: dict[str, Any]) -> type[BaseModel]:
    """A Pydantic model for ``state.fields``, reducers declared with Annotated."""
    fields: dict[str, Any] = {}
    for field_name, spec in (state.get("fields") or {}).items():
        unknown = set(spec) - {"type", "default", "reducer", "alt_reducer"}
        if unknown:
            raise AdapterError("fixture_directive_unknown", f"field keys {sorted(unknown)}")
        annotation = _python_type(spec["type"])
        reducers = [_reducer(spec[key]) for key in ("reducer", "alt_reducer") if key in spec]
        if reducers:
            annotation = Annotated[annotation, *reducers]
        if "default" in spec:
            default = spec["default"]
            fields[field_name] = (
                annotation,
                Field(default_factory=lambda value=default: copy.deepcopy(value)),
            )
        else:
            fields[field_name] = (annotation, ...)
    return create_model(f"{name}_state", **fields)


# -------------------------------------------------------------------- nodes
def _node_function(name: str, spec: dict[str, Any]) -> Any:
    behaviours = [key for key in spec if key in _NODE_BEHAVIOURS]
    unknown = set(spec) - _NODE_BEHAVIOURS
    if unknown:
        raise AdapterError("fixture_directive_unknown", f"node {name!r} has {sorted(unknown)}")

    def node(state: GraphState) -> dict[str, Any]:
        update: dict[str, Any] = {}
        for key in behaviours:  # conformance-adapter §8.3: document order
            value = spec[key]
            if key == "raises":
                raise RuntimeError(value)
            if key in ("update", "update_pure"):
                update.update(copy.deepcopy(value))
            elif key == "update_from_field":
                multiplier = value.get("multiplier", 1)
                for target, source in value.items():
                    if target != "multiplier":
                        update[target] = state[source] * multiplier
        return update

    node.__name__ = name
    return node


def build_graph(
    name: str, graph: dict[str, Any], subgraphs: Mapping[str, AgentGraph]
) -> AgentGraph:
    """The AgentGraph a fixture graph block describes."""
    result = AgentGraph(
        name, state_schema=build_schema(name, graph.get("state") or {}), strict_entry=True
    )
    for node_name, spec in (graph.get("nodes") or {}).items():
        spec = spec or {}
        if "subgraph" in spec:
            unknown = set(spec) - _SUBGRAPH_KEYS
            if unknown:
                raise AdapterError("fixture_directive_unknown", f"subgraph node has {unknown}")
            child = subgraphs.get(spec["subgraph"])
            if child is None:
                raise AdapterError("fixture_schema_invalid", f"no subgraph {spec['subgraph']!r}")
            # OpenArmature maps are destination -> source; ours read source -> destination.
            inputs = spec.get("inputs")
            outputs = spec.get("outputs")
            result.add_subgraph(
                node_name,
                child,
                input_map={p: c for c, p in inputs.items()} if inputs is not None else None,
                output_map={c: p for p, c in outputs.items()} if outputs is not None else None,
                projects_in=spec.get("projects_in"),
                projects_out=spec.get("projects_out"),
            )
        else:
            result.add_node(node_name, _node_function(node_name, spec))
    for edge in graph.get("edges") or []:
        _add_edge(result, edge)
    if graph.get("entry") is not None:
        result.set_entry(graph["entry"])
    return result


def _target(name: Any) -> Any:
    return END if name == "END" else name


def _add_edge(graph: AgentGraph, edge: dict[str, Any]) -> None:
    unknown = set(edge) - {"from", "to", "condition"}
    if unknown:
        raise AdapterError("fixture_directive_unknown", f"edge keys {sorted(unknown)}")
    if "condition" not in edge:
        graph.add_edge(edge["from"], _target(edge["to"]))
        return
    condition = edge["condition"]
    unknown = set(condition) - {"if_field", "equals", "then", "else"}
    if unknown:
        raise AdapterError("fixture_directive_unknown", f"condition keys {sorted(unknown)}")
    field, expected = condition["if_field"], condition["equals"]
    then, otherwise = _target(condition["then"]), _target(condition["else"])

    def route(state: GraphState) -> Any:
        return then if state[field] == expected else otherwise

    graph.add_conditional_edge(edge["from"], route)


def build_case(case: dict[str, Any]) -> AgentGraph:
    """The graph of one case (``graph:`` block or top-level keys), subgraphs included."""
    unknown = set(case) - _CASE_KEYS
    if unknown:
        raise AdapterError("fixture_directive_unknown", f"{sorted(unknown)}")
    body = case.get("graph", case)
    declared: dict[str, Any] = {}
    for source in (case, body):
        if "subgraphs" in source:
            declared.update(source["subgraphs"])
        if "subgraph" in source:
            declared[source["subgraph"]["name"]] = source["subgraph"]
    built: dict[str, AgentGraph] = {}
    for sub_name, spec in declared.items():
        spec = {k: v for k, v in spec.items() if k != "name"}
        built[sub_name] = build_graph(sub_name, spec, built)
    return build_graph(case.get("name", "fixture"), body, built)


def state_subset(state: GraphState, expected: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of ``state.data`` the fixture asserts on (and whether any are missing)."""
    return {key: state.data.get(key, "<missing>") for key in expected}
