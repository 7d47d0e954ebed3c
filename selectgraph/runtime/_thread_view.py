"""A thread as a caller sees it: its record, what it is doing, and its latest state.

Also copying a thread: a new thread whose first run holds the source's latest
state (one checkpoint), so a conversation can be forked and both go on apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from selectgraph.core._errors import ResumeError
from selectgraph.core._messages import Message
from selectgraph.core._serialization import StateSerializer
from selectgraph.persistence._chain import CheckpointChain
from selectgraph.persistence._protocol import CheckpointStore
from selectgraph.persistence._threads import Thread
from selectgraph.runtime._inspect import StateSnapshot, get_state
from selectgraph.runtime._resume import run_status
from selectgraph.runtime._run import new_run_id
from selectgraph.runtime._threads import thread_store

if TYPE_CHECKING:
    from selectgraph.runtime._program import GraphProgram

__all__ = ["ThreadSnapshot", "ThreadStatus", "copy_thread", "get_thread"]

ThreadStatus = Literal["idle", "busy", "interrupted", "paused"]
"""What a thread is doing.

- ``"idle"``: no run is on it; a new input starts a run.
- ``"busy"``: a run is running on it.
- ``"interrupted"``: its run waits for answers to its questions (``interrupts``).
- ``"paused"``: its run stopped at a pause gate or a PauseToken (continue it with
  ``run(None, thread_id=...)``).
"""


@dataclass(frozen=True, slots=True)
class ThreadSnapshot:
    """A thread: its record in the store, its status, and its latest state."""

    thread: Thread
    """The store's record: id, metadata, times, runs, owner, expiry."""
    status: ThreadStatus
    """What it is doing."""
    state: StateSnapshot | None
    """The latest checkpoint of its current (or last) run; None for a thread with none."""

    @property
    def thread_id(self) -> str:
        """The thread's id."""
        return self.thread.thread_id

    @property
    def values(self) -> dict[str, Any]:
        """The state's data (LangGraph's ``values``); empty when there is no state."""
        return {} if self.state is None else self.state.values

    @property
    def messages(self) -> list[Message]:
        """The conversation so far (``state.messages``)."""
        return [] if self.state is None else list(self.state.state.messages)

    @property
    def interrupts(self) -> tuple[Any, ...]:
        """The questions its run waits on."""
        return () if self.state is None else self.state.interrupts


async def get_thread(
    graph: GraphProgram,
    store: CheckpointStore,
    thread_id: str,
    serializer: StateSerializer,
    blocking: bool,
) -> ThreadSnapshot:
    """The thread ``thread_id`` as it is now.

    Raises:
        ResumeError: the store has no such thread.
        TypeError: the store keeps no threads.
    """
    threads = thread_store(store)
    found = threads.get_thread(thread_id) if blocking else await threads.aget_thread(thread_id)
    if found is None:
        raise ResumeError(f"thread {thread_id!r} does not exist in this store")
    run_id = found.owner or found.last_run
    snapshot = None
    if run_id is not None:
        try:
            snapshot = await get_state(graph, store, run_id, serializer, blocking)
        except ResumeError:
            snapshot = None  # its first checkpoint is not written yet
    return ThreadSnapshot(found, _status(found, snapshot), snapshot)


def _status(thread: Thread, snapshot: StateSnapshot | None) -> ThreadStatus:
    if thread.owner is None:
        return "idle"
    if snapshot is None or snapshot.run_id != thread.owner:
        return "busy"
    status = run_status(snapshot.metadata)
    if status == "interrupted" or snapshot.interrupts:
        return "interrupted"
    return "paused" if status == "paused" else "busy"


def copy_thread(store: CheckpointStore, source: str, target: str | None = None) -> str:
    """Copy thread ``source`` to a new thread (``target``, or a new id); returns its id.

    The copy has the source's metadata and one run, whose single checkpoint holds
    the source's latest state; from there the two go on apart.

    Raises:
        ResumeError: the source does not exist, or the target does.
        TypeError: the store keeps no threads.
    """
    threads = thread_store(store)
    found = threads.get_thread(source)
    if found is None:
        raise ResumeError(f"thread {source!r} does not exist in this store")
    target = target or f"{source}-copy-{new_run_id()[:8]}"
    if threads.get_thread(target) is not None:
        raise ResumeError(f"thread {target!r} already exists; copy into a new thread id")
    run_id = new_run_id()
    claim = threads.claim_thread(target, run_id, metadata=found.metadata)
    try:
        last = found.owner or found.last_run
        head = None if last is None else store.head(last)
        state = {} if head is None else store.load_state(head.checkpoint_id)
        checkpoint = CheckpointChain(run_id).next(
            step=0,
            state=state,
            next=[],
            metadata={
                "trigger": "copy",
                "thread_id": target,
                "thread_run": claim.run.seq,
                "copied_from": None if head is None else head.checkpoint_id,
            },
        )
        store.save(checkpoint, expected_version=0)
    finally:
        threads.release_thread(target, run_id)
    return target
