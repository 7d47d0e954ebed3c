"""Durable runs from the store's side: start, continue, resume, and look back (time travel).

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
from selectgraph.core._interrupts import Interrupt, interrupt_run_id
from selectgraph.core._sentinels import END
from selectgraph.core._serialization import StateSerializer, default_serializer
from selectgraph.core._state import GraphState, _decode_history_entry
from selectgraph.core._usage import NO_USAGE, Usage
from selectgraph.observe._recorder import EventRecorder, Listener
from selectgraph.persistence._chain import CheckpointChain
from selectgraph.persistence._checkpoint import Checkpoint
from selectgraph.persistence._delta import apply_delta_in_place, copy_encoded
from selectgraph.persistence._protocol import CheckpointStore
from selectgraph.runtime._book import InterruptBook, forget_paused, paused_run
from selectgraph.runtime._book_codec import (
    decode_children,
    decode_interrupt_records,
    decode_memo,
    decode_pending_writes,
)
from selectgraph.runtime._durable import DURABILITIES, Durability, Durable, encode_next
from selectgraph.runtime._guard import guard_start
from selectgraph.runtime._mirror import StateMirror
from selectgraph.runtime._run import Run, Sleep, blocking_sleep, new_run_id
from selectgraph.runtime._start import start_run
from selectgraph.state._output import NodeOutput

if TYPE_CHECKING:
    import datetime as dt

    from selectgraph.runtime._program import GraphProgram

__all__ = [
    "DurableOptions",
    "continue_child",
    "StateSnapshot",
    "get_history",
    "get_state",
    "resume_run",
    "start_durable_run",
    "update_state",
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

    def __post_init__(self) -> None:
        if self.durability not in DURABILITIES:
            raise ValueError(
                f"durability must be one of {', '.join(map(repr, DURABILITIES))}, "
                f"got {self.durability!r}"
            )
        if not isinstance(self.store, CheckpointStore):
            raise TypeError(
                "checkpoint_store must be a CheckpointStore (InMemoryCheckpointStore, "
                f"FileCheckpointStore, SQLiteCheckpointStore...), got {type(self.store).__name__}"
            )


@dataclass(frozen=True, slots=True)
class StateSnapshot:
    """A run as one checkpoint saw it: what ``get_state`` and ``get_history`` return."""

    run_id: str
    """The run."""
    checkpoint_id: str
    """The checkpoint; pass it as ``checkpoint_id=`` to continue or fork from here."""
    step: int
    """Nodes the run had executed."""
    state: GraphState
    """The state at that point."""
    next: tuple[str, ...]
    """The nodes that run next, when known without routing: a node the run stopped
    before, or the target of a static edge or goto() after the last node. Empty when
    the run ended, or when a conditional edge decides (see ``after``)."""
    interrupts: tuple[Interrupt, ...]
    """Questions the run was waiting on."""
    after: str | None
    """The node the run continues by routing from (its output is in ``state``), if any."""
    metadata: dict[str, Any]
    """What triggered the checkpoint (``trigger``), visit counts, usage..."""
    created_at: dt.datetime
    """When it was taken."""
    parent_id: str | None
    """The checkpoint before it."""

    @property
    def values(self) -> dict[str, Any]:
        """``state.data``, under the name LangGraph users know."""
        return dict(self.state.data)


# ---------------------------------------------------------------- store calls


async def _head(store: CheckpointStore, run_id: str, blocking: bool) -> Checkpoint | None:
    return store.head(run_id) if blocking else await store.ahead(run_id)


async def _load(store: CheckpointStore, checkpoint_id: str, blocking: bool) -> Checkpoint:
    return store.load(checkpoint_id) if blocking else await store.aload(checkpoint_id)


async def _load_state(store: CheckpointStore, checkpoint_id: str, blocking: bool) -> dict[str, Any]:
    if blocking:
        return store.load_state(checkpoint_id)
    return await store.aload_state(checkpoint_id)


# ------------------------------------------------------------------- helpers


def _target(graph: GraphProgram, checkpoint: Checkpoint) -> Any:
    """Where a run continues from ``checkpoint``: a node name, or (node, ok, goto) to route."""
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
    if node not in graph.nodes:
        raise ResumeError(
            f"checkpoint {checkpoint.checkpoint_id!r} of run {checkpoint.run_id!r} continues at "
            f"node {node!r}, which graph {graph.name!r} does not have; the graph's structure "
            f"changed since it was saved (nodes now: {', '.join(sorted(graph.nodes))})",
            run_id=checkpoint.run_id,
        )
    if isinstance(entry, str):
        return entry
    goto = entry.get("goto")
    if goto == "__end__":
        goto = END
    return (node, bool(entry.get("ok", True)), goto)


def _decode_interrupts(
    checkpoint: Checkpoint, serializer: StateSerializer
) -> tuple[dict[str, Interrupt], dict[str, Any]]:
    """(pending questions, recorded answers) of a checkpoint."""
    return decode_interrupt_records(
        checkpoint.interrupts, serializer, f"checkpoint {checkpoint.checkpoint_id!r}"
    )


def _next_nodes(graph: GraphProgram, checkpoint: Checkpoint) -> tuple[tuple[str, ...], str | None]:
    """(nodes that run next as far as known without routing, the node routed from)."""
    if not checkpoint.next:
        return (), None
    entry = checkpoint.next[0]
    if isinstance(entry, str):
        return (entry,), None
    after = entry.get("after") if type(entry) is dict else None
    if not isinstance(after, str):
        return (), None
    goto = entry.get("goto")
    if isinstance(goto, str):
        return ((), after) if goto == "__end__" else ((goto,), after)
    routes = graph.routes.get(after)
    static = routes.static_success if routes is not None and entry.get("ok", True) else None
    if static is not None and isinstance(static.target, str):
        return (static.target,), after
    return (), after


def _snapshot(
    graph: GraphProgram,
    checkpoint: Checkpoint,
    encoded: dict[str, Any],
    serializer: StateSerializer,
    history: list[Any] | None = None,
) -> Any:
    pending, _ = _decode_interrupts(checkpoint, serializer)
    next_, after = _next_nodes(graph, checkpoint)
    if history is None:
        state = GraphState.from_dict(encoded, serializer=serializer)
    else:  # its history already decoded (entries are shared, read-only, between snapshots)
        state = GraphState.from_dict({**encoded, "history": []}, serializer=serializer)
        state.history.extend(history)
    return StateSnapshot(
        run_id=checkpoint.run_id,
        checkpoint_id=checkpoint.checkpoint_id,
        step=checkpoint.step,
        state=state,
        next=next_,
        after=after,
        interrupts=tuple(pending.values()),
        metadata=dict(checkpoint.metadata),
        created_at=checkpoint.created_at,
        parent_id=checkpoint.parent_id,
    )


def _restored_run(
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
    state = GraphState.from_dict(encoded, serializer=serializer)
    metadata = checkpoint.metadata
    recorder = EventRecorder(run_id, graph.name, (), (*graph.listeners, *listeners))
    run = Run(graph, state, run_id=run_id, recorder=recorder, sleep=sleep)
    usage = metadata.get("usage")
    history_start = int(metadata.get("history_start", 0))
    run.restore(
        steps=checkpoint.step,
        visits=Counter(entry[0] for entry in list(state.history)[history_start:]),
        usage=Usage.from_dict(usage) if type(usage) is dict else NO_USAGE,
        degraded=bool(metadata.get("degraded", False)),
    )
    run._history_start = history_start
    run.resumed_from = checkpoint.checkpoint_id
    pending, answers = _decode_interrupts(checkpoint, serializer)
    if run_id != checkpoint.run_id:
        # A fork: answers given in the original run carry over under the fork's ids;
        # questions still open there are asked again when the fork reaches them.
        answers = {_in_run(key, run_id): value for key, value in answers.items()}
        pending = {}
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
        mirror = StateMirror(serializer, state, copy_encoded(encoded))
        run.written_keys = set()
    chain = CheckpointChain(run_id, parent=parent, parent_state=encoded if parent else None)
    run.durable = Durable(
        options.store,
        run_id,
        serializer,
        options.durability,
        chain=chain,
        mirror=mirror,
        pause=options.pause,
        pause_before=options.pause_before,
        pause_after=options.pause_after,
    )
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
    node: str,
    sleep: Sleep,
    track_writes: bool,
) -> tuple[Run, Any]:
    """The paused run of a subgraph node, and where it goes on: the node continues it.

    ``paused`` is the run itself (in the process that paused) or the state,
    counters and next node saved in the parent's checkpoint.
    """
    if isinstance(paused, Run):
        run = paused
        run.sleep = sleep
        run.resumed_live = True
        run.recorder = EventRecorder(
            parent.run_id,
            child.name,
            (*parent.namespace, node),
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
            (*parent.namespace, node),
            child.listeners,
            parent=parent.recorder,
        )
        run = Run(
            child,
            paused["state"],
            run_id=parent.run_id,
            recorder=recorder,
            sleep=sleep,
            namespace=(*parent.namespace, node),
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


# ------------------------------------------------------------------- running


async def start_durable_run(
    graph: GraphProgram,
    input: Any,
    options: DurableOptions,
    *,
    run_id: str | None,
    checkpoint_id: str | None,
    listeners: Sequence[Listener],
    sleep: Sleep,
) -> Any:
    """Run ``graph`` with checkpoints: a new run, the continuation of one, or a fork."""
    blocking = sleep is blocking_sleep
    store = options.store
    if run_id is not None and "|" in run_id:
        raise ValueError(f"run_id {run_id!r} must not contain '|' (interrupt ids use it)")
    if checkpoint_id is not None:
        if input is not None:
            raise ValueError(
                "give either input (a new run) or checkpoint_id (continue from a checkpoint), "
                "not both"
            )
        checkpoint = await _load(store, checkpoint_id, blocking)
        head = await _head(store, checkpoint.run_id, blocking)
        same_run = run_id in (None, checkpoint.run_id)
        if same_run and head is not None and head.checkpoint_id == checkpoint.checkpoint_id:
            return await _continue(graph, head, options, listeners, sleep, blocking)
        # An earlier checkpoint (or another run id): a fork, leaving the original untouched.
        fork_id = run_id if run_id is not None and not same_run else new_run_id()
        if await _head(store, fork_id, blocking) is not None:
            raise ResumeError(f"run {fork_id!r} already exists; fork into a new run_id")
        encoded = await _load_state(store, checkpoint.checkpoint_id, blocking)
        target = _target(graph, checkpoint)
        run = _restored_run(
            graph,
            checkpoint,
            encoded,
            options,
            run_id=fork_id,
            parent=None,
            listeners=listeners,
            sleep=sleep,
        )
        run.first_write = ("fork", checkpoint.next, {"forked_from": checkpoint.checkpoint_id})
        return await run.walk(target)
    if run_id is not None:
        head = await _head(store, run_id, blocking)
        if head is not None:
            if input is not None:
                raise ResumeError(
                    f"run {run_id!r} already has checkpoints; continue it with input=None, or "
                    "start a new run under another run_id",
                    run_id=run_id,
                )
            return await _continue(graph, head, options, listeners, sleep, blocking)
    run = start_run(graph, input, run_id=run_id, listeners=listeners, sleep=sleep)
    if "|" in run.run_id:
        raise ValueError(f"run_id {run.run_id!r} must not contain '|' (interrupt ids use it)")
    mirror = None
    if options.durability != "exit":
        mirror = StateMirror.of(options.serializer, run.state)
        run.written_keys = set()
    run.durable = Durable(
        store,
        run.run_id,
        options.serializer,
        options.durability,
        chain=CheckpointChain(run.run_id),
        mirror=mirror,
        pause=options.pause,
        pause_before=options.pause_before,
        pause_after=options.pause_after,
    )
    entry = graph.entry
    if graph.settings.input_guardrails is not None or graph.settings.fast_route_fn is not None:
        chosen = await guard_start(graph, run.state)
        if chosen is not None:
            run.one_node = True
            entry = chosen
    if options.durability != "exit":
        run.first_write = ("input", [entry], None)
    return await run.walk(entry)


_STATUS_BY_TRIGGER: Final = {
    "end": "done",
    "interrupt": "interrupted",
    "answer": "running",
    "pause": "paused",
    "error": "failed",
    "cancel": "cancelled",
    "budget": "stopped",
    "max_steps": "done",
    "loop": "done",
}


def run_status(metadata: Mapping[str, Any]) -> str:
    """A run's state in a word, from its head checkpoint's metadata (its trigger).

    ``done``, ``interrupted``, ``paused``, ``failed``, ``cancelled``, ``stopped``
    (a budget), or ``running`` (it took an answer, or it has not stopped yet).
    """
    return _STATUS_BY_TRIGGER.get(str(metadata.get("trigger")), "running")


def _refuse_unanswered(checkpoint: Checkpoint, options: DurableOptions) -> None:
    pending, _ = _decode_interrupts(checkpoint, options.serializer)
    if pending:
        raise ResumeError(
            f"run {checkpoint.run_id!r} is waiting for answers to "
            f"{', '.join(map(repr, pending))}; answer them with graph.resume(interrupt_id, "
            "answer) (or a mapping of interrupt id to answer)",
            run_id=checkpoint.run_id,
        )


async def _continue(
    graph: GraphProgram,
    head: Checkpoint,
    options: DurableOptions,
    listeners: Sequence[Listener],
    sleep: Sleep,
    blocking: bool,
) -> Any:
    target = _target(graph, head)
    _refuse_unanswered(head, options)
    run = await _load_head(graph, head, options, listeners, sleep, blocking)
    return await run.walk(target)


async def _load_head(
    graph: GraphProgram,
    head: Checkpoint,
    options: DurableOptions,
    listeners: Sequence[Listener],
    sleep: Sleep,
    blocking: bool,
) -> Run:
    """The run ``head`` is the latest checkpoint of, rebuilt to carry on writing after it."""
    encoded = await _load_state(options.store, head.checkpoint_id, blocking)
    return _restored_run(
        graph,
        head,
        encoded,
        options,
        run_id=head.run_id,
        parent=head,
        listeners=listeners,
        sleep=sleep,
    )


async def resume_run(
    graph: GraphProgram,
    answers: Mapping[str, Any],
    options: DurableOptions | None,
    *,
    listeners: Sequence[Listener],
    sleep: Sleep,
) -> Any:
    """Answer a paused run's interrupts and continue it (in memory if it still is, else replay)."""
    if not answers:
        raise ValueError("resume needs at least one interrupt id and its answer")
    run_ids = {interrupt_run_id(interrupt_id) for interrupt_id in answers}
    if len(run_ids) != 1:
        raise ValueError(
            f"these interrupts belong to different runs ({', '.join(sorted(run_ids))}); "
            "resume one run at a time"
        )
    (run_id,) = run_ids
    blocking = sleep is blocking_sleep
    kept = paused_run(next(iter(answers)))
    live = kept if isinstance(kept, Run) and kept.graph is graph else None
    if live is not None and options is not None:
        durable = live.durable
        if durable is None or durable.store is not options.store:
            live = None
        else:
            head = await _head(options.store, run_id, blocking)
            if head is None or head.checkpoint_id != live._checkpoint_id:
                # The run moved on without this process (another resumer, update_state):
                # the state in memory is stale; continue from the store instead.
                forget_paused(live)
                live.drop_live()
                live = None
    if live is not None:
        return await _resume_live(live, answers, sleep, options, listeners)
    if options is None:
        raise ResumeError(
            f"run {run_id!r} is not paused in this process and no checkpoint_store was given; "
            "pass the store the run was saved in",
            run_id=run_id,
        )
    head = await _head(options.store, run_id, blocking)
    if head is None:
        raise ResumeError(f"run {run_id!r} has no checkpoints in this store", run_id=run_id)
    pending, _ = _decode_interrupts(head, options.serializer)
    _check_answers(run_id, answers, pending)
    target = _target(graph, head)
    _check_askers(graph, run_id, [pending[i] for i in answers])
    run = await _load_head(graph, head, options, listeners, sleep, blocking)
    await _record_answers(run, answers, head.next)
    return await run.walk(target)


def _in_run(interrupt_id: str, run_id: str) -> str:
    """``interrupt_id`` as the same question in run ``run_id``."""
    return run_id + "|" + interrupt_id.split("|", 1)[1]


def _check_answers(run_id: str, answers: Mapping[str, Any], pending: Mapping[str, Any]) -> None:
    unknown = [interrupt_id for interrupt_id in answers if interrupt_id not in pending]
    if unknown:
        waiting = ", ".join(map(repr, pending)) or "none"
        raise ResumeError(
            f"interrupt {', '.join(map(repr, unknown))} is not pending in run {run_id!r}: it was "
            f"already answered or never raised (pending: {waiting})",
            run_id=run_id,
        )


def _check_askers(graph: GraphProgram, run_id: str, interrupts: list[Interrupt]) -> None:
    """Refuse answers for questions that no node of this graph asks any more."""
    from selectgraph.nodes._generator import GeneratorAdapter

    for interrupt in interrupts:
        task = interrupt.id.split("|")[1]
        if "/" in task:
            continue  # asked inside a branch or subgraph: checked when it is reached
        spec = graph.nodes.get(interrupt.node)
        adapter = getattr(spec, "adapter", None)
        inner = getattr(adapter, "inner", adapter)  # a cached node wraps its adapter
        if spec is None or not isinstance(inner, GeneratorAdapter):
            raise ResumeError(
                f"interrupt {interrupt.id!r} was asked by node {interrupt.node!r}, which graph "
                f"{graph.name!r} no longer has as a generator node; the graph's structure "
                "changed since the run paused",
                run_id=run_id,
            )


async def _record_answers(run: Run, answers: Mapping[str, Any], next_: list[Any]) -> None:
    """Save the answers as the run's new head before continuing: the single-writer gate.

    Of two processes answering the same pause, exactly one saves; the other
    gets CheckpointConflict and runs nothing.
    """
    book = run.ensure_book()
    before_answers = dict(book.answers)
    before_pending = dict(book.pending)
    for interrupt_id, answer in answers.items():
        book.answers[interrupt_id] = answer
        book.pending.pop(interrupt_id, None)
    for interrupt_id in answers:  # named on RunResumed: the first one answered
        asked = before_pending.get(interrupt_id)
        run.resumed_answer = (asked.node if asked is not None else None, interrupt_id)
        break
    durable = run.durable
    if durable is None:
        return
    try:
        # Encoding is inside: an answer that is not JSON data changes nothing either.
        pending = tuple(book.pending.values())
        records, extra, writes = run.interrupt_records(durable.serializer, pending)
        await durable.write(
            run, "answer", next_, interrupts=records, extra=extra, pending_writes=writes
        )
    except BaseException:
        book.answers, book.pending = before_answers, before_pending
        raise


async def _resume_live(
    run: Run,
    answers: Mapping[str, Any],
    sleep: Sleep,
    options: DurableOptions | None,
    listeners: Sequence[Listener],
) -> Any:
    book = run.ensure_book()
    _check_answers(run.run_id, answers, book.pending)
    # The continued run reports like a replayed one: its own events, observers and time.
    run.recorder = EventRecorder(
        run.run_id, run.graph.name, run.namespace, (*run.graph.listeners, *listeners)
    )
    run.restart_clock()
    run.sleep = sleep
    durable = run.durable
    if durable is not None and options is not None:
        durable.pause = options.pause
        if options.durability != "exit" and durable.mirror is None:
            durable.mirror = StateMirror.of(durable.serializer, run.state)
            run.written_keys = set()
        durable.durability = options.durability
    next_: list[Any]
    if durable is not None and durable.head is not None:
        next_ = list(durable.head.next)
    else:
        next_ = list(run._resume_next)
    await _record_answers(run, answers, next_)
    forget_paused(run)
    run._interrupts = ()
    run.resumed_live = True
    run.resumed_from = run._checkpoint_id
    entry = next_[0]
    target: Any = entry if isinstance(entry, str) else (entry["after"], True, None)
    if run._resume_branches is not None:
        target, run._resume_branches = run._resume_branches, None  # not routed again
    elif durable is not None and isinstance(target, str):
        durable.skip_gate = target  # the paused node already passed its gate
    return await run.walk(target)


# --------------------------------------------------------------- inspection


async def get_state(
    graph: GraphProgram,
    store: CheckpointStore,
    run_id: str,
    serializer: StateSerializer,
    blocking: bool,
) -> StateSnapshot:
    """The run's latest checkpoint as a StateSnapshot."""
    head = await _head(store, run_id, blocking)
    if head is None:
        raise ResumeError(f"run {run_id!r} has no checkpoints in this store", run_id=run_id)
    encoded = await _load_state(store, head.checkpoint_id, blocking)
    snapshot: StateSnapshot = _snapshot(graph, head, encoded, serializer)
    return snapshot


async def get_history(
    graph: GraphProgram,
    store: CheckpointStore,
    run_id: str,
    serializer: StateSerializer,
    blocking: bool,
    limit: int | None,
) -> list[StateSnapshot]:
    """Every checkpoint of the run, newest first (the newest ``limit`` of them).

    States are rebuilt oldest first, applying each delta in place, and the
    history (which only grows) is decoded once per entry, not once per
    checkpoint, so listing a long run stays close to linear.
    """
    if limit is not None and (type(limit) is not int or limit < 0):
        raise ValueError(f"limit must be an int >= 0 or None, got {limit!r}")
    head = await _head(store, run_id, blocking)
    if head is None:
        raise ResumeError(f"run {run_id!r} has no checkpoints in this store", run_id=run_id)
    if limit == 0:
        return []
    if limit is None:
        checkpoints = store.list(run_id) if blocking else await store.alist(run_id)
    else:
        before = head.checkpoint_id
        older = (
            (
                store.list(run_id, limit=limit - 1, before=before)
                if blocking
                else await store.alist(run_id, limit=limit - 1, before=before)
            )
            if limit > 1
            else []
        )
        checkpoints = [*older, head]
    snapshots: list[StateSnapshot] = []
    working: dict[str, Any] | None = None
    history: list[Any] = []
    history_source: Any = None
    for checkpoint in checkpoints:
        if checkpoint.kind == "snapshot":
            working = copy_encoded(checkpoint.values)
        elif working is None:  # the first one listed is a delta: rebuild it from its chain
            working = await _load_state(store, checkpoint.checkpoint_id, blocking)
        else:
            apply_delta_in_place(working, checkpoint.values, checkpoint.checkpoint_id)
        encoded_history = working.get("history", [])
        if encoded_history is not history_source or len(history) > len(encoded_history):
            history, history_source = [], encoded_history  # replaced: decode it afresh
        for i in range(len(history), len(encoded_history)):
            history.append(
                _decode_history_entry(encoded_history[i], f"history[{i}]", serializer.decode)
            )
        snapshots.append(_snapshot(graph, checkpoint, working, serializer, history))
    snapshots.reverse()
    return snapshots


async def update_state(
    graph: GraphProgram,
    run_id: str,
    values: Mapping[str, Any],
    options: DurableOptions,
    *,
    as_node: str | None,
    blocking: bool,
) -> str:
    """Merge ``values`` into the run's latest state (through the reducers); returns the new id."""
    store = options.store
    head = await _head(store, run_id, blocking)
    if head is None:
        raise ResumeError(f"run {run_id!r} has no checkpoints in this store", run_id=run_id)
    if as_node is not None and as_node not in graph.nodes:
        raise ValueError(
            f"as_node={as_node!r} is not a node of graph {graph.name!r}; "
            f"nodes: {', '.join(sorted(graph.nodes))}"
        )
    if not isinstance(values, Mapping):
        raise TypeError(f"values must be a mapping of data keys, got {type(values).__name__}")
    run = await _load_head(
        graph, head, options, (), blocking_sleep if blocking else _no_sleep, blocking
    )
    writer = as_node or "update_state"
    output = NodeOutput(dict(values))
    run._merger.merge(run.state, output, writer, run.steps)
    if graph.schema.model is not None:
        # Checked now, not when the continued run exits: nothing invalid is saved.
        graph.schema.validate_exit(run.state.data, state=run.state)
    if run.written_keys is not None:
        run.written_keys.update(output.written_keys())
    durable = run.durable
    assert durable is not None
    if as_node is not None:
        next_ = encode_next("after", as_node)
        interrupts: dict[str, dict[str, Any]] = {}
        extra: dict[str, Any] = {"as_node": as_node}
    else:
        next_ = list(head.next)
        interrupts = dict(head.interrupts)
        memo = head.metadata.get("memo")
        extra = {"memo": memo} if memo else {}
    checkpoint = durable.make(run, "update", next_, interrupts=interrupts, extra=extra)
    if blocking:
        store.save(checkpoint, expected_version=checkpoint.version - 1)
    else:
        await store.asave(checkpoint, expected_version=checkpoint.version - 1)
    return checkpoint.checkpoint_id


async def _no_sleep(seconds: float) -> None:
    return None
