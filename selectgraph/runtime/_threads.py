"""Threads in the runtime: claim a thread for a run, start from where it is, hand it back.

A run on a thread (``run(input, thread_id=...)``) claims the thread in the store
(see ``persistence/_threads.py`` for what a claim does under each
``multitask_strategy``), starts from the state of the checkpoint the claim names
(the thread's last run, as it left it) with the new input merged in through the
reducers, and releases the thread when it stops, unless it paused: a paused run
keeps its thread until it is answered or taken over.

Only the conversation carries over: the state's ``data``, ``messages`` and
``metadata``. ``history`` and ``errors`` are a run's own record, so continuing a
thread reads one checkpoint's state whatever the thread's length.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from selectgraph.core._errors import ThreadBusy
from selectgraph.core._messages import Message
from selectgraph.core._result import GraphResult
from selectgraph.core._run_errors import StateValidationError
from selectgraph.core._serialization import StateSerializer
from selectgraph.core._state import GraphState
from selectgraph.persistence._protocol import CheckpointStore
from selectgraph.persistence._thread_base import check_ttl, new_ticket
from selectgraph.persistence._threads import (
    MULTITASK_STRATEGIES,
    Claim,
    MultitaskStrategy,
    ThreadStore,
    check_thread_id,
    keeps_threads,
)
from selectgraph.runtime._compat import upgrade_state
from selectgraph.runtime._run_state import Sleep
from selectgraph.state._merge import Merger
from selectgraph.state._output import NodeOutput
from selectgraph.state._reducers import owned

if TYPE_CHECKING:
    from selectgraph.persistence._checkpoint import Checkpoint
    from selectgraph.runtime._program import GraphProgram
    from selectgraph.runtime._run import Run

__all__ = [
    "ThreadOptions",
    "carried_state",
    "check_input",
    "claim_thread",
    "thread_store",
    "walk_and_release",
]

_log = logging.getLogger("selectgraph")

QUEUE_LEASE: Final = 30.0
"""Seconds an enqueued input's ticket lives without its waiter renewing it."""
POLL_FIRST: Final = 0.02
POLL_MOST: Final = 1.0
"""How often a waiting input looks again whether its turn came (doubling up to the most)."""


@dataclass(frozen=True, slots=True)
class ThreadOptions:
    """Which thread a run is on, and what it does if the thread is busy."""

    thread_id: str
    strategy: MultitaskStrategy = "reject"
    metadata: Mapping[str, Any] | None = None
    """Merged into the thread's metadata when the run claims it."""
    ttl: float | None = None
    """Seconds of inactivity after which the thread may be pruned (renewed by each run)."""

    def __post_init__(self) -> None:
        check_thread_id(self.thread_id)
        if self.strategy not in MULTITASK_STRATEGIES:
            raise ValueError(
                "multitask_strategy must be one of "
                f"{', '.join(map(repr, MULTITASK_STRATEGIES))}, got {self.strategy!r}"
            )
        check_ttl(self.ttl)


def thread_store(store: CheckpointStore) -> ThreadStore:
    """``store``, if it keeps threads.

    Raises:
        TypeError: it does not (a custom store without the ThreadStore methods).
    """
    if not keeps_threads(store):
        raise TypeError(
            f"{type(store).__name__} keeps checkpoints but not threads: run threads on "
            "InMemoryCheckpointStore, FileCheckpointStore, SQLiteCheckpointStore or "
            "PostgresCheckpointStore, or implement the ThreadStore methods"
        )
    return store


async def claim_thread(
    store: ThreadStore, thread: ThreadOptions, run_id: str, sleep: Sleep, blocking: bool
) -> Claim:
    """Claim ``thread`` for ``run_id``; with ``"enqueue"``, wait for its turn first.

    A waiting input holds a ticket in the thread's queue, renewed while it waits
    and dropped if it gives up (cancelled), so inputs run in arrival order and a
    waiter that died never blocks the ones behind it.

    Raises:
        ThreadBusy: the thread is busy and the strategy does not take it.
    """
    if thread.strategy != "enqueue":
        return await _claim(store, thread, run_id, None, blocking)
    ticket = new_ticket()
    delay = POLL_FIRST
    try:
        while True:
            await _call(store, "enqueue", blocking, thread.thread_id, ticket, lease=QUEUE_LEASE)
            try:
                return await _claim(store, thread, run_id, ticket, blocking)
            except ThreadBusy:
                await sleep(delay)
                delay = min(delay * 2, POLL_MOST)
    except BaseException:
        store.dequeue(thread.thread_id, ticket)  # sync: this may run while being cancelled
        raise


async def _claim(
    store: ThreadStore, thread: ThreadOptions, run_id: str, ticket: str | None, blocking: bool
) -> Claim:
    claim: Claim = await _call(
        store,
        "claim_thread",
        blocking,
        thread.thread_id,
        run_id,
        strategy=thread.strategy,
        ticket=ticket,
        metadata=thread.metadata,
        ttl=thread.ttl,
    )
    return claim


async def _call(store: Any, method: str, blocking: bool, *args: Any, **kwargs: Any) -> Any:
    """``store.method(...)``, or its async twin when the run has an event loop."""
    if blocking:
        return getattr(store, method)(*args, **kwargs)
    return await getattr(store, "a" + method)(*args, **kwargs)


def carried_state(
    graph: GraphProgram,
    encoded: Mapping[str, Any] | None,
    value: Any,
    serializer: StateSerializer,
    source: Checkpoint | None = None,
) -> GraphState:
    """The state a run on a thread starts from: the thread's conversation, plus its input.

    From ``encoded`` (the thread's latest state), ``data``, ``messages`` and
    ``metadata`` carry over; ``history`` and ``errors`` belong to the run that made
    them. The input is merged as a node's update is: a prompt string becomes a user
    message; a mapping is a partial update of ``data`` through the reducers
    (``messages`` there too, for a schema with an ``add_messages`` field); a
    GraphState adds its data through the reducers and appends its messages.

    ``source`` is the checkpoint ``encoded`` was saved with: a state saved under
    another version of the graph goes through its state migrations first.

    Raises:
        TypeError: the input is of another kind.
        ReducerError, StateValidationError: the input does not fit the state.
        GraphChanged: the thread's state no longer fits the graph (StateMigrationError:
            a migration is missing or failed).
    """
    if encoded is None:
        state = GraphState()
    else:
        state = GraphState.from_dict(
            {**encoded, "history": [], "errors": []}, serializer=serializer
        )
        state.current_node = None
        if source is not None:
            upgrade_state(graph, source, state)
    update = _input_update(state, value)
    if update:
        Merger(graph.schema, None).merge(state, NodeOutput(dict(update)), "input", 0)
    if graph.schema.model is not None:
        try:  # a new thread's defaults, and the input checked before anything runs
            state.data = graph.schema.initial_data(state.data)
        except StateValidationError as error:
            error.state = state
            raise
    data = state.data
    for key in graph.schema.reducers:
        if key in data:
            data[key] = owned(data[key])  # reducers may extend them in place
    return state


def check_input(graph: GraphProgram, value: Any) -> None:
    """Refuse an input that cannot fit the state, before the thread is claimed.

    The keys, and the values of fields without a reducer, are checked on their
    own (the thread's state may hold the rest), so such a wrong input leaves no
    run behind on the thread. A reducer's field is checked when it is merged
    into the thread's state: what it accepts depends on what is there.

    Raises:
        TypeError: the input is of a kind a thread does not take.
        StateValidationError: a key is unknown or a plain field's value is wrong.
    """
    update = _input_update(GraphState(), value)
    if update:
        schema = graph.schema
        schema.check_input_keys(update, where="the thread's input")
        plain = {k: v for k, v in update.items() if k not in schema.reducers}
        schema.check_partial(plain, where="the thread's input")


def _input_update(state: GraphState, value: Any) -> Mapping[str, Any]:
    """What of a thread's new input is an update of ``data`` (messages go in here)."""
    if value is None:
        return {}
    if isinstance(value, str):
        state.messages.append(Message.user(value))
        return {}
    if isinstance(value, GraphState):
        state.messages.extend(value.messages)
        state.metadata.update(value.metadata)
        return value.data
    if isinstance(value, Mapping):
        return value
    raise TypeError(
        "a run on a thread takes a GraphState, a mapping of data, a prompt string or "
        f"None; got {type(value).__name__}"
    )


async def walk_and_release(run: Run, target: Any) -> Any:
    """Walk ``run`` (on a thread); hand the thread back unless the run paused on it."""
    durable = run.durable
    thread_id = durable.thread_id if durable is not None else None
    if thread_id is None or durable is None or durable.threads is None:
        return await run.walk(target)
    store = durable.threads
    try:
        result = await run.walk(target)
    except BaseException:
        _release(store, thread_id, run.run_id)
        raise
    if (
        isinstance(result, GraphResult)
        and not result.paused
        and result.stop_reason != ("superseded")
    ):
        _release(store, thread_id, run.run_id)
    return result


def _release(store: ThreadStore, thread_id: str, run_id: str) -> None:
    # Sync on purpose: this also runs while the run is being cancelled.
    try:
        store.release_thread(thread_id, run_id)
    except Exception:
        _log.warning("could not release thread %r from run %r", thread_id, run_id, exc_info=True)
