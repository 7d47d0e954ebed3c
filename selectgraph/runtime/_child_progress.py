"""Checkpoints inside subgraphs: a subgraph's progress, saved under the run that owns the store.

A subgraph node runs a whole child run. Without these checkpoints a crash inside
it loses every node the child completed: the resumed parent runs the subgraph
node, and so the child, from the start. With them, after each node a child
completes, the run that owns the checkpoint store writes a checkpoint of its own
state as it was when the subgraph node started (``next`` is that node again,
trigger ``"subgraph_node"``) whose ``children`` say where each running subgraph
is: the innermost continues after the node it just completed, the ones around
it at the subgraph node they are running. The resumed run re-enters the
subgraph node, which finds its child's record in the interrupt book and
continues it (``continue_child``), exactly as after an interrupt inside it.

Covered: subgraphs on a run's own path, nested to any depth. A subgraph inside a
fan-out branch or a parallel group is not (a branch's work is kept by its
fan-out's pending writes instead); it starts over after a crash. Nor is a run
whose tasks an executor records (the DBOS executor runs a subgraph node as one
step, replayed whole).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Final, Protocol

from selectgraph.runtime._book_codec import encode_child
from selectgraph.runtime._durable import Checkpointed, encode_next

if TYPE_CHECKING:
    from selectgraph.core._interrupts import Interrupt
    from selectgraph.core._serialization import StateSerializer
    from selectgraph.core._state import GraphState
    from selectgraph.runtime._durable import Durable
    from selectgraph.runtime._tasks import TaskRunner

__all__ = ["ChildProgress", "progress_for"]


class Nested(Protocol):
    """A subgraph's run, as its progress record reads it."""

    child_key: str | None
    state: GraphState
    steps: int
    written_keys: set[str] | None

    @property
    def visits(self) -> dict[str, int]:
        """How many times each node ran."""
        ...

    @property
    def driven_without_loop(self) -> bool:
        """Whether it runs without an event loop (a blocking subgraph on a worker thread)."""
        ...

    @property
    def _book_parent(self) -> Nested | None:
        """The run around it (a subgraph's parent)."""
        ...


class Owner(Checkpointed, Protocol):
    """The run that keeps the checkpoints (or a parent whose subgraph starts)."""

    durable: Durable | None
    stop_at: Any
    progress: ChildProgress | None
    tasks: TaskRunner | None
    active_subgraph: Any


TRIGGER: Final = "subgraph_node"
"""The trigger of a checkpoint written inside a subgraph (its metadata says so)."""


class ChildProgress:
    """Saves a subgraph run's progress through the checkpoint writer of the run around it.

    One per outermost durable run, shared by every subgraph nested on its path;
    the step loop calls :meth:`after_node` where a durable run would checkpoint.
    """

    pause_after: frozenset[str] = frozenset()
    """Pause gates: none inside a subgraph (the step loop asks, as of a run's writer)."""

    def __init__(self, owner: Owner, outermost: Any) -> None:
        self.owner = owner
        """The run whose checkpoint store keeps the progress."""
        self.outermost = outermost
        """The subgraph run the owner's node started (the others are nested in it)."""
        self.steps = owner.steps
        self.node = owner.state.current_node
        owner.active_subgraph = outermost

    def given_up(self) -> bool:
        """Whether the owner no longer waits for this subgraph (a timeout, a retry, a cancel).

        A blocking subgraph runs on a worker thread that cannot be stopped; once its
        node was given up, it must not write the owner's checkpoints any more.
        """
        owner = self.owner
        return (
            owner.steps != self.steps
            or owner.state.current_node != self.node
            or owner.active_subgraph is not self.outermost
        )

    async def after_node(self, child: Nested, node: str, ok: bool, goto: Any) -> bool:
        """Checkpoint the owner with ``child`` just past ``node``; never pauses.

        Returns:
            False: a subgraph does not pause here (its owner's gates are its own).
        """
        owner = self.owner
        durable = owner.durable
        if durable is None or durable.durability == "exit":
            return False  # "exit" writes only at a stop
        if self.given_up():
            raise asyncio.CancelledError("the subgraph's node was given up (a timeout or a retry)")
        serializer = durable.serializer
        children: dict[str, Any] = {}
        key = child.child_key
        assert key is not None
        children[key] = _record(child, encode_next("after", node, ok=ok, goto=goto), serializer)
        outer = child._book_parent
        while outer is not None and id(outer) != id(owner):  # up to the owner
            # A subgraph around this one: it goes on at the subgraph node it is running.
            assert outer.child_key is not None
            at = outer.state.current_node
            assert at is not None
            children[outer.child_key] = _record(outer, [at], serializer, rolled_back=at)
            outer = outer._book_parent
        at = owner.state.current_node
        assert at is not None
        # The store is called as the subgraph runs: without a loop on a worker thread.
        at_node = _AtNode(owner, blocking=child.driven_without_loop)
        await durable.write(at_node, TRIGGER, [at], extra={"children": children})
        # A stop before the subgraph node completes (a cancel, a budget, a failure) keeps it.
        durable.inside = (at, children)
        return False


def progress_for(parent: Owner, in_branch: bool, child: Any) -> ChildProgress | None:
    """The progress saver of a subgraph that ``parent`` starts, or None when none is kept.

    Args:
        parent: the run whose node is the subgraph.
        in_branch: whether the node runs inside a fan-out branch or parallel group.
        child: the subgraph's run.
    """
    if in_branch or parent.stop_at is not None:
        return None
    if parent.durable is not None:
        # Under an executor's task runner the subgraph node is one recorded task:
        # its replay runs nothing inside, so checkpoints there would not replay.
        return ChildProgress(parent, child) if parent.tasks is None else None
    return parent.progress  # a subgraph inside a subgraph: the same owner keeps both


def _record(
    run: Nested, next_: list[Any], serializer: StateSerializer, rolled_back: str | None = None
) -> dict[str, Any]:
    """A running subgraph as a paused child record; ``rolled_back``'s visit is uncounted."""
    steps = run.steps
    visits = dict(run.visits)
    if rolled_back is not None:
        # The node in progress runs again on resume, as the same step.
        steps -= 1
        if visits.get(rolled_back, 1) > 1:
            visits[rolled_back] -= 1
        else:
            visits.pop(rolled_back, None)
    written = run.written_keys
    record = {
        "state": run.state,
        "steps": steps,
        "visits": visits,
        "next": next_,
        "written": set(written) if written is not None else None,
    }
    return encode_child(record, serializer)


class _AtNode:
    """The owner as it was when its subgraph node started: its step not yet counted.

    The checkpoint's ``next`` runs that node again, which counts the step anew.
    """

    __slots__ = (
        "_blocking",
        "_run",
        "book",
        "recorder",
        "run_id",
        "state",
        "steps",
        "usage",
        "written_keys",
    )

    def __init__(self, run: Owner, *, blocking: bool) -> None:
        self._run = run
        self._blocking = blocking
        self.run_id = run.run_id
        self.steps = run.steps - 1
        self.state = run.state  # the subgraph node has merged nothing yet
        self.usage = run.usage
        self.written_keys = run.written_keys  # the same set: the write clears it
        self.book = run.book
        self.recorder = run.recorder

    @property
    def degraded(self) -> bool:
        """Whether the owner absorbed a failure."""
        return self._run.degraded

    @property
    def history_start(self) -> int:
        """Entries of the owner's history that predate it."""
        return self._run.history_start

    @property
    def driven_without_loop(self) -> bool:
        """Whether the subgraph calling runs without an event loop (stores' blocking calls)."""
        return self._blocking

    def interrupt_records(
        self, serializer: StateSerializer, pending: tuple[Interrupt, ...]
    ) -> tuple[dict[str, dict[str, Any]], dict[str, Any], dict[str, list[Any]]]:
        """The owner's interrupt records."""
        return self._run.interrupt_records(serializer, pending)
