"""The one DBOS workflow every selectgraph run is: look the graph up by name and run it.

A queued record names a graph and carries the run's input as JSON data; it
never names code. The worker finds the graph among those it was given and
runs it with :class:`DBOSTaskRunner` installed, an in-memory checkpoint store
whose checkpoints are published, and a publisher for events. At an
interrupt the workflow publishes the questions, marks the run interrupted
and waits in a durable ``recv`` for answers (which ``resume`` sends from any
process); then it resumes the run in place, as ``graph.aresume`` does.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from typing import Any, Final

from dbos import DBOS

from selectgraph.compile._compiled import CompiledGraph
from selectgraph.compile._options import GraphInput
from selectgraph.core._errors import AnswerInvalid
from selectgraph.core._result import GraphResult
from selectgraph.core._run_errors import GraphRunError
from selectgraph.core._serialization import StateSerializer
from selectgraph.core._state import GraphState
from selectgraph.executors.dbos._records import (
    checkpoint_from_record,
    encode_failure,
    encode_interrupt,
    encode_result,
)
from selectgraph.executors.dbos._runner import DBOSTaskRunner, Publisher, PublishingStore
from selectgraph.executors.dbos._turns import STATE_ATTRIBUTE, end_turn, thread_stop, wait_turn
from selectgraph.persistence._checkpoint import checkpoint_ids_from, replayable_ids
from selectgraph.runtime._tasks import running_tasks_with

__all__ = [
    "ANSWERS",
    "FAILURE",
    "INTERRUPTS",
    "STATE_ATTRIBUTE",
    "STOP",
    "WAKE",
    "WORKFLOW",
    "UnknownGraphError",
    "decode_input",
    "encode_input",
    "install_graphs",
]

WORKFLOW: Final = "selectgraph.run"
"""The registered name of the workflow (what a queued record names)."""
ANSWERS: Final = "selectgraph.answers"
"""The topic ``resume`` sends answers on."""
INTERRUPTS: Final = "selectgraph.interrupts"
"""The event holding a paused run's pending questions."""
FAILURE: Final = "selectgraph.failure"
"""The event holding a failed run's error and state."""
WAKE: Final = "selectgraph.wake"
"""A message that only wakes a waiting workflow (sent after cancelling it)."""
STOP: Final = "selectgraph.stop"
"""A message telling a paused run on a thread that a newer input interrupted it."""
_WAIT_SECONDS: Final = 24 * 3600.0


class UnknownGraphError(LookupError):
    """A queued run names a graph this worker was not given."""


_graphs: dict[str, CompiledGraph] = {}


def install_graphs(graphs: Mapping[str, CompiledGraph]) -> None:
    """The graphs this process's workflows run, by name."""
    _graphs.clear()
    _graphs.update(graphs)


# ---------------------------------------------------------------------- input
def encode_input(value: GraphInput, serializer: StateSerializer) -> dict[str, Any]:
    """A run's input as JSON data.

    Raises:
        TypeError: ``value`` is not a GraphState, a mapping, a prompt string or None.
        StateSerializationError: a value in it is not something a state can hold.
    """
    if value is None:
        return {"kind": "none"}
    if isinstance(value, str):
        return {"kind": "prompt", "value": value}
    if isinstance(value, GraphState):
        return {"kind": "state", "value": value.to_dict(serializer=serializer)}
    if isinstance(value, Mapping):
        return {"kind": "data", "value": serializer.encode(dict(value), "input")}
    raise TypeError(
        f"a run starts from a GraphState, a mapping of data, a prompt string or None; "
        f"got {type(value).__name__}"
    )


def decode_input(record: Mapping[str, Any], serializer: StateSerializer) -> GraphInput:
    """The input :func:`encode_input` wrote (decoding only the classes ``serializer`` allows)."""
    kind = record.get("kind")
    if kind == "none":
        return None
    if kind == "prompt":
        return str(record["value"])
    if kind == "state":
        return GraphState.from_dict(record["value"], serializer=serializer)
    if kind == "data":
        value = serializer.decode(record["value"], "input")
        if not isinstance(value, dict):
            raise ValueError(f"a run's input data must be an object, got {type(value).__name__}")
        return value
    raise ValueError(f"unknown input kind {kind!r}")


# ------------------------------------------------------------------- workflow
@DBOS.workflow(name=WORKFLOW)
async def selectgraph_run(graph_name: str, request: dict[str, Any]) -> dict[str, Any]:
    """Run graph ``graph_name`` as this workflow (the run id is the workflow id)."""
    run_id = DBOS.workflow_id
    assert run_id is not None
    graph = _graphs.get(graph_name)
    if graph is None:
        known = ", ".join(sorted(_graphs)) or "none"
        raise UnknownGraphError(
            f"run {run_id!r} names graph {graph_name!r}, which this worker does not have "
            f"(it has: {known}); register it under that name on every worker"
        )
    serializer = graph.serializer
    publisher = Publisher()
    store = PublishingStore(publisher)
    started = dt.datetime.fromisoformat(request["started_at"])
    thread_id = request.get("thread_id")
    stop = thread_stop(run_id, thread_id) if thread_id is not None else None
    runner = DBOSTaskRunner(serializer, publisher, stop)
    with running_tasks_with(runner), checkpoint_ids_from(replayable_ids(started, run_id)):
        try:
            result = await _start(graph, request, run_id, store, publisher, serializer)
            while result.interrupted:
                answers = await _answers(run_id, result, publisher, serializer)
                if answers is None:  # a newer input on the thread interrupted the pause
                    result = dataclasses.replace(result, stop_reason="superseded", interrupts=())
                    break
                try:
                    result = await graph.aresume(
                        answers, checkpoint_store=store, observers=[publisher]
                    )
                except AnswerInvalid:
                    # An answer that does not fit its question (sent around resume's own
                    # check) is refused before anything runs: the run keeps waiting.
                    continue
        except Exception as error:  # the run failed: its last events and its state stay readable
            await publisher.flush()
            await DBOS.set_event_async(FAILURE, _failure(error, serializer))
            if thread_id is not None:
                await end_turn(run_id, "failed", store.last_state(run_id))
            raise
    await publisher.flush()
    if thread_id is not None:
        outcome = "superseded" if result.stop_reason == "superseded" else "done"
        await end_turn(run_id, outcome, store.last_state(run_id))
    return encode_result(result, serializer)


async def _start(
    graph: CompiledGraph,
    request: Mapping[str, Any],
    run_id: str,
    store: PublishingStore,
    publisher: Publisher,
    serializer: StateSerializer,
) -> GraphResult:
    fork = request.get("fork")
    if fork is None:
        input = decode_input(request["input"], serializer)
        thread_id = request.get("thread_id")
        if thread_id is not None:  # the thread's conversation, with the input merged in
            input = await wait_turn(run_id, str(thread_id), graph, input, serializer)
        return await graph.arun(input, run_id=run_id, checkpoint_store=store, observers=[publisher])
    # A fork of another run: its checkpoints up to the chosen one were read when the
    # fork was started; they seed this run's store, and the run forks from there.
    for raw in fork["checkpoints"]:
        checkpoint = checkpoint_from_record(raw)
        await store.asave(checkpoint, expected_version=checkpoint.version - 1)
    publisher.checkpoints.clear()  # the original's, not this run's: its stream has them
    return await graph.arun(
        None,
        run_id=run_id,
        checkpoint_id=str(fork["checkpoint_id"]),
        checkpoint_store=store,
        observers=[publisher],
    )


async def _answers(
    run_id: str, result: GraphResult, publisher: Publisher, serializer: StateSerializer
) -> dict[str, Any] | None:
    """Publish the run's questions and wait, durably, until some of them are answered.

    None: a newer input on the run's thread interrupted it while it waited.
    """
    await publisher.flush()
    pending = {item.id for item in result.interrupts}
    await DBOS.set_event_async(
        INTERRUPTS,
        {
            "pending": [encode_interrupt(item, serializer) for item in result.interrupts],
            "result": encode_result(result, serializer),
        },
    )
    await DBOS.update_workflow_attributes_async(
        run_id, {STATE_ATTRIBUTE: "interrupted"}, merge=True
    )
    while True:
        message = await DBOS.recv_async(ANSWERS, timeout_seconds=_WAIT_SECONDS)
        if message == STOP:
            answers = None
            break
        if type(message) is not dict:
            continue  # a timeout (wait again) or a wake-up after a cancel
        answers = {
            key: serializer.decode(value, f"answer to {key!r}")
            for key, value in dict(message.get("answers", {})).items()
            if key in pending
        }
        if answers:
            break
    await DBOS.update_workflow_attributes_async(run_id, {STATE_ATTRIBUTE: "running"}, merge=True)
    if answers is None:
        await DBOS.set_event_async(INTERRUPTS, {"pending": [], "result": None})
        return None
    # Questions still open stay listed: their answers may come while the run goes on
    # (they wait in the mailbox until it asks again).
    still = [encode_interrupt(i, serializer) for i in result.interrupts if i.id not in answers]
    await DBOS.set_event_async(INTERRUPTS, {"pending": still, "result": None})
    return answers


def _failure(error: Exception, serializer: StateSerializer) -> dict[str, Any]:
    """A failed run's error and the state it failed in, for the client's ``result()``."""
    record: dict[str, Any] = {"error": encode_failure(error)}
    state = error.state if isinstance(error, GraphRunError) else None
    if state is not None:
        try:
            record["state"] = state.to_dict(serializer=serializer)
        except Exception as exc:  # a state that cannot be encoded still reports its error
            record["state_error"] = f"{type(exc).__name__}: {exc}"
    return record
