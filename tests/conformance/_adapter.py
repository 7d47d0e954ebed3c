"""Conformance adapter: turn OpenArmature graph-engine fixtures into selectgraph graphs.

Implements the subset of the conformance-adapter directive vocabulary the
graph-engine fixtures use (state schemas, node behaviour, static and
conditional edges, subgraph projection, fan-out and parallel-branches nodes,
recording observers, compile errors and warnings). Any directive outside it
raises ``fixture_directive_unknown`` so that nothing is silently skipped.

A fixture's composite nodes are built from selectgraph's own parallel API, and
the events they produce are read back as OpenArmature node events:

- ``fan_out`` node ``F``: a node ``F`` whose router returns one
  ``Scatter("F::instance", {item})`` per item; ``F::instance`` is the
  subgraph behind an input/output mapping; the branches join at ``F::join``,
  which hands the collected values, merged in instance-index order, to the
  target field's reducer. OpenArmature's ``F`` pair is ``F``'s start and
  ``F::join``'s finish.
- ``parallel_branches`` node ``P``: a parallel group ``P`` whose members are
  subgraph nodes named after the branches, each with its ``outputs`` mapping.
- Subgraph nodes (and the two above) fire no node events of their own in
  OpenArmature: their inner nodes do, with the namespace extended.
"""

from __future__ import annotations

import asyncio
import copy
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import BaseModel, Field, create_model

import selectgraph as sg
from selectgraph import END, AgentGraph, GraphEvent, GraphState, Scatter
from selectgraph.graph import FailureMode, NodeContext
from selectgraph.observe import (
    DrainSummary,
    NodeFinished,
    NodeRetried,
    NodeStarted,
    RunFailed,
    RunStarted,
    drain_events_for,
    subscribe,
)

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
        "observers",
        "invoke",
        "invoke_with",
        "invocations",
        "invariants",
    }
)
_NODE_BEHAVIOURS = frozenset({"update", "update_pure", "update_from_field", "raises"})
_SUBGRAPH_KEYS = frozenset({"subgraph", "inputs", "outputs", "projects_in", "projects_out"})
_FAN_OUT_KEYS = frozenset(
    {
        "subgraph",
        "items_field",
        "count",
        "item_field",
        "collect_field",
        "target_field",
        "error_policy",
        "concurrency",
        "concurrent_mode",
    }
)
_ERROR_POLICIES: dict[str, FailureMode] = {"fail_fast": "fail_all", "collect": "wait_all"}
"""OpenArmature fan-out / branch error policies and the selectgraph failure modes they are."""
SEPARATOR = "::"
"""Joins a fixture node's name to the role of a node the adapter adds for it."""


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


def build_schema(
    name: str, state: dict[str, Any], extra: Mapping[str, Any] | None = None
) -> type[BaseModel]:
    """A Pydantic model for ``state.fields``, reducers declared with Annotated.

    ``extra`` adds fields the adapter itself needs (a fan-out's item and
    collected values), given as Pydantic field definitions.
    """
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
    for field_name, definition in (extra or {}).items():
        if field_name in fields:
            raise AdapterError("fixture_schema_invalid", f"state field {field_name!r} is reserved")
        fields[field_name] = definition
    return create_model(f"{name}_state", **fields)


# -------------------------------------------------------------------- nodes
def _apply(behaviours: list[str], spec: dict[str, Any], state: GraphState) -> dict[str, Any]:
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


def _node_function(name: str, spec: dict[str, Any], harness: Harness | None) -> Any:
    behaviours = [key for key in spec if key in _NODE_BEHAVIOURS]
    unknown = set(spec) - _NODE_BEHAVIOURS - {"invoke_drain_events_for"}
    if unknown:
        raise AdapterError("fixture_directive_unknown", f"node {name!r} has {sorted(unknown)}")
    drain_spec = spec.get("invoke_drain_events_for")
    if drain_spec is None:

        def node(state: GraphState) -> dict[str, Any]:
            return _apply(behaviours, spec, state)

        node.__name__ = name
        return node
    if harness is None:
        raise AdapterError("fixture_schema_invalid", "invoke_drain_events_for needs a harness")
    unknown = set(drain_spec) - {"timeout_seconds", "snapshot_observer"}
    if unknown:
        raise AdapterError("fixture_directive_unknown", f"drain directive has {sorted(unknown)}")
    timeout = drain_spec.get("timeout_seconds")
    watched = drain_spec["snapshot_observer"]

    async def draining_node(state: GraphState, context: NodeContext) -> dict[str, Any]:
        update = _apply(behaviours, spec, state)
        # conformance-adapter §5.1: the real per-invocation drain, then the bucket.
        emitted = harness.snapshots.emitted(context.run_id)
        began = time.monotonic()
        summary = await drain_events_for(context.run_id, timeout=timeout)
        elapsed = time.monotonic() - began
        observer = harness.observer(watched)
        harness.node_drains.append(
            NodeDrain(
                name,
                context.run_id,
                summary,
                elapsed,
                timeout,
                observer,
                observer.bucket(context.run_id),
                emitted,
            )
        )
        return update

    draining_node.__name__ = name
    return draining_node


@dataclass(frozen=True)
class NodeDrain:
    """What one ``invoke_drain_events_for`` node saw: summary, time taken, observer bucket."""

    node: str
    run_id: str
    summary: DrainSummary
    elapsed: float
    timeout: float | None
    observer: RecordingObserver
    bucket: list[GraphEvent]
    """The snapshot observer's bucket for the run, as the drain returned."""
    emitted: int
    """Node events the run had emitted when the drain was called."""


# ---------------------------------------------------------------- layout
@dataclass
class Layout:
    """What the adapter built for each fixture node, to read events back in fixture terms.

    Keys are ``(graph name, node name)`` as selectgraph's events carry them.
    """

    roles: dict[tuple[str, str], str] = field(default_factory=dict)
    """``"subgraph"``, ``"instance"`` or ``"member"`` (nodes OpenArmature gives no events),
    ``"dispatch"`` (a fan-out's start) or ``"join"`` (its finish); plain nodes are absent."""
    boundaries: dict[str, tuple[str, str, str | None]] = field(default_factory=dict)
    """A namespace segment the adapter named -> ``(fixture segment, kind, branch name)``,
    ``kind`` being ``"fan_out"`` or ``"branch"``; segments not listed are plain subgraphs."""
    hidden_fields: set[str] = field(default_factory=set)
    """State fields the adapter added (a fan-out's item and collected values)."""

    def add_boundary(self, segment: str, entry: tuple[str, str, str | None]) -> None:
        """Record ``segment``; the same name standing for two boundaries is ambiguous."""
        if self.boundaries.setdefault(segment, entry) != entry:
            raise AdapterError("fixture_schema_invalid", f"node name {segment!r} used twice")

    def fixture_name(self, graph: str, node: str) -> str:
        """The fixture node a selectgraph node stands for."""
        if self.roles.get((graph, node)) == "join":
            return node[: -len(SEPARATOR + "join")]
        return node

    def execution_order(self, graph: str, node_order: Sequence[str]) -> list[str]:
        """``node_order`` of ``graph`` as the fixture names its nodes."""
        hidden = {"instance", "member", "join"}
        return [n for n in node_order if self.roles.get((graph, n)) not in hidden]


class _Reset:
    """Written to a fan-out's collected-values field by its join: start over next time."""

    __slots__ = ()


_RESET = _Reset()


def _collect_values(current: Any, update: Any) -> Any:
    """One instance's collected value appended; the join's reset empties the list."""
    if update is _RESET:
        return []
    return [*(current or []), update]


_collect: sg.Reducer = sg.reducer(_collect_values, name="collect_instances")


def _fan_out_fields(node: str) -> tuple[str, str]:
    """The hidden fields a fan-out node uses: the instance's item and the collected values."""
    return f"fanout_{node}_item", f"fanout_{node}_collected"


def _add_fan_out(
    graph: AgentGraph,
    name: str,
    spec: dict[str, Any],
    built: Mapping[str, AgentGraph],
    layout: Layout,
) -> None:
    unknown = set(spec) - _FAN_OUT_KEYS
    if unknown:
        raise AdapterError("fixture_directive_unknown", f"fan_out {name!r} has {sorted(unknown)}")
    child = built.get(spec["subgraph"])
    if child is None:
        raise AdapterError("fixture_schema_invalid", f"no subgraph {spec['subgraph']!r}")
    if ("items_field" in spec) == ("count" in spec):
        raise AdapterError("fixture_schema_invalid", f"fan_out {name!r}: items_field or count")
    item_field, collected = _fan_out_fields(name)
    instance, join = name + SEPARATOR + "instance", name + SEPARATOR + "join"
    mode = _ERROR_POLICIES.get(spec.get("error_policy", "fail_fast"))
    if mode is None:
        raise AdapterError("fixture_directive_unknown", f"error_policy {spec['error_policy']!r}")
    limit = spec.get("concurrency")
    if spec.get("concurrent_mode") == "serial":
        limit = 1
    elif spec.get("concurrent_mode") not in (None, "concurrent"):
        raise AdapterError(
            "fixture_directive_unknown", f"concurrent_mode {spec['concurrent_mode']!r}"
        )
    items_field, target = spec.get("items_field"), spec["target_field"]
    count = int(spec.get("count", 0))

    def route(state: GraphState) -> Any:
        items = state[items_field] if items_field is not None else range(count)
        return [Scatter(instance, {item_field: item}) for item in items] or join

    def collect(state: GraphState) -> dict[str, Any]:
        # The join merged each instance's value in instance-index order; the
        # target field's reducer takes them as one update (pipeline-utilities §9.3).
        return {target: list(state[collected]), collected: _RESET}

    graph.add_node(name, lambda state: {})
    input_map = {item_field: spec["item_field"]} if items_field is not None else {}
    graph.add_subgraph(
        instance, child, input_map=input_map, output_map={spec["collect_field"]: collected}
    )
    graph.add_node(join, collect)
    graph.add_conditional_edge(
        name,
        route,
        failure_mode=mode,
        max_concurrency=limit,
    )
    graph.add_edge(instance, join)
    layout.roles.update(
        {
            (graph.name, name): "dispatch",
            (graph.name, instance): "instance",
            (graph.name, join): "join",
        }
    )
    layout.add_boundary(instance, (name, "fan_out", None))


def _add_parallel_branches(
    graph: AgentGraph,
    name: str,
    spec: dict[str, Any],
    built: Mapping[str, AgentGraph],
    layout: Layout,
) -> None:
    unknown = set(spec) - {"branches", "error_policy"}
    if unknown:
        raise AdapterError("fixture_directive_unknown", f"parallel_branches has {sorted(unknown)}")
    mode = _ERROR_POLICIES.get(spec.get("error_policy", "fail_fast"))
    if mode is None:
        raise AdapterError("fixture_directive_unknown", f"error_policy {spec['error_policy']!r}")
    for branch, branch_spec in spec["branches"].items():
        unknown = set(branch_spec) - {"subgraph", "outputs"}
        if unknown:
            raise AdapterError(
                "fixture_directive_unknown", f"branch {branch!r} has {sorted(unknown)}"
            )
        child = built.get(branch_spec["subgraph"])
        if child is None:
            raise AdapterError("fixture_schema_invalid", f"no subgraph {branch_spec['subgraph']!r}")
        outputs = branch_spec.get("outputs")
        # The member node is named after the branch, so the branch's name is
        # what selectgraph reports as the branch name.
        graph.add_subgraph(
            branch,
            child,
            output_map={c: p for p, c in outputs.items()} if outputs is not None else None,
        )
        layout.roles[(graph.name, branch)] = "member"
        layout.add_boundary(branch, (name, "branch", branch))
    graph.add_parallel_nodes(name, list(spec["branches"]), failure_mode=mode)


def build_graph(
    name: str,
    graph: dict[str, Any],
    subgraphs: Mapping[str, AgentGraph],
    layout: Layout | None = None,
    observers: Sequence[Any] = (),
    harness: Harness | None = None,
    carried: Iterable[str] = (),
) -> AgentGraph:
    """The AgentGraph a fixture graph block describes (``layout`` learns what was built).

    ``carried`` are initial-state keys the fixture's schema does not declare:
    graph-engine state carries them along (020 routes on one), so they become
    fields of any type.
    """
    layout = layout if layout is not None else Layout()
    nodes = {n: spec or {} for n, spec in (graph.get("nodes") or {}).items()}
    extra: dict[str, Any] = dict.fromkeys(carried, (Any, None))
    for node_name, spec in nodes.items():
        if SEPARATOR in node_name:
            raise AdapterError(
                "fixture_schema_invalid", f"node name {node_name!r} has {SEPARATOR!r}"
            )
        if "fan_out" in spec:
            item_field, collected = _fan_out_fields(node_name)
            extra[item_field] = (Any, None)
            layout.hidden_fields.update((item_field, collected))
            extra[collected] = (Annotated[list[Any], _collect], Field(default_factory=list))
    result = AgentGraph(
        name,
        state_schema=build_schema(name, graph.get("state") or {}, extra),
        strict_entry=True,
        observers=observers,
    )
    fan_outs = set()
    for node_name, spec in nodes.items():
        if "fan_out" in spec or "parallel_branches" in spec:
            key = "fan_out" if "fan_out" in spec else "parallel_branches"
            if set(spec) != {key}:
                raise AdapterError("fixture_directive_unknown", f"{key} node has {sorted(spec)}")
            if key == "fan_out":
                _add_fan_out(result, node_name, spec[key], subgraphs, layout)
                fan_outs.add(node_name)
            else:
                _add_parallel_branches(result, node_name, spec[key], subgraphs, layout)
        elif "subgraph" in spec:
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
            layout.roles[(name, node_name)] = "subgraph"
        else:
            result.add_node(node_name, _node_function(node_name, spec, harness))
    sources = set()
    for edge in graph.get("edges") or []:
        sources.add(edge.get("from"))
        if edge.get("from") in fan_outs:  # a fan-out node moves on once its instances joined
            edge = {**edge, "from": edge["from"] + SEPARATOR + "join"}
        _add_edge(result, edge)
    # graph-engine §3 lets a node without an outgoing edge compile (020's unreached
    # node b); selectgraph refuses a dead end, so the adapter ends the run there.
    for node_name in graph.get("nodes") or {}:
        if node_name not in sources:
            result.add_edge(node_name, END)
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
    if "callable" in condition:
        graph.add_conditional_edge(edge["from"], _callable_condition(condition))
        return
    unknown = set(condition) - {"if_field", "equals", "then", "else"}
    if unknown:
        raise AdapterError("fixture_directive_unknown", f"condition keys {sorted(unknown)}")
    field_name, expected = condition["if_field"], condition["equals"]
    then, otherwise = _target(condition["then"]), _target(condition["else"])

    def route(state: GraphState) -> Any:
        return then if state[field_name] == expected else otherwise

    graph.add_conditional_edge(edge["from"], route)


def _callable_condition(condition: dict[str, Any]) -> Any:
    """A fixture's named edge function: ``state_field_read`` or ``edge_raises``."""
    kind = condition["callable"]
    if kind == "state_field_read":
        unknown = set(condition) - {"callable", "field"}
        field_name = condition["field"]

        def read(state: GraphState) -> Any:
            return _target(state[field_name])

        route = read
    elif kind == "edge_raises":
        unknown = set(condition) - {"callable", "message"}
        message = condition["message"]

        def raises(state: GraphState) -> Any:
            raise RuntimeError(message)

        route = raises
    else:
        raise AdapterError("fixture_directive_unknown", f"edge callable {kind!r}")
    if unknown:
        raise AdapterError("fixture_directive_unknown", f"{kind} keys {sorted(unknown)}")
    return route


def build_case(
    case: dict[str, Any],
    layout: Layout | None = None,
    observers: Sequence[Any] = (),
    harness: Harness | None = None,
) -> AgentGraph:
    """The graph of one case (``graph:`` block or top-level keys), subgraphs included.

    ``observers`` are attached to the outermost graph, after the harness's
    snapshot listener and the observers it attaches there; the harness's
    observers targeting a subgraph are attached to that subgraph. ``layout``
    records what the adapter built, for :func:`node_events`.
    """
    unknown = set(case) - _CASE_KEYS
    if unknown:
        raise AdapterError("fixture_directive_unknown", f"{sorted(unknown)}")
    layout = layout if layout is not None else Layout()
    body = case.get("graph", case)
    declared: dict[str, Any] = {}
    for source in (case, body):
        if "subgraphs" in source:
            declared.update(source["subgraphs"])
        if "subgraph" in source:
            declared[source["subgraph"]["name"]] = source["subgraph"]
    targets = harness.attached_to(declared) if harness is not None else {}
    built: dict[str, AgentGraph] = {}
    for sub_name, spec in declared.items():
        spec = {k: v for k, v in spec.items() if k != "name"}
        built[sub_name] = build_graph(
            sub_name, spec, built, layout, targets.get(sub_name, ()), harness
        )
    outer: list[Any] = []
    if harness is not None:
        outer = [harness.snapshots, *targets.get(None, ())]
    declared_fields = (body.get("state") or {}).get("fields") or {}
    carried = [k for k in case.get("initial_state") or {} if k not in declared_fields]
    return build_graph(
        case.get("name", "fixture"), body, built, layout, [*outer, *observers], harness, carried
    )


def state_subset(state: GraphState, expected: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of ``state.data`` the fixture asserts on (and whether any are missing)."""
    return {key: state.data.get(key, "<missing>") for key in expected}


# ------------------------------------------------------------------ observers
_NODE_EVENT_TYPES = (NodeStarted, NodeFinished, NodeRetried, RunFailed)
"""selectgraph events that can stand for OpenArmature node events."""
_HIDDEN_ROLES = frozenset({"subgraph", "instance", "member"})


class ObserverFailure(Exception):
    """What a fixture's ``raise`` observer raises on every event."""


@dataclass(eq=False)
class RecordingObserver:
    """A fixture observer (conformance-adapter §6.1): ``record``, ``accumulate`` or ``raise``.

    Its ``on_event`` is ``async def``, so selectgraph delivers to it through
    the run's serial delivery queue, on its delivery loop: what it records and
    when is what that queue did. ``pace_ms`` is the sleep before each node
    event, for the first invocation and for later ones.
    """

    name: str
    phases: frozenset[str] = frozenset({"started", "completed"})
    behavior: str = "record"
    pace_ms: tuple[float, float] = (0, 0)
    run_order: list[str] = field(default_factory=list, repr=False)
    """Outermost run ids in invocation order (the harness's snapshot listener fills it)."""
    deliveries: list[tuple[str, GraphEvent]] = field(default_factory=list, repr=False)
    """``(observer name, event)`` in delivery order, shared by a case's observers."""
    events: list[GraphEvent] = field(default_factory=list, repr=False)
    buckets: dict[str, list[GraphEvent]] = field(default_factory=dict, repr=False)
    """Events by ``run_id`` (OpenArmature's ``invocation_id``), for ``accumulate``."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    async def on_event(self, event: GraphEvent) -> None:
        """Record ``event`` (after the configured pause); raise if that is the behaviour."""
        if isinstance(event, _NODE_EVENT_TYPES):
            first = not self.run_order or self.run_order[0] == event.run_id
            pause = self.pace_ms[0 if first else 1]
            if pause:
                await asyncio.sleep(pause / 1000)
        with self._lock:
            self.events.append(event)
            self.buckets.setdefault(event.run_id, []).append(event)
            self.deliveries.append((self.name, event))
        if self.behavior == "raise":
            raise ObserverFailure(f"{self.name} raises on {event.type.name}")

    def bucket(self, run_id: str) -> list[GraphEvent]:
        """The events delivered so far for run ``run_id``."""
        with self._lock:
            return list(self.buckets.get(run_id, ()))


class Snapshots:
    """A synchronous listener, first on the outermost graph: what node events lack.

    selectgraph's node events carry neither OpenArmature's invocation-wide
    ``step`` nor state snapshots. Listeners are called in the run as each
    event is emitted, so this one reads the run's live state objects
    (``RunStarted.state`` of each graph run, ``NodeFinished.state``) at that
    moment and keeps, per event: ``step`` (node starts counted in emission
    order across subgraphs), ``pre_state``, ``post_state``, ``error`` (the
    category of the RunFailed naming the node) and ``parent_states`` (each
    enclosing graph's state when it entered the subgraph node; outside
    fan-outs only).
    """

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self.run_ids: list[str] = []
        """Outermost run ids, in the order the runs started."""
        self._lock = threading.Lock()
        self._extras: dict[int, tuple[GraphEvent, dict[str, Any]]] = {}
        self._states: dict[tuple[Any, ...], GraphState] = {}
        self._pre: dict[tuple[Any, ...], Any] = {}
        self._steps: dict[tuple[Any, ...], int] = {}
        self._entered: dict[tuple[Any, ...], Any] = {}
        self._next_step: dict[str, int] = {}
        self._emitted: dict[str, int] = {}

    def __call__(self, event: GraphEvent) -> None:
        with self._lock:
            self._see(event)

    def emitted(self, run_id: str) -> int:
        """OpenArmature node events run ``run_id`` has emitted so far."""
        with self._lock:
            return self._emitted.get(run_id, 0)

    def extras(self, event: GraphEvent) -> dict[str, Any]:
        """The fields taken for ``event`` when it was emitted."""
        with self._lock:
            found = self._extras.get(id(event))
        return dict(found[1]) if found is not None and found[0] is event else {}

    def _data(self, key: tuple[Any, ...]) -> Any:
        state = self._states.get(key)
        if state is None:
            return None
        hidden = self.layout.hidden_fields
        return {k: copy.deepcopy(v) for k, v in state.data.items() if k not in hidden}

    def _see(self, event: GraphEvent) -> None:
        run_id = event.run_id
        key = (run_id, event.namespace, event.branch)
        if isinstance(event, RunStarted):
            if event.state is not None:
                self._states[key] = event.state
            if not event.namespace and event.branch is None:
                self.run_ids.append(run_id)
            return
        node = getattr(event, "node", None)
        if not isinstance(event, _NODE_EVENT_TYPES) or node is None:
            return
        role = self.layout.roles.get((event.graph, node))
        slot = (key, self.layout.fixture_name(event.graph, node))
        extras: dict[str, Any] = {}
        if isinstance(event, NodeStarted):
            if role != "join":  # the join's start is inside its fan-out node's pair
                self._pre[slot] = self._data(key)
                if role in _HIDDEN_ROLES and event.branch is None:
                    self._entered[(run_id, (*event.namespace, node))] = self._pre[slot]
                elif role not in _HIDDEN_ROLES:
                    self._steps[slot] = self._next_step.get(run_id, 0)
                    self._next_step[run_id] = self._steps[slot] + 1
            extras["pre_state"] = self._pre.get(slot)
        elif isinstance(event, NodeFinished):
            extras["pre_state"] = self._pre.get(slot)
            if event.outcome == "success" and event.state is not None:
                extras["post_state"] = self._data(key) if key in self._states else None
            else:
                extras["error"] = event.error
        elif isinstance(event, RunFailed):
            extras["pre_state"] = self._pre.get(slot)
            extras["error"] = event.category
        else:
            extras["pre_state"] = self._pre.get(slot)
        if slot in self._steps:
            extras["step"] = self._steps[slot]
        if event.branch is None:
            path = event.namespace
            extras["parent_states"] = [
                self._entered.get((run_id, path[: i + 1])) for i in range(len(path))
            ]
        self._extras[id(event)] = (event, extras)
        self._emitted[run_id] = self._emitted.get(run_id, 0) + len(
            node_events([event], self.layout)
        )


@dataclass
class Harness:
    """A case's observers, its snapshot listener and what its draining nodes saw."""

    layout: Layout
    snapshots: Snapshots
    observers: list[RecordingObserver]
    targets: dict[str, str]
    """Observer name -> ``attach`` (``"graph"`` or ``"invocation"``)."""
    places: dict[str, str]
    """Observer name -> ``target`` (``"outer"``, ``"inner"`` or a subgraph's name)."""
    deliveries: list[tuple[str, GraphEvent]]
    node_drains: list[NodeDrain] = field(default_factory=list)

    def observer(self, name: str) -> RecordingObserver:
        """The observer called ``name``."""
        for observer in self.observers:
            if observer.name == name:
                return observer
        raise AdapterError("fixture_schema_invalid", f"no observer {name!r}")

    def per_invocation(self) -> list[Any]:
        """Observers passed to each run (``attach: invocation``), as registered."""
        return [registered(o) for o in self.observers if self.targets[o.name] == "invocation"]

    def attached_to(self, declared: Mapping[str, Any]) -> dict[str | None, list[Any]]:
        """Graph-attached observers by the subgraph they go on (``None``: the outermost graph)."""
        result: dict[str | None, list[Any]] = {}
        for observer in self.observers:
            if self.targets[observer.name] != "graph":
                continue
            place = self.places[observer.name]
            graph: str | None
            if place == "outer":
                graph = None
            elif place in declared:
                graph = place
            elif place == "inner" and len(declared) == 1:
                (graph,) = declared
            else:
                raise AdapterError("fixture_schema_invalid", f"observer target {place!r}")
            result.setdefault(graph, []).append(registered(observer))
        return result


def registered(observer: RecordingObserver) -> Any:
    """What goes in ``observers=``: the observer, behind the engine's phase filter if it has one."""
    if observer.phases == frozenset({"started", "completed"}):
        return observer
    return subscribe(observer, phases=observer.phases)  # type: ignore[arg-type]


_OBSERVER_KEYS = frozenset({"name", "attach", "target", "behavior", "phases", "sleep_ms_per_event"})


def _pace(spec: Any) -> tuple[float, float]:
    if spec is None:
        return 0, 0
    if isinstance(spec, int | float):
        return spec, spec
    if isinstance(spec, dict) and set(spec) == {"first_invocation", "subsequent_invocations"}:
        return spec["first_invocation"], spec["subsequent_invocations"]
    raise AdapterError("fixture_schema_invalid", f"sleep_ms_per_event {spec!r}")


def harness_of(case: dict[str, Any], layout: Layout) -> Harness:
    """The case's observers (conformance-adapter §5.5), ready for :func:`build_case`."""
    snapshots = Snapshots(layout)
    deliveries: list[tuple[str, GraphEvent]] = []
    harness = Harness(layout, snapshots, [], {}, {}, deliveries)
    for spec in case.get("observers") or []:
        unknown = set(spec) - _OBSERVER_KEYS
        if unknown:
            raise AdapterError("fixture_directive_unknown", f"observer keys {sorted(unknown)}")
        behaviour = spec.get("behavior")
        if behaviour not in ("record", "accumulate", "raise"):
            raise AdapterError("fixture_directive_unknown", f"observer behavior {behaviour!r}")
        if spec.get("attach") not in ("graph", "invocation"):
            raise AdapterError(
                "fixture_directive_unknown", f"observer attach {spec.get('attach')!r}"
            )
        if spec.get("attach") == "invocation" and spec.get("target", "outer") != "outer":
            raise AdapterError("fixture_schema_invalid", "invocation observers go on the outer run")
        phases = frozenset(spec.get("phases") or ("started", "completed"))
        observer = RecordingObserver(
            spec["name"],
            phases,
            behaviour,
            _pace(spec.get("sleep_ms_per_event")),
            snapshots.run_ids,
            deliveries,
        )
        harness.observers.append(observer)
        harness.targets[observer.name] = spec["attach"]
        harness.places[observer.name] = spec.get("target", "outer")
    return harness


def node_events(
    events: Sequence[GraphEvent], layout: Layout, snapshots: Snapshots | None = None
) -> list[dict[str, Any]]:
    """selectgraph's events as OpenArmature node events (graph-engine §6), in order.

    Each is a mapping with ``phase``, ``node_name``, ``namespace``,
    ``attempt_index``, ``fan_out_index_chain`` and ``branch_name_chain``, plus
    ``fan_out_index`` / ``branch_name`` only when present (absent otherwise).
    One selectgraph node run is one OpenArmature attempt pair per attempt: a
    retry closes the failed attempt and starts the next; a RunFailed naming a
    node is that node's ``completed`` event with ``error``. With ``snapshots``,
    each also gets what :class:`Snapshots` took when the event was emitted.
    """
    result: list[dict[str, Any]] = []
    for event in events:
        if isinstance(event, NodeStarted):
            phases = [("started", 0)]
        elif isinstance(event, NodeRetried):
            phases = [("completed", event.attempt - 1), ("started", event.attempt)]
        elif isinstance(event, NodeFinished):
            phases = [("completed", event.attempts - 1)]
        elif isinstance(event, RunFailed) and event.node is not None:
            phases = [("completed", 0)]
        else:
            continue
        role = layout.roles.get((event.graph, str(event.node)))
        if role in ("subgraph", "instance", "member"):
            continue  # composite nodes: only their inner nodes fire events
        if role == "dispatch":
            phases = [p for p in phases if p[0] == "started"]
        elif role == "join":
            phases = [p for p in phases if p[0] == "completed"]
        extras = snapshots.extras(event) if snapshots is not None else {}
        for phase, attempt in phases:
            mapped = _node_event(event, layout, phase, attempt)
            mapped.update(extras)
            if phase == "started":  # a start has no outcome yet
                mapped.pop("post_state", None)
                mapped.pop("error", None)
            result.append(mapped)
    return result


def _node_event(event: Any, layout: Layout, phase: str, attempt: int) -> dict[str, Any]:
    refs = list(event.branch.chain) if event.branch is not None else []
    namespace: list[str] = []
    indices: list[int | None] = []
    names: list[str | None] = []
    for segment in event.namespace:
        boundary = layout.boundaries.get(segment)
        if boundary is None:  # a plain subgraph boundary
            namespace.append(segment)
            indices.append(None)
            names.append(None)
            continue
        source, kind, branch = boundary
        if not refs or refs[0].source != source:
            raise AssertionError(
                f"event {event!r}: segment {segment!r} entered {source!r}'s {kind}, "
                f"but its branch chain is {event.branch!r}"
            )
        ref = refs.pop(0)
        namespace.append(source)
        if kind == "fan_out":
            indices.append(ref.index)
            names.append(None)
        else:
            if ref.name != branch:
                raise AssertionError(f"event {event!r}: branch {ref.name!r}, expected {branch!r}")
            indices.append(None)
            names.append(branch)
    if refs:
        raise AssertionError(f"event {event!r}: branches {refs!r} match no namespace segment")
    out: dict[str, Any] = {
        "phase": phase,
        "node_name": layout.fixture_name(event.graph, event.node),
        "namespace": [*namespace, layout.fixture_name(event.graph, event.node)],
        "attempt_index": attempt,
        "fan_out_index_chain": indices,
        "branch_name_chain": names,
    }
    # The scalars are the innermost (deepest non-null) chain entries.
    index = next((i for i in reversed(indices) if i is not None), None)
    if index is not None:
        out["fan_out_index"] = index
    name = next((n for n in reversed(names) if n is not None), None)
    if name is not None:
        out["branch_name"] = name
    return out


# ---------------------------------------------------------------- invariants
def _identity(event: dict[str, Any], chains: bool = False) -> tuple[Any, ...]:
    """An event's source identity (graph-engine §6); absent scalars are a slot of their own."""
    key: tuple[Any, ...] = (
        tuple(event["namespace"]),
        event.get("fan_out_index", "<absent>"),
        event.get("branch_name", "<absent>"),
        event["attempt_index"],
        event["phase"],
    )
    if chains:
        key += (tuple(event["fan_out_index_chain"]), tuple(event["branch_name_chain"]))
    return key


def _innermost_matches(events: list[dict[str, Any]]) -> bool:
    return all(
        e.get("fan_out_index")
        == next((i for i in reversed(e["fan_out_index_chain"]) if i is not None), None)
        for e in events
    )


def _chains(events: list[dict[str, Any]], key: str) -> set[tuple[Any, ...]]:
    return {tuple(e[key]) for e in events}


def _scalar_collides(events: list[dict[str, Any]]) -> bool:
    return len({_identity(e) for e in events}) < len({_identity(e, chains=True) for e in events})


_PER_NODE: dict[str, Callable[[list[dict[str, Any]], Any], bool]] = {
    # Longest suffixes first: a shorter one may end a longer one.
    "scalar_fan_out_index_not_unique_across_outer_instances": lambda evs, _: _scalar_collides(evs),
    "scalar_fan_out_index_equals_innermost_chain_element": lambda evs, _: _innermost_matches(evs),
    "event_identities_unique_by_chain": lambda evs, _: (
        len({_identity(e, chains=True) for e in evs}) == len(evs)
    ),
    "fan_out_index_chains_seen": lambda evs, want: (
        _chains(evs, "fan_out_index_chain") == {tuple(c) for c in want}
    ),
    "branch_name_chains_seen": lambda evs, want: (
        _chains(evs, "branch_name_chain") == {tuple(c) for c in want}
    ),
    "fan_out_index_chain_empty": lambda evs, _: all(e["fan_out_index_chain"] == [] for e in evs),
    "scalar_branch_name_absent": lambda evs, _: all("branch_name" not in e for e in evs),
    "fan_out_index_absent": lambda evs, _: all("fan_out_index" not in e for e in evs),
    "events_count": lambda evs, want: len(evs) == want,
    "started_present": lambda evs, _: any(e["phase"] == "started" for e in evs),
    "completed_present": lambda evs, _: any(e["phase"] == "completed" for e in evs),
}
"""Per-node predicates ``<node>[_node]_<suffix>`` (conformance-adapter §5.9, fixture 039)."""


def _inner(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Events from nodes inside a fan-out instance or a parallel branch."""
    return [e for e in events if "fan_out_index" in e or "branch_name" in e]


def _edge_failure_completes(events: list[dict[str, Any]]) -> bool:
    """Whether routing or edge failures are on completed events, and no completion succeeded."""
    errors = [e.get("error") for e in events if e["phase"] == "completed" and e.get("error")]
    completions = [e for e in events if e["phase"] == "completed"]
    return (
        bool(errors)
        and all(error in ("routing_error", "edge_exception") for error in errors)
        and len(completions) == len(errors)
    )


_INNER: dict[str, Callable[[list[dict[str, Any]], Any], bool]] = {
    "inner_event_count": lambda evs, want: len(_inner(evs)) == want,
    "inner_fan_out_indices_seen": lambda evs, want: (
        {e["fan_out_index"] for e in _inner(evs) if "fan_out_index" in e} == set(want)
    ),
    "inner_branch_names_seen": lambda evs, want: (
        {e["branch_name"] for e in _inner(evs) if "branch_name" in e} == set(want)
    ),
    "inner_attempt_indices_seen": lambda evs, want: (
        {e["attempt_index"] for e in _inner(evs)} == set(want)
    ),
    "inner_event_identities_unique": lambda evs, want: (
        (len({_identity(e) for e in _inner(evs)}) == len(_inner(evs))) == want
    ),
    "no_events_for_node": lambda evs, node: all(e["node_name"] != node for e in evs),
    "edge_resolution_failure_in_completed_event": lambda evs, want: (
        _edge_failure_completes(evs) == want
    ),
    "outermost_events_have_no_branch_name": lambda evs, want: all(
        (mine := [e for e in evs if e["namespace"] == [node]])
        and all("branch_name" not in e for e in mine)
        for node in want["nodes"]
    ),
    "inner_events_carry_correct_branch_name": lambda evs, want: all(
        (mine := [e for e in evs if e["node_name"] == node])
        and all(e.get("branch_name") == branch for e in mine)
        for node, branch in want.items()
    ),
}
"""Predicates over the whole event stream (conformance-adapter §5.9, fixtures 017 and 021)."""


def failed_invariants(events: list[dict[str, Any]], predicates: Mapping[str, Any]) -> list[str]:
    """The names of ``predicates`` that do not hold on ``events`` (empty when all hold).

    Raises:
        AdapterError: a predicate this adapter does not know.
    """
    nodes = {e["node_name"] for e in events}
    failed = []
    for name, want in predicates.items():
        check = _INNER.get(name)
        if not (check(events, want) if check is not None else _per_node(name, want, events, nodes)):
            failed.append(name)
    return failed


def _per_node(name: str, want: Any, events: list[dict[str, Any]], nodes: set[str]) -> bool:
    for suffix, check in _PER_NODE.items():
        if not name.endswith("_" + suffix):
            continue
        node = name[: -len(suffix) - 1]
        if node not in nodes and node.endswith("_node"):
            node = node[: -len("_node")]
        mine = [e for e in events if e["node_name"] == node]
        if isinstance(want, bool):
            return bool(mine) and check(mine, want) == want
        return check(mine, want)
    raise AdapterError("fixture_directive_unknown", f"invariant predicate {name!r}")
