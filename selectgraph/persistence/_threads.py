"""Threads in a store: a conversation's runs, the run that owns it, and inputs waiting for it.

A thread is a conversation; a run is one execution on it. The store keeps, per
thread, its metadata, the runs it had (in order), the run that owns it now (the
one running or paused on it) and the tickets of inputs queued for it. Claiming a
thread for a new run is one atomic step in every store, and a run's checkpoints
are saved only while it still owns its thread (a checkpoint names its thread in
``metadata["thread_id"]``), so of two processes writing one thread exactly one
wins.

How a claim goes, given what the thread is doing (:func:`decide_claim`; each
store runs it inside its own lock or transaction):

- an idle thread (or a new one): the run owns it and starts from the last run's
  latest checkpoint (a new thread: from its input alone);
- a busy one (a run is running or paused on it), by ``strategy``:
  ``"reject"`` refuses (:class:`~selectgraph.ThreadBusy`), ``"enqueue"`` refuses
  until the thread is idle and the caller's ticket is the oldest,
  ``"interrupt"`` takes it over from the owner, which stops at its next
  checkpoint, and starts from the owner's latest checkpoint; ``"rollback"`` takes
  it over and deletes the owner's run, starting from where that run started.
"""

from __future__ import annotations

import builtins
import datetime as dt
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Protocol, runtime_checkable

from typing_extensions import TypeIs

from selectgraph.core._errors import ThreadBusy, ThreadIdError
from selectgraph.persistence._protocol import implements

__all__ = [
    "MULTITASK_STRATEGIES",
    "Claim",
    "ClaimDecision",
    "MultitaskStrategy",
    "StoredEvent",
    "Thread",
    "ThreadRun",
    "ThreadStore",
    "check_thread_id",
    "decide_claim",
    "keeps_threads",
]

MultitaskStrategy = Literal["reject", "enqueue", "interrupt", "rollback"]
"""What a new input does when its thread is busy (a run is running or paused on it).

- ``"reject"``: refuse it with ThreadBusy; nothing changes.
- ``"enqueue"``: wait until the thread is idle, then run, in arrival order.
- ``"interrupt"``: stop the running run at its next checkpoint (keeping what it
  completed) and start from there.
- ``"rollback"``: discard the running run and start from the state before it.
"""
MULTITASK_STRATEGIES: Final = ("reject", "enqueue", "interrupt", "rollback")

_THREAD_ID: Final = re.compile(r"[^\x00-\x1f\x7f|]{1,256}")


def check_thread_id(thread_id: Any) -> str:
    """``thread_id``, if a store can hold it.

    A thread id is 1 to 256 characters, none of them a control character or
    ``|`` (interrupt ids use it), and it can be written as UTF-8 (no lone
    surrogates).

    Raises:
        ThreadIdError: it is not such a string.
    """
    if (
        not isinstance(thread_id, str)
        or _THREAD_ID.fullmatch(thread_id) is None
        or not _utf8(thread_id)
    ):
        raise ThreadIdError(
            f"thread_id {thread_id!r} cannot be stored: use a string of 1 to 256 characters "
            "without control characters or '|', that UTF-8 can encode"
        )
    return thread_id


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


@dataclass(frozen=True, slots=True, kw_only=True)
class Thread:
    """A conversation as its store keeps it."""

    thread_id: str
    """The thread's id (chosen by the caller)."""
    created_at: dt.datetime
    """When its first run claimed it."""
    updated_at: dt.datetime
    """When a run last claimed it, saved a checkpoint on it, or released it."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """The caller's data about the thread (a user, a title...); JSON data."""
    runs: int = 0
    """How many runs it has had (rolled-back ones included)."""
    last_run: str | None = None
    """The run whose state the thread has now: the latest one that was not rolled back."""
    owner: str | None = None
    """The run running or paused on it; ``None`` when it is idle."""
    expires_at: dt.datetime | None = None
    """When :meth:`ThreadStore.prune_threads` may delete it (its TTL), if it has one."""
    ttl: float | None = None
    """Seconds of inactivity after which it expires (renewed by each claim), if any."""

    @property
    def busy(self) -> bool:
        """Whether a run is running or paused on it."""
        return self.owner is not None


@dataclass(frozen=True, slots=True, kw_only=True)
class ThreadRun:
    """One run of a thread, in the order the thread had them."""

    thread_id: str
    """The thread."""
    run_id: str
    """The run."""
    seq: int
    """1 for the thread's first run, 2 for the next..."""
    created_at: dt.datetime
    """When it claimed the thread."""
    strategy: str
    """How it got the thread: ``"new"`` (idle or new thread), or the strategy it took it with."""
    start_from: str | None = None
    """The checkpoint whose state it started from (``None``: its input alone)."""
    superseded: str | None = None
    """The run it interrupted or rolled back, if any."""


@dataclass(frozen=True, slots=True)
class Claim:
    """A successful claim: the thread (now owned by the run) and where the run starts."""

    thread: Thread
    """The thread as the claim left it."""
    run: ThreadRun
    """The run's record in the thread."""
    start_from: str | None
    """The checkpoint whose state the run continues (``None``: its input alone)."""
    superseded: str | None = None
    """The run that was interrupted (stops at its next checkpoint) or rolled back (deleted)."""


@dataclass(frozen=True, slots=True)
class ClaimDecision:
    """What a store does to claim a thread, as :func:`decide_claim` decided it."""

    start_after_run: str | None
    """The run whose latest checkpoint the new run starts from (its head at the claim)."""
    start_from: str | None = None
    """Or, for a rollback, the checkpoint the rolled-back run started from."""
    superseded: str | None = None
    """The run that loses the thread."""
    delete_superseded: bool = False
    """Whether that run's checkpoints and events go (a rollback)."""


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """One event of a run's stored log."""

    run_id: str
    """The run."""
    seq: int
    """Its place in the run's log: 1, 2, 3... with no gaps; read on with ``after=seq``."""
    event: dict[str, Any]
    """The event as JSON data (``observe/_codec.event_to_json``)."""


def decide_claim(
    thread: Thread | None,
    run_id: str,
    strategy: str,
    *,
    front_ticket: str | None = None,
    ticket: str | None = None,
    superseded_start: str | None = None,
) -> ClaimDecision:
    """How ``run_id`` claims ``thread`` (None: a new thread) under ``strategy``.

    ``front_ticket`` is the oldest live ticket of the thread's queue, ``ticket``
    the caller's (with ``"enqueue"``); ``superseded_start`` is where the owner's
    run started (its ThreadRun's ``start_from``), for a rollback.

    Raises:
        ThreadBusy: the thread is busy and the strategy says not to take it (now).
        ValueError: an unknown strategy.
    """
    if strategy not in MULTITASK_STRATEGIES:
        raise ValueError(
            f"multitask_strategy must be one of {', '.join(map(repr, MULTITASK_STRATEGIES))}, "
            f"got {strategy!r}"
        )
    if thread is None:
        return ClaimDecision(start_after_run=None)
    if thread.owner == run_id:
        raise ValueError(f"run {run_id!r} already owns thread {thread.thread_id!r}")
    queued_ahead = front_ticket is not None and front_ticket != ticket
    if thread.owner is None and not queued_ahead:
        return ClaimDecision(start_after_run=thread.last_run)
    if strategy == "interrupt" and thread.owner is not None:
        return ClaimDecision(start_after_run=thread.owner, superseded=thread.owner)
    if strategy == "rollback" and thread.owner is not None:
        return ClaimDecision(
            start_after_run=None,
            start_from=superseded_start,
            superseded=thread.owner,
            delete_superseded=True,
        )
    if thread.owner is None:  # idle, but inputs queued before this one go first
        raise ThreadBusy(thread.thread_id, None, queued=True)
    raise ThreadBusy(thread.thread_id, thread.owner)


@runtime_checkable
class ThreadStore(Protocol):
    """A store that keeps threads, their queues and their runs' event logs.

    The four stores selectgraph ships implement it; a custom
    :class:`~selectgraph.CheckpointStore` without it runs graphs but not threads.
    Every method has an async twin (``aclaim_thread``...).

    Such a store also reads two things from each checkpoint it saves:
    ``checkpoint.events``, the run's events since its previous checkpoint, appended to
    the run's log in the same transaction (a retried save appends nothing); and
    ``metadata["thread_id"]``: a checkpoint naming a thread is saved only while its
    run owns the thread, or the thread is idle and the run is its last one (else
    :class:`~selectgraph.ThreadTakenOver`, and nothing is written). That check comes
    before the version check: a rolled-back run has no head left to conflict with.
    """

    def claim_thread(
        self,
        thread_id: str,
        run_id: str,
        *,
        strategy: MultitaskStrategy = "reject",
        ticket: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        ttl: float | None = None,
    ) -> Claim:
        """Make ``run_id`` the thread's owner (creating the thread if needed); see the module.

        ``metadata`` is merged into the thread's; ``ttl`` (seconds) sets its expiry,
        renewed by every claim.

        Raises:
            ThreadBusy: the thread is busy and ``strategy`` does not take it (now).
            ThreadIdError: ``thread_id`` cannot be stored.
        """
        ...

    def release_thread(self, thread_id: str, run_id: str) -> bool:
        """The run ended (not paused): the thread is idle again. False if it was not the owner."""
        ...

    def get_thread(self, thread_id: str) -> Thread | None:
        """The thread, or None."""
        ...

    def list_threads(
        self, *, metadata: Mapping[str, Any] | None = None, limit: int | None = None
    ) -> builtins.list[Thread]:
        """Threads whose metadata holds every item of ``metadata``, most recently updated first."""
        ...

    def thread_runs(self, thread_id: str) -> builtins.list[ThreadRun]:
        """The thread's runs, oldest first (rolled-back ones are gone)."""
        ...

    def update_thread(
        self,
        thread_id: str,
        *,
        metadata: Mapping[str, Any] | None = None,
        ttl: float | None = None,
    ) -> Thread:
        """Merge ``metadata`` into the thread's; a ``ttl`` (seconds) sets a new expiry.

        Raises:
            ResumeError: no such thread.
        """
        ...

    def delete_thread(self, thread_id: str) -> int:
        """Delete the thread, its runs' checkpoints and events and its queue.

        Returns the number of checkpoints deleted (0 for an unknown thread).
        """
        ...

    def prune_threads(
        self, *, older_than: dt.timedelta | None = None, now: dt.datetime | None = None
    ) -> builtins.list[str]:
        """Delete expired threads, and idle ones not updated for ``older_than``; their ids.

        ``now`` is the time to judge by (default: now).
        """
        ...

    def thread_bytes(self, thread_id: str) -> int:
        """The bytes the thread's records take in the store (checkpoints, writes, events)."""
        ...

    def enqueue(self, thread_id: str, ticket: str, *, lease: float) -> int:
        """Queue an input's ``ticket``, or renew it; returns how many live tickets are ahead.

        A ticket lives ``lease`` seconds from the last call: one whose waiter died
        is dropped when its lease runs out, so it never blocks the queue.
        """
        ...

    def dequeue(self, thread_id: str, ticket: str) -> None:
        """Drop ``ticket`` (its caller gave up, or claimed the thread)."""
        ...

    def append_events(self, run_id: str, events: Sequence[Mapping[str, Any]]) -> int:
        """Append events that came after the run's last checkpoint (its RunFinished...).

        Returns the seq of the last event appended (0 when none were). Appending
        to a run that has no checkpoint in this store does nothing and returns 0.
        """
        ...

    def read_events(
        self, run_id: str, *, after: int = 0, limit: int | None = None
    ) -> builtins.list[StoredEvent]:
        """The run's stored events after ``after`` (a seq), in order.

        Events are stored with the checkpoint written after them, in the same
        transaction, so the log and the checkpoints always agree.
        """
        ...

    async def aclaim_thread(
        self,
        thread_id: str,
        run_id: str,
        *,
        strategy: MultitaskStrategy = "reject",
        ticket: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        ttl: float | None = None,
    ) -> Claim:
        """Async :meth:`claim_thread`."""
        ...

    async def arelease_thread(self, thread_id: str, run_id: str) -> bool:
        """Async :meth:`release_thread`."""
        ...

    async def aget_thread(self, thread_id: str) -> Thread | None:
        """Async :meth:`get_thread`."""
        ...

    async def alist_threads(
        self, *, metadata: Mapping[str, Any] | None = None, limit: int | None = None
    ) -> builtins.list[Thread]:
        """Async :meth:`list_threads`."""
        ...

    async def athread_runs(self, thread_id: str) -> builtins.list[ThreadRun]:
        """Async :meth:`thread_runs`."""
        ...

    async def aupdate_thread(
        self,
        thread_id: str,
        *,
        metadata: Mapping[str, Any] | None = None,
        ttl: float | None = None,
    ) -> Thread:
        """Async :meth:`update_thread`."""
        ...

    async def adelete_thread(self, thread_id: str) -> int:
        """Async :meth:`delete_thread`."""
        ...

    async def aprune_threads(
        self, *, older_than: dt.timedelta | None = None, now: dt.datetime | None = None
    ) -> builtins.list[str]:
        """Async :meth:`prune_threads`."""
        ...

    async def athread_bytes(self, thread_id: str) -> int:
        """Async :meth:`thread_bytes`."""
        ...

    async def aenqueue(self, thread_id: str, ticket: str, *, lease: float) -> int:
        """Async :meth:`enqueue`."""
        ...

    async def adequeue(self, thread_id: str, ticket: str) -> None:
        """Async :meth:`dequeue`."""
        ...

    async def aappend_events(self, run_id: str, events: Sequence[Mapping[str, Any]]) -> int:
        """Async :meth:`append_events`."""
        ...

    async def aread_events(
        self, run_id: str, *, after: int = 0, limit: int | None = None
    ) -> builtins.list[StoredEvent]:
        """Async :meth:`read_events`."""
        ...


def keeps_threads(store: object) -> TypeIs[ThreadStore]:
    """Whether ``store`` has the ThreadStore methods (checked once per class)."""
    return implements(store, ThreadStore)
