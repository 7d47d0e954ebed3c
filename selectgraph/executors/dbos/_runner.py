"""The task runner a run uses inside a DBOS workflow: each task a step, replayed from its record.

The step loop runs in the workflow as it runs anywhere; this runner turns
each of its tasks into a DBOS step. A node's visit (retries included), a
fan-out's branch (its whole walk) and an llm_decide edge's decision each
run once and leave a JSON record (``_records``). When DBOS replays the
workflow (another worker took it over, or the process restarted), every
step that completed returns its record instead of running, and the runner
hands the loop the same values the first execution gave it. The loop's own
work between tasks (merging, routing, events, checkpoints) is cheap and
deterministic, so it simply happens again.

Events and checkpoints go to the run's DBOS stream (see :class:`Publisher`).

Only a step's record counts: a step DBOS refuses (its replay met a different
step than the one recorded, because the graph changed under a run in flight)
raises :class:`ReplayDivergedError`, which no error policy absorbs.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from dbos import DBOS
from dbos._error import DBOSException

from selectgraph.core._control import BudgetStop, RunCancelledByToken, current_control
from selectgraph.core._errors import ThreadTakenOver
from selectgraph.core._interrupts import NodeInterrupt
from selectgraph.core._serialization import StateSerializer
from selectgraph.executors.dbos._records import (
    decode_decision,
    decode_interrupt,
    decode_tally,
    encode_budget_stop,
    encode_decision,
    encode_failure,
    encode_interrupt,
    encode_tally,
    rebuild_budget_stop,
    rebuild_failure,
)
from selectgraph.executors.dbos._steps import StepFrontier, carry_stream_item
from selectgraph.observe._codec import event_to_json
from selectgraph.observe._events import GraphEvent
from selectgraph.persistence._checkpoint import Checkpoint, checkpoint_ids_from
from selectgraph.persistence._memory import InMemoryCheckpointStore
from selectgraph.runtime._book_codec import (
    decode_children,
    decode_interrupt_records,
    decode_memo,
    encode_book,
)
from selectgraph.runtime._pending import (
    decode_branch_writes,
    decode_node_output,
    encode_branch_writes,
    encode_node_output,
)
from selectgraph.runtime._tasks import TaskHost, running_tasks_with

if TYPE_CHECKING:
    from selectgraph.nodes._spec import NodeSpec
    from selectgraph.routing._edges import Edge, RouteDecision
    from selectgraph.runtime._branches import BranchTask
    from selectgraph.runtime._fanout import FanOutPlan
    from selectgraph.runtime._join import BranchWrites
    from selectgraph.state._output import NodeOutput

__all__ = [
    "STREAM",
    "DBOSTaskRunner",
    "Publisher",
    "PublishingStore",
    "ReplayDivergedError",
    "ThreadStop",
]

STREAM: Final = "selectgraph"
"""The run's stream: items ``{"from": n, "events": [...], "checkpoints": [...]}``, in order."""

STREAM_EVERY: Final = 0.2
"""Seconds between a run's stream writes while its nodes are quick (events wait at most this)."""

_step_events: ContextVar[list[dict[str, Any]] | None] = ContextVar(
    "selectgraph_dbos_step_events", default=None
)
"""Inside a step: where the events it emits go (they are part of its record)."""


class Publisher:
    """Collects a run's events and checkpoints and writes them to its stream.

    It listens to the run's events: one emitted inside a step goes into that
    step's record (so a replay has it too), any other is the loop's and waits
    here. A node's step takes what waits as one stream item, unless the last
    write is younger than ``STREAM_EVERY``, and the item is inserted in the
    transaction that records the step (``_steps``): one commit for both, and
    an item is written exactly when its step's record is (so what waited
    before a node becomes readable when that node's step ends). The
    workflow writes what is left when the run stops or pauses. Events are
    numbered in the order the run produced them, which a replay reproduces
    exactly: an item names the number of its first event, so a reader drops
    an event written twice (a node whose worker died runs again and writes
    what waited before it once more), and a replay knows which events were
    written already.
    """

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.first = 0
        """The number of ``events[0]``: how many events were written before it."""
        self.checkpoints: list[dict[str, Any]] = []
        self._written_at = -STREAM_EVERY

    def __call__(self, event: GraphEvent) -> None:
        bucket = _step_events.get()
        (self.events if bucket is None else bucket).append(event_to_json(event))

    def due(self) -> bool:
        """Whether a step should write what waits (the last write is old enough)."""
        return time.monotonic() - self._written_at >= STREAM_EVERY

    def item(self) -> dict[str, Any]:
        """What waits, as one stream item; it counts as written from now on."""
        self._written_at = time.monotonic()
        item = {"from": self.first, "events": self.events, "checkpoints": self.checkpoints}
        self.first += len(self.events)
        self.events, self.checkpoints = [], []
        return item

    def written_up_to(self, first: int, *, wrote: bool) -> None:
        """A replayed step had written everything before event ``first``: drop it here.

        ``wrote``: whether that step wrote an item (then the checkpoints waiting
        were in it too; otherwise they still wait).
        """
        del self.events[: first - self.first]
        self.first = first
        if wrote:
            self.checkpoints = []

    async def flush(self) -> None:
        """Write what waits (workflow code: recorded, so a replay does not write it again)."""
        await DBOS.write_stream_async(STREAM, self.item())


class ReplayDivergedError(BaseException):
    """DBOS refused a task's step: most often a replay that met a different step than recorded.

    That happens when a worker replays a run on a graph that changed since the
    run started (see "Upgrades" in docs/scaling-out.md). A BaseException, like
    a cancellation: it is not the node's failure, and no error policy, retry or
    on_failure edge may absorb it; the run's workflow fails with it.
    """


class PublishingStore(InMemoryCheckpointStore):
    """The workflow's checkpoint store: in memory, each saved checkpoint also published.

    The run's checkpoints are rebuilt by every replay (their ids are replayable),
    so memory is enough for resuming inside the workflow; the stream carries them
    to other processes for ``get_state`` and ``get_history``.
    """

    def __init__(self, publisher: Publisher) -> None:
        super().__init__()
        self._publisher = publisher

    def _save(self, checkpoint: Checkpoint, expected_version: int) -> None:
        super()._save(checkpoint, expected_version)
        self._publisher.checkpoints.append(json.loads(self._records[checkpoint.checkpoint_id]))

    def last_state(self, run_id: str) -> dict[str, Any] | None:
        """Run ``run_id``'s latest state and checkpoint record, as a thread keeps them."""
        head = self.head(run_id)
        if head is None:
            return None
        return {
            "state": self.load_state(head.checkpoint_id),
            "checkpoint": json.loads(self._records[head.checkpoint_id]),
        }


@dataclass(frozen=True, slots=True)
class ThreadStop:
    """How a run on a thread learns, at each node, that a newer input took the thread."""

    run_id: str
    thread_id: str
    check: Callable[[], Awaitable[bool]]
    """True once the run should stop (read inside the node's step, so it is recorded)."""


class DBOSTaskRunner:
    """Runs each task of one top-level run as a DBOS step (see the module's docstring)."""

    def __init__(
        self, serializer: StateSerializer, publisher: Publisher, thread: ThreadStop | None = None
    ) -> None:
        self.serializer = serializer
        self.publisher = publisher
        self.thread = thread
        self._reserved: dict[str, Any] = {}
        self._frontier = StepFrontier()

    # ------------------------------------------------------------------ nodes
    async def node(
        self,
        run: TaskHost,
        spec: NodeSpec,
        visit: int,
        call: Callable[[], Awaitable[NodeOutput]],
    ) -> NodeOutput:
        serializer = self.serializer
        publisher = self.publisher
        where = f"node {spec.name!r}"
        live: list[Any] = []  # what the first execution produced, unencoded

        async def step() -> dict[str, Any]:
            if self.thread is not None and await self.thread.check():
                # A newer input took the thread: the node does not run (a replay
                # meets this record and stops at the same node).
                return {"superseded": True, "events": [], "published": publisher.first}
            # What waits goes out with this step's record, in its transaction, rather
            # than as a step of its own (a stand-in for DBOS has it written here);
            # a run of quick nodes writes at most every STREAM_EVERY seconds.
            wrote = publisher.due()
            if wrote:
                item = publisher.item()
                if not carry_stream_item(STREAM, item):
                    await DBOS.write_stream_async(STREAM, item)
            record = await self._execute(
                run, call, live, lambda output: encode_node_output(output, serializer, where)
            )
            record["published"] = publisher.first
            record["wrote"] = wrote
            record["attempts"] = run.attempts
            return record

        record = await _step(self._frontier.run(f"node:{spec.name}", step, DBOS.run_step_async))
        run.attempts = int(record.get("attempts", 1))
        if not live:  # replayed: what its first execution wrote is not written again
            publisher.written_up_to(int(record["published"]), wrote=bool(record.get("wrote")))
        publisher.events.extend(record["events"])
        if live:  # this process ran it: the loop gets the very objects
            return _outcome(live[0])  # type: ignore[no-any-return]
        self._restore_book(run, record.get("book"))
        if "ok" in record:
            output = decode_node_output(record["ok"], serializer, where)
            _count(output.usage)
            return output
        raise self._replayed_stop(record)

    # --------------------------------------------------------------- branches
    def fan_out(self, run: TaskHost, plan: FanOutPlan) -> None:
        """Draw every branch's step id now, in merge order (workflow code, before any starts).

        A branch that waits for a slot (``max_concurrency``) or is cancelled
        before it starts then cannot shift the ids of those after it: a replay
        meets each record under the id its first execution had.
        """
        self._reserved = {task.ref.task_id: DBOS.reserve_step() for task in plan.tasks}

    async def branch(
        self,
        run: TaskHost,
        task: BranchTask,
        body: Callable[[], Awaitable[BranchWrites]],
        walks: list[Any],
    ) -> BranchWrites:
        serializer = self.serializer
        where = f"branch {task.ref.label!r}"
        live: list[Any] = []

        async def step() -> dict[str, Any]:
            record = await self._execute(
                run, body, live, lambda writes: encode_branch_writes(writes, serializer, where)
            )
            # Branches run at once: this branch's walks are the ones made for its task.
            record["tally"] = encode_tally([w for w in walks if w.branch is task.ref])
            return record

        reservation = self._reserved.pop(task.ref.task_id)
        options = {"name": f"branch:{task.ref.task_id}"}
        record = await _step(reservation.run_async(options, step))
        self.publisher.events.extend(record["events"])
        if live:
            return _outcome(live[0])  # type: ignore[no-any-return]
        tally = decode_tally(record["tally"])
        tally.branch = task.ref
        walks.append(tally)
        _count(tally.usage)
        self._restore_book(run, record.get("book"))
        if "ok" in record:
            return decode_branch_writes(record["ok"], serializer, where)
        raise self._replayed_stop(record)

    # -------------------------------------------------------------- decisions
    async def decision(
        self, run: TaskHost, edge: Edge, pending: Awaitable[RouteDecision]
    ) -> RouteDecision:
        live: list[Any] = []

        async def step() -> dict[str, Any]:
            try:
                with running_tasks_with(None), checkpoint_ids_from(None):
                    decision = await pending
            except Exception as exc:  # the edge falls back; a replay must say so alike
                live.append(exc)
                return {"error": encode_failure(exc)}
            live.append(decision)
            return encode_decision(decision)

        record = await _step(DBOS.run_step_async({"name": f"decide:{edge.source}"}, step))
        if live:
            return _outcome(live[0])  # type: ignore[no-any-return]
        close = getattr(pending, "close", None)
        if close is not None:
            close()  # the recorded decision stands; the call is never made
        if "error" in record:
            raise rebuild_failure(record["error"])
        decision = decode_decision(record)
        _count(decision.usage)
        return decision

    # ------------------------------------------------------------------ tasks
    async def _execute(
        self,
        run: TaskHost,
        body: Callable[[], Awaitable[Any]],
        live: list[Any],
        encode: Callable[[Any], Any],
    ) -> dict[str, Any]:
        """Run a task for the first time: its outcome as a record, and in ``live`` as it is.

        Inside, no runner and no replayable checkpoint ids: whatever the task
        runs (subgraphs, branch walks, a graph of its own) runs plainly, and
        does not draw from the run's ids, so a replay that skips it draws the same.
        """
        events: list[dict[str, Any]] = []
        token = _step_events.set(events)
        before = self._book(run)
        record: dict[str, Any] = {}
        try:
            with running_tasks_with(None), checkpoint_ids_from(None):
                value = await body()
            record["ok"] = encode(value)
            live.append(value)
        except NodeInterrupt as signal:
            record["interrupt"] = encode_interrupt(signal.interrupt, self.serializer)
            live.append(signal)
        except BudgetStop as stop:
            record["budget"] = encode_budget_stop(stop)
            live.append(stop)
        except RunCancelledByToken as stop:
            record["token_cancelled"] = True
            live.append(stop)
        except Exception as exc:
            record["error"] = encode_failure(exc)
            live.append(exc)
        finally:
            _step_events.reset(token)
        record["events"] = events
        changes = self._changes(before, self._book(run))
        if changes:
            record["book"] = changes
        return record

    def _replayed_stop(self, record: dict[str, Any]) -> BaseException:
        """What a replayed task that did not complete raises, as its first execution did."""
        if "interrupt" in record:
            return NodeInterrupt(decode_interrupt(record["interrupt"], self.serializer))
        if "budget" in record:
            return rebuild_budget_stop(record["budget"])
        if record.get("token_cancelled"):
            return RunCancelledByToken()
        if record.get("superseded") and self.thread is not None:
            return ThreadTakenOver(self.thread.run_id, self.thread.thread_id, None)
        failure = rebuild_failure(record["error"])
        _count(getattr(failure, "usage", None))
        return failure

    # ------------------------------------------------------------------- book
    def _book(self, run: TaskHost) -> dict[str, dict[str, Any]]:
        """The parts of the run's InterruptBook a task can change, encoded."""
        book = run.book
        if book is None:
            return {}
        records, extra, _ = encode_book(book, self.serializer, book.pending.values())
        return {
            "interrupts": records,
            "memo": extra.get("memo", {}),
            "children": extra.get("children", {}),
        }

    @staticmethod
    def _changes(
        before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]]
    ) -> dict[str, Any]:
        """What a task changed in the book: entries set (new or different) and removed."""
        changes: dict[str, Any] = {}
        for part in ("interrupts", "memo", "children"):
            old, new = before.get(part, {}), after.get(part, {})
            set_ = {key: value for key, value in new.items() if old.get(key) != value}
            removed = sorted(key for key in old if key not in new)
            if set_:
                changes.setdefault("set", {})[part] = set_
            if removed:
                changes.setdefault("removed", {})[part] = removed
        return changes

    def _restore_book(self, run: TaskHost, changes: dict[str, Any] | None) -> None:
        """Make the book changes a replayed task had made."""
        if not changes:
            return
        book = run.ensure_book()
        serializer = self.serializer
        removed = changes.get("removed", {})
        for interrupt_id in removed.get("interrupts", ()):
            book.pending.pop(interrupt_id, None)
            book.answers.pop(interrupt_id, None)
        for task in removed.get("memo", ()):
            book.memo.pop(task, None)
        for key in removed.get("children", ()):
            book.children.pop(key, None)
        set_ = changes.get("set", {})
        pending, answers = decode_interrupt_records(
            set_.get("interrupts", {}), serializer, "replayed task"
        )
        book.pending.update(pending)
        book.answers.update(answers)
        book.memo.update(decode_memo(set_.get("memo", {}), serializer, "replayed task"))
        book.children.update(decode_children(set_.get("children", {}), serializer))


async def _step(pending: Awaitable[Any]) -> Any:
    """A DBOS step's record; DBOS refusing the step is not the task's failure."""
    try:
        return await pending
    except DBOSException as exc:
        raise ReplayDivergedError(f"{type(exc).__name__}: {exc}") from exc


def _outcome(outcome: Any) -> Any:
    """What a task's first execution gave the loop: its value, or what it raised."""
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome


def _count(usage: Any) -> None:
    """Count a replayed task's model usage into the run's budgets, as its first execution did."""
    if usage is None:
        return
    control = current_control()
    if control is not None:
        control.add(usage)
