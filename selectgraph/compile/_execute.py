"""Execution: how a compiled graph's runs start, stream, resume and block, for the run methods.

The public run methods (:class:`~selectgraph.compile._runs.RunMethods`) check their
arguments here and hand the run to the runtime. Everything here reads the compiled
graph through :class:`RunProgram`: the runtime's ``GraphProgram`` and the store
its runs use when given none.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import threading
from collections.abc import (
    AsyncIterator,
    Coroutine,
    Generator,
    Iterable,
    Mapping,
    Sequence,
)
from typing import Any, Protocol, TypeVar

from selectgraph.compile._inbox import blocking_inbox, inbox
from selectgraph.compile._options import NO_RESPONSE, GraphInput, PauseSignal
from selectgraph.core._control import cancellable
from selectgraph.core._interrupts import interrupt_run_id
from selectgraph.core._result import GraphResult
from selectgraph.core._run_errors import GraphRunError
from selectgraph.core._serialization import StateSerializer
from selectgraph.core._sync import iterate_sync, run_sync
from selectgraph.observe._observer import Observer, as_listener
from selectgraph.observe._recorder import Listener
from selectgraph.observe._stream import StreamMode, stream_converter
from selectgraph.persistence._protocol import CheckpointStore
from selectgraph.persistence._seed_store import SeedCheckpointStore, as_checkpoint_store
from selectgraph.runtime._durable import Durability, EventLog
from selectgraph.runtime._guard import fast_route_target, guard_input, guard_start
from selectgraph.runtime._offload import halting, run_elsewhere, start_elsewhere
from selectgraph.runtime._program import GraphProgram
from selectgraph.runtime._restore import DurableOptions
from selectgraph.runtime._resume import resume_run, start_durable_run
from selectgraph.runtime._run import Run, Sleep, blocking_sleep
from selectgraph.runtime._start import start_run
from selectgraph.runtime._tasks import current_task_runner
from selectgraph.runtime._threads import ThreadOptions

__all__ = [
    "RunProgram",
    "continue_run",
    "drive",
    "drive_sleep",
    "durable_options",
    "execute",
    "run_blocking",
    "store_for",
    "stream_run",
    "stream_sync",
    "StreamRequest",
]

T = TypeVar("T")


class RunProgram(GraphProgram, Protocol):
    """A compiled graph as its run methods read it: what a run reads, and a default store."""

    checkpointer: CheckpointStore | None
    """The store runs use when none is passed (``AgentGraph.compile(checkpointer=...)``)."""


# ------------------------------------------------------------------- options
def durable_options(
    graph: RunProgram,
    store: CheckpointStore | SeedCheckpointStore | None,
    durability: Durability,
    pause: PauseSignal | None,
    pause_before: Iterable[str] | None,
    pause_after: Iterable[str] | None,
    serializer: StateSerializer | None,
    thread: ThreadOptions | None = None,
    event_log: EventLog | None = None,
    migrate: Mapping[str, str] | None = None,
) -> DurableOptions | None:
    """How a run of ``graph`` keeps checkpoints and pauses; ``None`` for a run that keeps none.

    Raises:
        ValueError: a pause, a thread or ``migrate`` without a store, an unknown node or
            durability.
        TypeError: ``pause`` has no ``is_set()``; ``migrate`` is not a mapping of names.
    """
    if event_log is not True and event_log is not False and event_log not in (None, "content"):
        raise ValueError(f"event_log must be True, False or 'content', got {event_log!r}")
    if store is None:
        store = graph.checkpointer
    if (
        store is None
        and thread is None
        and pause is None
        and pause_before is None
        and pause_after is None
        and durability == "sync"
        and not graph.settings.pause_before
        and not graph.settings.pause_after
        and migrate is None
    ):
        return None  # the common case, checked first: every run() passes here
    before = graph.settings.pause_before | _check_nodes(graph, "pause_before", pause_before)
    after = graph.settings.pause_after | _check_nodes(graph, "pause_after", pause_after)
    if store is None:
        if thread is not None:
            raise ValueError(
                f"thread {thread.thread_id!r} lives in a checkpoint store: pass "
                "checkpoint_store=..., or compile the graph with compile(checkpointer=...)"
            )
        if pause is not None or before or after:
            raise ValueError(
                "pausing a run (pause=, pause_before=, pause_after=) needs a "
                "checkpoint_store to continue it from, e.g. InMemoryCheckpointStore()"
            )
        if migrate is not None:
            raise ValueError(
                "migrate= maps the node names of a stored checkpoint: pass the "
                "checkpoint_store the run was saved in"
            )
        if durability not in ("sync", "async", "exit"):
            raise ValueError(f"durability must be 'sync', 'async' or 'exit', got {durability!r}")
        return None
    if pause is not None and not callable(getattr(pause, "is_set", None)):
        raise TypeError(
            "pause must be a PauseToken, threading.Event or asyncio.Event, "
            f"got {type(pause).__name__}"
        )
    return DurableOptions(
        store=as_checkpoint_store(store),
        durability=durability,
        serializer=serializer or graph.serializer,
        pause=pause,
        pause_before=before,
        pause_after=after,
        thread=thread,
        event_log=event_log,
        migrate=_check_migrate(graph, migrate),
    )


def _check_migrate(graph: RunProgram, migrate: Mapping[str, str] | None) -> dict[str, str] | None:
    """``migrate`` as a dict, refused unless it maps names to nodes of ``graph``."""
    if migrate is None:
        return None
    if not isinstance(migrate, Mapping):
        raise TypeError(
            "migrate must map old node names to new ones, e.g. migrate={'review': 'approve'}, "
            f"got {type(migrate).__name__}"
        )
    checked: dict[str, str] = {}
    for old, new in migrate.items():
        if not isinstance(old, str) or not isinstance(new, str) or not old:
            raise TypeError(f"migrate maps node names to node names, got {old!r}: {new!r}")
        if new not in graph.nodes:
            raise ValueError(
                f"migrate maps {old!r} to {new!r}, which is not a node of graph {graph.name!r}; "
                f"nodes: {', '.join(graph.nodes)}"
            )
        checked[old] = new
    return checked


def _check_nodes(graph: RunProgram, what: str, names: Iterable[str] | None) -> frozenset[str]:
    if names is None:
        return frozenset()
    if isinstance(names, str):
        names = (names,)
    chosen = frozenset(names)
    unknown = sorted(n for n in chosen if n not in graph.nodes)
    if unknown:
        raise ValueError(
            f"{what} names {', '.join(map(repr, unknown))}, not a node of graph "
            f"{graph.name!r}; nodes: {', '.join(sorted(graph.nodes))}"
        )
    return chosen


def store_for(
    graph: RunProgram, what: str, store: CheckpointStore | SeedCheckpointStore | None
) -> CheckpointStore:
    """``store``, else the graph's own.

    Raises:
        ValueError: neither is given; ``what`` names the method that needed one.
    """
    chosen: CheckpointStore | None = as_checkpoint_store(
        store if store is not None else graph.checkpointer
    )
    if chosen is None:
        raise ValueError(
            f"{what} reads a checkpoint store: pass checkpoint_store=..., or compile the "
            "graph with compile(checkpointer=...)"
        )
    return chosen


# ---------------------------------------------------------------------- runs
def execute(
    graph: RunProgram,
    input: GraphInput,
    observers: Sequence[Observer | Listener],
    run_id: str | None,
    sleep: Sleep,
    options: DurableOptions | None = None,
    checkpoint_id: str | None = None,
    config: Mapping[str, Any] | None = None,
) -> Coroutine[Any, Any, GraphResult]:
    """A prepared run of ``graph`` (input checked, guardrails run): the coroutine runs it."""
    if runs_elsewhere(graph, sleep):
        halt = threading.Event()
        with halting(halt):  # prepared now, as any run is; driven on a thread when awaited
            started = _start(
                graph, input, observers, run_id, blocking_sleep, options, checkpoint_id, config
            )
        return run_elsewhere(started, halt)
    started = _start(graph, input, observers, run_id, sleep, options, checkpoint_id, config)
    token = graph.settings.cancellation_token
    if token is None or sleep is blocking_sleep:
        return started  # a run without an event loop stops at its next node
    return cancellable(started, token)


def _start(
    graph: RunProgram,
    input: GraphInput,
    observers: Sequence[Observer | Listener],
    run_id: str | None,
    sleep: Sleep,
    options: DurableOptions | None,
    checkpoint_id: str | None,
    config: Mapping[str, Any] | None,
) -> Coroutine[Any, Any, GraphResult]:
    listeners = tuple(as_listener(o) for o in observers) if observers else ()
    if options is not None:
        if config:
            options = dataclasses.replace(options, config=dict(config))
        return start_durable_run(
            graph,
            input,
            options,
            run_id=run_id,
            checkpoint_id=checkpoint_id,
            listeners=listeners,
            sleep=sleep,
        )
    if checkpoint_id is not None:
        raise ValueError("checkpoint_id needs the checkpoint_store it was saved in")
    run = start_run(graph, input, run_id=run_id, listeners=listeners, sleep=sleep)
    if config:
        run.config = dict(config)
    settings = graph.settings
    if settings.input_guardrails is None and settings.fast_route_fn is None:
        return run.execute()  # the common case
    if settings.input_guardrails is not None and settings.input_guardrails.is_async:
        return _guarded(graph, run)
    if settings.input_guardrails is not None:
        guard_input(settings.input_guardrails, run.state)
    chosen = fast_route_target(graph, run.state)
    if chosen is None:
        return run.execute()
    run.one_node = True
    return run.walk(chosen)


async def _guarded(graph: RunProgram, run: Run) -> GraphResult:
    """A run whose prompt goes through async guardrails first."""
    chosen = await guard_start(graph, run.state)
    if chosen is None:
        return await run.execute()
    run.one_node = True
    return await run.walk(chosen)  # type: ignore[no-any-return]


def continue_run(
    graph: RunProgram,
    interrupt_id: str | Mapping[str, Any],
    response: Any,
    checkpoint_store: CheckpointStore | SeedCheckpointStore | None,
    observers: Sequence[Observer | Listener],
    durability: Durability,
    pause: PauseSignal | None,
    serializer: StateSerializer | None,
    sleep: Sleep,
    config: Mapping[str, Any] | None = None,
    migrate: Mapping[str, str] | None = None,
    event_log: EventLog | None = None,
) -> Coroutine[Any, Any, GraphResult]:
    """A paused run of ``graph`` with its interrupts answered: the coroutine continues it.

    ``event_log=None``: the run stores its events as it was started to.
    """
    answers = _answers(interrupt_id, response)
    options = durable_options(
        graph,
        checkpoint_store,
        durability,
        pause,
        None,
        None,
        serializer,
        event_log=event_log,
        migrate=migrate,
    )
    if options is not None and config:
        options = dataclasses.replace(options, config=dict(config))
    listeners = tuple(as_listener(o) for o in observers) if observers else ()
    if runs_elsewhere(graph, sleep):
        halt = threading.Event()
        with halting(halt):
            resumed = resume_run(graph, answers, options, listeners=listeners, sleep=blocking_sleep)
        return run_elsewhere(resumed, halt)
    resumed = resume_run(graph, answers, options, listeners=listeners, sleep=sleep)
    token = graph.settings.cancellation_token
    if token is None or sleep is blocking_sleep:
        return resumed
    return cancellable(resumed, token)


def runs_elsewhere(graph: RunProgram, sleep: Sleep) -> bool:
    """Whether a run of ``graph`` the event loop awaits is driven on a worker thread.

    An all-synchronous graph needs no loop: under ``arun()`` it runs as ``run()``
    runs it, on one worker thread (see ``runtime/_offload.py``), unless the graph
    keeps its nodes on the loop (``sync_nodes="loop"``) or an executor runs its
    tasks.
    """
    return (
        sleep is not blocking_sleep
        and not graph.is_async
        and graph.settings.sync_nodes == "thread"
        and current_task_runner() is None
    )


def _answers(interrupt_id: str | Mapping[str, Any], response: Any) -> dict[str, Any]:
    if isinstance(interrupt_id, Mapping):
        if response is not NO_RESPONSE:
            raise TypeError(
                "resume: give a mapping of interrupt id to answer, or one id and its answer"
            )
        return dict(interrupt_id)
    if response is NO_RESPONSE:
        raise TypeError(f"resume({interrupt_id!r}) needs the answer: resume(interrupt_id, answer)")
    interrupt_run_id(interrupt_id)  # a clear error for something that is not an interrupt id
    return {interrupt_id: response}


# ------------------------------------------------------------------ blocking
def drive_sleep(graph: RunProgram) -> Sleep:
    """How a blocking run of ``graph`` waits: without an event loop when nothing needs one."""
    return asyncio.sleep if graph.is_async else blocking_sleep


def run_blocking(graph: RunProgram, coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` (a run of ``graph``) to its end, from synchronous code."""
    if not graph.is_async:
        return drive(coroutine)
    return run_sync(coroutine)


def drive(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never suspends, without an event loop."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coroutine.close()
    raise RuntimeError(
        "a synchronous graph awaited something that needs an event loop; use arun()"
    )  # pragma: no cover - every awaitable on the sync path completes immediately


# ----------------------------------------------------------------- streaming
_STREAM_END = object()


async def _yielding_sleep(seconds: float) -> None:
    await asyncio.sleep(seconds)


@dataclasses.dataclass(frozen=True, slots=True)
class StreamRequest:
    """What ``astream()`` and ``stream()`` were asked: a run of ``graph`` and what to yield."""

    graph: RunProgram
    input: GraphInput
    observers: Sequence[Observer | Listener]
    run_id: str | None
    checkpoint_store: CheckpointStore | SeedCheckpointStore | None
    checkpoint_id: str | None
    durability: Durability
    pause: PauseSignal | None
    pause_before: Iterable[str] | None
    pause_after: Iterable[str] | None
    serializer: StateSerializer | None
    stream_mode: StreamMode | Sequence[StreamMode]
    thread: ThreadOptions | None = None
    event_log: EventLog | None = None
    config: Mapping[str, Any] | None = None
    migrate: Mapping[str, str] | None = None

    def options(self) -> DurableOptions | None:
        """The run's durable options, checked."""
        return durable_options(
            self.graph,
            self.checkpoint_store,
            self.durability,
            self.pause,
            self.pause_before,
            self.pause_after,
            self.serializer,
            self.thread,
            self.event_log,
            self.migrate,
        )


async def stream_run(request: StreamRequest) -> AsyncIterator[Any]:
    """Run the request's graph and yield what its ``stream_mode`` asks for as it happens.

    Raises:
        GraphRunError: after the run's last event, if the run failed.
    """
    pending, deliver, push, wait = inbox(stream_converter(request.stream_mode))
    listeners = (*request.observers, deliver)
    task = asyncio.ensure_future(
        execute(
            request.graph,
            request.input,
            listeners,
            request.run_id,
            _yielding_sleep,
            request.options(),
            request.checkpoint_id,
            request.config,
        )
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
            await wait()
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, GraphRunError):
                await task


_STOP_WAIT = 30.0
"""Seconds a stream left early waits for its run to stop (it stops at a node boundary)."""


def stream_sync(request: StreamRequest) -> Generator[Any, None, None]:
    """:func:`stream_run` for a plain ``for`` loop (``stream()``).

    A graph ``arun()`` would drive on a worker thread (all synchronous) is driven
    on one here too, its items handed straight to the caller's thread, with no
    event loop between them. Any other graph runs in an event loop of its own on
    a thread (``iterate_sync``).

    Raises:
        GraphRunError: after the run's last event, if the run failed.
    """
    if not runs_elsewhere(request.graph, _yielding_sleep):
        yield from iterate_sync(lambda: stream_run(request))
        return
    pending, deliver, push, wait = blocking_inbox(stream_converter(request.stream_mode))
    listeners = (*request.observers, deliver)
    halt = threading.Event()
    with halting(halt):
        started = _start(
            request.graph,
            request.input,
            listeners,
            request.run_id,
            blocking_sleep,
            request.options(),
            request.checkpoint_id,
            request.config,
        )
    failure: list[BaseException | None] = []
    over = threading.Event()

    def ended(_: Any, error: BaseException | None) -> None:  # on the run's thread
        failure.append(error)
        over.set()
        push(_STREAM_END)

    try:
        start_elsewhere(started, halt, ended)
        while True:
            while pending:
                item = pending.popleft()
                if item is _STREAM_END:
                    if failure[0] is not None:
                        raise failure[0]  # after the run's last event
                    return
                yield item
            wait()
    finally:
        if not over.is_set():
            halt.set()  # left early: the run stops before its next node, as a cancelled one
            over.wait(_STOP_WAIT)
