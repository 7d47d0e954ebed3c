"""Compiled graph: an immutable, validated graph that runs — run(), arun(), astream()."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import copy
import threading
from collections.abc import (
    AsyncIterator,
    Callable,
    Coroutine,
    Generator,
    Iterable,
    Mapping,
    Sequence,
)
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar

from selectgraph.compile._langgraph import invoke_run, state_values
from selectgraph.core._control import cancellable
from selectgraph.core._errors import Diagnostic
from selectgraph.core._interrupts import interrupt_run_id
from selectgraph.core._policies import (
    ErrorPolicy,
)
from selectgraph.core._result import GraphResult
from selectgraph.core._run_errors import GraphRunError
from selectgraph.core._sentinels import EndType
from selectgraph.core._serialization import StateSerializer, default_serializer
from selectgraph.core._state import GraphState
from selectgraph.core._sync import iterate_sync, run_sync
from selectgraph.nodes._function import FunctionAdapter
from selectgraph.nodes._spec import NodeSpec
from selectgraph.observe._delivery import DrainSummary, drain_events_for
from selectgraph.observe._delivery import drain as drain_observers
from selectgraph.observe._events import GraphEvent
from selectgraph.observe._observer import Observer, as_listener
from selectgraph.observe._recorder import EventRecorder, Listener
from selectgraph.observe._stream import StreamMode, stream_converter
from selectgraph.persistence._protocol import CheckpointStore
from selectgraph.routing._edges import Edge, NodeRoutes
from selectgraph.routing._reach import possible_targets
from selectgraph.runtime._durable import Durability
from selectgraph.runtime._guard import fast_route_target, guard_input, guard_start
from selectgraph.runtime._resume import (
    DurableOptions,
    StateSnapshot,
    get_history,
    get_state,
    resume_run,
    start_durable_run,
    update_state,
)
from selectgraph.runtime._run import Run, Sleep, blocking_sleep
from selectgraph.runtime._settings import GraphSettings
from selectgraph.runtime._start import prepare_state, start_run
from selectgraph.state._merge import Merger
from selectgraph.state._schema import StateSchema

if TYPE_CHECKING:
    from selectgraph.runtime._subgraph import GraphAdapter

__all__ = [
    "NO_RESPONSE",
    "CompiledGraph",
    "GraphInput",
    "ResumeOptions",
    "RunOptions",
    "StreamOptions",
]

T = TypeVar("T")

GraphInput = GraphState | Mapping[str, Any] | str | None
"""What a run starts from: a state, a mapping of data, a user prompt, or nothing."""


NO_RESPONSE: Any = object()
"""``resume(interrupt_id)`` was not given an answer (None is a valid answer)."""
_NO_RESPONSE = NO_RESPONSE

PauseSignal = Any
"""A PauseToken, threading.Event or asyncio.Event: anything with ``is_set()``."""


class ResumeOptions(TypedDict, total=False):
    """Keyword options of ``resume()`` / ``aresume()``."""

    checkpoint_store: CheckpointStore | None
    observers: Sequence[Observer | Listener]
    durability: Durability
    pause: PauseSignal | None
    serializer: StateSerializer | None


class RunOptions(ResumeOptions, total=False):
    """Keyword options of ``run()``, ``arun()`` and ``astream()``."""

    run_id: str | None
    checkpoint_id: str | None
    pause_before: Iterable[str] | None
    pause_after: Iterable[str] | None


class StreamOptions(RunOptions, total=False):
    """Keyword options of ``astream()``."""

    stream_mode: StreamMode | Sequence[StreamMode]


class CompiledGraph:
    """A validated graph, ready to run. Build one with ``AgentGraph.compile()``."""

    def __init__(
        self,
        *,
        name: str,
        entry: str,
        nodes: Mapping[str, NodeSpec],
        routes: Mapping[str, NodeRoutes],
        edges: Sequence[Edge],
        schema: StateSchema,
        settings: GraphSettings,
        observers: Sequence[Observer | Listener] = (),
        warnings: Sequence[Diagnostic] = (),
        description: str = "",
        serializer: StateSerializer | None = None,
    ) -> None:
        self.name = name
        """The graph's name (traces, events, diagrams)."""
        self.entry = entry
        """The node every run starts at."""
        self.nodes: Mapping[str, NodeSpec] = dict(nodes)
        """Every node as compiled, by name, in declaration order."""
        self.routes: Mapping[str, NodeRoutes] = dict(routes)
        """Each node's outgoing edges, ready for routing."""
        self.edges: tuple[Edge, ...] = tuple(edges)
        """Every edge, in declaration order."""
        self.schema = schema
        """The state schema (fields, reducers, validation)."""
        self.settings = settings
        """Run-time rules: step limit, error policy, budgets, pause gates..."""
        self.observers = tuple(observers)
        """Told every event of every run."""
        self.warnings: tuple[Diagnostic, ...] = tuple(warnings)
        """Non-fatal problems compile found."""
        self.checkpointer: CheckpointStore | None = None
        """The store runs use when none is passed (``AgentGraph.compile(checkpointer=...)``)."""
        self.description = description
        """What the graph does (diagrams, parent graphs)."""
        self.serializer = serializer or default_serializer()
        """Encodes states for checkpoints and restores them: the library's types plus the
        state schema's own (a run may pass another)."""
        self.is_async = any(
            spec.adapter.is_async or spec.timeout is not None for spec in self.nodes.values()
        ) or any(route.is_async for route in self.routes.values())
        """Whether running needs an event loop (some node or edge is async, or has a timeout)."""
        if settings.input_guardrails is not None and settings.input_guardrails.is_async:
            self.is_async = True
        self.listeners = tuple(as_listener(o) for o in observers)
        """The observers as event listeners (what runs call)."""
        plain = {
            name: spec.adapter
            for name, spec in self.nodes.items()
            if isinstance(spec.adapter, FunctionAdapter)
            and not spec.adapter.wants_context
            and not spec.reads
            and spec.timeout is None
        }
        self.direct_calls: Mapping[str, Callable[[GraphState], Any]] = {
            name: adapter.fn for name, adapter in plain.items() if not adapter.is_async
        }
        """Nodes the runner may call directly: plain sync functions."""
        self.direct_async: Mapping[str, Callable[[GraphState], Any]] = {
            name: adapter.fn for name, adapter in plain.items() if adapter.is_async
        }
        """Plain async functions, awaited directly by the runner."""
        self.retried_directly: frozenset[str] = frozenset(
            name
            for name, spec in self.nodes.items()
            if name in plain and (spec.error_policy or settings.error_policy) is ErrorPolicy.RETRY
        )
        """Plain functions under ErrorPolicy.RETRY: called directly, retried after a failure."""
        self.plain_merger = None if schema.reducers else Merger(schema, None)
        """A merger runs may share while they have no reducer fields nor fingerprints."""
        self.join_points: dict[tuple[str, ...], Any] = {}
        """Fan-out join points found so far, by the branches' start nodes."""
        self.quick_branches: dict[tuple[str, Any, bool], Any] = {}
        """Start nodes of branches that need no walk of their own (found on first use)."""
        self.post_dominators: Mapping[Any, set[Any]] | None = None
        """For each node, the nodes every path from it to END passes (computed on first use)."""

    # ----------------------------------------------------------------- input
    def prepare_state(self, value: GraphInput) -> GraphState:
        """The engine-owned state a run starts from.

        Raises:
            StateValidationError: the input does not satisfy the state schema.
        """
        return prepare_state(self, value)

    def start_run(
        self,
        input: GraphInput,
        *,
        run_id: str | None = None,
        namespace: tuple[str, ...] = (),
        listeners: Sequence[Listener] = (),
        parent: EventRecorder | None = None,
        sleep: Sleep = asyncio.sleep,
        track_writes: bool = False,
    ) -> Run:
        """A run of this graph, ready to :meth:`~Run.execute` (see ``runtime.start_run``)."""
        return start_run(
            self,
            input,
            run_id=run_id,
            namespace=namespace,
            listeners=listeners,
            parent=parent,
            sleep=sleep,
            track_writes=track_writes,
        )

    # ------------------------------------------------------------------ runs
    def arun(
        self,
        input: GraphInput = None,
        *,
        observers: Sequence[Observer | Listener] = (),
        run_id: str | None = None,
        checkpoint_store: CheckpointStore | None = None,
        checkpoint_id: str | None = None,
        durability: Durability = "sync",
        pause: PauseSignal | None = None,
        pause_before: Iterable[str] | None = None,
        pause_after: Iterable[str] | None = None,
        serializer: StateSerializer | None = None,
    ) -> Coroutine[Any, Any, GraphResult]:
        """Run to a stop and return the result: ``result = await graph.arun(input)``.

        The run is prepared (its input checked against the schema) when ``arun``
        is called, and runs when the returned coroutine is awaited. Handing back
        the run's own coroutine, rather than wrapping it in another, saves every
        step of every run a layer of coroutine to resume.

        Args:
            input: A GraphState, a mapping of data, a prompt string, or None
                (with ``checkpoint_id``, or a ``run_id`` that has checkpoints:
                continue that run).
            observers: Extra observers for this run only.
            run_id: Identifier for the run (a random one by default). With a
                store, a run id that already has checkpoints is continued.
            checkpoint_store: Where the run keeps checkpoints (see
                docs/persistence.md); none by default.
            checkpoint_id: Continue from this checkpoint: the run's latest one
                continues the run; an earlier one forks a new run (the original
                is untouched).
            durability: ``"sync"`` (each checkpoint saved before the next node
                starts), ``"async"`` (saved in the background) or ``"exit"``
                (only when the run stops or pauses).
            pause: A PauseToken (or threading/asyncio Event): when set, the run
                stops at the next node boundary, checkpointed.
            pause_before: Nodes to pause before (adds to the graph's own).
            pause_after: Nodes to pause after (adds to the graph's own).
            serializer: Encodes the state for checkpoints and holds the
                allow-list of classes that may be restored.

        Raises:
            GraphRunError: the run failed; ``error.state`` and ``error.result`` keep what was done.
            ResumeError: the run cannot be continued as asked.
        """
        options = self._durable_options(
            checkpoint_store, durability, pause, pause_before, pause_after, serializer
        )
        return self._execute(input, observers, run_id, asyncio.sleep, options, checkpoint_id)

    def _durable_options(
        self,
        store: CheckpointStore | None,
        durability: Durability,
        pause: PauseSignal | None,
        pause_before: Iterable[str] | None,
        pause_after: Iterable[str] | None,
        serializer: StateSerializer | None,
    ) -> DurableOptions | None:
        if store is None:
            store = self.checkpointer
        if (
            store is None
            and pause is None
            and pause_before is None
            and pause_after is None
            and durability == "sync"
            and not self.settings.pause_before
            and not self.settings.pause_after
        ):
            return None  # the common case, checked first: every run() passes here
        before = self.settings.pause_before | self._check_nodes("pause_before", pause_before)
        after = self.settings.pause_after | self._check_nodes("pause_after", pause_after)
        if store is None:
            if pause is not None or before or after:
                raise ValueError(
                    "pausing a run (pause=, pause_before=, pause_after=) needs a "
                    "checkpoint_store to continue it from, e.g. InMemoryCheckpointStore()"
                )
            if durability not in ("sync", "async", "exit"):
                raise ValueError(
                    f"durability must be 'sync', 'async' or 'exit', got {durability!r}"
                )
            return None
        if pause is not None and not callable(getattr(pause, "is_set", None)):
            raise TypeError(
                "pause must be a PauseToken, threading.Event or asyncio.Event, "
                f"got {type(pause).__name__}"
            )
        return DurableOptions(
            store=store,
            durability=durability,
            serializer=serializer or self.serializer,
            pause=pause,
            pause_before=before,
            pause_after=after,
        )

    def _check_nodes(self, what: str, names: Iterable[str] | None) -> frozenset[str]:
        if names is None:
            return frozenset()
        if isinstance(names, str):
            names = (names,)
        chosen = frozenset(names)
        unknown = sorted(n for n in chosen if n not in self.nodes)
        if unknown:
            raise ValueError(
                f"{what} names {', '.join(map(repr, unknown))}, not a node of graph "
                f"{self.name!r}; nodes: {', '.join(sorted(self.nodes))}"
            )
        return chosen

    def _execute(
        self,
        input: GraphInput,
        observers: Sequence[Observer | Listener],
        run_id: str | None,
        sleep: Sleep,
        options: DurableOptions | None = None,
        checkpoint_id: str | None = None,
    ) -> Coroutine[Any, Any, GraphResult]:
        started = self._start(input, observers, run_id, sleep, options, checkpoint_id)
        token = self.settings.cancellation_token
        if token is None or sleep is blocking_sleep:
            return started  # a run without an event loop stops at its next node
        return cancellable(started, token)

    def _start(
        self,
        input: GraphInput,
        observers: Sequence[Observer | Listener],
        run_id: str | None,
        sleep: Sleep,
        options: DurableOptions | None,
        checkpoint_id: str | None,
    ) -> Coroutine[Any, Any, GraphResult]:
        listeners = tuple(as_listener(o) for o in observers) if observers else ()
        if options is not None:
            return start_durable_run(
                self,
                input,
                options,
                run_id=run_id,
                checkpoint_id=checkpoint_id,
                listeners=listeners,
                sleep=sleep,
            )
        if checkpoint_id is not None:
            raise ValueError("checkpoint_id needs the checkpoint_store it was saved in")
        run = self.start_run(input, run_id=run_id, listeners=listeners, sleep=sleep)
        settings = self.settings
        if settings.input_guardrails is None and settings.fast_route_fn is None:
            return run.execute()  # the common case
        if settings.input_guardrails is not None and settings.input_guardrails.is_async:
            return self._guarded(run)
        if settings.input_guardrails is not None:
            guard_input(settings.input_guardrails, run.state)
        chosen = fast_route_target(self, run.state)
        if chosen is None:
            return run.execute()
        run.one_node = True
        return run.walk(chosen)

    async def _guarded(self, run: Run) -> GraphResult:
        """A run whose prompt goes through async guardrails first."""
        chosen = await guard_start(self, run.state)
        if chosen is None:
            return await run.execute()
        run.one_node = True
        return await run.walk(chosen)  # type: ignore[no-any-return]

    def _drive_sleep(self) -> Sleep:
        return asyncio.sleep if self.is_async else blocking_sleep

    def _run_blocking(self, coroutine: Coroutine[Any, Any, T]) -> T:
        if not self.is_async:
            return _drive(coroutine)
        return run_sync(coroutine)

    def run(
        self,
        input: GraphInput = None,
        *,
        observers: Sequence[Observer | Listener] = (),
        run_id: str | None = None,
        checkpoint_store: CheckpointStore | None = None,
        checkpoint_id: str | None = None,
        durability: Durability = "sync",
        pause: PauseSignal | None = None,
        pause_before: Iterable[str] | None = None,
        pause_after: Iterable[str] | None = None,
        serializer: StateSerializer | None = None,
    ) -> GraphResult:
        """Run to a stop and return the result (blocking); arguments as for :meth:`arun`.

        A graph whose nodes and edges are all synchronous runs without an event
        loop at all; otherwise this runs :meth:`arun` in one (on a worker thread
        when called from inside a running loop).
        """
        options = self._durable_options(
            checkpoint_store, durability, pause, pause_before, pause_after, serializer
        )
        return self._run_blocking(
            self._execute(input, observers, run_id, self._drive_sleep(), options, checkpoint_id)
        )

    # ---------------------------------------------------------------- resume
    def aresume(
        self,
        interrupt_id: str | Mapping[str, Any],
        response: Any = _NO_RESPONSE,
        *,
        checkpoint_store: CheckpointStore | None = None,
        observers: Sequence[Observer | Listener] = (),
        durability: Durability = "sync",
        pause: PauseSignal | None = None,
        serializer: StateSerializer | None = None,
    ) -> Coroutine[Any, Any, GraphResult]:
        """Answer an interrupt and continue the run: ``await graph.aresume(interrupt_id, "yes")``.

        In the process that paused, the generator node continues at its yield
        (nothing before it runs again). Otherwise the run is loaded from
        ``checkpoint_store``: completed nodes are not run again, and the paused
        generator node starts over with its earlier answers fed back in order
        (``context.once`` steps are not redone).

        Args:
            interrupt_id: The interrupt to answer, or a mapping of interrupt id to
                answer to answer several at once (parallel branches).
            response: The answer (JSON data); omitted with a mapping.
            checkpoint_store: The store the run was saved in (needed unless the
                run is still paused in this process).
            observers: Extra observers for the continued run.
            durability: As for :meth:`arun`.
            pause: As for :meth:`arun`.
            serializer: As for :meth:`arun`.

        Raises:
            ResumeError: an interrupt id is unknown or already answered.
            CheckpointConflict: another process answered first; nothing ran.
        """
        return self._resume(
            interrupt_id,
            response,
            checkpoint_store,
            observers,
            durability,
            pause,
            serializer,
            asyncio.sleep,
        )

    def _resume(
        self,
        interrupt_id: str | Mapping[str, Any],
        response: Any,
        checkpoint_store: CheckpointStore | None,
        observers: Sequence[Observer | Listener],
        durability: Durability,
        pause: PauseSignal | None,
        serializer: StateSerializer | None,
        sleep: Sleep,
    ) -> Coroutine[Any, Any, GraphResult]:
        answers = _answers(interrupt_id, response)
        options = self._durable_options(checkpoint_store, durability, pause, None, None, serializer)
        listeners = tuple(as_listener(o) for o in observers) if observers else ()
        resumed = resume_run(self, answers, options, listeners=listeners, sleep=sleep)
        token = self.settings.cancellation_token
        if token is None or sleep is blocking_sleep:
            return resumed
        return cancellable(resumed, token)

    def resume(
        self,
        interrupt_id: str | Mapping[str, Any],
        response: Any = _NO_RESPONSE,
        *,
        checkpoint_store: CheckpointStore | None = None,
        observers: Sequence[Observer | Listener] = (),
        durability: Durability = "sync",
        pause: PauseSignal | None = None,
        serializer: StateSerializer | None = None,
    ) -> GraphResult:
        """Answer an interrupt and continue the run (blocking); see :meth:`aresume`."""
        return self._run_blocking(
            self._resume(
                interrupt_id,
                response,
                checkpoint_store,
                observers,
                durability,
                pause,
                serializer,
                self._drive_sleep(),
            )
        )

    # ------------------------------------------------------------ time travel
    def _store_for(self, what: str, store: CheckpointStore | None) -> CheckpointStore:
        chosen = store if store is not None else self.checkpointer
        if chosen is None:
            raise ValueError(
                f"{what} reads a checkpoint store: pass checkpoint_store=..., or compile the "
                "graph with compile(checkpointer=...)"
            )
        return chosen

    def get_state(
        self,
        run_id: str,
        *,
        checkpoint_store: CheckpointStore | None = None,
        serializer: StateSerializer | None = None,
    ) -> StateSnapshot:
        """The run's latest checkpoint: its state, what runs next and any pending interrupts."""
        store = self._store_for("get_state", checkpoint_store)
        return _drive(get_state(self, store, run_id, serializer or self.serializer, True))

    def get_history(
        self,
        run_id: str,
        *,
        checkpoint_store: CheckpointStore | None = None,
        limit: int | None = None,
        serializer: StateSerializer | None = None,
    ) -> list[StateSnapshot]:
        """Every checkpoint of the run, newest first; fork from one with ``checkpoint_id=``."""
        store = self._store_for("get_history", checkpoint_store)
        return _drive(get_history(self, store, run_id, serializer or self.serializer, True, limit))

    def update_state(
        self,
        run_id: str,
        values: Mapping[str, Any],
        *,
        checkpoint_store: CheckpointStore | None = None,
        as_node: str | None = None,
        serializer: StateSerializer | None = None,
    ) -> str:
        """Correct a saved run's state before continuing it; returns the new checkpoint's id.

        ``values`` are merged like a node's update (through the reducers). With
        ``as_node``, they count as that node's output: the run continues by
        routing from it (pending interrupts are dropped). Without, the run
        continues where it was, interrupts and all.
        """
        store = self._store_for("update_state", checkpoint_store)
        options = self._durable_options(store, "sync", None, None, None, serializer)
        assert options is not None
        return _drive(update_state(self, run_id, values, options, as_node=as_node, blocking=True))

    # ------------------------------------------------------------ LangGraph's spellings
    def with_checkpointer(self, checkpointer: CheckpointStore | None) -> CompiledGraph:
        """This graph, with ``checkpointer`` as the store of runs given none."""
        bound = copy.copy(self)
        bound.checkpointer = checkpointer
        return bound

    def invoke(
        self, input: Any = None, config: Mapping[str, Any] | None = None, **options: Any
    ) -> dict[str, Any]:
        """Run to a stop and return the final state's data, as LangGraph's ``invoke`` does.

        ``config`` is LangGraph's (``configurable.thread_id`` is the run id,
        ``configurable.checkpoint_id`` a checkpoint to continue or fork from,
        ``recursion_limit`` the step limit); ``invoke(Command(resume=answer), config)``
        answers the run's pending question. ``run()`` returns the whole GraphResult.
        """
        kind, graph, start, chosen = invoke_run(self, input, config, options)
        if kind == "resume":
            return state_values(graph.resume(start, **chosen))
        return state_values(graph.run(start, **chosen))

    async def ainvoke(
        self, input: Any = None, config: Mapping[str, Any] | None = None, **options: Any
    ) -> dict[str, Any]:
        """Async :meth:`invoke`."""
        kind, graph, start, chosen = invoke_run(self, input, config, options)
        if kind == "resume":
            return state_values(await graph.aresume(start, **chosen))
        return state_values(await graph.arun(start, **chosen))

    def stream(
        self,
        input: Any = None,
        config: Mapping[str, Any] | None = None,
        *,
        stream_mode: StreamMode | Sequence[StreamMode] = "updates",
        **options: Any,
    ) -> Generator[Any, None, None]:
        """Run and yield as it goes, from synchronous code (LangGraph's ``stream``).

        The default ``stream_mode`` is ``"updates"`` (``{node: what it wrote}`` per
        step), as in LangGraph; every mode of :meth:`astream` is available.
        """
        kind, graph, start, chosen = invoke_run(self, input, config, options)
        if kind == "resume":
            raise TypeError("stream() starts or continues a run; resume with invoke(Command(...))")
        return iterate_sync(lambda: graph.astream(start, stream_mode=stream_mode, **chosen))

    async def astream(
        self,
        input: GraphInput = None,
        *,
        observers: Sequence[Observer | Listener] = (),
        run_id: str | None = None,
        checkpoint_store: CheckpointStore | None = None,
        checkpoint_id: str | None = None,
        durability: Durability = "sync",
        pause: PauseSignal | None = None,
        pause_before: Iterable[str] | None = None,
        pause_after: Iterable[str] | None = None,
        serializer: StateSerializer | None = None,
        stream_mode: StreamMode | Sequence[StreamMode] = "events",
    ) -> AsyncIterator[Any]:
        """Run and yield what it does as it happens.

        ``stream_mode`` chooses what is yielded (see docs/events.md):

        - ``"events"`` (default): every GraphEvent; the last is RunFinished (with
          ``.result``), RunPaused, RunFailed or RunCancelled.
        - ``"updates"``: ``{node: what it wrote}`` after each node of this graph.
        - ``"values"``: the state's data (a dict) at the start and after each step.
        - ``"messages"``: ``(text, metadata)`` for each piece of text an agent
          streams, from subgraphs and branches too (``metadata["node_path"]``).
        - ``"custom"``: what nodes publish with ``context.emit_custom(data)``.

        Several modes (a list) yield ``(mode, item)`` pairs.

        Raises:
            GraphRunError: after the run's last event, if the run failed.
        """
        convert = stream_converter(stream_mode)
        # A deque and an Event rather than an asyncio.Queue: a step's events are
        # appended at the cost of a list append, and the consumer takes every
        # item that is ready before it waits again.
        pending: collections.deque[Any] = collections.deque()
        ready = asyncio.Event()
        loop = asyncio.get_running_loop()
        home = threading.get_ident()

        def push(item: Any) -> None:
            pending.append(item)
            ready.set()

        def deliver(event: GraphEvent) -> None:
            items = convert(event)
            if not items:
                return
            if threading.get_ident() == home:
                pending.extend(items)
                ready.set()
            else:  # a blocking node of a branch may emit from a worker thread
                for item in items:
                    loop.call_soon_threadsafe(push, item)

        listeners = (*observers, deliver)
        options = self._durable_options(
            checkpoint_store, durability, pause, pause_before, pause_after, serializer
        )
        task = asyncio.ensure_future(
            self._execute(input, listeners, run_id, _yielding_sleep, options, checkpoint_id)
        )
        task.add_done_callback(lambda _: push(_STREAM_END))
        try:
            while True:
                while pending:
                    item = pending.popleft()
                    if item is _STREAM_END:
                        task.result()  # re-raise a failure after its last event
                        return
                    yield item
                ready.clear()
                await ready.wait()
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, GraphRunError):
                    await task

    async def drain(self, timeout: float | None = None) -> DrainSummary:
        """Wait until async observers got every event queued so far (see :func:`drain`).

        Async observers (AsyncAgentObserver, ``async def on_event``) run on a
        queue and may still be busy after a run returns; a short-lived script
        should drain before it exits (at exit selectgraph waits up to 5 s).
        """
        return await drain_observers(timeout)

    async def drain_events_for(self, run_id: str, *, timeout: float | None = None) -> DrainSummary:
        """Wait until async observers got the events of run ``run_id`` queued so far."""
        return await drain_events_for(run_id, timeout=timeout)

    def __call__(self, state: GraphState) -> GraphState:
        """Run on ``state`` and return the final state, so a graph is callable like a node."""
        return self.run(state).state

    def __selectgraph_node__(self, name: str) -> GraphAdapter:
        from selectgraph.runtime._subgraph import GraphAdapter

        return GraphAdapter(self)

    # --------------------------------------------------------- inspection
    def to_mermaid(self, result: GraphResult | None = None) -> str:
        """A Mermaid flowchart; with ``result``, the edges that fired are highlighted."""
        from selectgraph.compile._mermaid import render_mermaid

        return render_mermaid(self, result)

    def visualize(self, format: str = "ascii", result: GraphResult | None = None) -> str:
        """A text picture of the graph: ``"ascii"`` or ``"mermaid"``."""
        if format == "mermaid":
            return self.to_mermaid(result)
        if format == "ascii":
            from selectgraph.compile._ascii import render_ascii

            return render_ascii(self, result)
        raise ValueError(f"unknown format {format!r}; use 'ascii' or 'mermaid'")

    def targets_of(self, node: str) -> list[str | EndType]:
        """Every place ``node`` can route to, as far as compile can tell."""
        return possible_targets(self.edges, self.nodes, node)

    def __repr__(self) -> str:
        return f"CompiledGraph(name={self.name!r}, entry={self.entry!r}, nodes={len(self.nodes)})"


def _answers(interrupt_id: str | Mapping[str, Any], response: Any) -> dict[str, Any]:
    if isinstance(interrupt_id, Mapping):
        if response is not _NO_RESPONSE:
            raise TypeError(
                "resume: give a mapping of interrupt id to answer, or one id and its answer"
            )
        return dict(interrupt_id)
    if response is _NO_RESPONSE:
        raise TypeError(f"resume({interrupt_id!r}) needs the answer: resume(interrupt_id, answer)")
    interrupt_run_id(interrupt_id)  # a clear error for something that is not an interrupt id
    return {interrupt_id: response}


_STREAM_END = object()


async def _yielding_sleep(seconds: float) -> None:
    await asyncio.sleep(seconds)


def _drive(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never suspends, without an event loop."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coroutine.close()
    raise RuntimeError(
        "a synchronous graph awaited something that needs an event loop; use arun()"
    )  # pragma: no cover - every awaitable on the sync path completes immediately
