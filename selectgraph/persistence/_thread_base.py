"""What the blocking stores share to keep threads: argument checks and async twins.

A store implements the ``_``-prefixed primitives (each one atomic in its own
storage: a lock, a file lock, a transaction); the public methods and their
async forms live here, once. See ``_threads.py`` for what a thread is.
"""

from __future__ import annotations

import builtins
import datetime as dt
import uuid
from abc import abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from selectgraph.persistence._base import check_list_args
from selectgraph.persistence._codec import encode_events
from selectgraph.persistence._thread_records import encode_metadata
from selectgraph.persistence._threads import (
    MULTITASK_STRATEGIES,
    Claim,
    MultitaskStrategy,
    StoredEvent,
    Thread,
    ThreadRun,
    check_thread_id,
)

__all__ = ["ThreadKeeping", "check_metadata", "check_ttl", "new_ticket"]

T = TypeVar("T")


def new_ticket() -> str:
    """A fresh queue ticket."""
    return uuid.uuid4().hex


def check_metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """``metadata`` as a dict of JSON data.

    Raises:
        TypeError: it is not a mapping with string keys.
        StateSerializationError: a value is not JSON data (every store, the
            in-memory one too, refuses what a durable store could not keep).
    """
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping) or not all(isinstance(k, str) for k in metadata):
        raise TypeError(f"thread metadata must be a mapping with string keys, got {metadata!r}")
    checked = dict(metadata)
    encode_metadata(checked)
    return checked


def check_ttl(ttl: float | None) -> float | None:
    """A positive number of seconds, or None."""
    if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, int | float) or ttl <= 0):
        raise ValueError(f"ttl must be a positive number of seconds or None, got {ttl!r}")
    return None if ttl is None else float(ttl)


class ThreadKeeping:
    """Threads for a :class:`~selectgraph.persistence._base.BlockingStore`."""

    _run: Callable[..., Any]  # BlockingStore's: run blocking work off the event loop

    # -- primitives -------------------------------------------------------------

    @abstractmethod
    def _claim_thread(
        self,
        thread_id: str,
        run_id: str,
        strategy: str,
        ticket: str | None,
        metadata: dict[str, Any],
        ttl: float | None,
        now: dt.datetime,
    ) -> Claim: ...

    @abstractmethod
    def _release_thread(self, thread_id: str, run_id: str, now: dt.datetime) -> bool: ...

    @abstractmethod
    def _get_thread(self, thread_id: str) -> Thread | None: ...

    @abstractmethod
    def _list_threads(
        self, metadata: dict[str, Any], limit: int | None
    ) -> builtins.list[Thread]: ...

    @abstractmethod
    def _thread_runs(self, thread_id: str) -> builtins.list[ThreadRun]: ...

    @abstractmethod
    def _update_thread(
        self,
        thread_id: str,
        metadata: dict[str, Any] | None,
        ttl: float | None,
        now: dt.datetime,
    ) -> Thread: ...

    @abstractmethod
    def _delete_thread(self, thread_id: str) -> int: ...

    @abstractmethod
    def _expired_threads(
        self, now: dt.datetime, idle_before: dt.datetime | None
    ) -> builtins.list[str]: ...

    @abstractmethod
    def _thread_bytes(self, thread_id: str) -> int: ...

    @abstractmethod
    def _enqueue(
        self, thread_id: str, ticket: str, until: dt.datetime, now: dt.datetime
    ) -> int: ...

    @abstractmethod
    def _dequeue(self, thread_id: str, ticket: str) -> None: ...

    @abstractmethod
    def _append_events(self, run_id: str, events: builtins.list[bytes]) -> int: ...

    @abstractmethod
    def _read_events(
        self, run_id: str, after: int, limit: int | None
    ) -> builtins.list[StoredEvent]: ...

    # -- sync API ---------------------------------------------------------------

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
        """See :meth:`ThreadStore.claim_thread`."""
        if strategy not in MULTITASK_STRATEGIES:
            raise ValueError(
                "multitask_strategy must be one of "
                f"{', '.join(map(repr, MULTITASK_STRATEGIES))}, got {strategy!r}"
            )
        return self._claim_thread(
            check_thread_id(thread_id),
            run_id,
            strategy,
            ticket,
            check_metadata(metadata),
            check_ttl(ttl),
            _now(),
        )

    def release_thread(self, thread_id: str, run_id: str) -> bool:
        """See :meth:`ThreadStore.release_thread`."""
        return self._release_thread(check_thread_id(thread_id), run_id, _now())

    def get_thread(self, thread_id: str) -> Thread | None:
        """See :meth:`ThreadStore.get_thread`."""
        return self._get_thread(check_thread_id(thread_id))

    def list_threads(
        self, *, metadata: Mapping[str, Any] | None = None, limit: int | None = None
    ) -> builtins.list[Thread]:
        """See :meth:`ThreadStore.list_threads`."""
        check_list_args(limit)
        return self._list_threads(check_metadata(metadata), limit)

    def thread_runs(self, thread_id: str) -> builtins.list[ThreadRun]:
        """See :meth:`ThreadStore.thread_runs`."""
        return self._thread_runs(check_thread_id(thread_id))

    def update_thread(
        self,
        thread_id: str,
        *,
        metadata: Mapping[str, Any] | None = None,
        ttl: float | None = None,
    ) -> Thread:
        """See :meth:`ThreadStore.update_thread`."""
        return self._update_thread(
            check_thread_id(thread_id),
            None if metadata is None else check_metadata(metadata),
            check_ttl(ttl),
            _now(),
        )

    def delete_thread(self, thread_id: str) -> int:
        """See :meth:`ThreadStore.delete_thread`."""
        return self._delete_thread(check_thread_id(thread_id))

    def prune_threads(
        self, *, older_than: dt.timedelta | None = None, now: dt.datetime | None = None
    ) -> builtins.list[str]:
        """See :meth:`ThreadStore.prune_threads`."""
        if older_than is not None and (
            not isinstance(older_than, dt.timedelta) or older_than < dt.timedelta(0)
        ):
            raise ValueError(f"older_than must be a timedelta >= 0 or None, got {older_than!r}")
        moment = now or _now()
        idle_before = None if older_than is None else moment - older_than
        doomed = self._expired_threads(moment, idle_before)
        for thread_id in doomed:
            self._delete_thread(thread_id)
        return doomed

    def thread_bytes(self, thread_id: str) -> int:
        """See :meth:`ThreadStore.thread_bytes`."""
        return self._thread_bytes(check_thread_id(thread_id))

    def enqueue(self, thread_id: str, ticket: str, *, lease: float) -> int:
        """See :meth:`ThreadStore.enqueue`."""
        if isinstance(lease, bool) or not isinstance(lease, int | float) or lease <= 0:
            raise ValueError(f"lease must be a positive number of seconds, got {lease!r}")
        now = _now()
        return self._enqueue(
            check_thread_id(thread_id), ticket, now + dt.timedelta(seconds=lease), now
        )

    def dequeue(self, thread_id: str, ticket: str) -> None:
        """See :meth:`ThreadStore.dequeue`."""
        self._dequeue(check_thread_id(thread_id), ticket)

    def append_events(self, run_id: str, events: Sequence[Mapping[str, Any]]) -> int:
        """See :meth:`ThreadStore.append_events`."""
        return self._append_events(run_id, encode_events(events, run_id))

    def read_events(
        self, run_id: str, *, after: int = 0, limit: int | None = None
    ) -> builtins.list[StoredEvent]:
        """See :meth:`ThreadStore.read_events`."""
        if type(after) is not int or after < 0:
            raise ValueError(f"after must be an int >= 0 (an event's seq), got {after!r}")
        check_list_args(limit)
        return self._read_events(run_id, after, limit)

    # -- async API --------------------------------------------------------------

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
        claim: Claim = await self._run(
            self.claim_thread,
            thread_id,
            run_id,
            strategy=strategy,
            ticket=ticket,
            metadata=metadata,
            ttl=ttl,
        )
        return claim

    async def arelease_thread(self, thread_id: str, run_id: str) -> bool:
        """Async :meth:`release_thread`."""
        done: bool = await self._run(self.release_thread, thread_id, run_id)
        return done

    async def aget_thread(self, thread_id: str) -> Thread | None:
        """Async :meth:`get_thread`."""
        found: Thread | None = await self._run(self.get_thread, thread_id)
        return found

    async def alist_threads(
        self, *, metadata: Mapping[str, Any] | None = None, limit: int | None = None
    ) -> builtins.list[Thread]:
        """Async :meth:`list_threads`."""
        found: builtins.list[Thread] = await self._run(
            self.list_threads, metadata=metadata, limit=limit
        )
        return found

    async def athread_runs(self, thread_id: str) -> builtins.list[ThreadRun]:
        """Async :meth:`thread_runs`."""
        found: builtins.list[ThreadRun] = await self._run(self.thread_runs, thread_id)
        return found

    async def aupdate_thread(
        self,
        thread_id: str,
        *,
        metadata: Mapping[str, Any] | None = None,
        ttl: float | None = None,
    ) -> Thread:
        """Async :meth:`update_thread`."""
        found: Thread = await self._run(self.update_thread, thread_id, metadata=metadata, ttl=ttl)
        return found

    async def adelete_thread(self, thread_id: str) -> int:
        """Async :meth:`delete_thread`."""
        deleted: int = await self._run(self.delete_thread, thread_id)
        return deleted

    async def aprune_threads(
        self, *, older_than: dt.timedelta | None = None, now: dt.datetime | None = None
    ) -> builtins.list[str]:
        """Async :meth:`prune_threads`."""
        pruned: builtins.list[str] = await self._run(
            self.prune_threads, older_than=older_than, now=now
        )
        return pruned

    async def athread_bytes(self, thread_id: str) -> int:
        """Async :meth:`thread_bytes`."""
        size: int = await self._run(self.thread_bytes, thread_id)
        return size

    async def aenqueue(self, thread_id: str, ticket: str, *, lease: float) -> int:
        """Async :meth:`enqueue`."""
        ahead: int = await self._run(self.enqueue, thread_id, ticket, lease=lease)
        return ahead

    async def adequeue(self, thread_id: str, ticket: str) -> None:
        """Async :meth:`dequeue`."""
        await self._run(self.dequeue, thread_id, ticket)

    async def aappend_events(self, run_id: str, events: Sequence[Mapping[str, Any]]) -> int:
        """Async :meth:`append_events`."""
        last: int = await self._run(self.append_events, run_id, events)
        return last

    async def aread_events(
        self, run_id: str, *, after: int = 0, limit: int | None = None
    ) -> builtins.list[StoredEvent]:
        """Async :meth:`read_events`."""
        found: builtins.list[StoredEvent] = await self._run(
            self.read_events, run_id, after=after, limit=limit
        )
        return found


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)
