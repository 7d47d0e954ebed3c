"""Durable runs: when a run writes checkpoints, and what they hold.

A run with a checkpoint store gets a :class:`Durable`. The step loop calls it
at a few points and nowhere else, so a run without a store pays nothing:

- ``after_node``: a node finished and its output was merged. The checkpoint's
  ``next`` is ``{"after": node}``: a resume routes from that node again
  (routing is a function of the saved state), so no completed node re-runs.
- ``stop``: the run pauses (an interrupt, a pause gate, a PauseToken), was
  cancelled, failed, or ended. These are written whatever the durability.

Durability (see docs/persistence.md for the loss window of each):
``"sync"`` writes each checkpoint before the next node starts; ``"async"``
hands it to a writer thread and goes on (a crash loses the writes still
queued); ``"exit"`` writes only when the run stops.

Every write carries the head version it was based on, so of two processes
resuming one run exactly one wins (the other gets CheckpointConflict).
"""

from __future__ import annotations

import concurrent.futures
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol

from selectgraph.core._serialization import StateSerializer
from selectgraph.core._state import GraphState
from selectgraph.core._usage import Usage
from selectgraph.observe._events import CheckpointSaved
from selectgraph.observe._log_json import log_entries
from selectgraph.persistence._chain import CheckpointChain
from selectgraph.persistence._checkpoint import Checkpoint
from selectgraph.persistence._protocol import CheckpointStore
from selectgraph.persistence._threads import ThreadStore, keeps_threads
from selectgraph.runtime._mirror import StateMirror
from selectgraph.runtime._queued_writes import QueuedWrites

if TYPE_CHECKING:
    from selectgraph.core._interrupts import Interrupt
    from selectgraph.observe._recorder import EventRecorder
    from selectgraph.runtime._book import InterruptBook

__all__ = ["DURABILITIES", "Checkpointed", "Durability", "Durable", "EventLog", "encode_next"]

Durability = Literal["sync", "async", "exit"]
"""When a durable run's checkpoints reach the store (``durability=`` of ``run``,
``arun``, ``astream`` and ``resume``).

- ``"sync"`` (default): each node's checkpoint is saved before the next node starts;
  a crash loses nothing completed.
- ``"async"``: checkpoints go to a background writer thread while the run goes on; a
  crash loses those still queued.
- ``"exit"``: only the checkpoints of a stop (interrupt, pause, error, cancel, end)
  are written.

The checkpoints of a stop are written before ``run`` returns, whatever the mode.
"""
DURABILITIES: Final = ("sync", "async", "exit")

EventLog = bool | Literal["content"]
"""What a durable run stores of its events beside its checkpoints (``event_log=``).

- ``True`` (default): every event, without message content (no text chunks, prompts,
  replies or tool arguments), in a store that keeps event logs.
- ``"content"``: the same with message content.
- ``False``: none.
"""

_log = logging.getLogger("selectgraph")

_QUEUED: Final = frozenset({"node_complete", "subgraph_node"})
"""Triggers that durability "async" hands to the writer thread (the others are stops)."""


class Checkpointed(Protocol):
    """What a checkpoint is made of: the run as :class:`Durable` reads it."""

    run_id: str
    steps: int
    state: GraphState
    usage: Usage
    written_keys: set[str] | None
    """Data keys written since the last checkpoint (None: not tracked, write it whole)."""
    book: InterruptBook | None
    recorder: EventRecorder

    @property
    def degraded(self) -> bool:
        """Whether a failure was absorbed on the way."""
        ...

    @property
    def history_start(self) -> int:
        """Entries of the state's history that predate this run."""
        ...

    @property
    def driven_without_loop(self) -> bool:
        """Whether the run is driven without an event loop (stores' blocking calls, then)."""
        ...

    def interrupt_records(
        self, serializer: StateSerializer, pending: tuple[Interrupt, ...]
    ) -> tuple[dict[str, dict[str, Any]], dict[str, Any], dict[str, list[Any]]]:
        """The run's interrupts, their metadata and pending writes, as a checkpoint holds them."""
        ...


def encode_next(kind: str, node: str, *, ok: bool = True, goto: Any = None) -> list[Any]:
    """The ``next`` of a checkpoint: run ``node`` (``kind="node"``), or route after it."""
    if kind == "node":
        return [node]
    entry: dict[str, Any] = {"after": node}
    if not ok:
        entry["ok"] = False
    if goto is not None:
        entry["goto"] = goto if isinstance(goto, str) else "__end__"
    return [entry]


class Durable:
    """The checkpoint writer of one run."""

    def __init__(
        self,
        store: CheckpointStore,
        run_id: str,
        serializer: StateSerializer,
        durability: Durability,
        *,
        chain: CheckpointChain,
        mirror: StateMirror | None,
        pause: Any = None,
        pause_before: frozenset[str] = frozenset(),
        pause_after: frozenset[str] = frozenset(),
        thread_id: str | None = None,
        event_log: EventLog = True,
    ) -> None:
        self.store = store
        self.run_id = run_id
        self.serializer = serializer
        self.durability = durability
        self.chain = chain
        self.mirror = mirror
        self.pause = pause
        self.pause_before = pause_before
        self.pause_after = pause_after
        self.skip_gate: str | None = None
        """A pause-before gate the run was continued from: it does not stop the run again."""
        self._writes = QueuedWrites(store)
        self.dirty = False
        """With durability "exit": whether anything happened since the last write."""
        self.completed: tuple[int, str, bool, Any] | None = None
        """(step, node, ok, goto) of the last node that finished: where a stop resumes."""
        self.thread_id = thread_id
        """The thread the run belongs to: its checkpoints name it, and save only while the
        run owns it."""
        self.threads: ThreadStore | None = store if keeps_threads(store) else None
        """The store, when it keeps threads and event logs."""
        self.log_as(event_log)
        self._logged = 0
        """The recorder's log mark up to which events went into a checkpoint."""
        self._log_of: object = None
        """The recorder ``_logged`` counts in (a live resume replaces the run's)."""
        self.marks: Mapping[str, Any] = {}
        """Added to every checkpoint's metadata: the graph's shape hash, the state
        version when it is not 1 (see ``runtime/_shape.py``)."""
        self.shape_record: Mapping[str, Any] | None = None
        """The graph's whole shape, stored with the next checkpoint (then None)."""
        self._sent_shape: Mapping[str, Any] | None = None
        self.inside: tuple[str, dict[str, Any]] | None = None
        """(subgraph node, its children records) of the last ``subgraph_node`` checkpoint,
        until that node completes: a stop there keeps where the subgraph was."""

    @property
    def head(self) -> Checkpoint | None:
        """The last checkpoint this run wrote or continued from."""
        return self.chain.head

    # ----------------------------------------------------------- writing
    async def after_node(self, run: Checkpointed, node: str, ok: bool, goto: Any) -> bool:
        """Checkpoint after ``node``; returns whether the run should pause here."""
        self.completed = (run.steps, node, ok, goto)
        self.inside = None
        pausing = node in self.pause_after or (self.pause is not None and self.pause.is_set())
        if self.durability == "exit" and not pausing:
            self.dirty = True
            return False
        await self.write(run, "node_complete", encode_next("after", node, ok=ok, goto=goto))
        return pausing

    async def write(
        self,
        run: Checkpointed,
        trigger: str,
        next: list[Any],
        *,
        interrupts: dict[str, dict[str, Any]] | None = None,
        extra: dict[str, Any] | None = None,
        pending_writes: dict[str, list[Any]] | None = None,
    ) -> Checkpoint:
        """Write a checkpoint of ``run`` now (queued, with durability "async")."""
        parent = self.chain.head
        logged = self._logged
        try:
            checkpoint = self.make(
                run,
                trigger,
                next,
                interrupts=interrupts,
                extra=extra,
                pending_writes=pending_writes,
            )
            if self.durability == "async" and trigger in _QUEUED:
                self._writes.put(checkpoint)
            else:
                await self.flush(run)
                if run.driven_without_loop:
                    self.store.save(checkpoint, expected_version=checkpoint.version - 1)
                else:
                    await self.store.asave(checkpoint, expected_version=checkpoint.version - 1)
        except BaseException:
            self._rewind(parent)
            self._logged = logged  # the events go with the next checkpoint instead
            raise
        self.dirty = False
        run.recorder.record(
            CheckpointSaved, run.steps, checkpoint.checkpoint_id, trigger, checkpoint.version
        )
        return checkpoint

    def make(
        self,
        run: Checkpointed,
        trigger: str,
        next: list[Any],
        *,
        interrupts: dict[str, dict[str, Any]] | None = None,
        extra: dict[str, Any] | None = None,
        pending_writes: dict[str, list[Any]] | None = None,
    ) -> Checkpoint:
        """The next checkpoint of ``run`` (not yet saved)."""
        state = run.state
        written = run.written_keys
        if self._rebuild:
            self.mirror = StateMirror.of(self.serializer, state)
            self._rebuild = False
        if self.mirror is not None:
            delta: dict[str, Any] | None = self.mirror.update(state, written or ())
            encoded = self.mirror.encoded
        else:
            delta = None
            encoded = state.to_dict(serializer=self.serializer)
        if written:
            written.clear()
        book = run.book
        if interrupts is None and book is not None and book.holds_anything():
            # Questions, answers and finished branches in flight survive any stop.
            interrupts, held, writes = run.interrupt_records(
                self.serializer, tuple(book.pending.values())
            )
            if extra and "children" in extra and "children" in held:
                # A subgraph's progress beside subgraphs paused on a question.
                extra = {**extra, "children": {**held["children"], **extra["children"]}}
            extra = {**held, **(extra or {})}
            pending_writes = pending_writes or writes
        # Visit counts are not stored: the history a checkpoint holds says them.
        metadata: dict[str, Any] = {"trigger": trigger, **self.marks}
        if self.shape_record is not None:
            metadata["graph_shape"] = self._sent_shape = self.shape_record
            self.shape_record = None
        if self.thread_id is not None:
            metadata["thread_id"] = self.thread_id
        if run.usage.total_tokens or run.usage.cost_usd:
            metadata["usage"] = run.usage.to_dict()
        if self.logged_as is not True:
            metadata["event_log"] = self.logged_as
        if run.degraded:
            metadata["degraded"] = True
        if run.history_start:
            metadata["history_start"] = run.history_start
        inside = self.inside
        if inside is not None and next == [inside[0]] and "children" not in metadata:
            # A stop while a subgraph node runs: resumed, the subgraph goes on from there.
            metadata["children"] = inside[1]
        if extra:
            metadata.update(extra)
        return self.chain.next(
            step=run.steps,
            state=encoded,
            delta=delta,
            next=next,
            interrupts=interrupts or {},
            pending_writes=pending_writes or {},
            metadata=metadata,
            events=self._new_events(run) if self.event_log else (),
        )

    def log_as(self, event_log: EventLog) -> None:
        """Store the run's events as ``event_log`` says, from the next checkpoint on."""
        self.event_log: EventLog = event_log if self.threads is not None else False
        """Whether each checkpoint carries the run's events since the last one."""
        self.logged_as: EventLog = event_log
        """What the run was asked to store of its events: its checkpoints say it when it
        is not the default, so a resume in another process stores the same."""

    def _new_events(self, run: Checkpointed) -> tuple[dict[str, Any], ...]:
        """The run's events since the last checkpoint, as its event log keeps them."""
        recorder = run.recorder
        if recorder is not self._log_of:
            # A live resume gives the run a new recorder, whose log starts empty.
            self._log_of, self._logged = recorder, 0
        raw = recorder.raw_since(self._logged)
        # Counted, not read back: a branch's thread may append in between.
        self._logged += len(raw)
        return tuple(log_entries(raw, content=self.event_log == "content"))

    async def log_tail(self, run: Checkpointed) -> None:
        """Store the events recorded after the run's last checkpoint (its end, its pause).

        A failure here is logged, not raised: the run's result and checkpoints stand.
        """
        if not self.event_log or self.threads is None:
            return
        events = self._new_events(run)
        if not events:
            return
        try:
            if run.driven_without_loop:
                self.threads.append_events(self.run_id, events)
            else:
                await self.threads.aappend_events(self.run_id, events)
        except Exception:
            _log.warning("could not store the last events of run %r", self.run_id, exc_info=True)

    def _rewind(self, head: Checkpoint | None) -> None:
        """After a failed write: the next checkpoint follows ``head`` again, as a full snapshot.

        The mirror may have taken in changes that were never stored; it is
        rebuilt from the state at the next write.
        """
        self.chain = CheckpointChain(self.run_id, parent=head)
        if self.mirror is not None:
            self.mirror = None
            self._rebuild = True
        # The write that held the graph's shape may be the one that failed: send it
        # again, unless the checkpoint the chain goes back to was written under this graph.
        graph = self.marks.get("graph")
        if self._sent_shape is not None and (head is None or head.metadata.get("graph") != graph):
            self.shape_record = self._sent_shape

    _rebuild = False

    def pending_writes(self) -> list[concurrent.futures.Future[None]]:
        """Writes queued and maybe not yet stored (durability "async")."""
        return self._writes.taken()

    async def flush(self, run: Checkpointed) -> None:
        """Wait until every queued write is stored (re-raising the first that failed)."""
        await self._writes.flush(blocking=run.driven_without_loop)

    def close(self) -> None:
        """Stop the writer thread (after :meth:`flush`)."""
        self._writes.close()
