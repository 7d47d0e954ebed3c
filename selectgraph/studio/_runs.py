"""The studio's runs: started, resumed and forked from the page, each with its event log.

A run started here runs as a task on the server's event loop, with an observer that
writes every event to the run's :class:`EventLog` (as JSON, with the state after
each step). Runs that are only in the checkpoint store (earlier runs, other
processes') can be opened, continued and forked the same way: their events are
read from the store's event log (``_stored.py``), and a run continued here starts
its log with them, numbered as the store numbers them.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import dataclasses
import logging
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal

from selectgraph.build._builder import AgentGraph
from selectgraph.core._answers import check_answer
from selectgraph.core._errors import AnswerInvalid, ResumeError, SelectGraphError
from selectgraph.core._result import GraphResult
from selectgraph.core._run_errors import GraphRunError, StateValidationError
from selectgraph.observe._codec import event_to_json, json_value, log_entry
from selectgraph.observe._events import GraphEvent, ToolCallFinished
from selectgraph.persistence._protocol import CheckpointStore
from selectgraph.persistence._threads import ThreadStore
from selectgraph.runtime._resume import run_status
from selectgraph.studio._lineage import lineage
from selectgraph.studio._log import EventLog
from selectgraph.studio._stored import TERMINAL, StoredRecords, follow_stored, interrupt_record

__all__ = ["RunManager", "StudioError", "StudioRun", "new_run_id"]

log = logging.getLogger("selectgraph.studio")

_STATUS = {
    "end": "done",
    "interrupted": "interrupted",
    "paused": "paused",
    "cancelled": "cancelled",
    "max_steps": "done",
    "loop": "done",
    "token_budget": "stopped",
    "cost_budget": "stopped",
    "time_budget": "stopped",
    "superseded": "superseded",
}


_CONTENT_FIELDS = ("messages", "text", "arguments", "tool_result")
"""What a record carries only with content capture on (as ``log_entry`` names it)."""


class StudioError(SelectGraphError):
    """A request the studio cannot carry out; ``status`` is the HTTP status to answer with.

    ``detail`` goes into the answer beside ``error`` (an answer's ``errors`` by field).
    """

    def __init__(self, status: int, message: str, detail: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.detail = dict(detail or {})


@dataclass(slots=True)
class StudioRun:
    """A run this studio process is driving or has driven."""

    run_id: str
    log: EventLog
    status: str = "running"
    """``running``, ``interrupted``, ``paused``, ``done``, ``stopped``, ``failed`` or
    ``cancelled``."""
    started: float = field(default_factory=time.time)
    interrupts: list[dict[str, Any]] = field(default_factory=list)
    """Questions the run waits on."""
    answered: set[str] = field(default_factory=set)
    """Interrupt ids already answered here."""
    summary: dict[str, Any] | None = None
    error: str | None = None
    exception: BaseException | None = None
    """What the run raised, when it failed without finishing (for the request that started it)."""
    thread_id: str | None = None
    """The thread it runs on, if any."""
    began: bool = False
    """Whether the run recorded an event (a run on a thread: it got the thread)."""
    task: asyncio.Task[Any] | None = None
    forked_from: dict[str, Any] | None = None
    """The run and checkpoint (with its step) this run was forked from, if it was."""
    models: dict[str, Any] = field(default_factory=dict)
    """The Pydantic model each pending question asked with, where this process has it
    (its validators check an answer beyond the JSON schema)."""

    def describe(self) -> dict[str, Any]:
        """The run as the API shows it."""
        return {
            "run_id": self.run_id,
            "status": self.status,
            "started": self.started,
            "interrupts": self.interrupts,
            "summary": self.summary,
            "error": self.error,
            "events": self.log.last_id,
            "live": True,
            "thread_id": self.thread_id,
            "forked_from": self.forked_from,
        }


class RunManager:
    """Starts and tracks the studio's runs of one graph."""

    def __init__(
        self,
        graph: AgentGraph,
        store: CheckpointStore,
        *,
        max_events: int = 50_000,
        poll_interval: float = 0.25,
        capture_content: bool = False,
    ) -> None:
        if poll_interval <= 0:
            raise ValueError(f"poll_interval must be > 0 seconds, got {poll_interval}")
        self.graph = graph
        self.store = store
        self.max_events = max_events
        self.poll_interval = poll_interval
        """Seconds between reads of the store's event log while following a run made elsewhere."""
        self.runs: dict[str, StudioRun] = {}
        self.capture_content = capture_content
        """Whether runs started here keep prompts, replies and tool arguments and results
        (in the page's records and in the store's event log)."""

    @property
    def threads(self) -> ThreadStore | None:
        """The store, if it keeps threads and event logs."""
        return self.store if isinstance(self.store, ThreadStore) else None

    @property
    def event_log(self) -> Literal["content"] | bool:
        """What runs started here store of their events (``"content"`` with capture on)."""
        return "content" if self.capture_content else True

    # ------------------------------------------------------------ starting
    def start(self, graph_input: Any, run_id: str | None = None) -> StudioRun:
        """Start a new run from ``graph_input``.

        Raises:
            StudioError: 409 when ``run_id`` is taken.
        """
        run_id = run_id or new_run_id()
        if run_id in self.runs or self.store.head(run_id) is not None:
            raise StudioError(409, f"a run with id {run_id!r} already exists")
        run = StudioRun(run_id=run_id, log=EventLog(max_events=self.max_events))
        try:
            self.graph.compile().prepare_state(graph_input)  # the schema's check, before a run
            work = self.graph.arun(
                graph_input,
                run_id=run_id,
                checkpoint_store=self.store,
                observers=[self.listener(run)],
                event_log=self.event_log,
            )
        except (StateValidationError, TypeError, ValueError) as error:
            raise StudioError(422, f"the input does not fit the graph: {error}") from None
        self.runs[run_id] = run
        self.launch(run, work)
        return run

    def resume(self, run_id: str, interrupt_id: str, answer: Any) -> StudioRun:
        """Answer an interrupt of ``run_id`` and continue the run.

        Raises:
            StudioError: 404 for an unknown run or interrupt, 409 when the run is not
                waiting for an answer or the interrupt was already answered.
        """
        run = self.runs.get(run_id)
        if run is None:
            if self.store.head(run_id) is None:
                raise StudioError(404, f"no run {run_id!r}")
            run = self.new_run(run_id)
            run.status, run.interrupts = self.stored_status(run_id)
            self._seed(run)
        if interrupt_id in run.answered:
            raise StudioError(409, f"interrupt {interrupt_id!r} was already answered")
        if run.status != "interrupted":
            raise StudioError(409, f"run {run_id!r} is {run.status}, not waiting for an answer")
        if interrupt_id not in {i["id"] for i in run.interrupts}:
            known = ", ".join(i["id"] for i in run.interrupts) or "none"
            raise StudioError(
                404, f"run {run_id!r} has no pending interrupt {interrupt_id!r} (pending: {known})"
            )
        asked = next(i for i in run.interrupts if i["id"] == interrupt_id)
        answer = _checked_answer(run, asked, answer)
        run.answered.add(interrupt_id)  # before anything awaits: a second answer gets 409
        run.status = "running"
        run.interrupts = []
        run.log.reopen()
        self.launch(
            run,
            self.graph.aresume(
                interrupt_id,
                answer,
                checkpoint_store=self.store,
                observers=[self.listener(run)],
            ),
        )
        return run

    def fork(self, run_id: str, checkpoint_id: str) -> StudioRun:
        """Start a new run from checkpoint ``checkpoint_id`` of ``run_id``.

        Raises:
            StudioError: 404 when the checkpoint is not one of the run's.
        """
        known = {cp.checkpoint_id: cp.step for cp in self.store.list(run_id)}
        if checkpoint_id not in known:
            raise StudioError(404, f"run {run_id!r} has no checkpoint {checkpoint_id!r}")
        new_id = new_run_id()
        run = self.new_run(new_id)
        step = known[checkpoint_id]
        run.forked_from = {"run_id": run_id, "checkpoint_id": checkpoint_id, "step": step}
        self.launch(
            run,
            self.graph.arun(
                None,
                checkpoint_id=checkpoint_id,
                run_id=new_id,
                checkpoint_store=self.store,
                observers=[self.listener(run)],
                event_log=self.event_log,
            ),
        )
        return run

    def cancel(self, run_id: str) -> StudioRun:
        """Cancel a running run (its task), which stops at once.

        Raises:
            StudioError: 404 for an unknown run, 409 when it is not running.
        """
        run = self.runs.get(run_id)
        if run is None:
            raise StudioError(404, f"no live run {run_id!r}")
        if run.task is None or run.task.done():
            raise StudioError(409, f"run {run_id!r} is {run.status}, not running")
        run.task.cancel()
        return run

    # ------------------------------------------------------------ reading
    def checkpoint(self, run_id: str, checkpoint_id: str) -> dict[str, Any]:
        """The state's data at one of ``run_id``'s checkpoints (blocking), to edit before a fork.

        Raises:
            StudioError: 404 when the checkpoint is not one of the run's, 422 when this
                graph cannot read it.
        """
        found = next((c for c in self.store.list(run_id) if c.checkpoint_id == checkpoint_id), None)
        if found is None:
            raise StudioError(404, f"run {run_id!r} has no checkpoint {checkpoint_id!r}")
        data = StoredRecords(self.graph, self.store, run_id).checkpoint_data(checkpoint_id)
        if data is None:
            raise StudioError(422, f"checkpoint {checkpoint_id!r} cannot be read by this graph")
        return {"run_id": run_id, "checkpoint_id": checkpoint_id, "step": found.step, "state": data}

    def describe(self, run_id: str) -> dict[str, Any]:
        """A run's status, pending questions and current state.

        Raises:
            StudioError: 404 for an unknown run.
        """
        run = self.runs.get(run_id)
        described = run.describe() if run is not None else None
        try:
            snapshot = self.graph.get_state(run_id, checkpoint_store=self.store)
        except SelectGraphError:
            snapshot = None
        if described is None:
            if snapshot is None:
                raise StudioError(404, f"no run {run_id!r}")
            status, interrupts = self.stored_status(run_id)
            described = {
                "run_id": run_id,
                "status": status,
                "interrupts": interrupts,
                "summary": None,
                "error": None,
                "events": 0,
                "live": False,
                "thread_id": snapshot.metadata.get("thread_id"),
                "event_log": self.threads is not None,
            }
        if snapshot is not None:
            described.update(lineage(self.store, run_id))
            self._own_forks(run_id, described["forks"])
            described["state"] = json_value(dict(snapshot.values))
            described["next"] = list(snapshot.next)
            described["checkpoint_id"] = snapshot.checkpoint_id
            head = self.store.head(run_id)
            if head is not None:  # the steps completed, as ``selectgraph runs`` counts them
                described["step"] = head.step
        return described

    def _own_forks(self, run_id: str, forks: builtins.list[dict[str, Any]]) -> None:
        """Add the forks of ``run_id`` made here: listed whatever the store's scan reached."""
        listed = {fork["run_id"] for fork in forks}
        for run in self.runs.values():
            parent = run.forked_from
            if parent and parent["run_id"] == run_id and run.run_id not in listed:
                where = {key: parent[key] for key in ("checkpoint_id", "step")}
                forks.append({"run_id": run.run_id, **where})

    def listing(self, limit: int = 100) -> builtins.list[dict[str, Any]]:
        """Live runs first (newest first), then runs only the store holds."""
        listed = [
            run.describe()
            for run in sorted(self.runs.values(), key=lambda r: r.started, reverse=True)
        ]
        for item in listed:
            head = self.store.head(item["run_id"])
            item["step"] = None if head is None else head.step
        seen = set(self.runs)
        for run_id in self.store.runs(limit=limit):
            if run_id in seen:
                continue
            status, interrupts = self.stored_status(run_id)
            head = self.store.head(run_id)
            listed.append(
                {
                    "run_id": run_id,
                    "status": status,
                    "interrupts": interrupts,
                    "live": False,
                    "thread_id": None if head is None else head.metadata.get("thread_id"),
                    "step": None if head is None else head.step,
                }
            )
        return listed[:limit]

    def history(self, run_id: str) -> list[dict[str, Any]]:
        """The run's checkpoints, newest first.

        Raises:
            StudioError: 404 for an unknown run.
        """
        checkpoints = self.store.list(run_id)
        if not checkpoints:
            raise StudioError(404, f"no checkpoints for run {run_id!r}")
        return [
            {
                "checkpoint_id": cp.checkpoint_id,
                "step": cp.step,
                "trigger": cp.metadata.get("trigger", ""),
                "node": cp.node_name,
                "next": json_value(cp.next),
                "created_at": cp.created_at.isoformat(),
            }
            for cp in reversed(checkpoints)
        ]

    async def _stored(self, run_id: str) -> ThreadStore:
        """The store, to read ``run_id``'s events from.

        Raises:
            StudioError: 404 when the store has no such run, or keeps no event log.
        """
        if await asyncio.to_thread(self.store.head, run_id) is None:
            raise StudioError(404, f"no run {run_id!r}")
        threads = self.threads
        if threads is None:
            raise StudioError(
                404,
                f"no events for run {run_id!r}: this studio's store "
                f"({type(self.store).__name__}) keeps no event log",
            )
        return threads

    async def stream(self, run_id: str, after: int) -> AsyncIterator[dict[str, Any]]:
        """The run's records with ids above ``after``, as they come, until it has ended.

        A run this studio drives streams from its log; any other run from the
        store's event log, its ids the log's seqs.

        Raises:
            StudioError: 404 for an unknown run.
        """
        run = self.runs.get(run_id)
        if run is not None:
            return run.log.follow(after)
        threads = await self._stored(run_id)
        records = StoredRecords(self.graph, self.store, run_id)
        return follow_stored(records, threads, after, self.poll_interval)

    async def events_page(self, run_id: str, after: int, limit: int) -> dict[str, Any]:
        """Up to ``limit`` of the run's records with ids above ``after``, as they are now.

        Raises:
            StudioError: 404 for an unknown run.
        """
        run = self.runs.get(run_id)
        if run is not None:
            missed, records = run.log.since(after)
            return {
                "run_id": run_id,
                "source": "live",
                "missed": missed,
                "events": records[:limit],
                "last_id": run.log.last_id,
                "ended": run.log.closed,
            }
        threads = await self._stored(run_id)
        batch = await threads.aread_events(run_id, after=after, limit=limit)
        converted = StoredRecords(self.graph, self.store, run_id).convert
        records = await asyncio.to_thread(converted, batch)
        last = records[-1] if records else None
        return {
            "run_id": run_id,
            "source": "store",
            "missed": 0,
            "events": records,
            "last_id": after if last is None else last["id"],
            "ended": last is not None and last.get("event") in TERMINAL,
        }

    async def close(self) -> None:
        """Cancel the runs still going."""
        tasks = [r.task for r in self.runs.values() if r.task is not None and not r.task.done()]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task

    # ------------------------------------------------------------ driving
    def new_run(self, run_id: str, *, thread_id: str | None = None) -> StudioRun:
        """A run this studio drives from now on."""
        run = StudioRun(
            run_id=run_id, log=EventLog(max_events=self.max_events), thread_id=thread_id
        )
        self.runs[run_id] = run
        return run

    def listener(self, run: StudioRun) -> Any:
        """The observer writing ``run``'s events to its log."""

        def listen(event: GraphEvent) -> None:
            if not run.began:
                run.began = True
                if run.status == "queued":  # an enqueued input got its turn
                    run.status = "running"
            run.log.append(self.record(event))

        return listen

    def record(self, event: GraphEvent) -> dict[str, Any]:
        """``event`` as the page reads it: with the state, and content only when captured.

        Content (prompts, replies, tool arguments and results) is what the store's
        event log keeps with ``event_log="content"``: the same fields, from the same
        function, so a live run and a stored one read alike. Never headers or keys:
        a prompt is its messages' roles and text.
        """
        if isinstance(event, ToolCallFinished) and event.result is not None:
            # event_to_json reads an event's ``result`` as a run's GraphResult, and a tool
            # call's is its answer (a str): encoded without it, and it added as content.
            entry = event_to_json(dataclasses.replace(event, result=None), state=True)
            if self.capture_content:
                entry["tool_result"] = event.result
            return entry
        entry = event_to_json(event, state=True)
        entry.pop("arguments", None)  # tool arguments are content
        if self.capture_content:
            extra = log_entry(event, content=True) or {}
            for key in _CONTENT_FIELDS:
                if key in extra:
                    entry[key] = extra[key]
            reply = getattr(getattr(event, "completion", None), "message", None)
            if entry.get("text") is None and reply is not None:
                # log_entry reads ``completion.text``; a Completion's text is its message's.
                entry["text"] = json_value(getattr(reply, "text", None))
        return entry

    def launch(self, run: StudioRun, work: Any) -> None:
        """Drive ``work`` (the run's coroutine) as a task; its outcome goes to ``run``."""

        async def drive() -> None:
            try:
                result: GraphResult = await work
            except asyncio.CancelledError:
                run.status = "cancelled"
                run.log.append({"event": "StudioRunCancelled", "run_id": run.run_id})
                run.log.close()
                raise
            except Exception as error:
                if not isinstance(error, GraphRunError | ResumeError | SelectGraphError):
                    log.exception("run %s failed", run.run_id)  # a bug in a node: keep serving
                run.status = "failed"
                run.error = f"{type(error).__name__}: {error}"
                run.exception = error
                if not isinstance(error, GraphRunError):  # the run said nothing of it itself
                    run.log.append(
                        {"event": "StudioRunFailed", "run_id": run.run_id, "error": run.error}
                    )
                run.log.close()
                return
            run.status = _STATUS.get(result.stop_reason, "done")
            run.summary = event_summary(result)
            run.interrupts = run.summary["interrupts"]
            run.models = {i.id: i.response_model for i in result.interrupts if i.response_model}
            if run.status not in ("interrupted", "paused"):
                run.log.close()

        run.task = asyncio.get_running_loop().create_task(drive())

    async def started(self, run: StudioRun) -> None:
        """Wait until ``run`` has recorded its first event, or has ended without one."""
        task = run.task
        if task is None or task.done() or run.log.last_id > 0:
            return

        async def first_record() -> None:
            async with contextlib.aclosing(run.log.follow(0)) as records:
                async for _ in records:
                    return

        waiting = asyncio.ensure_future(first_record())
        try:
            await asyncio.wait({task, waiting}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiting.cancel()

    def _seed(self, run: StudioRun) -> None:
        """Start the log of a stored run continued here with its stored events (same ids)."""
        threads = self.threads
        if threads is None:
            return
        stored = threads.read_events(run.run_id)
        for record in StoredRecords(self.graph, self.store, run.run_id).convert(stored):
            run.log.append({k: v for k, v in record.items() if k != "id"})

    def stored_status(self, run_id: str) -> tuple[str, list[dict[str, Any]]]:
        """A stored run's status and the questions it waits on (blocking)."""
        try:
            snapshot = self.graph.get_state(run_id, checkpoint_store=self.store)
        except SelectGraphError:
            return "unknown", []
        pending = [interrupt_record(i) for i in snapshot.interrupts]
        status = run_status(snapshot.metadata)
        if pending and status != "failed":
            status = "interrupted"
        return status, pending


def _checked_answer(run: StudioRun, asked: dict[str, Any], answer: Any) -> Any:
    """``answer`` as the question's schema takes it, checked before the run goes on.

    Raises:
        StudioError: 422 naming each field that does not fit (``errors``: path -> why);
            nothing is applied and the question stays pending.
    """
    schema = asked.get("response_schema")
    if schema is None:
        return answer
    try:
        return check_answer(asked["id"], answer, schema, run.models.get(asked["id"]))
    except AnswerInvalid as error:
        raise StudioError(
            422, str(error), {"interrupt_id": asked["id"], "errors": error.errors}
        ) from None


def new_run_id() -> str:
    """A fresh run id."""
    return uuid.uuid4().hex[:16]


def event_summary(result: GraphResult) -> dict[str, Any]:
    """What the page shows of a finished or paused run."""
    from selectgraph.observe._codec import _summary

    return _summary(result)
