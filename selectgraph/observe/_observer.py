"""Observers: objects told about a run's events as they happen.

Three shapes are accepted in ``observers=``:

- a plain callable ``fn(event)``, or an :class:`Observer` with ``on_event``;
- an :class:`AgentObserver` with the seed's thirteen ``on_*`` methods;
- an :class:`AsyncAgentObserver` (``a_on_*``), or any observer whose
  ``on_event`` is ``async def``: these are delivered through a queue
  (``observe._delivery``), so a slow one never holds the run up.

Only the methods a subclass overrides are called, chosen once per class.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable, Collection, Iterable
from typing import Any, ClassVar, Literal, get_args

from selectgraph.observe._delivery import AsyncHandler, enqueue
from selectgraph.observe._events import (
    EdgeFired,
    GraphEvent,
    InterruptRaised,
    LoopDetected,
    NodeFinished,
    NodeStarted,
    ParallelFinished,
    ParallelStarted,
    RunCancelled,
    RunFailed,
    RunFinished,
    RunResumed,
    RunStarted,
    StallDetected,
    SupervisorReplanned,
)
from selectgraph.observe._recorder import Listener, wanted_types

__all__ = ["AgentObserver", "AsyncAgentObserver", "Observer", "Phase", "as_listener", "subscribe"]

Phase = Literal["started", "completed", "suspended"]
"""A node event's phase (OpenArmature's names): NodeStarted is ``"started"``;
NodeFinished is ``"completed"``, or ``"suspended"`` when the node paused for an answer."""

_PHASES: frozenset[str] = frozenset(get_args(Phase))

logger = logging.getLogger("selectgraph")


class Observer:
    """Base for objects notified of every event of a run; override :meth:`on_event`.

    A synchronous ``on_event`` is called in the run, in the order observers were
    given; an ``async def on_event`` is queued and awaited on selectgraph's
    delivery loop. An exception in either is logged and never reaches the run.

    Set :attr:`event_types` on a subclass that needs only some events: the run
    then does not even build the others for it.
    """

    event_types: ClassVar[Collection[type[GraphEvent]] | None] = None
    """The event classes :meth:`on_event` is called with (their subclasses too);
    ``None``, the default, for every event."""

    def on_event(self, event: GraphEvent) -> None:
        """Called for each event (of :attr:`event_types`, when set)."""


# The seed's thirteen events: (method, event class, how the event becomes arguments).
_Args = Callable[[Any], tuple[Any, ...]]
_SEED_EVENTS: tuple[tuple[str, type[GraphEvent], _Args], ...] = (
    ("graph_start", RunStarted, lambda e: (e.run_id, e.graph, e.entry, e.state)),
    ("graph_end", RunFinished, lambda e: (e.run_id, e.graph, e.steps, e.duration_ms)),
    (
        "graph_error",
        RunFailed,
        lambda e: (e.run_id, e.graph, e.node, e.exception if e.exception is not None else e.error),
    ),
    # A run stopped from outside ends with on_graph_error too (as LangChain's
    # callbacks do): an observer that opened a span at on_graph_start can close it.
    ("graph_error", RunCancelled, lambda e: (e.run_id, e.graph, e.node, _cancelled(e))),
    ("node_start", NodeStarted, lambda e: (e.run_id, e.node, e.step)),
    ("node_end", NodeFinished, lambda e: (e.run_id, e.node, e.step, e.duration_ms)),
    ("graph_routing", EdgeFired, lambda e: (e.run_id, e.source, e.next_node)),
    ("graph_interrupt", InterruptRaised, lambda e: (e.run_id, e.node, e.interrupt_id)),
    ("graph_resume", RunResumed, lambda e: (e.run_id, e.node, e.interrupt_id)),
    ("parallel_start", ParallelStarted, lambda e: (e.run_id, e.source, list(e.branches))),
    (
        "parallel_end",
        ParallelFinished,
        lambda e: (e.run_id, e.source, len(e.succeeded) + len(e.failed) + len(e.cancelled)),
    ),
    ("stall_detected", StallDetected, lambda e: (e.run_id, e.node, e.unchanged_steps)),
    ("loop_detected", LoopDetected, lambda e: (e.run_id, e.node, 1)),
    ("supervisor_replan", SupervisorReplanned, lambda e: (e.run_id, e.stall_count, e.new_plan)),
)
_OUTERMOST_ONLY = frozenset({RunStarted, RunFinished, RunFailed, RunCancelled, RunResumed})
"""Events the seed reports once per run: a subgraph's own start and end are not the run's."""


def _cancelled(event: RunCancelled) -> asyncio.CancelledError:
    """The error ``on_graph_error`` gets for a run stopped from outside."""
    return asyncio.CancelledError(f"the run was stopped from outside ({event.reason})")


def _overridden(cls: type, base: type, name: str) -> bool:
    return getattr(cls, name, None) is not getattr(base, name, None)


def _methods_of(
    cls: type, base: type, prefix: str
) -> tuple[dict[type[GraphEvent], tuple[str, _Args]], bool]:
    """The seed methods ``cls`` overrides, by event; and whether it overrides ``*event``."""
    dispatch = {
        event_cls: (f"{prefix}{name}", args)
        for name, event_cls, args in _SEED_EVENTS
        if _overridden(cls, base, f"{prefix}{name}")
    }
    return dispatch, _overridden(cls, base, f"{prefix}event")


class AgentObserver(Observer):
    """The seed's observer: override any of the thirteen ``on_*`` methods.

    ``on_graph_start``, ``on_graph_end``, ``on_graph_error`` and
    ``on_graph_resume`` are called for the outermost graph only; node, routing,
    parallel, stall and loop methods also for nodes inside subgraphs and
    branches (``on_event`` gets the full event, with its ``namespace`` and
    ``branch``). Override ``on_event`` too to see every event.
    """

    _dispatch: ClassVar[dict[type[GraphEvent], tuple[str, _Args]]] = {}
    _wants_all: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._dispatch, cls._wants_all = _methods_of(cls, AgentObserver, "on_")

    def listener(self) -> Listener:
        """The callable the run calls with each event."""
        dispatch = self._dispatch
        on_event = self.on_event if self._wants_all else None
        only = _declared(self)

        def deliver(event: GraphEvent) -> None:
            if on_event is not None and (only is None or isinstance(event, only)):
                on_event(event)
            found = dispatch.get(type(event))
            if found is not None and (type(event) not in _OUTERMOST_ONLY or _outermost(event)):
                name, args = found
                getattr(self, name)(*args(event))

        return _wanting(deliver, _seed_types(dispatch, self._wants_all, only))

    def on_graph_start(self, run_id: str, graph_name: str, entry_node: str, state: Any) -> None:
        """The run began."""

    def on_graph_end(
        self, run_id: str, graph_name: str, steps: int, total_duration_ms: float
    ) -> None:
        """The run finished."""

    def on_graph_error(
        self, run_id: str, graph_name: str, node_name: str | None, error: Any
    ) -> None:
        """The run failed (``error`` is the exception), or was stopped from outside.

        A run stopped from outside gets an ``asyncio.CancelledError``, with the
        node that was running as ``node_name``.
        """

    def on_node_start(self, run_id: str, node_name: str, step: int) -> None:
        """A node began."""

    def on_node_end(self, run_id: str, node_name: str, step: int, duration_ms: float) -> None:
        """A node finished."""

    def on_graph_routing(self, run_id: str, from_node: str, to_node: str) -> None:
        """Routing chose the next node (``"END"`` for END)."""

    def on_graph_interrupt(self, run_id: str, node_name: str, interrupt_id: str) -> None:
        """A node asked a question; the run pauses."""

    def on_graph_resume(self, run_id: str, node_name: str | None, interrupt_id: str | None) -> None:
        """A paused run continued."""

    def on_parallel_start(self, run_id: str, group_name: str, child_nodes: list[str]) -> None:
        """A fan-out started its branches."""

    def on_parallel_end(self, run_id: str, group_name: str, child_count: int) -> None:
        """A fan-out's branches were merged."""

    def on_stall_detected(self, run_id: str, node_name: str, stall_count: int) -> None:
        """The state has not changed for ``stall_count`` steps."""

    def on_loop_detected(self, run_id: str, node_name: str, loop_count: int) -> None:
        """A node came back to a state it had already seen."""

    def on_supervisor_replan(self, run_id: str, stall_count: int, new_plan: str) -> None:
        """A supervisor made a new plan after stalling."""


def _outermost(event: GraphEvent) -> bool:
    return not event.namespace and event.branch is None


class AsyncAgentObserver(Observer):
    """The seed's async observer: override any ``a_on_*`` method (``async def``).

    Calls are queued and awaited one at a time, in event order, on selectgraph's
    delivery loop; the run does not wait for them. ``await graph.drain()`` (or
    ``selectgraph.drain_observers()``) waits until they have all been made.
    """

    _dispatch: ClassVar[dict[type[GraphEvent], tuple[str, _Args]]] = {}
    _wants_all: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._dispatch, cls._wants_all = _methods_of(cls, AsyncAgentObserver, "a_on_")

    def listener(self) -> Listener:
        """The callable the run calls with each event: it only queues."""
        dispatch = self._dispatch
        wants_all = self._wants_all
        only = _declared(self)

        def deliver(event: GraphEvent) -> None:
            if wants_all and (only is None or isinstance(event, only)):
                enqueue(self.a_on_event, event)
            found = dispatch.get(type(event))
            if found is not None and (type(event) not in _OUTERMOST_ONLY or _outermost(event)):
                name, args = found
                method = getattr(self, name)
                values = args(event)

                async def call(_: GraphEvent) -> None:
                    await method(*values)

                call.__self__ = self  # type: ignore[attr-defined]  # named in error reports
                enqueue(call, event)

        return _wanting(deliver, _seed_types(dispatch, wants_all, only))

    async def a_on_event(self, event: GraphEvent) -> None:
        """Every event (override to see them all)."""

    async def a_on_graph_start(
        self, run_id: str, graph_name: str, entry_node: str, state: Any
    ) -> None:
        """The run began."""

    async def a_on_graph_end(
        self, run_id: str, graph_name: str, steps: int, total_duration_ms: float
    ) -> None:
        """The run finished."""

    async def a_on_graph_error(
        self, run_id: str, graph_name: str, node_name: str | None, error: Any
    ) -> None:
        """The run failed, or was stopped from outside (an ``asyncio.CancelledError``)."""

    async def a_on_node_start(self, run_id: str, node_name: str, step: int) -> None:
        """A node began."""

    async def a_on_node_end(
        self, run_id: str, node_name: str, step: int, duration_ms: float
    ) -> None:
        """A node finished."""

    async def a_on_graph_routing(self, run_id: str, from_node: str, to_node: str) -> None:
        """Routing chose the next node."""

    async def a_on_graph_interrupt(self, run_id: str, node_name: str, interrupt_id: str) -> None:
        """A node asked a question."""

    async def a_on_graph_resume(
        self, run_id: str, node_name: str | None, interrupt_id: str | None
    ) -> None:
        """A paused run continued."""

    async def a_on_parallel_start(
        self, run_id: str, group_name: str, child_nodes: list[str]
    ) -> None:
        """A fan-out started."""

    async def a_on_parallel_end(self, run_id: str, group_name: str, child_count: int) -> None:
        """A fan-out was merged."""

    async def a_on_stall_detected(self, run_id: str, node_name: str, stall_count: int) -> None:
        """The state has not changed for ``stall_count`` steps."""

    async def a_on_loop_detected(self, run_id: str, node_name: str, loop_count: int) -> None:
        """A node came back to a state it had already seen."""

    async def a_on_supervisor_replan(self, run_id: str, stall_count: int, new_plan: str) -> None:
        """A supervisor made a new plan after stalling."""


class Subscription:
    """An observer that receives node events of some phases only: see :func:`subscribe`."""

    __slots__ = ("observer", "phases")

    def __init__(self, observer: Any, phases: frozenset[str]) -> None:
        self.observer = observer
        """The observer told of the events."""
        self.phases = phases
        """The phases whose node events it is told of; events without a phase always are."""

    def listener(self) -> Listener:
        """The inner observer's listener, behind the phase filter."""
        inner = as_listener(self.observer)
        started = "started" in self.phases
        completed = "completed" in self.phases
        suspended = "suspended" in self.phases

        def deliver(event: GraphEvent) -> None:
            if isinstance(event, NodeStarted):
                wanted = started
            elif isinstance(event, NodeFinished):
                wanted = suspended if event.outcome == "interrupted" else completed
            else:
                wanted = True  # events without a phase always go through
            if wanted:
                inner(event)

        return _wanting(deliver, wanted_types(inner))

    def __repr__(self) -> str:
        return f"subscribe({self.observer!r}, phases={sorted(self.phases)})"


def subscribe(observer: Any, *, phases: Iterable[Phase]) -> Subscription:
    """``observer``, told only of node events in ``phases``; pass it in ``observers=``.

    Other events (routing, runs, model calls...) have no phase and always reach it.
    ``subscribe(obs, phases={"completed"})`` sees each node once, after its merge.

    Raises:
        ValueError: ``phases`` is empty or names an unknown phase.
    """
    if isinstance(phases, str):
        phases = (phases,)  # type: ignore[assignment]
    chosen = frozenset(phases)
    if not chosen:
        raise ValueError(
            f"subscribe(): phases is empty, so {observer!r} would never hear of a node; "
            "give at least one of 'started', 'completed', 'suspended'"
        )
    unknown = sorted(chosen - _PHASES)
    if unknown:
        raise ValueError(
            f"subscribe(): unknown phases {unknown}; use 'started', 'completed', 'suspended'"
        )
    as_listener(observer)  # a clear error now for something that is not an observer
    return Subscription(observer, chosen)


def as_listener(observer: Any) -> Listener:
    """The callable that delivers events to ``observer``.

    Raises:
        TypeError: ``observer`` is none of the accepted shapes.
    """
    if isinstance(observer, AgentObserver | AsyncAgentObserver | Subscription):
        return observer.listener()
    only = _declared(observer)
    on_event = getattr(observer, "on_event", None)
    target = on_event if callable(on_event) else observer if callable(observer) else None
    if target is None:
        raise TypeError(
            f"an observer needs an on_event(event) method or must be callable, got {observer!r}"
        )
    if inspect.iscoroutinefunction(target) or inspect.iscoroutinefunction(
        getattr(target, "__call__", None)  # noqa: B004 - an object with async __call__
    ):
        handler: AsyncHandler = target

        def queue(event: GraphEvent) -> None:
            enqueue(handler, event)

        return _wanting(queue, only)
    return target  # type: ignore[no-any-return]


def _declared(observer: Any) -> tuple[type[GraphEvent], ...] | None:
    """The observer's :attr:`Observer.event_types`, checked; ``None`` for every event.

    Raises:
        TypeError: ``event_types`` is not a collection of GraphEvent classes.
    """
    types = getattr(observer, "event_types", None)
    if types is None:
        return None
    chosen = tuple(types) if isinstance(types, Iterable) and not isinstance(types, str) else None
    if chosen is None or not all(
        isinstance(cls, type) and issubclass(cls, GraphEvent) for cls in chosen
    ):
        raise TypeError(
            f"observer {observer!r}: event_types must be GraphEvent classes "
            f"(e.g. {{NodeFinished}}) or None for every event, got {types!r}"
        )
    return chosen


def _seed_types(
    dispatch: dict[type[GraphEvent], Any],
    wants_all: bool,
    only: tuple[type[GraphEvent], ...] | None,
) -> tuple[type[GraphEvent], ...] | None:
    """What a seed observer needs: its methods' events, and those ``*on_event`` is given."""
    if wants_all and only is None:
        return None
    return (*dispatch, *(only or ()))


def _wanting(listener: Listener, types: tuple[type[GraphEvent], ...] | None) -> Listener:
    """``listener``, marked with the event classes it needs (read by the recorder)."""
    if types is not None:
        listener.event_types = types  # type: ignore[attr-defined]
    return listener
