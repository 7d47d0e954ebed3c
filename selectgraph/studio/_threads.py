"""The studio's threads: the conversations in the store, and the next message sent on one.

A thread's page shows its record, its conversation (the latest state's messages),
and its runs in order, each of which opens like any run. Sending a message starts
a run on the thread under the double-texting strategy chosen; it is driven by the
:class:`~selectgraph.studio._runs.RunManager` like any run the studio starts, so its
events stream live.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from typing import Any

from selectgraph.build._input import graph_input
from selectgraph.core._errors import ResumeError, SelectGraphError, ThreadBusy, ThreadIdError
from selectgraph.core._messages import Message
from selectgraph.core._run_errors import StateValidationError
from selectgraph.observe._codec import json_value
from selectgraph.persistence._threads import (
    MULTITASK_STRATEGIES,
    Thread,
    ThreadRun,
    ThreadStore,
    check_thread_id,
)
from selectgraph.runtime._resume import run_status
from selectgraph.runtime._thread_view import ThreadSnapshot
from selectgraph.studio._runs import RunManager, StudioError, StudioRun, new_run_id
from selectgraph.studio._stored import interrupt_record

__all__ = ["ThreadDesk", "conversation"]


def conversation(snapshot: ThreadSnapshot) -> builtins.list[Message]:
    """The thread's messages: an ``add_messages`` data field's (a MessagesState), or the state's."""
    field = snapshot.values.get("messages")
    if isinstance(field, list) and field and all(isinstance(m, Message) for m in field):
        return field
    return snapshot.messages


def _message(message: Message) -> dict[str, Any]:
    return {
        "role": str(message.role.value),
        "name": message.name,
        "text": message.text,
        "id": message.id,
        "tool_calls": [call.name for call in message.tool_calls],
    }


class ThreadDesk:
    """Lists, shows and sends on the threads of the studio's store."""

    def __init__(self, manager: RunManager) -> None:
        self.manager = manager

    @property
    def threads(self) -> ThreadStore:
        """The store, which must keep threads.

        Raises:
            StudioError: 501 when it does not.
        """
        threads = self.manager.threads
        if threads is None:
            raise StudioError(
                501, f"this studio's store ({type(self.manager.store).__name__}) keeps no threads"
            )
        return threads

    # ------------------------------------------------------------ reading
    def listing(
        self, metadata: Mapping[str, Any] | None, limit: int
    ) -> builtins.list[dict[str, Any]]:
        """Threads whose metadata holds ``metadata``, most recently active first."""
        found = self.threads.list_threads(metadata=metadata or None, limit=limit)
        return [self._record(thread) for thread in found]

    def _status(self, thread: Thread) -> str:
        if thread.owner is None:
            return "idle"
        head = self.manager.store.head(thread.owner)
        status = "running" if head is None else run_status(head.metadata)
        return status if status in ("interrupted", "paused") else "busy"

    def _record(self, thread: Thread) -> dict[str, Any]:
        return {
            "thread_id": thread.thread_id,
            "status": self._status(thread),
            "runs": thread.runs,
            "created_at": thread.created_at.isoformat(),
            "updated_at": thread.updated_at.isoformat(),
            "metadata": json_value(thread.metadata),
            "owner": thread.owner,
            "last_run": thread.last_run,
            "expires_at": None if thread.expires_at is None else thread.expires_at.isoformat(),
            "ttl": thread.ttl,
        }

    def describe(self, thread_id: str) -> dict[str, Any]:
        """The thread: its record, status, conversation, pending questions and runs.

        Raises:
            StudioError: 400 for an id no store can hold, 404 for an unknown thread.
        """
        _check(thread_id)
        store = self.manager.store
        try:
            snapshot = self.manager.graph.get_thread(thread_id, checkpoint_store=store)
        except ResumeError:
            raise StudioError(404, f"no thread {thread_id!r}") from None
        except SelectGraphError as error:  # a state this graph cannot read: the rest still shows
            found = self.threads.get_thread(thread_id)
            if found is None:
                raise StudioError(404, f"no thread {thread_id!r}") from None
            shown = {**self._record(found), "messages": [], "interrupts": [], "state": None}
            shown["error"] = f"its state cannot be read by this graph: {error}"
        else:
            shown = {
                **self._record(snapshot.thread),
                "status": snapshot.status,
                "messages": [_message(m) for m in conversation(snapshot)],
                "interrupts": [interrupt_record(i) for i in snapshot.interrupts],
                "state": json_value(snapshot.values),
            }
        runs = self.threads.thread_runs(thread_id)
        superseded = {run.superseded for run in runs if run.superseded}
        shown["thread_runs"] = [self._run(run, superseded) for run in runs]
        return shown

    def _run(self, run: ThreadRun, superseded: set[str]) -> dict[str, Any]:
        live = self.manager.runs.get(run.run_id)
        head = self.manager.store.head(run.run_id)
        if live is not None:
            status = live.status
        else:
            status = "unknown" if head is None else run_status(head.metadata)
        if run.run_id in superseded:
            status = "superseded"  # a newer input took the thread over
        output = None
        if status == "done" and head is not None:
            data = self.manager.store.load_state(head.checkpoint_id).get("data")
            if isinstance(data, Mapping):
                output = _plain(data.get("__last_output__"))
        return {
            "seq": run.seq,
            "run_id": run.run_id,
            "status": status,
            "strategy": run.strategy,
            "superseded": run.superseded,
            "created_at": run.created_at.isoformat(),
            "output": output,
        }

    # ------------------------------------------------------------ sending
    async def send(
        self,
        thread_id: str,
        value: Any,
        *,
        strategy: str = "reject",
        metadata: Mapping[str, Any] | None = None,
        run_id: str | None = None,
    ) -> StudioRun:
        """Start a run on the thread with ``value`` (a message's text, data, or None).

        Returns once the run has started (with ``"enqueue"``, at once: it may wait
        for its turn), so a busy thread under ``"reject"`` is answered here.

        Raises:
            StudioError: 400 for a bad thread id, strategy or metadata; 409 for a busy
                thread (``"reject"``) or a run id in use; 422 for an input the graph
                refuses; 404 for ``None`` on a thread with no run to continue.
        """
        _check(thread_id)
        if strategy not in MULTITASK_STRATEGIES:
            raise StudioError(
                400, f"strategy must be one of {', '.join(MULTITASK_STRATEGIES)}, got {strategy!r}"
            )
        if metadata is not None and not isinstance(metadata, Mapping):
            raise StudioError(400, "metadata must be a JSON object")
        self.threads  # noqa: B018  # 501 before anything starts, for a store without threads
        manager = self.manager
        run_id = run_id or new_run_id()
        if run_id in manager.runs or manager.store.head(run_id) is not None:
            raise StudioError(409, f"a run with id {run_id!r} already exists")
        run = manager.new_run(run_id, thread_id=thread_id)
        if strategy == "enqueue":
            run.status = "queued"
        try:
            work = manager.graph.arun(
                self._input(value),
                thread_id=thread_id,
                multitask_strategy=strategy,  # type: ignore[arg-type]  # checked above
                thread_metadata=metadata,
                run_id=run_id,
                checkpoint_store=manager.store,
                observers=[manager.listener(run)],
            )
        except (ValueError, TypeError) as error:
            del manager.runs[run_id]
            raise StudioError(422, f"the input does not fit the graph: {error}") from None
        manager.launch(run, work)
        if strategy != "enqueue":
            await manager.started(run)
        if run.exception is not None and not run.began:
            del manager.runs[run_id]  # it never started: the request is what failed
            raise _refusal(run.exception, thread_id)
        return run

    def _input(self, value: Any) -> Any:
        """A message's text as the graph takes it (the input convention of the CLI too)."""
        graph = self.manager.graph
        return graph_input(graph, graph, value)


def _check(thread_id: str) -> None:
    try:
        check_thread_id(thread_id)
    except ThreadIdError as error:
        raise StudioError(400, str(error)) from None


def _refusal(error: BaseException, thread_id: str) -> StudioError:
    """The HTTP answer for a run on a thread that failed before it started."""
    message = str(error)
    if isinstance(error, ThreadBusy):
        return StudioError(409, message)
    if isinstance(error, ThreadIdError):
        return StudioError(400, message)
    if isinstance(error, ResumeError):
        return StudioError(404, message)
    if isinstance(error, StateValidationError | TypeError | ValueError):
        return StudioError(422, f"the input does not fit the graph: {message}")
    return StudioError(500, f"the run on thread {thread_id!r} failed: {type(error).__name__}")


def _plain(value: Any) -> Any:
    """A stored value with the serializer's type tags taken off."""
    if isinstance(value, Mapping):
        if "__sg__" in value and "v" in value:
            return _plain(value["v"])
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value
