"""RunHandle: a run on DBOS seen from any process, by its run id.

Everything a handle reports is read from the database: the run's status
(DBOS's, refined by the run's ``selectgraph`` attribute, because DBOS has no
"interrupted"), its result (the workflow's output, or the failure it
published), its events and checkpoints (its stream), its pending questions
(an event). So a handle made in another process, or after a reconnect, sees
the same run.

Each method has an async twin (``astatus``, ``aresult``...) that runs the same
code on a worker thread, since DBOS's client is synchronous at heart.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any, Final, Literal

from selectgraph.core._errors import ResumeError
from selectgraph.core._interrupts import Interrupt
from selectgraph.core._result import GraphResult
from selectgraph.core._run_errors import GraphRunError
from selectgraph.core._serialization import StateSerializer
from selectgraph.core._state import GraphState
from selectgraph.executors.dbos._protocols import HandleExecutor
from selectgraph.executors.dbos._records import (
    checkpoint_from_record,
    decode_events,
    decode_interrupt,
    decode_result,
)
from selectgraph.executors.dbos._runner import STREAM
from selectgraph.executors.dbos._workflow import FAILURE, INTERRUPTS, STATE_ATTRIBUTE
from selectgraph.observe._events import GraphEvent
from selectgraph.persistence._memory import InMemoryCheckpointStore
from selectgraph.runtime._inspect import StateSnapshot

__all__ = ["RunCancelledError", "RunFailedError", "RunHandle", "RunStatus"]

RunStatus = Literal["queued", "running", "interrupted", "done", "failed", "cancelled"]
"""Where a run stands (``handle.status()``).

- ``"queued"``: waiting for a worker to take it (or, on a thread, for its turn).
- ``"running"``: a worker runs it (or will take it over from one that died).
- ``"interrupted"``: it waits for an answer (``handle.interrupts()``).
- ``"done"``: it ended; ``handle.result()`` is its GraphResult.
- ``"failed"``: it ended with an error; ``handle.result()`` raises RunFailedError.
- ``"cancelled"``: it was cancelled before it ended.
"""

_STATUSES: Final[dict[str, RunStatus]] = {
    "ENQUEUED": "queued",
    "DELAYED": "queued",
    "PENDING": "running",
    "SUCCESS": "done",
    "ERROR": "failed",
    "MAX_RECOVERY_ATTEMPTS_EXCEEDED": "failed",
    "CANCELLED": "cancelled",
}
_ENDED: Final = frozenset({"done", "failed", "cancelled"})


class RunFailedError(GraphRunError):
    """A run on DBOS failed; ``error_type`` names what the worker raised, ``state`` is kept."""

    def __init__(
        self,
        message: str,
        *,
        run_id: str,
        error_type: str,
        state: GraphState | None = None,
        node: str | None = None,
        step: int | None = None,
    ) -> None:
        super().__init__(message, state=state, node=node, step=step)
        self.run_id = run_id
        """The run that failed."""
        self.error_type = error_type
        """The name of the exception the worker raised (``NodeError``, ``UnknownGraphError``...)."""


class RunCancelledError(Exception):
    """The run was cancelled before it finished."""

    def __init__(self, run_id: str) -> None:
        super().__init__(f"run {run_id!r} was cancelled")
        self.run_id = run_id
        """The run that was cancelled."""


class RunHandle:
    """A run on the DBOS executor; get one from ``executor.start()`` or ``executor.handle()``."""

    def __init__(self, executor: HandleExecutor, run_id: str, graph_name: str) -> None:
        self.executor = executor
        """The executor the handle reads through."""
        self.run_id = run_id
        """The run's id (its DBOS workflow id)."""
        self.graph_name = graph_name
        """The name the run's graph is registered under."""

    def __repr__(self) -> str:
        return f"RunHandle(run_id={self.run_id!r}, graph={self.graph_name!r})"

    @property
    def _serializer(self) -> StateSerializer:
        return self.executor.serializer_for(self.graph_name)

    # ----------------------------------------------------------------- status
    def status(self) -> RunStatus:
        """``queued``, ``running``, ``interrupted``, ``done``, ``failed`` or ``cancelled``."""
        status = self.executor.workflow_status(self.run_id)
        mapped = _STATUSES.get(status.status, "running")
        if mapped == "running":
            marked = (status.attributes or {}).get(STATE_ATTRIBUTE)
            if marked == "interrupted":
                return "interrupted"
            if marked == "queued":  # waiting for its turn on its thread
                return "queued"
        return mapped

    async def astatus(self) -> RunStatus:
        """:meth:`status`, awaited."""
        return await asyncio.to_thread(self.status)

    # ----------------------------------------------------------------- result
    def result(self, timeout: float | None = None) -> GraphResult:
        """The run's GraphResult once it ends or waits for an answer.

        A run waiting at an interrupt gives its paused result (``result.interrupts``
        holds the questions), as ``graph.run`` does in process.

        Raises:
            TimeoutError: ``timeout`` seconds passed first (the run goes on).
            RunFailedError: the run failed; ``error.state`` is the state it failed in.
            RunCancelledError: the run was cancelled.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = 0.02
        while True:
            status = self.status()
            if status == "interrupted":
                paused = self._paused()
                if paused is not None:
                    return paused
            elif status in _ENDED:
                return self._ended(status)
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(
                    f"run {self.run_id!r} is still {status} after {timeout:g} s "
                    "(it goes on; call result() again later)"
                )
            pause = delay if deadline is None else min(delay, max(0.0, deadline - time.monotonic()))
            time.sleep(pause)
            delay = min(delay * 1.5, self.executor.poll_interval * 10)

    async def aresult(self, timeout: float | None = None) -> GraphResult:
        """:meth:`result`, awaited."""
        return await asyncio.to_thread(self.result, timeout)

    def _paused(self) -> GraphResult | None:
        record = self.executor.client.get_event(self.run_id, INTERRUPTS, timeout_seconds=0)
        if type(record) is not dict or not record.get("result"):
            return None  # answered in the meantime: the run is running again
        asked = [str(raw.get("id")) for raw in record.get("pending", [])]
        if self.executor.claims.any_answered(asked):
            return None  # answered, and the run has not taken the answer yet
        return decode_result(record["result"], self._serializer, self._events(follow=False))

    def _ended(self, status: RunStatus) -> GraphResult:
        if status == "cancelled":
            raise RunCancelledError(self.run_id)
        full = self.executor.workflow_status(self.run_id, load_output=True)
        if status == "done":
            return decode_result(full.output, self._serializer, self._events(follow=False))
        raise self._failure(full)

    def _failure(self, status: Any) -> RunFailedError:
        record = self.executor.client.get_event(self.run_id, FAILURE, timeout_seconds=0)
        if type(record) is dict and type(record.get("error")) is dict:
            error = record["error"]
            state = None
            if "state" in record:
                state = GraphState.from_dict(record["state"], serializer=self._serializer)
            node, step = error.get("node"), error.get("step")
            return RunFailedError(
                f"run {self.run_id!r} failed: {error.get('message', '')}",
                run_id=self.run_id,
                error_type=str(error.get("type", "")),
                state=state,
                node=node if isinstance(node, str) else None,
                step=step if isinstance(step, int) else None,
            )
        # The workflow failed before the graph ran (e.g. a graph this worker lacks).
        error = status.error
        error_type = getattr(error, "type_name", type(error).__name__)
        message = getattr(error, "message", str(error))
        if status.status == "MAX_RECOVERY_ATTEMPTS_EXCEEDED":
            error_type, message = (
                "MaxRecoveryAttemptsExceeded",
                ("its workflow was recovered too many times without finishing"),
            )
        return RunFailedError(
            f"run {self.run_id!r} failed: {message}", run_id=self.run_id, error_type=error_type
        )

    # ----------------------------------------------------------------- events
    def events(self, *, follow: bool = True, start: int = 0) -> Iterator[GraphEvent]:
        """The run's events in order, from the ``start``-th; with ``follow``, until the run ends.

        Works from any process and after a reconnect (the events are a DBOS
        stream). With ``follow`` the iterator waits for new events while the
        run goes on (also while it waits at an interrupt); without, it stops
        at the last event written so far.
        """
        expected = 0  # the number of the next event: a repeated one is skipped
        for item in self._items(follow):
            number = int(item.get("from", expected))
            for raw in item.get("events", []):
                if number == expected:
                    if number >= start:
                        yield decode_events([raw])[0]
                    expected += 1
                number += 1

    async def aevents(self, *, follow: bool = True, start: int = 0) -> AsyncIterator[GraphEvent]:
        """:meth:`events`, as an async iterator."""
        iterator = self.events(follow=follow, start=start)
        done = object()
        while True:
            event = await asyncio.to_thread(next, iterator, done)
            if event is done:
                return
            yield event  # type: ignore[misc]

    def _events(self, *, follow: bool) -> list[GraphEvent]:
        return list(self.events(follow=follow))

    def _items(self, follow: bool) -> Iterator[dict[str, Any]]:
        client = self.executor.client
        offset = 0
        while True:
            try:
                for item in client.read_stream(
                    self.run_id,
                    STREAM,
                    offset=offset,
                    polling_interval_sec=self.executor.poll_interval,
                    timeout_seconds=None if follow else 0.001,
                ):
                    offset += 1
                    yield item
                return  # the stream closed: the run ended
            except Exception as exc:
                if type(exc).__name__ != "DBOSStreamTimeoutError":
                    raise
                if not follow:
                    return

    # ------------------------------------------------------------- interrupts
    def interrupts(self) -> tuple[Interrupt, ...]:
        """The questions the run waits on (empty unless it is ``interrupted``)."""
        record = self.executor.client.get_event(self.run_id, INTERRUPTS, timeout_seconds=0)
        if type(record) is not dict:
            return ()
        serializer = self._serializer
        return tuple(decode_interrupt(raw, serializer) for raw in record.get("pending", []))

    async def ainterrupts(self) -> tuple[Interrupt, ...]:
        """:meth:`interrupts`, awaited."""
        return await asyncio.to_thread(self.interrupts)

    def resume(self, interrupt_id: str, value: Any) -> None:
        """Answer one of the run's questions: ``executor.resume(run_id, interrupt_id, value)``."""
        self.executor.resume(self.run_id, interrupt_id, value)

    async def aresume(self, interrupt_id: str, value: Any) -> None:
        """:meth:`resume`, awaited."""
        await self.executor.aresume(self.run_id, interrupt_id, value)

    # ----------------------------------------------------------------- cancel
    def cancel(self) -> None:
        """Cancel the run: it stops at its next step (a run waiting for an answer, at once)."""
        self.executor.cancel(self.run_id)

    async def acancel(self) -> None:
        """:meth:`cancel`, awaited."""
        await self.executor.acancel(self.run_id)

    # ------------------------------------------------------------ time travel
    def checkpoint_store(self) -> InMemoryCheckpointStore:
        """The run's checkpoints so far, read from its stream into a store of their own."""
        store = InMemoryCheckpointStore()
        for raw in self.checkpoint_records():
            checkpoint = checkpoint_from_record(raw)
            store.save(checkpoint, expected_version=checkpoint.version - 1)
        return store

    def checkpoint_records(self) -> list[dict[str, Any]]:
        """The run's checkpoints so far as stored JSON records, oldest first, each once."""
        seen: set[str] = set()
        records = []
        for item in self._items(follow=False):
            for raw in item.get("checkpoints", []):
                checkpoint_id = str(raw.get("checkpoint_id"))
                if checkpoint_id not in seen:
                    seen.add(checkpoint_id)
                    records.append(raw)
        return records

    def get_state(self) -> StateSnapshot:
        """The run's latest checkpoint, as ``graph.get_state`` gives it (needs the graph here).

        Raises:
            ResumeError: the run has written no checkpoint yet.
        """
        graph = self.executor.graph(self.graph_name)
        store = self.checkpoint_store()
        if store.head(self.run_id) is None:
            raise ResumeError(f"run {self.run_id!r} has no checkpoint yet", run_id=self.run_id)
        return graph.get_state(self.run_id, checkpoint_store=store)

    def get_history(self, *, limit: int | None = None) -> list[StateSnapshot]:
        """Every checkpoint of the run, newest first (needs the graph here)."""
        graph = self.executor.graph(self.graph_name)
        return graph.get_history(self.run_id, checkpoint_store=self.checkpoint_store(), limit=limit)
