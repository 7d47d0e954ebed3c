"""Durable runs from the store's side: start a run; continue, fork or resume one; on a thread.

Every function here is a coroutine that, with ``blocking=True``, only calls
the stores' synchronous twins and so never suspends: ``run()`` drives it
without an event loop for a synchronous graph, like the step loop itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from selectgraph.core._answers import check_answer
from selectgraph.core._errors import ResumeError
from selectgraph.core._interrupts import Interrupt, interrupt_run_id
from selectgraph.observe._recorder import EventRecorder, Listener
from selectgraph.persistence._chain import CheckpointChain
from selectgraph.persistence._checkpoint import Checkpoint
from selectgraph.runtime._book import forget_paused, paused_run
from selectgraph.runtime._guard import guard_start
from selectgraph.runtime._mirror import StateMirror
from selectgraph.runtime._restore import (
    DurableOptions,
    checked_checkpoint,
    checkpoint_writer,
    continue_target,
    decode_interrupts,
    load_checkpoint,
    load_head,
    load_state,
    renamed_answers,
    restored_run,
    store_head,
)
from selectgraph.runtime._run import Run, Sleep, blocking_sleep, new_run_id
from selectgraph.runtime._start import start_run
from selectgraph.runtime._threads import (
    carried_state,
    check_input,
    claim_thread,
    thread_store,
    walk_and_release,
)

if TYPE_CHECKING:
    from selectgraph.runtime._program import GraphProgram

__all__ = ["resume_run", "run_status", "start_durable_run"]


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
    """Run ``graph`` with checkpoints: a new run, the continuation of one, or a fork.

    Raises:
        ResumeError: the run cannot be started or continued as asked (``input=None``
            for a run id with no checkpoints, input for one that has some...).
    """
    blocking = sleep is blocking_sleep
    store = options.store
    if run_id is not None and "|" in run_id:
        raise ValueError(f"run_id {run_id!r} must not contain '|' (interrupt ids use it)")
    if options.thread is not None:
        return await _start_on_thread(
            graph, input, options, run_id, checkpoint_id, listeners, sleep
        )
    if checkpoint_id is not None:
        if input is not None:
            raise ValueError(
                "give either input (a new run) or checkpoint_id (continue from a checkpoint), "
                "not both"
            )
        checkpoint = await load_checkpoint(store, checkpoint_id, blocking)
        checkpoint = await checked_checkpoint(graph, checkpoint, options, blocking)
        head = await store_head(store, checkpoint.run_id, blocking)
        same_run = run_id in (None, checkpoint.run_id)
        if same_run and head is not None and head.checkpoint_id == checkpoint.checkpoint_id:
            return await _continue(graph, head, options, listeners, sleep, blocking)
        # An earlier checkpoint (or another run id): a fork, leaving the original untouched.
        fork_id = run_id if run_id is not None and not same_run else new_run_id()
        if await store_head(store, fork_id, blocking) is not None:
            raise ResumeError(f"run {fork_id!r} already exists; fork into a new run_id")
        encoded = await load_state(store, checkpoint.checkpoint_id, blocking)
        target = continue_target(graph, checkpoint)
        run = restored_run(
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
        return await walk_and_release(run, target)
    if run_id is not None:
        head = await store_head(store, run_id, blocking)
        if head is not None:
            if input is not None:
                raise ResumeError(
                    f"run {run_id!r} already has checkpoints; continue it with input=None, or "
                    "start a new run under another run_id",
                    run_id=run_id,
                )
            return await _continue(graph, head, options, listeners, sleep, blocking)
        if input is None:
            raise ResumeError(
                f"run {run_id!r} has no checkpoints in this store, so there is nothing to "
                "continue: give an input to start a new run under this id, or check the id "
                "and the store",
                run_id=run_id,
            )
    run = start_run(graph, input, run_id=run_id, listeners=listeners, sleep=sleep)
    if options.config:
        run.config = options.config
    entry = await _begin(graph, run, options, None)
    return await run.walk(entry)


async def _begin(
    graph: GraphProgram, run: Run, options: DurableOptions, extra: dict[str, Any] | None
) -> str:
    """Give a new run its checkpoint writer and first checkpoint; returns where it starts."""
    if "|" in run.run_id:
        raise ValueError(f"run_id {run.run_id!r} must not contain '|' (interrupt ids use it)")
    mirror = None
    if options.durability != "exit":
        mirror = StateMirror.of(options.serializer, run.state)
        run.written_keys = set()
    thread = options.thread
    run.durable = checkpoint_writer(
        graph,
        options,
        run.run_id,
        chain=CheckpointChain(run.run_id),
        mirror=mirror,
        thread_id=None if thread is None else thread.thread_id,
    )
    entry = graph.entry
    if graph.settings.input_guardrails is not None or graph.settings.fast_route_fn is not None:
        chosen = await guard_start(graph, run.state)
        if chosen is not None:
            run.one_node = True
            entry = chosen
    if options.durability != "exit" or thread is not None:
        # On a thread the first checkpoint is written whatever the durability: it is
        # the state the thread's next run starts from if this one stops early.
        run.first_write = ("input", [entry], extra)
    return entry


async def _start_on_thread(
    graph: GraphProgram,
    input: Any,
    options: DurableOptions,
    run_id: str | None,
    checkpoint_id: str | None,
    listeners: Sequence[Listener],
    sleep: Sleep,
) -> Any:
    """A new run on ``options.thread``, from the thread's state (or a checkpoint of it)."""
    thread = options.thread
    assert thread is not None
    blocking = sleep is blocking_sleep
    store = thread_store(options.store)
    if run_id is not None and await store_head(options.store, run_id, blocking) is not None:
        raise ResumeError(
            f"run {run_id!r} already exists; a new run on thread {thread.thread_id!r} needs a "
            "new run id (or none: one is made)",
            run_id=run_id,
        )
    if input is None and checkpoint_id is None:
        return await _continue_thread(graph, options, listeners, sleep, blocking)
    run_id = run_id or new_run_id()
    if checkpoint_id is not None:
        return await _fork_on_thread(graph, input, options, run_id, checkpoint_id, listeners, sleep)
    check_input(graph, input)
    claim = await claim_thread(store, thread, run_id, sleep, blocking)
    start_from = claim.start_from
    try:
        source = encoded = None
        if start_from is not None:
            source = await load_checkpoint(options.store, start_from, blocking)
            encoded = await load_state(options.store, start_from, blocking)
        state = carried_state(graph, encoded, input, options.serializer, source)
        recorder = EventRecorder(run_id, graph.name, (), (*graph.listeners, *listeners))
        run = Run(graph, state, run_id=run_id, recorder=recorder, sleep=sleep)
        if options.config:
            run.config = options.config
        extra: dict[str, Any] = {"thread_run": claim.run.seq}
        if start_from is not None:
            extra["started_from"] = start_from
        if claim.superseded is not None:
            extra["superseded"] = claim.superseded
        entry = await _begin(graph, run, options, extra)
    except BaseException:
        store.release_thread(thread.thread_id, run_id)
        raise
    return await walk_and_release(run, entry)


async def _fork_on_thread(
    graph: GraphProgram,
    input: Any,
    options: DurableOptions,
    run_id: str,
    checkpoint_id: str,
    listeners: Sequence[Listener],
    sleep: Sleep,
) -> Any:
    """A new run on the thread that goes on from ``checkpoint_id`` (LangGraph's replay)."""
    thread = options.thread
    assert thread is not None
    if input is not None:
        raise ValueError(
            "give either input (a new run from the thread's state) or checkpoint_id (go on "
            "from that checkpoint), not both"
        )
    blocking = sleep is blocking_sleep
    store = thread_store(options.store)
    checkpoint = await load_checkpoint(options.store, checkpoint_id, blocking)
    checkpoint = await checked_checkpoint(graph, checkpoint, options, blocking)
    target = continue_target(graph, checkpoint)
    claim = await claim_thread(store, thread, run_id, sleep, blocking)
    try:
        encoded = await load_state(options.store, checkpoint_id, blocking)
        run = restored_run(
            graph,
            checkpoint,
            encoded,
            options,
            run_id=run_id,
            parent=None,
            listeners=listeners,
            sleep=sleep,
        )
        assert run.durable is not None
        run.durable.thread_id = thread.thread_id
        run.first_write = (
            "fork",
            checkpoint.next,
            {"forked_from": checkpoint_id, "thread_run": claim.run.seq},
        )
    except BaseException:
        store.release_thread(thread.thread_id, run_id)
        raise
    return await walk_and_release(run, target)


async def _continue_thread(
    graph: GraphProgram,
    options: DurableOptions,
    listeners: Sequence[Listener],
    sleep: Sleep,
    blocking: bool,
) -> Any:
    """``run(None, thread_id=...)``: continue the thread's run that stopped before its end."""
    thread = options.thread
    assert thread is not None
    found = thread_store(options.store).get_thread(thread.thread_id)
    last = None if found is None else (found.owner or found.last_run)
    head = None if last is None else await store_head(options.store, last, blocking)
    if head is None or not head.next:
        raise ResumeError(
            f"thread {thread.thread_id!r} has no run to continue"
            + ("" if found is None else f" (its last run, {last!r}, finished)")
            + ": start a new run on it with an input",
        )
    return await _continue(graph, head, options, listeners, sleep, blocking)


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
    pending, _ = decode_interrupts(checkpoint, options.serializer)
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
    head = await checked_checkpoint(graph, head, options, blocking)
    target = continue_target(graph, head)
    _refuse_unanswered(head, options)
    run = await load_head(graph, head, options, listeners, sleep, blocking)
    return await walk_and_release(run, target)


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
            head = await store_head(options.store, run_id, blocking)
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
    head = await store_head(options.store, run_id, blocking)
    if head is None:
        raise ResumeError(f"run {run_id!r} has no checkpoints in this store", run_id=run_id)
    head = await checked_checkpoint(graph, head, options, blocking)
    # Asked under the ids the run paused with; migrate= may have renamed their nodes.
    answers = renamed_answers(head, answers)
    pending, _ = decode_interrupts(head, options.serializer)
    # Checked against the schemas stored with the questions, before anything runs.
    answers = _check_answers(run_id, answers, pending)
    target = continue_target(graph, head)
    _check_askers(graph, run_id, [pending[i] for i in answers])
    run = await load_head(graph, head, options, listeners, sleep, blocking)
    await _record_answers(run, answers, head.next)
    return await walk_and_release(run, target)


def _check_answers(
    run_id: str, answers: Mapping[str, Any], pending: Mapping[str, Interrupt]
) -> dict[str, Any]:
    """The answers to record: each names a pending question and fits its response schema.

    An answer to a question with a schema comes back as the JSON data it was
    checked as (see ``core/_answers``); the others as they were given.

    Raises:
        ResumeError: an answer names a question that is not pending.
        AnswerInvalid: an answer does not fit its question's schema (the first one that
            does not, of several): nothing is applied.
    """
    unknown = [interrupt_id for interrupt_id in answers if interrupt_id not in pending]
    if unknown:
        waiting = ", ".join(map(repr, pending)) or "none"
        raise ResumeError(
            f"interrupt {', '.join(map(repr, unknown))} is not pending in run {run_id!r}: it was "
            f"already answered or never raised (pending: {waiting})",
            run_id=run_id,
        )
    checked: dict[str, Any] = {}
    for interrupt_id, answer in answers.items():
        asked = pending[interrupt_id]
        checked[interrupt_id] = check_answer(
            interrupt_id,
            answer,
            asked.response_schema,
            asked.response_model,  # at hand in the process the node asked in
            run_id=run_id,
        )
    return checked


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
        if run.expected_fan_out is not None:  # still to be checked when the fan-out is rebuilt
            source, size = run.expected_fan_out
            extra["fan_out"] = {"source": source, "branches": size}
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
    # Checked before anything changes: a refused answer leaves the live generator waiting.
    answers = _check_answers(run.run_id, answers, book.pending)
    # The continued run reports like a replayed one: its own events, observers and time.
    run.recorder = EventRecorder(
        run.run_id, run.graph.name, run.namespace, (*run.graph.listeners, *listeners)
    )
    run.restart_clock()
    run.sleep = sleep
    if options is not None and options.config:
        run.config = options.config
    durable = run.durable
    if durable is not None and options is not None:
        durable.pause = options.pause
        if options.durability != "exit" and durable.mirror is None:
            durable.mirror = StateMirror.of(durable.serializer, run.state)
            run.written_keys = set()
        durable.durability = options.durability
        if options.event_log is not None:
            durable.log_as(options.event_log)
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
    return await walk_and_release(run, target)
