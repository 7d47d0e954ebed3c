"""Edges: how a node says where the run goes next, and resolve_next() which picks one.

A node's edges are walked in declaration order. Conditional edges (a safe
expression or a predicate) and a router are tried first; the first that
matches wins. An unconditional edge is the fallback and fires only when none
matched. ``trigger`` selects edges by the node's outcome: ``"success"`` edges
after a normal return, ``"failure"`` edges after a failure, ``"always"`` edges
after either.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Generator, Hashable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from selectgraph.core._callables import is_async_callable
from selectgraph.core._run_errors import EdgeError, RoutingError
from selectgraph.core._sentinels import END, EndType
from selectgraph.core._state import GraphState
from selectgraph.core._usage import Usage
from selectgraph.routing._directives import Directive
from selectgraph.routing._parallel import (
    DEFAULT_FANOUT,
    Branches,
    FanOutOptions,
    Scatter,
    is_fanout,
)
from selectgraph.routing._safe_eval import Condition, MissingStateKey
from selectgraph.state._views import StateView, ViewWrites

__all__ = [
    "Decider",
    "Edge",
    "EdgeKind",
    "NodeRoutes",
    "RouteContext",
    "RouteDecision",
    "Trigger",
    "aresolve_next",
    "match_simple",
    "resolve_next",
]

EdgeKind = Literal["static", "condition", "router", "llm"]
"""What decides whether an edge fires.

- ``"static"``: always fires (the unconditional fallback).
- ``"condition"``: fires when its safe expression or predicate is true.
- ``"router"``: a function returns the target.
- ``"llm"``: a model picks the target among candidates; its ``target`` is the fallback.
"""

Trigger = Literal["success", "failure", "always"]
"""Which node outcomes an edge is considered for.

- ``"success"``: the node returned normally (the default).
- ``"failure"``: the node failed after its retries (an on_failure edge).
- ``"always"``: either.
"""

Router = Callable[[GraphState], Any]
Predicate = Callable[[GraphState], Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class RouteContext:
    """What an llm_decide edge is told when choosing where to go."""

    source: str
    """The node that just finished."""
    goal: str
    """The graph's goal."""
    candidates: Mapping[str | EndType, str]
    """Each allowed target and its description."""
    output: Any = None
    """The source node's output (``state.last_output``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RouteDecision:
    """An llm_decide edge's choice."""

    target: str | EndType | None
    """The chosen target; ``None`` (or one outside the candidates) fires the fallback."""
    reasoning: str = ""
    """Why, in the model's words (shown in the trace)."""
    usage: Usage | None = None
    """Tokens and cost of the decision call."""
    error: str | None = None
    """Why no valid decision was made (the fallback then fires)."""


Decider = Callable[[GraphState, RouteContext], Awaitable[RouteDecision]]
"""An llm_decide edge's chooser: async ``(state, route) -> RouteDecision``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Edge:
    """One outgoing edge of a node."""

    source: str
    """The node the edge leaves."""
    kind: EdgeKind
    """What decides whether it fires."""
    trigger: Trigger = "success"
    """Which outcomes of the source it applies to."""
    target: str | EndType | Branches | None = None
    """Destination of static and condition edges (several at once: Branches); ``None``
    for routers."""
    condition: Condition | Predicate | None = None
    """For ``"condition"`` edges: a parsed safe expression or a predicate on the state."""
    router: Router | None = None
    """For ``"router"`` edges: returns a target, a path_map key or a goto()."""
    path_map: Mapping[Hashable, str | EndType] | None = None
    """For routers: allowed return values and the targets they mean."""
    decider: Decider | None = None
    """For ``"llm"`` edges: picks the target."""
    route: RouteContext | None = None
    """For ``"llm"`` edges: the candidates and goal, filled in at compile time."""
    label: str = ""
    """Condition text or router name, for traces and diagrams."""
    order: int = 0
    """Declaration order across the whole graph."""
    fanout: FanOutOptions = DEFAULT_FANOUT
    """For routers: how the branches merge and fail when the router returns a list."""

    @property
    def is_async(self) -> bool:
        """Whether evaluating this edge needs an event loop."""
        if self.kind == "llm":
            return True
        fn = self.router if self.kind == "router" else self.condition
        if fn is None or isinstance(fn, Condition):
            return False
        return is_async_callable(fn)

    def targets(self) -> list[str | EndType]:
        """Every node (or END) this edge leads to directly; several for a fan-out."""
        target = self.target
        if target is None:
            return []
        if type(target) is Branches:
            return list(target.nodes())
        return [target]  # type: ignore[list-item]

    def describe(self) -> str:
        """A short human description, e.g. ``a -> b [score > 3]``."""
        shown = self.target.describe() if type(self.target) is Branches else self.target
        target = "END" if shown is END else (shown or "?")
        when = "" if self.trigger == "success" else f" (on {self.trigger})"
        if self.kind == "router":
            return f"{self.source} -> router {self.label}{when}"
        if self.kind == "llm":
            return f"{self.source} -> llm_decide (fallback {target}){when}"
        suffix = f" [{self.label}]" if self.label else ""
        return f"{self.source} -> {target}{suffix}{when}"


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeRoutes:
    """A node's edges, compiled for resolve_next()."""

    success: tuple[Edge, ...]
    """Edges considered after success: conditionals in order, then the fallback."""
    failure: tuple[Edge, ...]
    """Edges considered after failure: conditionals in order, then the fallback."""
    static_success: Edge | None
    """The single unconditional success edge when there is nothing else to try (fast path)."""
    is_async: bool
    """Whether any edge needs an event loop."""
    simple: tuple[tuple[Callable[[Mapping[str, Any]], Any], Edge], ...] | None = None
    """When every success edge is a parsed condition or the static fallback: the
    ``(evaluate, edge)`` pairs, evaluated straight on the data (fast path)."""
    router: Edge | None = None
    """When the only success edge is one synchronous router: that edge (fast path)."""
    router_view: str = ""
    """The name the router's read-only view gives in errors (``router on 'node'``)."""

    @property
    def has_failure_route(self) -> bool:
        """Whether a failure of the node can be routed rather than propagated."""
        return bool(self.failure)


def _edge_error(edge: Edge, exc: BaseException, state: GraphState) -> EdgeError:
    if isinstance(exc, MissingStateKey):
        problem = f"state has no key {exc.args[0]!r}"
    else:
        problem = f"{type(exc).__name__}: {exc}"
    what = f"condition {edge.label!r}" if edge.kind == "condition" else f"router {edge.label!r}"
    return EdgeError(
        f"{what} on edge {edge.describe()} failed: {problem}", node=edge.source, state=state
    )


def _check_target(edge: Edge, target: Any, nodes: Mapping[str, object], how: str) -> str | EndType:
    if target is END or (isinstance(target, str) and target in nodes):
        checked: str | EndType = target
        return checked
    hint = " (did you mean selectgraph.END?)" if target in ("END", "__end__") else ""
    raise RoutingError(
        f"{how} on {edge.source!r} returned {target!r}, which is not a node of this graph "
        f"or END{hint}; nodes: {', '.join(sorted(nodes))}",
        node=edge.source,
    )


def _router_target(
    edge: Edge, value: Any, nodes: Mapping[str, object]
) -> tuple[str | EndType | Branches | None, Directive | None]:
    """The router's target (``None`` for update() without one) and its directive, if any."""
    how = f"router {edge.label!r}"
    if is_fanout(value):
        # Several at once: node names and/or Scatter, checked before any branch starts.
        targets = tuple(value)
        if edge.path_map is not None:
            targets = tuple(_through_path_map(edge, item, how) for item in targets)
        return Branches(targets, edge.fanout, how), None
    directive: Directive | None = None
    if isinstance(value, Directive):
        if value.target is None:
            return None, value
        directive, value = value, value.target
    path_map = edge.path_map
    if path_map is not None and directive is None:
        try:
            if value in path_map:
                value = path_map[value]
            elif value is not END:
                allowed = ", ".join(repr(k) for k in path_map)
                raise RoutingError(
                    f"{how} on {edge.source!r} returned {value!r}, which is not in its "
                    f"path_map (allowed: {allowed})",
                    node=edge.source,
                )
        except TypeError:  # unhashable return value
            raise RoutingError(
                f"{how} on {edge.source!r} returned unhashable {value!r}", node=edge.source
            ) from None
    elif path_map is not None and value is not END and value not in path_map.values():
        raise RoutingError(
            f"{how} on {edge.source!r} returned goto({value!r}), which is not among its "
            f"path_map targets",
            node=edge.source,
        )
    return _check_target(edge, value, nodes, how), directive


def _through_path_map(edge: Edge, item: Any, how: str) -> Any:
    """One item of a router's list, translated by its path_map (Scatter names a target)."""
    path_map = edge.path_map
    assert path_map is not None
    if isinstance(item, Hashable) and not isinstance(item, Scatter) and item in path_map:
        return path_map[item]
    name = item.node_name if isinstance(item, Scatter) else item
    if name in path_map.values():
        return item
    allowed = ", ".join(repr(k) for k in path_map)
    raise RoutingError(
        f"{how} on {edge.source!r} returned a list holding {item!r}, which is not in its "
        f"path_map (allowed: {allowed})",
        node=edge.source,
    )


Resolved = tuple[
    "str | EndType | Branches", "Edge | None", "Directive | None", "RouteDecision | None"
]


def _decide(edge: Edge, state: GraphState) -> Generator[Any, Any, RouteDecision]:
    """Ask an llm_decide edge's decider; anything but a valid candidate means the fallback."""
    assert edge.decider is not None
    assert edge.route is not None
    route = RouteContext(
        source=edge.route.source,
        goal=edge.route.goal,
        candidates=edge.route.candidates,
        output=state.last_output,
    )
    view = StateView(state, f"llm_decide on {edge.source!r}", readonly=True)
    try:
        decision: RouteDecision = yield edge, edge.decider(view, route)
    except Exception as exc:  # a failed call is a documented way to reach the fallback
        decision = RouteDecision(target=None, error=f"{type(exc).__name__}: {exc}")
    if decision.error is None and decision.target not in route.candidates:
        decision = RouteDecision(
            target=None,
            reasoning=decision.reasoning,
            usage=decision.usage,
            error=f"chose {decision.target!r}, which is not a candidate",
        )
    if decision.target is None or decision.error is not None:
        return RouteDecision(
            target=edge.target,  # type: ignore[arg-type]  # an llm edge's fallback is one node
            reasoning=f"fallback: {decision.error or 'no decision'}",
            usage=decision.usage,
            error=decision.error or "no decision",
        )
    return decision


def match_simple(source: str, routes: NodeRoutes, state: GraphState) -> Edge:
    """The first matching edge among ``routes.simple`` (conditions, then the fallback).

    Raises:
        EdgeError: a condition failed to evaluate.
        RoutingError: nothing matched.
    """
    data = state.data
    assert routes.simple is not None
    for evaluate, edge in routes.simple:
        try:
            if evaluate(data):
                return edge
        except Exception as exc:
            raise _edge_error(edge, exc, state) from exc
    return resolve_next(source, routes, True, state, {})[1]  # type: ignore[return-value]  # raises


def _resolution(
    source: str,
    routes: NodeRoutes,
    outcome_ok: bool,
    state: GraphState,
    nodes: Mapping[str, object],
) -> Generator[Any, Any, Resolved]:
    """The edge walk, as a generator yielding ``(edge, awaitable)`` for each awaitable.

    An awaitable is what an async condition, router or llm_decide decider returns.

    Writing it once as a generator lets a synchronous driver (no event loop)
    and an async driver share one implementation.
    """
    candidates = routes.success if outcome_ok else routes.failure
    view: StateView | None = None
    for edge in candidates:
        kind = edge.kind
        if kind == "static":
            return edge.target, edge, None, None  # type: ignore[return-value]
        if kind == "llm":
            decision = yield from _decide(edge, state)
            return decision.target, edge, None, decision  # type: ignore[return-value]
        try:
            if kind == "condition":
                condition = edge.condition
                if type(condition) is Condition:
                    matched = condition(state.data)
                else:
                    if view is None:
                        view = StateView(state, f"condition on {source!r}", readonly=True)
                    matched = condition(view)  # type: ignore[misc,arg-type]
                    if inspect.isawaitable(matched):
                        matched = yield edge, matched
                if matched:
                    return edge.target, edge, None, None  # type: ignore[return-value]
                continue
            # A router's own view: what it writes is merged like an update().
            routing = StateView(state, f"router on {source!r}")
            value = edge.router(routing)  # type: ignore[misc]
            if inspect.isawaitable(value):
                value = yield edge, value
        except (RoutingError, EdgeError):
            raise
        except Exception as exc:
            raise _edge_error(edge, exc, state) from exc
        return _routed(edge, value, nodes, routing, state)
    tried = "; ".join(edge.describe() for edge in candidates) or "none"
    raise RoutingError(
        f"no edge matched after node {source!r}; edges tried: {tried}. Add an unconditional "
        f"fallback edge, e.g. add_edge({source!r}, END)",
        node=source,
        state=state,
    )


def _routed(
    edge: Edge, value: Any, nodes: Mapping[str, object], view: StateView, state: GraphState
) -> Resolved:
    target, directive = _router_target(edge, value, nodes)
    writes = view.collect()
    if writes is not None:
        directive = _with_view_writes(edge, target, directive, writes, state)
    if target is None:
        # update() without a target: the patch is applied before routing, and
        # a router is a node's only unconditional way on, so the run ends.
        target = END
    return target, edge, directive, None


def _with_view_writes(
    edge: Edge,
    target: str | EndType | Branches | None,
    directive: Directive | None,
    writes: ViewWrites,
    state: GraphState,
) -> Directive:
    """The router's directive with what it wrote through its view (seed 004's routers).

    Raises:
        EdgeError: it wrote something other than data keys, or wrote and fanned out.
    """
    problem = None
    if writes.deletions or writes.messages or writes.history:
        problem = "deleted data keys or added messages or history"
    elif writes.metadata or writes.metadata_deletions:
        problem = "changed metadata"
    elif type(target) is Branches:
        problem = "wrote state and fanned out"
    if problem is not None:
        raise _edge_error(
            edge,
            TypeError(
                f"it {problem}; a router may set data keys (merged before routing, as "
                "update() is) and route to one target: do the rest in a node"
            ),
            state,
        )
    return Directive(
        target=directive.target if directive is not None else target,  # type: ignore[arg-type]
        values=directive.values if directive is not None else {},
        assignments=writes.assignments,
    )


def route_with_value(
    edge: Edge,
    state: GraphState,
    nodes: Mapping[str, object],
    view: StateView,
) -> Resolved:
    """Call a node's one synchronous router directly (the fast path of resolve_next).

    Raises:
        EdgeError: the router raised, or returned an awaitable although it is a plain function.
        RoutingError: it returned an unknown target.
    """
    try:
        value = edge.router(view)  # type: ignore[misc]
    except (RoutingError, EdgeError):
        raise
    except Exception as exc:
        raise _edge_error(edge, exc, state) from exc
    if type(value) is str and edge.path_map is None and value in nodes and view.touched is False:
        return value, edge, None, None
    if inspect.isawaitable(value):
        raise _awaitable_from_plain(edge, value, state)
    return _routed(edge, value, nodes, view, state)


def _awaitable_from_plain(edge: Edge, pending: Any, state: GraphState) -> EdgeError:
    if inspect.iscoroutine(pending):
        pending.close()  # never awaited, and nobody will: no "never awaited" warning
    return _edge_error(
        edge,
        TypeError(
            f"it is a plain function but returned {type(pending).__name__} {pending!r}; "
            "declare it with 'async def' so the engine awaits it"
        ),
        state,
    )


def resolve_next(
    source: str,
    routes: NodeRoutes,
    outcome_ok: bool,
    state: GraphState,
    nodes: Mapping[str, object],
) -> Resolved:
    """Pick the next node after ``source`` finished (all edges synchronous).

    Args:
        source: The node that finished.
        routes: Its compiled edges.
        outcome_ok: True after success (or a skipped failure), False after a routed failure.
        state: The live state, after the node's output was merged.
        nodes: The graph's nodes, to validate targets.

    Returns:
        ``(target, edge, directive)``: the edge that fired and, for a router
        that returned ``goto(target, update)``, the directive whose update must
        be merged before moving on.

    Raises:
        EdgeError: a condition or router raised, or a plain (non-async) one
            returned a coroutine or another awaitable.
        RoutingError: a router returned an unknown target, or no edge matched.
    """
    walk = _resolution(source, routes, outcome_ok, state, nodes)
    try:
        edge, pending = walk.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    walk.close()
    raise _awaitable_from_plain(edge, pending, state)


async def aresolve_next(
    source: str,
    routes: NodeRoutes,
    outcome_ok: bool,
    state: GraphState,
    nodes: Mapping[str, object],
    decide: Callable[[Edge, Awaitable[RouteDecision]], Awaitable[RouteDecision]] | None = None,
) -> Resolved:
    """:func:`resolve_next` for nodes with async routers or predicates.

    ``decide``, when given, makes each llm_decide edge's decision from its
    pending decider call (an executor records it, and replays the record).
    """
    walk = _resolution(source, routes, outcome_ok, state, nodes)
    value: Any = None
    error: Exception | None = None
    while True:
        try:
            edge, awaitable = walk.send(value) if error is None else walk.throw(error)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        if decide is not None and edge.kind == "llm":
            awaitable = decide(edge, awaitable)
        try:
            value, error = await awaitable, None
        except Exception as exc:  # raised inside the walk, where it is wrapped as EdgeError
            value, error = None, exc
