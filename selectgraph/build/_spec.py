"""Spec: a declarative graph (dict, YAML or JSON) that builds the same AgentGraph as code.

Nodes, routers, reducers and state schemas are referenced as ``module:attribute``
import paths; ``END`` is the stop target. A spec is validated with Pydantic, so
a mistake is reported with its place in the document (``nodes.classify.call``).

A spec is code: its references import modules and call what they name. No
reference may walk through a dunder attribute, and ``allowed_modules`` (off by
default in the Python API) limits the modules a spec may import, checked
before anything is imported. YAML is read with duplicate keys refused and
alias expansion bounded, so a small document cannot grow into a huge one.

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

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    PrivateAttr,
    Tag,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from selectgraph.build._builder import AgentGraph, read_specs_with
from selectgraph.build._spec_text import check_text, load_json, load_yaml, read_source
from selectgraph.compile._compiled import CompiledGraph
from selectgraph.core._callables import (
    BadReference,
    allowed_module_prefixes,
    check_reference,
    import_reference,
)
from selectgraph.core._errors import GraphSpecError, ReducerConfigurationError
from selectgraph.core._policies import ErrorPolicy, LoopAction, MaxStepsAction, RetryPolicy
from selectgraph.core._sentinels import END, EndType
from selectgraph.state._reducers import (
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

__all__ = ["GraphSpec", "load_reference", "read_spec"]

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

_ALLOWED_MODULES = "allowed_modules"
"""The validation-context key that carries the allow-list to the reference checks."""


def load_reference(reference: str, where: str, allowed_modules: Iterable[str] | None = None) -> Any:
    """Import ``module:attribute`` (dots allowed in the attribute path).

    Args:
        reference: ``pkg.module:attr.path``.
        where: the place in the spec, for the error message.
        allowed_modules: module prefixes that may be imported (``None``: any).

    Raises:
        GraphSpecError: naming ``where`` in the spec and what went wrong.
    """
    return _load(reference, where, _prefixes(allowed_modules))


def _load(reference: str, where: str, prefixes: tuple[str, ...] | None) -> Any:
    try:
        return import_reference(reference, prefixes)
    except BadReference as exc:
        raise GraphSpecError(f"{where}: {exc}") from None


def _prefixes(allowed_modules: Iterable[str] | None) -> tuple[str, ...] | None:
    try:
        return allowed_module_prefixes(allowed_modules)
    except BadReference as exc:
        raise GraphSpecError(str(exc)) from None


def _context_prefixes(info: ValidationInfo) -> tuple[str, ...] | None:
    context = info.context
    return context.get(_ALLOWED_MODULES) if isinstance(context, dict) else None


def _checked(reference: str, info: ValidationInfo) -> str:
    """Refuse a malformed, dunder or disallowed reference while validating (no import)."""
    check_reference(reference, _context_prefixes(info))  # BadReference is a ValueError
    return reference


def _checked_reducer(value: str, info: ValidationInfo) -> str:
    return _checked(value, info) if ":" in value else value  # else a reducer's name


def _by_type(value: Any) -> str:
    """The union member a value belongs to: a string is a reference or name."""
    return "<reference>" if isinstance(value, str) else "<mapping>"


_Reference = Annotated[str, AfterValidator(_checked)]
_UNION_TAGS = frozenset({"<reference>", "<mapping>"})
"""Union member tags in a validation error's location, left out of the spec path."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class RetrySpec(_Strict):
    """Retry settings of a spec (see RetryPolicy); every number must be >= 0 and finite."""

    max_retries: int = Field(3, ge=0)
    initial_delay: float = Field(0.1, ge=0, allow_inf_nan=False)
    max_delay: float = Field(10.0, ge=0, allow_inf_nan=False)
    multiplier: float = Field(2.0, ge=0, allow_inf_nan=False)
    jitter: float = Field(0.1, ge=0, allow_inf_nan=False)

    @model_validator(mode="after")
    def _valid_policy(self) -> RetrySpec:
        self.policy()  # RetryPolicy's own checks, reported here with the spec path
        return self

    def policy(self) -> RetryPolicy:
        """The RetryPolicy these settings describe."""
        return RetryPolicy(**self.model_dump())


class NodeEntry(_Strict):
    """One node of a spec: a referenced object or a subgraph."""

    call: _Reference | None = None
    """``module:attribute`` of the function, agent or graph to run."""
    subgraph: (
        Annotated[
            Annotated[str, AfterValidator(_checked), Tag("<reference>")]
            | Annotated[GraphSpec, Tag("<mapping>")],
            Discriminator(_by_type),
        ]
        | None
    ) = None
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
    router: _Reference | None = None
    """``module:attribute`` of a router function."""
    path_map: dict[str | int | bool, str] | list[str] | None = None
    """Router return value -> target; YAML ``yes``/``no`` keys arrive as booleans."""
    on: Literal["success", "failure", "always"] = "success"
    label: str | None = None

    @field_validator("condition", mode="after")
    @classmethod
    def _checked_condition(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None and _looks_like_reference(value):
            _checked(value, info)
        return value

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
    """The graph's name (``AgentGraph(name)``)."""
    description: str = ""
    """What the graph does, for diagrams and parent graphs."""
    goal: str = ""
    """What the graph is for; agents and ``llm_decide`` edges are told it."""
    input_field: str | None = None
    """The state field text input from outside goes to (``AgentGraph(input_field=...)``)."""
    entry: str | None = None
    """The first node; by default, the first node in ``nodes``."""
    state: _Reference | None = None
    """``module:attribute`` of a Pydantic model or TypedDict for ``state.data``."""
    reducers: dict[
        str,
        Annotated[
            Annotated[str, AfterValidator(_checked_reducer), Tag("<reference>")]
            | Annotated[dict[str, dict[str, Any]], Tag("<mapping>")],
            Discriminator(_by_type),
        ],
    ] = Field(default_factory=dict)
    """Field -> reducer name, ``{factory: {kwargs}}``, or ``module:attribute``."""
    max_steps: int | None = 50
    """Nodes a run may execute; ``None`` for no limit."""
    on_max_steps: MaxStepsAction = MaxStepsAction.RETURN_LAST
    """What happens at the limit."""
    error_policy: ErrorPolicy = ErrorPolicy.ABORT
    """What happens when a node raises (a node's own ``error_policy`` wins)."""
    retry: RetrySpec | None = None
    """Backoff for ``ErrorPolicy.RETRY``."""
    enable_loop_detection: bool = True
    """Detect a node about to rerun on an identical state."""
    on_loop: LoopAction = LoopAction.RAISE
    """What happens when a loop is detected."""
    stall_threshold: int | None = 3
    """Unchanged steps in a row that count as a stall; ``None`` disables."""
    nodes: dict[str, NodeEntry] = Field(default_factory=dict)
    """The nodes by name: each runs a ``call`` reference or a ``subgraph``."""
    edges: list[EdgeEntry] = Field(default_factory=list)
    """The edges: ``from`` a node ``to`` a node (or END) when ``condition`` holds, or
    through a ``router``."""

    _allowed_modules: tuple[str, ...] | None = PrivateAttr(default=None)
    """The allow-list given when loading; :meth:`build` imports under it."""

    # ------------------------------------------------------------ loading
    @classmethod
    def from_dict(
        cls, data: Mapping[str, Any], *, allowed_modules: Iterable[str] | None = None
    ) -> GraphSpec:
        """Validate a mapping.

        Args:
            data: the spec.
            allowed_modules: module prefixes references may import (``"myapp"``
                allows ``myapp`` and ``myapp.nodes``, not ``myapplication``);
                ``None`` allows any module, ``[]`` none. Checked now, without
                importing, and again by :meth:`build`, which keeps the list.

        Raises:
            GraphSpecError: naming every invalid entry and where it is.
        """
        prefixes = _prefixes(allowed_modules)
        check_text(data)
        try:
            spec = cls.model_validate(dict(data), context={_ALLOWED_MODULES: prefixes})
        except ValidationError as exc:
            problems = "; ".join(
                f"{_place(err['loc'])}: {err['msg'].removeprefix('Value error, ')}"
                for err in exc.errors()
            )
            raise GraphSpecError(problems) from None
        spec._allowed_modules = prefixes
        return spec

    @classmethod
    def from_yaml(
        cls, source: str | Path, *, allowed_modules: Iterable[str] | None = None
    ) -> GraphSpec:
        """Load YAML text, or a ``.yaml``/``.yml`` file (see :meth:`from_dict`).

        Duplicate mapping keys are refused with their line, and aliases may
        add at most 10,000 nodes to the document.
        """
        text = read_source(source, (".yaml", ".yml"))
        return cls.from_dict(_require_mapping(load_yaml(text)), allowed_modules=allowed_modules)

    @classmethod
    def from_json(
        cls, source: str | Path, *, allowed_modules: Iterable[str] | None = None
    ) -> GraphSpec:
        """Load JSON text, or a ``.json`` file (see :meth:`from_dict`).

        Duplicate keys are refused with the place of the object that repeats one.
        """
        text = read_source(source, (".json",))
        return cls.from_dict(_require_mapping(load_json(text)), allowed_modules=allowed_modules)

    # ----------------------------------------------------------- building
    def build(self, *, allowed_modules: Iterable[str] | None = None) -> AgentGraph:
        """The AgentGraph this spec describes (the same one the builder would make).

        Args:
            allowed_modules: module prefixes references may import; when not
                given, the list the spec was loaded with (``None``: any module).

        Raises:
            GraphSpecError: a reference is refused or cannot be imported, or a
                name is reserved; the message starts with the spec path.
        """
        prefixes = (
            _prefixes(allowed_modules) if allowed_modules is not None else self._allowed_modules
        )
        return self._build(prefixes, "")

    def _build(self, prefixes: tuple[str, ...] | None, at: str) -> AgentGraph:
        """Build under ``prefixes``; ``at`` places a nested spec (``nodes.s.subgraph.``)."""
        if _END_NAME in self.nodes:
            raise GraphSpecError(
                f"{at}nodes.END: in a spec 'END' means the stop target; name the node differently"
            )
        state = _load(self.state, f"{at}state", prefixes) if self.state else None
        reducers = {
            key: _reducer(value, f"{at}reducers.{key}", prefixes)
            for key, value in self.reducers.items()
        }
        graph = AgentGraph(
            self.name,
            state_schema=state,
            reducers=reducers or None,
            max_steps=self.max_steps,
            on_max_steps=self.on_max_steps,
            error_policy=self.error_policy,
            retry=self.retry.policy() if self.retry else None,
            enable_loop_detection=self.enable_loop_detection,
            on_loop=self.on_loop,
            stall_threshold=self.stall_threshold,
            goal=self.goal,
            description=self.description,
            input_field=self.input_field,
        )
        for name, node in self.nodes.items():
            _add_node(graph, name, node, prefixes, f"{at}nodes.{name}")
        for index, edge in enumerate(self.edges):
            _add_edge(graph, edge, f"{at}edges[{index}]", prefixes)
        if self.entry is not None:
            graph.set_entry(self.entry)
        return graph


def _place(loc: tuple[int | str, ...]) -> str:
    """A validation error's location as ``nodes.classify.call`` / ``edges[2].to``."""
    place = ""
    for part in loc:
        if part in _UNION_TAGS:
            continue
        place += f"[{part}]" if isinstance(part, int) else (f".{part}" if place else str(part))
    return place or "<root>"


def _require_mapping(data: Any) -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        raise GraphSpecError(f"a graph spec is a mapping, got {type(data).__name__}")
    return data


def _target(name: str) -> str | EndType:
    return END if name == _END_NAME else name


def _reducer(
    spec: str | dict[str, dict[str, Any]], where: str, prefixes: tuple[str, ...] | None
) -> Any:
    if isinstance(spec, str):
        if spec in _NAMED_REDUCERS:
            return _NAMED_REDUCERS[spec]
        if ":" in spec:
            return _load(spec, where, prefixes)
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


def _add_node(
    graph: AgentGraph,
    name: str,
    node: NodeEntry,
    prefixes: tuple[str, ...] | None,
    where: str,
) -> None:
    next_node = _target(node.next) if node.next is not None else None
    if node.subgraph is not None:
        if isinstance(node.subgraph, GraphSpec):
            child = node.subgraph._build(prefixes, f"{where}.subgraph.")
        else:
            child = _load(node.subgraph, f"{where}.subgraph", prefixes)
            if not isinstance(child, AgentGraph | CompiledGraph):
                raise GraphSpecError(
                    f"{where}.subgraph: {node.subgraph!r} is {_kind(child)}, "
                    "not a graph (an AgentGraph or a compiled graph)"
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
        target = _load(node.call, f"{where}.call", prefixes)
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


def _kind(value: Any) -> str:
    """What a wrongly referenced object is, in words: a function, a class, an int."""
    if isinstance(value, type):
        return "a class"
    if callable(value):
        return "a function"
    name = type(value).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def _add_edge(
    graph: AgentGraph, edge: EdgeEntry, where: str, prefixes: tuple[str, ...] | None
) -> None:
    if edge.router is not None:
        router = _load(edge.router, f"{where}.router", prefixes)
        path_map: Any = edge.path_map
        if isinstance(path_map, dict):
            path_map = {key: _target(value) for key, value in path_map.items()}
        elif isinstance(path_map, list):
            path_map = [_target(value) for value in path_map]
        try:
            graph.add_conditional_edge(edge.source, router, path_map, on=edge.on)
        except TypeError as exc:  # the reference is not a function
            raise GraphSpecError(f"{where}.router: {exc}") from None
        return
    assert edge.to is not None
    source: Any = _target(edge.source)  # "END" as a source is reported as edge_from_end
    condition: Any = edge.condition
    if condition is not None and _looks_like_reference(condition):
        condition = _load(condition, f"{where}.condition", prefixes)
    try:
        graph.add_edge(source, _target(edge.to), condition=condition, on=edge.on, label=edge.label)
    except TypeError as exc:  # the referenced predicate is not a function
        raise GraphSpecError(f"{where}.condition: {exc}") from None


def _looks_like_reference(text: str) -> bool:
    """``pkg.module:predicate`` rather than a safe expression (which never has a bare colon)."""
    module, sep, attribute = text.partition(":")
    return (
        bool(sep)
        and module.replace(".", "").replace("_", "").isalnum()
        and (attribute.replace(".", "").replace("_", "").isalnum())
    )


NodeEntry.model_rebuild()


def read_spec(spec: Any, allowed_modules: Iterable[str] | None) -> AgentGraph:
    """The graph a GraphSpec, a mapping, or a YAML/JSON file path describes.

    What ``AgentGraph.from_spec`` does; this module hands it to the builder.

    Raises:
        GraphSpecError: the spec is invalid, naming where.
    """
    if isinstance(spec, GraphSpec):
        return spec.build(allowed_modules=allowed_modules)
    if isinstance(spec, Mapping):
        return GraphSpec.from_dict(spec, allowed_modules=allowed_modules).build()
    path = str(spec)
    if path.endswith(".json"):
        return GraphSpec.from_json(path, allowed_modules=allowed_modules).build()
    return GraphSpec.from_yaml(path, allowed_modules=allowed_modules).build()


read_specs_with(read_spec)
