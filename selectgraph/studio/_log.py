"""EventLog: a run's events as numbered JSON records, followed by any number of readers.

The run appends and never waits: a record goes in a list under a lock, and readers
are woken on their own event loop. Each reader keeps only a cursor (the last id it
sent), so a slow or absent reader costs nothing, and a reader that reconnects with
``Last-Event-ID`` gets exactly what it missed. Memory is bounded per run, not per
reader: past ``max_events`` the oldest records are dropped, and a reader asking for
them is told how many it missed.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import AsyncGenerator
from typing import Any

__all__ = ["EventLog"]


class EventLog:
    """Numbered JSON records of one run; ids start at 1 and never repeat."""

    def __init__(self, *, max_events: int = 50_000) -> None:
        if max_events < 1:
            raise ValueError(f"max_events must be >= 1, got {max_events}")
        self._records: deque[dict[str, Any]] = deque(maxlen=max_events)
        self._last_id = 0
        self._closed = False
        self._lock = threading.Lock()
        self._waiters: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()

    @property
    def last_id(self) -> int:
        """The id of the newest record (0 before the first)."""
        return self._last_id

    @property
    def closed(self) -> bool:
        """Whether the run has ended for good (readers stop once they have caught up)."""
        return self._closed

    def append(self, record: dict[str, Any]) -> int:
        """Add ``record`` (from any thread) and return its id."""
        with self._lock:
            self._last_id += 1
            record = {**record, "id": self._last_id}
            self._records.append(record)
            waiters = list(self._waiters)
        self._wake(waiters)
        return self._last_id

    def close(self) -> None:
        """No more records will come: readers end after the last one."""
        with self._lock:
            self._closed = True
            waiters = list(self._waiters)
        self._wake(waiters)

    def reopen(self) -> None:
        """More records will come after all (a finished run was forked or continued)."""
        with self._lock:
            self._closed = False

    def since(self, after: int) -> tuple[int, list[dict[str, Any]]]:
        """``(missed, records)``: the records with ids above ``after``.

        ``missed`` counts those of them already dropped from the log.
        """
        with self._lock:
            records = list(self._records)
        first = records[0]["id"] if records else self._last_id + 1
        missed = max(0, first - after - 1)
        return missed, [r for r in records if r["id"] > after]

    async def follow(self, after: int = 0) -> AsyncGenerator[dict[str, Any], None]:
        """Records with ids above ``after`` as they come, until the log closes.

        A gap (records dropped before this reader got them) is reported as one
        ``{"event": "Gap", "missed": n}`` record first.
        """
        loop = asyncio.get_running_loop()
        ready = asyncio.Event()
        waiter = (loop, ready)
        with self._lock:
            self._waiters.add(waiter)
        try:
            while True:
                ready.clear()
                missed, records = self.since(after)
                if missed:
                    yield {"event": "Gap", "missed": missed, "id": after + missed}
                for record in records:
                    after = record["id"]
                    yield record
                if self._closed and after >= self._last_id:
                    return
                if after >= self._last_id:
                    await ready.wait()
        finally:
            with self._lock:
                self._waiters.discard(waiter)

    @staticmethod
    def _wake(waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]]) -> None:
        for loop, event in waiters:
            try:
                loop.call_soon_threadsafe(event.set)
            except RuntimeError:  # that reader's loop has closed
                continue
