"""A run on a thread, inside its workflow: wait for its turn, start from the thread, hand it on.

Every database read and write here is a DBOS step (or a recorded ``send``/``recv``),
so a replay meets the same answers: the turn it was given, the state it started
from, the stop it was told about. See ``_threads.py`` for the tables.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, Final

from dbos import DBOS

from selectgraph.compile._compiled import CompiledGraph
from selectgraph.core._serialization import StateSerializer
from selectgraph.core._state import GraphState
from selectgraph.executors.dbos._records import checkpoint_from_record
from selectgraph.executors.dbos._runner import ThreadStop
from selectgraph.executors.dbos._threads import TURN, ThreadBook
from selectgraph.runtime._threads import carried_state

__all__ = ["ThreadTurnLost", "end_turn", "install_threads", "thread_stop", "wait_turn"]

TURN_POLL: Final = 30.0
"""Seconds a waiting run sleeps between looks at its thread, if no wake-up comes first."""
STATE_ATTRIBUTE: Final = "selectgraph"
"""The workflow attribute saying ``queued``, ``running`` or ``interrupted`` (DBOS has no such
status); the workflow module re-exports it."""

_book: list[ThreadBook] = []


class ThreadTurnLost(RuntimeError):
    """The run was cancelled or rolled back before its turn on the thread came."""


def install_threads(book: ThreadBook | None) -> None:
    """The thread tables this process's workflows use."""
    _book.clear()
    if book is not None:
        _book.append(book)


def _threads() -> ThreadBook:
    if not _book:
        raise RuntimeError("this worker has no thread tables: start it with serve()")
    return _book[0]


async def wait_turn(
    run_id: str,
    thread_id: str,
    graph: CompiledGraph,
    input: Any,
    serializer: StateSerializer,
) -> GraphState:
    """Wait until run ``run_id`` may run on its thread; the state it starts from.

    Raises:
        ThreadTurnLost: it was cancelled or rolled back while it waited.
        GraphChanged, StateValidationError, ReducerError: the thread's state or the
            input does not fit the graph (the thread is left as it was).
    """
    book = _threads()
    waited = False
    while True:
        # A sync step runs off the loop.
        turn = await DBOS.run_step_async({"name": "thread:turn"}, book.take_turn, run_id)
        if "wait" not in turn:
            break
        if not waited:
            waited = True
            await DBOS.update_workflow_attributes_async(
                run_id, {STATE_ATTRIBUTE: "queued"}, merge=True
            )
        await DBOS.recv_async(TURN, timeout_seconds=TURN_POLL)
    if waited:
        await DBOS.update_workflow_attributes_async(
            run_id, {STATE_ATTRIBUTE: "running"}, merge=True
        )
    if "gone" in turn:
        raise ThreadTurnLost(
            f"run {run_id!r} was {turn['gone'].replace('_', ' ')} before its turn on thread "
            f"{thread_id!r} came"
        )
    kept: Mapping[str, Any] | None = turn["state"]
    source = encoded = None
    if kept is not None:
        source = checkpoint_from_record(kept["checkpoint"])
        encoded = kept["state"]
    return carried_state(graph, encoded, input, serializer, source)


def thread_stop(run_id: str, thread_id: str) -> ThreadStop:
    """What the task runner asks at each node: did a newer input take the thread?"""
    book = _threads()

    async def check() -> bool:
        return await asyncio.to_thread(book.stopping, run_id)

    return ThreadStop(run_id, thread_id, check)


async def end_turn(run_id: str, outcome: str, state: Mapping[str, Any] | None) -> None:
    """Hand the thread on: ``state`` becomes the thread's, the runs waiting for it wake."""
    book = _threads()
    waiters = await DBOS.run_step_async({"name": "thread:end"}, book.finish, run_id, outcome, state)
    for waiter in waiters:
        await DBOS.send_async(waiter, "turn", TURN, idempotency_key=f"turn:{run_id}:{waiter}")
