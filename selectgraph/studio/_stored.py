"""A run's stored event log as the page reads it: any run in the store, whichever process made it.

A run keeps its events beside its checkpoints (``ThreadStore.read_events``), each
numbered by its ``seq`` (1, 2, 3...). :class:`StoredRecords` turns them into the
records a live run's stream carries, adding what the log leaves out and the page
shows: the state before the first node and after each (on the checkpoints saved), the questions
a pause waits on, and the answer a finished run gave. :func:`follow_stored` reads
the log as it grows, polling the store, so a run going on in another process is
watched live; the seq is each record's id, so a reader that reconnects after seq N
gets exactly the events after it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any, Final

from selectgraph.build._builder import AgentGraph
from selectgraph.core._errors import SelectGraphError
from selectgraph.core._state import GraphState
from selectgraph.observe._codec import json_value
from selectgraph.persistence._protocol import CheckpointStore
from selectgraph.persistence._threads import StoredEvent, ThreadStore
from selectgraph.runtime._restore import decode_interrupts
from selectgraph.runtime._resume import run_status

__all__ = ["TERMINAL", "StoredRecords", "follow_stored", "interrupt_record"]

TERMINAL: Final = frozenset({"RunFinished", "RunFailed", "RunCancelled"})
"""Events after which a run's log grows no more."""
BATCH: Final = 500
"""Events read from the store at a time."""
SETTLE_POLLS: Final = 40
"""Polls a reader keeps waiting for the last event of a run whose checkpoints say it
ended (its process appends it just after the last checkpoint; one that died never does)."""
_ENDED: Final = frozenset({"done", "failed", "cancelled", "stopped"})
_DECODE_ERRORS: Final = (SelectGraphError, ValueError, KeyError, TypeError)


# Checkpoints whose state the page is sent: the input's (what the first step is diffed
# against) and each node's (the state after its step).
_STATE_TRIGGERS = ("input", "node_complete")


def interrupt_record(interrupt: Any) -> dict[str, Any]:
    """A question as the page shows it."""
    return {
        "id": interrupt.id,
        "node": interrupt.node,
        "prompt": interrupt.prompt,
        "payload": json_value(interrupt.payload),
        "index": interrupt.index,
        "response_schema": interrupt.response_schema,
    }


class StoredRecords:
    """Turns one run's stored events into the page's records (blocking: call off the loop)."""

    def __init__(self, graph: AgentGraph, store: CheckpointStore, run_id: str) -> None:
        self.serializer = graph.compile().serializer
        self.store = store
        self.run_id = run_id
        self.usage: dict[str, Any] = {
            "input_tokens": 0,
            "output_tokens": 0,
            "calls": 0,
            "cost_usd": 0.0,
        }

    def convert(self, batch: Sequence[StoredEvent]) -> list[dict[str, Any]]:
        """``batch`` as records: each event with ``id`` = its seq, and what the page needs."""
        records = []
        for stored in batch:
            record = {**stored.event, "id": stored.seq}
            name = record.get("event")
            if name == "LLMCallFinished":
                self._count(record)
            elif name == "CheckpointSaved" and record.get("trigger") in _STATE_TRIGGERS:
                data = self.checkpoint_data(str(record.get("checkpoint_id")))
                if data is not None:
                    record["state"] = data
            elif name == "RunPaused":
                record["summary"] = self._paused(record)
            elif name == "RunFinished":
                record["summary"] = self._finished(record)
            records.append(record)
        return records

    def _count(self, record: dict[str, Any]) -> None:
        self.usage["calls"] += 1
        self.usage["input_tokens"] += int(record.get("input_tokens") or 0)
        self.usage["output_tokens"] += int(record.get("output_tokens") or 0)
        self.usage["cost_usd"] += float(record.get("cost_usd") or 0.0)

    def _state(self, checkpoint_id: str) -> GraphState | None:
        try:
            encoded = self.store.load_state(checkpoint_id)
            return GraphState.from_dict({**encoded, "history": []}, serializer=self.serializer)
        except _DECODE_ERRORS:  # a checkpoint this graph cannot read: shown without its state
            return None

    def checkpoint_data(self, checkpoint_id: str) -> dict[str, Any] | None:
        """The state's data at ``checkpoint_id`` as JSON, or None when this graph cannot read it."""
        state = self._state(checkpoint_id)
        return None if state is None else json_value(dict(state.data))

    def _summary(self, record: dict[str, Any], stop_reason: str) -> dict[str, Any]:
        return {
            "stop_reason": stop_reason,
            "quality": record.get("quality", ""),
            "steps": record.get("steps", record.get("step", 0)),
            "content": None,
            "checkpoint_id": record.get("checkpoint_id"),
            "usage": dict(self.usage),
            "interrupts": [],
        }

    def _paused(self, record: dict[str, Any]) -> dict[str, Any]:
        """The questions the run waited on at that pause (answered since, maybe)."""
        reason = str(record.get("reason", ""))
        summary = self._summary(record, "interrupted" if reason == "interrupt" else reason)
        checkpoint_id = record.get("checkpoint_id")
        if isinstance(checkpoint_id, str):
            try:
                pending, _ = decode_interrupts(self.store.load(checkpoint_id), self.serializer)
            except _DECODE_ERRORS:
                pending = {}
            summary["interrupts"] = [interrupt_record(i) for i in pending.values()]
        return summary

    def _finished(self, record: dict[str, Any]) -> dict[str, Any]:
        """How the run ended, with its answer (its last output) from its last checkpoint."""
        summary = self._summary(record, str(record.get("stop_reason", "")))
        head = self.store.head(self.run_id)
        if head is not None:
            summary["checkpoint_id"] = head.checkpoint_id
            state = self._state(head.checkpoint_id)
            if state is not None:
                summary["content"] = json_value(state.last_output)
        return summary

    def settled(self, threads: ThreadStore) -> tuple[bool, bool]:
        """(whether the run has stopped for good, whether its last event may still come).

        A run whose checkpoints were deleted (rolled back), or that lost its thread
        to a newer input, writes nothing more; one whose last checkpoint says it
        ended still appends its last event.
        """
        head = self.store.head(self.run_id)
        if head is None:
            return True, False
        status = run_status(head.metadata)
        if status in _ENDED:
            return True, True
        thread_id = head.metadata.get("thread_id")
        if isinstance(thread_id, str) and status not in ("interrupted", "paused"):
            try:
                thread = threads.get_thread(thread_id)
            except _DECODE_ERRORS:
                thread = None
            if thread is None or thread.owner != self.run_id:
                return True, False  # superseded: its last checkpoint was refused
        return False, False


async def follow_stored(
    records: StoredRecords, threads: ThreadStore, after: int, poll: float
) -> AsyncIterator[dict[str, Any]]:
    """The run's stored events after seq ``after``, as records, as they are stored.

    Ends after the run's last event (RunFinished, RunFailed, RunCancelled), or when
    the run has stopped without one; waits (polling every ``poll`` seconds) while it
    runs or is paused.
    """
    run_id = records.run_id
    last: str | None = None
    if after > 0:  # a reconnect: was the last event it saw the run's last?
        seen = await threads.aread_events(run_id, after=after - 1, limit=1)
        last = str(seen[0].event.get("event")) if seen else None
    waited = 0
    while True:
        batch = await threads.aread_events(run_id, after=after, limit=BATCH)
        if batch:
            waited = 0
            for record in await asyncio.to_thread(records.convert, batch):
                after, last = record["id"], record.get("event")
                yield record
            continue
        if last in TERMINAL:
            return
        stopped, more = await asyncio.to_thread(records.settled, threads)
        if stopped:
            waited += 1
            if not more or waited > SETTLE_POLLS:
                return
        else:
            waited = 0
        await asyncio.sleep(poll)
