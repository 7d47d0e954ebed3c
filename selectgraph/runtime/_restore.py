"""Restoring a run from its store: a run rebuilt from a checkpoint, to go on from it.

A restored run has the checkpoint's state, counters, interrupts and a checkpoint
writer that continues its chain; the options of a durable run are here too.

A checkpoint saved under another version of the graph is checked first
(:func:`checked_checkpoint`, ``runtime/_compat.py``): what the run needs must
still be there, node names mapped with ``migrate=``; the stored state is
brought to the graph's state version and checked when the run is restored.

Every function here is a coroutine that, with ``blocking=True``, only calls
the stores' synchronous twins and so never suspends: ``run()`` drives it
without an event loop for a synchronous graph, like the step loop itself.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from selectgraph.core._errors import ResumeError
from selectgraph.core._interrupts import Interrupt
from selectgraph.core._sentinels import END
from selectgraph.core._serialization import StateSerializer, default_serializer
from selectgraph.core._state import GraphState
from selectgraph.core._usage import NO_USAGE, Usage
from selectgraph.observe._recorder import EventRecorder, Listener
from selectgraph.persistence._chain import CheckpointChain
from selectgraph.persistence._checkpoint import Checkpoint
from selectgraph.persistence._delta import copy_encoded
from selectgraph.persistence._fields import check_run_state
from selectgraph.persistence._protocol import CheckpointStore, implements
from selectgraph.runtime._book import InterruptBook
from selectgraph.runtime._book_codec import (
    decode_children,
    decode_interrupt_records,
    decode_memo,
    decode_pending_writes,
)
from selectgraph.runtime._compat import (
    AdaptedCheckpoint,
    adapt,
    changed_error,
    marks_for,
    node_changes,
    rename_answers,
    upgrade_state,
)
from selectgraph.runtime._durable import DURABILITIES, Durability, Durable, EventLog
from selectgraph.runtime._mirror import StateMirror
from selectgraph.runtime._run import Run, Sleep
from selectgraph.runtime._threads import ThreadOptions

if TYPE_CHECKING:
    from selectgraph.runtime._program import GraphProgram

__all__ = [
    "DurableOptions",
    "checked_checkpoint",
    "checkpoint_writer",
    "continue_child",
    "continue_target",
    "decode_interrupts",
    "in_run",
    "load_checkpoint",
    "load_head",
    "load_state",
    "renamed_answers",
    "restored_run",
    "store_head",
]


@dataclass(frozen=True, slots=True)
class DurableOptions:
    """How a run keeps checkpoints (what ``run(..., checkpoint_store=...)`` was given)."""

    store: CheckpointStore
    durability: Durability = "sync"
    serializer: StateSerializer = field(default_factory=default_serializer)
    pause: Any = None
    pause_before: frozenset[str] = frozenset()
    pause_after: frozenset[str] = frozenset()
    thread: ThreadOptions | None = None
    """The thread a new run goes on (``run(..., thread_id=...)``)."""
    event_log: EventLog | None = True
    """What the run stores of its events beside its checkpoints; ``None`` on a resume:
    as the run was started (its checkpoints say so, see :func:`_logged_as`)."""
    config: Mapping[str, Any] | None = None
    """Run-time values for the nodes (``context.config``)."""
    migrate: Mapping[str, str] | None = None
    """Node names to map, old -> new, in a checkpoint saved under another graph
    (``migrate=``); a node mapped to itself is taken as it is now."""

    def __post_init__(self) -> None:
        if self.durability not in DURABILITIES:
            raise ValueError(
                f"durability must be one of {', '.join(map(repr, DURABILITIES))}, "
                f"got {self.durability!r}"
            )
        if not implements(self.store, CheckpointStore):  # once per class: 3.11 is slow here
            raise TypeError(
                "checkpoint_store must be a CheckpointStore (InMemoryCheckpointStore, "
                "FileCheckpointStore, SQLiteCheckpointStore...) or a store with seed 004's "
                "save(graph_id, state, step) / load / list / delete, got "
                f"{type(self.store).__name__}"
            )


def _names_known(graph: GraphProgram, checkpoint: Checkpoint, entry: Any) -> None:
    """Refuse a ``next`` naming nodes the very graph it was saved under lacks.

    Only a record forged, or corrupted before checksums, says so: a changed graph
    is told apart by its hash and explained by ``node_changes``.
    """
    names = [entry] if isinstance(entry, str) else [entry.get("after"), entry.get("goto")]
    unknown = [n for n in names if isinstance(n, str) and n != "__end__" and n not in graph.nodes]
    if unknown:
        raise ResumeError(
            f"checkpoint {checkpoint.checkpoint_id!r} of run {checkpoint.run_id!r} names "
            f"{', '.join(map(repr, unknown))} in its next, which its own graph does not have: "
            "the record is inconsistent",
            run_id=checkpoint.run_id,
        )


async def store_head(store: CheckpointStore, run_id: str, blocking: bool) -> Checkpoint | None:
    """The run's head checkpoint (a blocking call when ``blocking``)."""
    return store.head(run_id) if blocking else await store.ahead(run_id)


async def load_checkpoint(store: CheckpointStore, checkpoint_id: str, blocking: bool) -> Checkpoint:
    """The stored checkpoint (a blocking call when ``blocking``)."""
    return store.load(checkpoint_id) if blocking else await store.aload(checkpoint_id)


async def load_state(store: CheckpointStore, checkpoint_id: str, blocking: bool) -> dict[str, Any]:
    """The whole encoded state at a checkpoint (a blocking call when ``blocking``)."""
    if blocking:
        return store.load_state(checkpoint_id)
    return await store.aload_state(checkpoint_id)


def continue_target(graph: GraphProgram, checkpoint: Checkpoint) -> Any:
    """Where a run continues from ``checkpoint``: a node name, or (node, ok, goto) to route.

    Raises:
        ResumeError: the run ended there, or its ``next`` is malformed.
        GraphChanged: the graph lacks a node the run needs (see ``node_changes``).
    """
    if not checkpoint.next:
        raise ResumeError(
            f"run {checkpoint.run_id!r} finished at checkpoint {checkpoint.checkpoint_id!r}; "
            "there is nothing to continue (fork from an earlier checkpoint with checkpoint_id=)",
            run_id=checkpoint.run_id,
        )
    entry = checkpoint.next[0]
    node = entry if isinstance(entry, str) else entry.get("after") if type(entry) is dict else None
    if not isinstance(node, str):
        raise ResumeError(
            f"checkpoint {checkpoint.checkpoint_id!r} has a malformed next {checkpoint.next!r}",
            run_id=checkpoint.run_id,
        )
    if checkpoint.metadata.get("graph") != graph.shape.hash:
        changes = node_changes(graph, checkpoint)
        if changes:
            old = checkpoint.old_shape if isinstance(checkpoint, AdaptedCheckpoint) else None
            raise changed_error(graph, checkpoint, changes, old)
    else:
        _names_known(graph, checkpoint, entry)
    if isinstance(entry, str):
        return entry
    goto = entry.get("goto")
    if goto == "__end__":
        goto = END
    return (node, bool(entry.get("ok", True)), goto)


async def checked_checkpoint(
    graph: GraphProgram, checkpoint: Checkpoint, options: DurableOptions, blocking: bool
) -> Checkpoint:
    """``checkpoint``, ready to continue under ``graph`` (its node names mapped by ``migrate=``).

    A checkpoint saved under this graph comes back as it is; one saved under
    another version is checked against what the run needs. Call it on every
    checkpoint a run is continued, resumed or forked from, before anything else
    reads it (``continue_target``, ``decode_interrupts``, ``load_head``...).

    Raises:
        GraphChanged: a node, kind of node or edge the run needs changed.
    """
    return await adapt(graph, checkpoint, options.store, options.migrate, blocking)


def renamed_answers(checkpoint: Checkpoint, answers: Mapping[str, Any]) -> dict[str, Any]:
    """``resume``'s answers, keyed like the questions of ``checkpoint`` (after ``migrate=``)."""
    return rename_answers(checkpoint, answers)


def checkpoint_writer(
    graph: GraphProgram,
    options: DurableOptions,
    run_id: str,
    *,
    chain: CheckpointChain,
    mirror: StateMirror | None,
    thread_id: str | None,
    parent: Checkpoint | None = None,
) -> Durable:
    """The checkpoint writer of a run of ``graph``: every checkpoint names the graph.

    Each checkpoint's metadata gets the graph's shape hash (``graph``) and, when
    it is not 1, the state version; the first also gets the whole shape
    (``graph_shape``) unless ``parent`` was written under the same graph. Without an
    ``event_log`` choice of its own, a run continued after ``parent`` (a checkpoint
    of the same run) stores its events as it was started to; any other, as run() does.
    """
    event_log = options.event_log
    if event_log is None:
        event_log = _logged_as(parent) if parent is not None and parent.run_id == run_id else True
    shape = graph.shape
    durable = Durable(
        options.store,
        run_id,
        options.serializer,
        options.durability,
        chain=chain,
        mirror=mirror,
        pause=options.pause,
        pause_before=options.pause_before,
        pause_after=options.pause_after,
        thread_id=thread_id,
        event_log=event_log,
    )
    durable.marks = marks_for(shape, shape.hash)
    if parent is None or parent.metadata.get("graph") != shape.hash:
        durable.shape_record = shape.record
    return durable


def decode_interrupts(
    checkpoint: Checkpoint, serializer: StateSerializer
) -> tuple[dict[str, Interrupt], dict[str, Any]]:
    """(pending questions, recorded answers) of a checkpoint."""
    return decode_interrupt_records(
        checkpoint.interrupts, serializer, f"checkpoint {checkpoint.checkpoint_id!r}"
    )


def _logged_as(checkpoint: Checkpoint) -> EventLog:
    """What the run of ``checkpoint`` was started to store of its events (``event_log=``)."""
    logged = checkpoint.metadata.get("event_log", True)
    return logged if logged is False or logged == "content" else True


def restored_run(
    graph: GraphProgram,
    checkpoint: Checkpoint,
    encoded: dict[str, Any],
    options: DurableOptions,
    *,
    run_id: str,
    parent: Checkpoint | None,
    listeners: Sequence[Listener],
    sleep: Sleep,
) -> Run:
    """A run of ``graph`` picking up the state and counters saved in ``checkpoint``."""
    serializer = options.serializer
    # The mirror below writes into the encoded state: refuse one without its parts.
    check_run_state(encoded, checkpoint.checkpoint_id, checkpoint.run_id)
    state = GraphState.from_dict(encoded, serializer=serializer)
    upgraded = upgrade_state(graph, checkpoint, state)
    metadata = checkpoint.metadata
    thread = metadata.get("thread_id")
    thread_id = thread if isinstance(thread, str) else None
    recorder = EventRecorder(run_id, graph.name, (), (*graph.listeners, *listeners))
    run = Run(graph, state, run_id=run_id, recorder=recorder, sleep=sleep)
    if options.config:
        run.config = options.config
    usage = metadata.get("usage")
    history_start = int(metadata.get("history_start", 0))
    renames = checkpoint.renames if isinstance(checkpoint, AdaptedCheckpoint) else {}
    run.restore(
        steps=checkpoint.step,
        visits=Counter(
            renames.get(entry[0], entry[0]) for entry in list(state.history)[history_start:]
        ),
        usage=Usage.from_dict(usage) if type(usage) is dict else NO_USAGE,
        degraded=bool(metadata.get("degraded", False)),
    )
    run._history_start = history_start
    run.resumed_from = checkpoint.checkpoint_id
    pending, answers = decode_interrupts(checkpoint, serializer)
    if run_id != checkpoint.run_id:
        # A fork: answers given in the original run carry over under the fork's ids;
        # questions still open there are asked again when the fork reaches them.
        answers = {in_run(key, run_id): value for key, value in answers.items()}
        pending = {}
    fan_out = metadata.get("fan_out")
    if type(fan_out) is dict and type(fan_out.get("branches")) is int:
        run.expected_fan_out = (str(fan_out.get("source")), fan_out["branches"])
    memo = metadata.get("memo")
    children = metadata.get("children")
    if pending or answers or memo or children or checkpoint.pending_writes:
        book = run.book = InterruptBook(answers=answers, pending=pending)
        where = f"checkpoint {checkpoint.checkpoint_id!r}"
        if type(memo) is dict:
            book.memo.update(decode_memo(memo, serializer, where))
        book.branches_done.update(
            decode_pending_writes(checkpoint.pending_writes, serializer, where)
        )
        if type(children) is dict:
            book.children.update(decode_children(children, serializer))
    mirror = None
    if options.durability != "exit":
        # A state the graph's migrations or defaults changed is encoded anew, and the
        # next checkpoint is a snapshot: a delta would be read against the old state.
        if upgraded:
            mirror = StateMirror.of(serializer, state)
        else:
            mirror = StateMirror(serializer, state, copy_encoded(encoded))
        run.written_keys = set()
    chain = CheckpointChain(
        run_id, parent=parent, parent_state=encoded if parent and not upgraded else None
    )
    durable = run.durable = checkpoint_writer(
        graph,
        options,
        run_id,
        chain=chain,
        mirror=mirror,
        # A run continued keeps its thread; a fork is a run of its own.
        thread_id=thread_id if run_id == checkpoint.run_id else None,
        parent=parent,
    )
    stored = metadata.get("graph")
    if stored != graph.shape.hash and node_changes(graph, checkpoint):
        # The checkpoint still names nodes this graph lacks (update_state on a run not
        # yet migrated): what it writes keeps naming the graph it was saved under.
        durable.marks = marks_for(graph.shape, stored if isinstance(stored, str) else None)
        durable.shape_record = None
    trigger = checkpoint.metadata.get("trigger")
    if checkpoint.next and isinstance(checkpoint.next[0], str) and trigger not in _GATED:
        # The run reached this node's gate before (it paused there, or the node
        # started): continuing goes through the gate, once.
        run.durable.skip_gate = checkpoint.next[0]
    return run


_GATED: Final = ("input", "max_steps")
"""Triggers of a checkpoint whose next node has not met its pause_before gate yet."""


def continue_child(
    child: GraphProgram,
    paused: Any,
    parent: Run,
    namespace: tuple[str, ...],
    sleep: Sleep,
    track_writes: bool,
) -> tuple[Run, Any]:
    """The paused run of a subgraph node (or a graph tool), and where it goes on.

    ``paused`` is the run itself (in the process that paused) or the state,
    counters and next node saved in the parent's checkpoint; ``namespace`` is
    the child's (the parent's, then the node's name and, for a tool, the call).
    """
    if isinstance(paused, Run):
        run = paused
        run.sleep = sleep
        run.resumed_live = True
        run.recorder = EventRecorder(
            parent.run_id,
            child.name,
            namespace,
            child.listeners,
            parent=parent.recorder,
        )
        if run.recorder.branch is not None:
            run.branch = run.recorder.branch
        next_ = run._resume_next
    else:
        recorder = EventRecorder(
            parent.run_id,
            child.name,
            namespace,
            child.listeners,
            parent=parent.recorder,
        )
        run = Run(
            child,
            paused["state"],
            run_id=parent.run_id,
            recorder=recorder,
            sleep=sleep,
            namespace=namespace,
            track_writes=track_writes,
        )
        if recorder.branch is not None:
            run.branch = recorder.branch  # as start_run does for a subgraph inside a branch
        run.restore(steps=paused["steps"], visits=paused["visits"], usage=NO_USAGE, degraded=False)
        if track_writes and paused.get("written"):
            run.written_keys = set(paused["written"])
        run.resumed_from = parent.resumed_from
        next_ = paused["next"]
    entry = next_[0]
    target: Any = entry if isinstance(entry, str) else (entry["after"], True, None)
    return run, target


async def load_head(
    graph: GraphProgram,
    head: Checkpoint,
    options: DurableOptions,
    listeners: Sequence[Listener],
    sleep: Sleep,
    blocking: bool,
) -> Run:
    """The run ``head`` is the latest checkpoint of, rebuilt to carry on writing after it."""
    encoded = await load_state(options.store, head.checkpoint_id, blocking)
    return restored_run(
        graph,
        head,
        encoded,
        options,
        run_id=head.run_id,
        parent=head,
        listeners=listeners,
        sleep=sleep,
    )


def in_run(interrupt_id: str, run_id: str) -> str:
    """``interrupt_id`` as the same question in run ``run_id``."""
    return run_id + "|" + interrupt_id.split("|", 1)[1]
