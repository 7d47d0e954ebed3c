"""A blocking connection for PostgresCheckpointStore's one-statement saves from sync code.

The store's pool lives on an event loop of its own thread (``Portal``), so a save
from sync code (``run()``, durability ``sync``) used to hop there and back: two
thread wake-ups and asyncio's bookkeeping around one round trip, about as much
as the round trip itself on a small machine. The quick save, a single statement
that commits on its own, is run here instead on a plain psycopg connection in
the caller's thread. Anything it cannot settle (a first save, a conflict, a lost
connection, a server that is down) goes back to the pool's retrying path, which
tells a save already committed from one that was not (saves are idempotent by
version).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from psycopg import Connection

__all__ = ["DirectWriter"]


class _Refused(Exception):
    """A statement of a batch changed nothing: the batch's transaction rolls back."""


_REST_AFTER_FAILURE: Final = 5.0
"""Seconds the writer stays out of the way after its connection failed: the pool's
path, which waits for a restarting server, handles saves meanwhile."""


class DirectWriter:
    """One lazily opened connection running quick saves for callers in any thread.

    Args:
        url: The libpq connection string.
        kwargs: Connection options, as the pool's connections get them.
    """

    def __init__(self, url: str, kwargs: dict[str, Any]) -> None:
        self._url = url
        self._kwargs = kwargs
        self._conn: Connection[Any] | None = None
        self._lock = threading.Lock()
        self._resting_until = 0.0
        self._closed = False

    def quick_save(self, query: str, params: dict[str, Any]) -> bool | None:
        """Run a quick save statement: True saved, False refused, None not tried.

        False: the statement changed nothing, or the id is stored already; the
        pool's full path says why. None: the connection is busy with another
        thread's save, failed, or is resting after a failure; the statement may or
        may not have been applied, and the pool's path settles it.
        """

        def save(conn: Connection[Any]) -> bool:
            row = conn.execute(query, params).fetchone()
            return row is not None and row[0] == 1

        return self._attempt(save)

    def quick_batch(self, statements: Sequence[tuple[str, dict[str, Any]]]) -> bool | None:
        """Run quick save statements in one transaction: all saved (True), or none.

        Sent as one pipeline, so the batch costs about one round trip and one
        commit however many checkpoints it holds. False: one of them changed
        nothing or hit a stored id, and the transaction was rolled back. None, as
        for :meth:`quick_save`: not tried, or the connection failed (the batch may
        have been committed).
        """

        def save_all(conn: Connection[Any]) -> bool:
            with conn.pipeline(), conn.transaction():
                cursors = [conn.execute(query, params) for query, params in statements]
                rows = [cursor.fetchone() for cursor in cursors]
                if any(row is None or row[0] != 1 for row in rows):
                    raise _Refused  # rolls the transaction back: nothing of it is stored
            return True

        return self._attempt(save_all)

    def _attempt(self, save: Callable[[Connection[Any]], bool]) -> bool | None:
        """``save`` on the connection (opened if need be), for :meth:`quick_save`'s answers."""
        import psycopg

        if self._closed or time.monotonic() < self._resting_until:
            return None
        if not self._lock.acquire(blocking=False):
            return None  # another thread's save: this one takes the pool's way
        try:
            conn = self._conn
            if conn is None or conn.closed:
                conn = self._conn = psycopg.connect(self._url, **self._kwargs)
            return save(conn)
        except (_Refused, psycopg.errors.UniqueViolation):
            return False
        except psycopg.Error:
            # Lost, timed out, refused: not this writer's to retry (see the module docstring).
            self._drop()
            self._resting_until = time.monotonic() + _REST_AFTER_FAILURE
            return None
        finally:
            self._lock.release()

    def close(self) -> None:
        """Close the connection; later saves take the pool's path."""
        with self._lock:
            self._closed = True
            self._drop()

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):  # a broken connection: nothing to keep
                conn.close()
