"""Node cache stores: where a cached node's output is kept, in memory or in a SQLite file.

A store maps a string key to JSON data, with an optional time to live. The
graph encodes a node's output with the library serializer before handing it
over, so a store never sees anything but JSON-safe values, and keeps them as
JSON text (never pickle): what comes back out is always a fresh copy.

Stores are synchronous: a lookup is a dict access or one indexed SQLite query,
far cheaper than the nodes worth caching.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Protocol, Self, runtime_checkable

if TYPE_CHECKING:
    from selectgraph.core._state import GraphState

__all__ = ["CachePolicy", "InMemoryNodeCache", "NodeCache", "SQLiteNodeCache"]

Clock = Callable[[], float]
"""Seconds since the epoch; ``time.time`` unless a test injects its own."""

_PURGE_EVERY: Final = 256
"""SQLite writes between two sweeps of expired rows (reads also drop the rows they find expired)."""


@runtime_checkable
class NodeCache(Protocol):
    """Where cached node outputs live: ``get``/``set`` JSON data under string keys.

    ``get`` returns ``None`` for a key that is missing or expired, so ``None``
    itself cannot be stored. Implementations must be safe to call from several
    threads (branches of a fan-out may run blocking nodes on worker threads).
    """

    def get(self, key: str) -> Any:
        """The value stored under ``key``, or ``None`` if there is none or it expired."""
        ...

    def set(self, key: str, value: Any, ttl: float | None = None) -> None:
        """Store ``value`` (JSON data) under ``key`` for ``ttl`` seconds (``None``: no expiry)."""
        ...

    def clear(self) -> None:
        """Remove every entry."""
        ...

    def close(self) -> None:
        """Release what the store holds open (a no-op for the memory store)."""
        ...


@dataclass(frozen=True, slots=True)
class CachePolicy:
    """How a node's output is cached: ``add_node(..., cache=CachePolicy(ttl=60))``.

    A node with a policy is not run again for an input it has already been run
    on: its recorded output is merged instead, and the trace shows a
    :class:`~selectgraph.observe.NodeCacheHit`. The entries live in the graph's
    ``node_cache`` (``AgentGraph(node_cache=...)``, in memory by default).

    Args:
        ttl: Seconds an entry stays valid (``None``: until the store is cleared).
        key: ``key(state) -> str`` naming the node's input; the state is read-only
            there. By default the key is a SHA-256 digest of the node's name and
            of ``state.data`` (only the keys in the node's ``reads=``, when it
            declares them; an agent node's messages too).

    Raises:
        ValueError: ``ttl`` is not a positive number.
        TypeError: ``key`` is not callable.
    """

    ttl: float | None = None
    """Seconds an entry stays valid, or ``None``."""
    key: Callable[[GraphState], str] | None = None
    """Names a node's input; ``None`` for the default digest."""

    def __post_init__(self) -> None:
        ttl = self.ttl
        if ttl is not None and (
            isinstance(ttl, bool) or not isinstance(ttl, int | float) or not 0 < ttl < math.inf
        ):
            raise ValueError(
                f"CachePolicy: ttl must be a number of seconds > 0, or None, got {ttl!r}"
            )
        if self.key is not None and not callable(self.key):
            raise TypeError(
                "CachePolicy: key must be a function (state) -> str, or None, got "
                f"{type(self.key).__name__} {self.key!r}"
            )


def _dumps(key: str, value: Any) -> str:
    """``value`` as compact JSON text; refuses ``None`` and anything JSON cannot hold."""
    if not isinstance(key, str):
        raise TypeError(f"a node cache key must be a str, got {type(key).__name__} {key!r}")
    if value is None:
        raise ValueError(f"cannot cache None under {key!r}: get() returns None for a miss")
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"cannot cache the value under {key!r}: it is not JSON data ({exc}); encode it "
            "with a StateSerializer first"
        ) from exc


def _expiry(ttl: float | None, clock: Clock) -> float | None:
    if ttl is None:
        return None
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not 0 < ttl < math.inf:
        raise ValueError(f"ttl must be a number of seconds > 0, or None, got {ttl!r}")
    return clock() + ttl


class _Closing:
    """``with cache:`` closes the cache on the way out."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class InMemoryNodeCache(_Closing):
    """Cached node outputs in this process's memory; lost when the object is.

    Every :class:`~selectgraph.AgentGraph` gets one of its own unless given a
    ``node_cache``, so repeated runs of one graph object reuse each other's work.

    Args:
        max_entries: Keep at most this many entries, dropping the least recently
            used first (``None``: no limit).
        clock: Seconds since the epoch, for expiry; ``time.time`` by default.
    """

    def __init__(self, *, max_entries: int | None = None, clock: Clock = time.time) -> None:
        if max_entries is not None and (
            isinstance(max_entries, bool) or not isinstance(max_entries, int) or max_entries < 1
        ):
            raise ValueError(f"max_entries must be an int >= 1, or None, got {max_entries!r}")
        self.max_entries = max_entries
        """The size limit, or ``None``."""
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, tuple[str, float | None]] = OrderedDict()

    def get(self, key: str) -> Any:
        """The value stored under ``key``, or ``None`` if there is none or it expired."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            text, expires_at = entry
            if expires_at is not None and self._clock() >= expires_at:
                del self._entries[key]
                return None
            self._entries.move_to_end(key)
        return json.loads(text)

    def set(self, key: str, value: Any, ttl: float | None = None) -> None:
        """Store ``value`` (JSON data) under ``key`` for ``ttl`` seconds (``None``: no expiry).

        Raises:
            TypeError: ``key`` is not a str, or ``value`` is not JSON data.
            ValueError: ``value`` is None, or ``ttl`` is not a positive number.
        """
        text = _dumps(key, value)
        expires_at = _expiry(ttl, self._clock)
        with self._lock:
            self._entries[key] = (text, expires_at)
            self._entries.move_to_end(key)
            if self.max_entries is not None:
                while len(self._entries) > self.max_entries:
                    self._entries.popitem(last=False)

    def clear(self) -> None:
        """Remove every entry."""
        with self._lock:
            self._entries.clear()

    def close(self) -> None:
        """Nothing to release; the entries stay until the object goes."""

    def __len__(self) -> int:
        """Entries held, expired ones not yet dropped included."""
        return len(self._entries)

    def __repr__(self) -> str:
        return f"InMemoryNodeCache({len(self._entries)} entries)"


class SQLiteNodeCache(_Closing):
    """Cached node outputs in a SQLite file (WAL), shared by threads and processes.

    One table holds ``key``, ``value`` (JSON text) and ``expires_at`` (seconds
    since the epoch, or NULL). Losing the cache only costs recomputation, so
    commits are not fsynced (``synchronous=NORMAL``).

    Args:
        path: The database file; created if missing.
        timeout: Seconds to wait for another writer's lock.
        clock: Seconds since the epoch, for expiry; ``time.time`` by default
            (processes sharing a file must share a clock too).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        timeout: float = 30.0,
        clock: Clock = time.time,
    ) -> None:
        self.path = Path(path)
        """The database file."""
        self._clock = clock
        self._lock = threading.Lock()
        self._writes = 0
        self._conn = sqlite3.connect(
            self.path, timeout=timeout, isolation_level=None, check_same_thread=False
        )
        try:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
            self._conn.execute(
                """CREATE TABLE IF NOT EXISTS node_cache (
                    key TEXT PRIMARY KEY,
                    value TEXT NOT NULL,
                    expires_at REAL
                ) WITHOUT ROWID"""
            )
        except BaseException:
            self._conn.close()
            raise

    def get(self, key: str) -> Any:
        """The value stored under ``key``, or ``None`` if there is none or it expired.

        A row whose value is not valid JSON (written behind the store's back)
        counts as a miss and is dropped.
        """
        with self._lock:
            row = self._conn.execute(
                "SELECT value, expires_at FROM node_cache WHERE key = ?", (key,)
            ).fetchone()
            if row is None:
                return None
            text, expires_at = row
            if expires_at is not None and self._clock() >= expires_at:
                self._conn.execute(
                    "DELETE FROM node_cache WHERE key = ? AND expires_at = ?", (key, expires_at)
                )
                return None
            try:
                return json.loads(text)
            except (TypeError, ValueError):
                self._conn.execute("DELETE FROM node_cache WHERE key = ?", (key,))
                return None

    def set(self, key: str, value: Any, ttl: float | None = None) -> None:
        """Store ``value`` (JSON data) under ``key`` for ``ttl`` seconds (``None``: no expiry).

        Raises:
            TypeError: ``key`` is not a str, or ``value`` is not JSON data.
            ValueError: ``value`` is None, or ``ttl`` is not a positive number.
        """
        text = _dumps(key, value)
        expires_at = _expiry(ttl, self._clock)
        with self._lock:
            self._conn.execute(
                "INSERT OR REPLACE INTO node_cache (key, value, expires_at) VALUES (?, ?, ?)",
                (key, text, expires_at),
            )
            self._writes += 1
            if self._writes % _PURGE_EVERY == 0:
                self._conn.execute("DELETE FROM node_cache WHERE expires_at <= ?", (self._clock(),))

    def clear(self) -> None:
        """Remove every entry (for every process sharing the file)."""
        with self._lock:
            self._conn.execute("DELETE FROM node_cache")

    def close(self) -> None:
        """Close the database connection; the file keeps the entries."""
        with self._lock:
            self._conn.close()

    def __len__(self) -> int:
        """Entries in the file, expired ones not yet dropped included."""
        with self._lock:
            count: int = self._conn.execute("SELECT count(*) FROM node_cache").fetchone()[0]
        return count

    def __repr__(self) -> str:
        return f"SQLiteNodeCache({str(self.path)!r})"
