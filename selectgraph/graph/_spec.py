"""Spec: a declarative graph (dict, YAML or JSON) that builds the same AgentGraph as code.

Nodes, routers, reducers and state schemas are referenced as ``module:attribute``
import paths; ``END`` is the stop target. A spec is validated with Pydantic, so
a mistake is reported with its place in the document (``nodes.classify.call``).

Example::

    name: support
    entry: classify
    max_steps: 20
    nodes:
      classify: {call: "support.nodes:classify"}
      billing:  {call: "support.nodes:billing", next: END}
      general:  {call: "support.nodes:general", next: END}
    edges:
      - {from: classify, to: billing, condition: "category == 'billing'"}
      - {from: classify, to: general}
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from selectgraph._errors import GraphSpecError, ReducerConfigurationError
from selectgraph._sentinels import END, EndType
from selectgraph.graph._builder import AgentGraph
from selectgraph.graph._policies import ErrorPolicy, LoopAction, MaxStepsAction, RetryPolicy
from selectgraph.graph._reducers import (
    Reducer,
    append,
    bounded_append,
    concat_flatten,
    dedupe_append,
    last_write_wins,
    merge,
    merge_all,
    merge_by_key,
)

__all__ = ["GraphSpec", "load_reference"]

_END_NAME = "END"
_NAMED_REDUCERS: dict[str, Reducer] = {
    "last_write_wins": last_write_wins,
    "append": append,
    "merge": merge,
    "concat_flatten": concat_flatten,
    "merge_all": merge_all,
}
_REDUCER_FACTORIES: dict[str, Any] = {
    "bounded_append": bounded_append,
    "dedupe_append": dedupe_append,
    "merge_by_key": merge_by_key,
}


def load_reference(reference: str, where: str) -> Any:
    """Import ``module:attribute`` (dots allowed in the attribute path).

    Raises:
        GraphSpecError: naming ``where`` in the spec and what went wrong.
    """
    module_name, sep, attribute = reference.partition(":")
    if not sep or not module_name or not attribute:
        raise GraphSpecError(f"{where}: {reference!r} is not of the form 'module:attribute'")
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise GraphSpecError(f"{where}: cannot import module {module_name!r} ({exc})") from exc
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise GraphSpecError(
                f"{where}: module {module_name!r} has no attribute {attribute!r}"
            ) from None
    return target


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class RetrySpec(_Strict):
    """Retry settings of a spec (see RetryPolicy)."""

    max_retries: int = 3
    initial_delay: float = 0.1
    max_delay: float = 10.0
    multiplier: float = 2.0
    jitter: float = 0.1

    def policy(self) -> RetryPolicy:
        """The RetryPolicy these settings describe."""
        return RetryPolicy(**self.model_dump())


class NodeEntry(_Strict):
    """One node of a spec: a referenced object or a subgraph."""

    call: str | None = None
    """``module:attribute`` of the function, agent or graph to run."""
    subgraph: str | GraphSpec | None = None
    """A nested spec, or ``module:attribute`` of a graph, run behind a projection boundary."""
    input_map: dict[str, str] | None = None
    output_map: dict[str, str] | None = None
    projects_in: list[str] | None = None
    projects_out: list[str] | None = None
    next: str | None = None
    """Shorthand for an unconditional edge from this node (``END`` allowed)."""
    reads: list[str] | None = None
    writes: list[str] | None = None
    optional_writes: list[str] | None = None
    max_visits: int | None = None
    error_policy: ErrorPolicy | None = None
    retry: RetrySpec | None = None
    destinations: list[str] | None = None
    description: str | None = None
    options: dict[str, Any] = Field(default_factory=dict)
    """Node-kind options passed to add_node (e.g. an agent's ``context_mode``)."""

    @model_validator(mode="after")
    def _one_kind(self) -> NodeEntry:
        if (self.call is None) == (self.subgraph is None):
            raise ValueError("a node needs exactly one of 'call' or 'subgraph'")
        mapping = (self.input_map, self.output_map, self.projects_in, self.projects_out)
        if self.call is not None and any(value is not None for value in mapping):
            raise ValueError("input_map/output_map/projects_in/projects_out need 'subgraph'")
        if self.subgraph is not None:
            call_only = {
                "reads": self.reads,
                "writes": self.writes,
                "optional_writes": self.optional_writes,
                "destinations": self.destinations,
                "options": self.options or None,
            }
            given = sorted(name for name, value in call_only.items() if value is not None)
            if given:
                raise ValueError(f"{', '.join(given)} apply to 'call' nodes, not subgraphs")
        return self


class EdgeEntry(_Strict):
    """One edge of a spec."""

    source: str = Field(alias="from")
    to: str | None = None
    condition: str | None = None
    """A safe expression, or ``module:attribute`` of a predicate."""
    router: str | None = None
    """``module:attribute`` of a router function."""
    path_map: dict[str | int | bool, str] | list[str] | None = None
    """Router return value -> target; YAML ``yes``/``no`` keys arrive as booleans."""
    on: Literal["success", "failure", "always"] = "success"
    label: str | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> EdgeEntry:
        if (self.to is None) == (self.router is None):
            raise ValueError("an edge needs exactly one of 'to' or 'router'")
        if self.router is not None and self.condition is not None:
            raise ValueError("a router edge takes no 'condition'")
        if self.to is not None and self.path_map is not None:
            raise ValueError("'path_map' belongs to router edges")
        return self


class GraphSpec(_Strict):
    """A whole graph, declaratively. Build it with :meth:`build` or ``AgentGraph.from_spec``."""

    name: str = "graph"
    description: str = ""
    goal: str = ""
    entry: str | None = None
    state: str | None = None
    """``module:attribute`` of a Pydantic model or TypedDict for ``state.data``."""
    reducers: dict[str, str | dict[str, dict[str, Any]]] = Field(default_factory=dict)
    """Field -> reducer name, ``{factory: {kwargs}}``, or ``module:attribute``."""
    max_steps: int | None = 50
    on_max_steps: MaxStepsAction = MaxStepsAction.RETURN_LAST
    error_policy: ErrorPolicy = ErrorPolicy.ABORT
    retry: RetrySpec | None = None
    enable_loop_detection: bool = True
    on_loop: LoopAction = LoopAction.RAISE
    stall_threshold: int | None = 3
    nodes: dict[str, NodeEntry] = Field(default_factory=dict)
    edges: list[EdgeEntry] = Field(default_factory=list)

    # ------------------------------------------------------------ loading
    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GraphSpec:
        """Validate a mapping.

        Raises:
            GraphSpecError: naming every invalid entry and where it is.
        """
        try:
            return cls.model_validate(dict(data))
        except ValidationError as exc:
            problems = "; ".join(
                f"{_place(err['loc'])}: {err['msg'].removeprefix('Value error, ')}"
                for err in exc.errors()
            )
            raise GraphSpecError(problems) from None

    @classmethod
    def from_yaml(cls, source: str | Path) -> GraphSpec:
        """Load YAML text, or a ``.yaml``/``.yml`` file."""
        text = _read(source, (".yaml", ".yml"))
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise GraphSpecError(f"invalid YAML: {exc}") from None
        return cls.from_dict(_require_mapping(data))

    @classmethod
    def from_json(cls, source: str | Path) -> GraphSpec:
        """Load JSON text, or a ``.json`` file."""
        text = _read(source, (".json",))
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise GraphSpecError(f"invalid JSON: {exc}") from None
        return cls.from_dict(_require_mapping(data))

    # ----------------------------------------------------------- building
    def build(self) -> AgentGraph:
        """The AgentGraph this spec describes (the same one the builder would make).

        Raises:
            GraphSpecError: a reference cannot be imported or a name is reserved.
        """
        if _END_NAME in self.nodes:
            raise GraphSpecError(
                "nodes.END: in a spec 'END' means the stop target; name the node differently"
            )
        graph = AgentGraph(
            self.name,
            state_schema=load_reference(self.state, "state") if self.state else None,
            reducers={k: _reducer(v, f"reducers.{k}") for k, v in self.reducers.items()} or None,
            max_steps=self.max_steps,
            on_max_steps=self.on_max_steps,
            error_policy=self.error_policy,
            retry=self.retry.policy() if self.retry else None,
            enable_loop_detection=self.enable_loop_detection,
            on_loop=self.on_loop,
            stall_threshold=self.stall_threshold,
            goal=self.goal,
            description=self.description,
        )
        for name, node in self.nodes.items():
            _add_node(graph, name, node)
        for index, edge in enumerate(self.edges):
            _add_edge(graph, edge, f"edges[{index}]")
        if self.entry is not None:
            graph.set_entry(self.entry)
        return graph


def _place(loc: tuple[int | str, ...]) -> str:
    """A validation error's location as ``nodes.classify.call`` / ``edges[2].to``."""
    place = ""
    for part in loc:
        place += f"[{part}]" if isinstance(part, int) else (f".{part}" if place else str(part))
    return place or "<root>"


def _read(source: str | Path, suffixes: tuple[str, ...]) -> str:
    """The text of ``source``, reading it when it names a file.

    A Path, a name with a known suffix, or the name of an existing file is a
    file; anything else is the document itself.
    """
    looks_like_path = (
        isinstance(source, str)
        and "\n" not in source
        and (source.endswith(suffixes) or _is_file(source))
    )
    if isinstance(source, Path) or looks_like_path:
        path = Path(source)
        try:
            return path.read_text()
        except OSError as exc:
            raise GraphSpecError(f"cannot read {path}: {exc}") from None
    return str(source)


def _is_file(name: str) -> bool:
    try:
        return Path(name).is_file()
    except OSError:  # not a usable path at all (too long, bad characters): it is text
        return False


def _require_mapping(data: Any) -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        raise GraphSpecError(f"a graph spec is a mapping, got {type(data).__name__}")
    return data


def _target(name: str) -> str | EndType:
    return END if name == _END_NAME else name


def _reducer(spec: str | dict[str, dict[str, Any]], where: str) -> Any:
    if isinstance(spec, str):
        if spec in _NAMED_REDUCERS:
            return _NAMED_REDUCERS[spec]
        if ":" in spec:
            return load_reference(spec, where)
        known = ", ".join([*_NAMED_REDUCERS, *_REDUCER_FACTORIES])
        raise GraphSpecError(f"{where}: unknown reducer {spec!r}; known: {known}")
    if len(spec) != 1:
        raise GraphSpecError(f"{where}: a reducer factory is one {{name: {{kwargs}}}} entry")
    ((factory, kwargs),) = spec.items()
    if factory not in _REDUCER_FACTORIES:
        raise GraphSpecError(f"{where}: unknown reducer factory {factory!r}")
    try:
        return _REDUCER_FACTORIES[factory](**kwargs)
    except ReducerConfigurationError as exc:
        # Keep the category (reducer_configuration_invalid), add where it is.
        raise ReducerConfigurationError(f"{where}: {exc.diagnostics[0].message}") from None
    except TypeError as exc:
        raise GraphSpecError(f"{where}: {factory}: {exc}") from None


def _add_node(graph: AgentGraph, name: str, node: NodeEntry) -> None:
    where = f"nodes.{name}"
    next_node = _target(node.next) if node.next is not None else None
    if node.subgraph is not None:
        child = (
            node.subgraph.build()
            if isinstance(node.subgraph, GraphSpec)
            else load_reference(node.subgraph, f"{where}.subgraph")
        )
        graph.add_subgraph(
            name,
            child,
            input_map=node.input_map,
            output_map=node.output_map,
            projects_in=node.projects_in,
            projects_out=node.projects_out,
            max_visits=node.max_visits,
            error_policy=node.error_policy,
            retry=node.retry.policy() if node.retry else None,
            description=node.description,
        )
    else:
        assert node.call is not None
        target = load_reference(node.call, f"{where}.call")
        try:
            graph.add_node(
                name,
                target,
                reads=node.reads,
                writes=node.writes,
                optional_writes=node.optional_writes,
                max_visits=node.max_visits,
                error_policy=node.error_policy,
                retry=node.retry.policy() if node.retry else None,
                destinations=[_target(d) for d in node.destinations]
                if node.destinations is not None
                else None,
                description=node.description,
                **node.options,
            )
        except TypeError as exc:
            raise GraphSpecError(f"{where}: {exc}") from None
    if next_node is not None:
        graph.add_edge(name, next_node)


def _add_edge(graph: AgentGraph, edge: EdgeEntry, where: str) -> None:
    if edge.router is not None:
        router = load_reference(edge.router, f"{where}.router")
        path_map: Any = edge.path_map
        if isinstance(path_map, dict):
            path_map = {key: _target(value) for key, value in path_map.items()}
        elif isinstance(path_map, list):
            path_map = [_target(value) for value in path_map]
        graph.add_conditional_edge(edge.source, router, path_map, on=edge.on)
        return
    assert edge.to is not None
    source: Any = _target(edge.source)  # "END" as a source is reported as edge_from_end
    condition: Any = edge.condition
    if condition is not None and _looks_like_reference(condition):
        condition = load_reference(condition, f"{where}.condition")
    graph.add_edge(source, _target(edge.to), condition=condition, on=edge.on, label=edge.label)


def _looks_like_reference(text: str) -> bool:
    """``pkg.module:predicate`` rather than a safe expression (which never has a bare colon)."""
    module, sep, attribute = text.partition(":")
    return (
        bool(sep)
        and module.replace(".", "").replace("_", "").isalnum()
        and (attribute.replace(".", "").replace("_", "").isalnum())
    )


NodeEntry.model_rebuild()
