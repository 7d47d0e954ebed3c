"""Threads for a store whose work runs as coroutines on a portal (``_base.Portal``).

The PostgreSQL store's twin of ``_thread_base.ThreadKeeping``: the same public
methods, sync and async, with the same argument checks, over ``_``-prefixed
async primitives that run on the store's portal loop (so sync callers, and
async ones on any loop, reach the one connection pool). See ``_threads.py``
for what a thread is.
"""

from __future__ import annotations

import builtins
import datetime as dt
from abc import ABC, abstractmethod
from collections.abc import Coroutine, Mapping, Sequence
from typing import Any

from selectgraph.persistence._base import Portal, check_list_args
from selectgraph.persistence._codec import encode_events
from selectgraph.persistence._thread_base import check_metadata, check_ttl
from selectgraph.persistence._threads import (
    MULTITASK_STRATEGIES,
    Claim,
    MultitaskStrategy,
    StoredEvent,
    Thread,
    ThreadRun,
    check_thread_id,
)

__all__ = ["PortalThreadKeeping"]


class PortalThreadKeeping(ABC):
    """Threads for a store whose primitives are coroutines run on ``self._portal``."""

    _portal: Portal

    # -- primitives (coroutines, run on the portal's loop) ---------------------------

    @abstractmethod
    async def _claim_thread(
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
    async def _release_thread(self, thread_id: str, run_id: str, now: dt.datetime) -> bool: ...

    @abstractmethod
    async def _get_thread(self, thread_id: str) -> Thread | None: ...

    @abstractmethod
    async def _list_threads(
        self, metadata: dict[str, Any], limit: int | None
    ) -> builtins.list[Thread]: ...

    @abstractmethod
    async def _thread_runs(self, thread_id: str) -> builtins.list[ThreadRun]: ...

    @abstractmethod
    async def _update_thread(
        self,
        thread_id: str,
        metadata: dict[str, Any] | None,
        ttl: float | None,
        now: dt.datetime,
    ) -> Thread: ...

    @abstractmethod
    async def _delete_thread(self, thread_id: str) -> int: ...

    @abstractmethod
    async def _expired_threads(
        self, now: dt.datetime, idle_before: dt.datetime | None
    ) -> builtins.list[str]: ...

    @abstractmethod
    async def _thread_bytes(self, thread_id: str) -> int: ...

    @abstractmethod
    async def _enqueue(
        self, thread_id: str, ticket: str, until: dt.datetime, now: dt.datetime
    ) -> int: ...

    @abstractmethod
    async def _dequeue(self, thread_id: str, ticket: str) -> None: ...

    @abstractmethod
    async def _append_events(self, run_id: str, events: builtins.list[bytes]) -> int: ...

    @abstractmethod
    async def _read_events(
        self, run_id: str, after: int, limit: int | None
    ) -> builtins.list[StoredEvent]: ...

    # -- checked work, shared by the sync and async forms ----------------------------

    def _claim(
        self,
        thread_id: str,
        run_id: str,
        strategy: str,
        ticket: str | None,
        metadata: Mapping[str, Any] | None,
        ttl: float | None,
    ) -> Coroutine[Any, Any, Claim]:
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

    def _update(
        self, thread_id: str, metadata: Mapping[str, Any] | None, ttl: float | None
    ) -> Coroutine[Any, Any, Thread]:
        return self._update_thread(
            check_thread_id(thread_id),
            None if metadata is None else check_metadata(metadata),
            check_ttl(ttl),
            _now(),
        )

    def _prune(
        self, older_than: dt.timedelta | None, now: dt.datetime | None
    ) -> Coroutine[Any, Any, builtins.list[str]]:
        if older_than is not None and (
            not isinstance(older_than, dt.timedelta) or older_than < dt.timedelta(0)
        ):
            raise ValueError(f"older_than must be a timedelta >= 0 or None, got {older_than!r}")
        moment = now or _now()
        idle_before = None if older_than is None else moment - older_than

        async def prune() -> builtins.list[str]:
            doomed = await self._expired_threads(moment, idle_before)
            for thread_id in doomed:
                await self._delete_thread(thread_id)
            return doomed

        return prune()

    def _queue(self, thread_id: str, ticket: str, lease: float) -> Coroutine[Any, Any, int]:
        if isinstance(lease, bool) or not isinstance(lease, int | float) or lease <= 0:
            raise ValueError(f"lease must be a positive number of seconds, got {lease!r}")
        now = _now()
        return self._enqueue(
            check_thread_id(thread_id), ticket, now + dt.timedelta(seconds=lease), now
        )

    def _events(
        self, run_id: str, after: int, limit: int | None
    ) -> Coroutine[Any, Any, builtins.list[StoredEvent]]:
        if type(after) is not int or after < 0:
            raise ValueError(f"after must be an int >= 0 (an event's seq), got {after!r}")
        check_list_args(limit)
        return self._read_events(run_id, after, limit)

    def _listed(
        self, metadata: Mapping[str, Any] | None, limit: int | None
    ) -> Coroutine[Any, Any, builtins.list[Thread]]:
        check_list_args(limit)
        return self._list_threads(check_metadata(metadata), limit)

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
        return self._portal.call(self._claim(thread_id, run_id, strategy, ticket, metadata, ttl))

    def release_thread(self, thread_id: str, run_id: str) -> bool:
        """See :meth:`ThreadStore.release_thread`."""
        return self._portal.call(self._release_thread(check_thread_id(thread_id), run_id, _now()))

    def get_thread(self, thread_id: str) -> Thread | None:
        """See :meth:`ThreadStore.get_thread`."""
        return self._portal.call(self._get_thread(check_thread_id(thread_id)))

    def list_threads(
        self, *, metadata: Mapping[str, Any] | None = None, limit: int | None = None
    ) -> builtins.list[Thread]:
        """See :meth:`ThreadStore.list_threads`."""
        return self._portal.call(self._listed(metadata, limit))

    def thread_runs(self, thread_id: str) -> builtins.list[ThreadRun]:
        """See :meth:`ThreadStore.thread_runs`."""
        return self._portal.call(self._thread_runs(check_thread_id(thread_id)))

    def update_thread(
        self,
        thread_id: str,
        *,
        metadata: Mapping[str, Any] | None = None,
        ttl: float | None = None,
    ) -> Thread:
        """See :meth:`ThreadStore.update_thread`."""
        return self._portal.call(self._update(thread_id, metadata, ttl))

    def delete_thread(self, thread_id: str) -> int:
        """See :meth:`ThreadStore.delete_thread`."""
        return self._portal.call(self._delete_thread(check_thread_id(thread_id)))

    def prune_threads(
        self, *, older_than: dt.timedelta | None = None, now: dt.datetime | None = None
    ) -> builtins.list[str]:
        """See :meth:`ThreadStore.prune_threads`."""
        return self._portal.call(self._prune(older_than, now))

    def thread_bytes(self, thread_id: str) -> int:
        """See :meth:`ThreadStore.thread_bytes`."""
        return self._portal.call(self._thread_bytes(check_thread_id(thread_id)))

    def enqueue(self, thread_id: str, ticket: str, *, lease: float) -> int:
        """See :meth:`ThreadStore.enqueue`."""
        return self._portal.call(self._queue(thread_id, ticket, lease))

    def dequeue(self, thread_id: str, ticket: str) -> None:
        """See :meth:`ThreadStore.dequeue`."""
        self._portal.call(self._dequeue(check_thread_id(thread_id), ticket))

    def append_events(self, run_id: str, events: Sequence[Mapping[str, Any]]) -> int:
        """See :meth:`ThreadStore.append_events`."""
        return self._portal.call(self._append_events(run_id, encode_events(events, run_id)))

    def read_events(
        self, run_id: str, *, after: int = 0, limit: int | None = None
    ) -> builtins.list[StoredEvent]:
        """See :meth:`ThreadStore.read_events`."""
        return self._portal.call(self._events(run_id, after, limit))

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
        return await self._portal.acall(
            self._claim(thread_id, run_id, strategy, ticket, metadata, ttl)
        )

    async def arelease_thread(self, thread_id: str, run_id: str) -> bool:
        """Async :meth:`release_thread`."""
        return await self._portal.acall(
            self._release_thread(check_thread_id(thread_id), run_id, _now())
        )

    async def aget_thread(self, thread_id: str) -> Thread | None:
        """Async :meth:`get_thread`."""
        return await self._portal.acall(self._get_thread(check_thread_id(thread_id)))

    async def alist_threads(
        self, *, metadata: Mapping[str, Any] | None = None, limit: int | None = None
    ) -> builtins.list[Thread]:
        """Async :meth:`list_threads`."""
        return await self._portal.acall(self._listed(metadata, limit))

    async def athread_runs(self, thread_id: str) -> builtins.list[ThreadRun]:
        """Async :meth:`thread_runs`."""
        return await self._portal.acall(self._thread_runs(check_thread_id(thread_id)))

    async def aupdate_thread(
        self,
        thread_id: str,
        *,
        metadata: Mapping[str, Any] | None = None,
        ttl: float | None = None,
    ) -> Thread:
        """Async :meth:`update_thread`."""
        return await self._portal.acall(self._update(thread_id, metadata, ttl))

    async def adelete_thread(self, thread_id: str) -> int:
        """Async :meth:`delete_thread`."""
        return await self._portal.acall(self._delete_thread(check_thread_id(thread_id)))

    async def aprune_threads(
        self, *, older_than: dt.timedelta | None = None, now: dt.datetime | None = None
    ) -> builtins.list[str]:
        """Async :meth:`prune_threads`."""
        return await self._portal.acall(self._prune(older_than, now))

    async def athread_bytes(self, thread_id: str) -> int:
        """Async :meth:`thread_bytes`."""
        return await self._portal.acall(self._thread_bytes(check_thread_id(thread_id)))

    async def aenqueue(self, thread_id: str, ticket: str, *, lease: float) -> int:
        """Async :meth:`enqueue`."""
        return await self._portal.acall(self._queue(thread_id, ticket, lease))

    async def adequeue(self, thread_id: str, ticket: str) -> None:
        """Async :meth:`dequeue`."""
        await self._portal.acall(self._dequeue(check_thread_id(thread_id), ticket))

    async def aappend_events(self, run_id: str, events: Sequence[Mapping[str, Any]]) -> int:
        """Async :meth:`append_events`."""
        return await self._portal.acall(self._append_events(run_id, encode_events(events, run_id)))

    async def aread_events(
        self, run_id: str, *, after: int = 0, limit: int | None = None
    ) -> builtins.list[StoredEvent]:
        """Async :meth:`read_events`."""
        return await self._portal.acall(self._events(run_id, after, limit))


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)
