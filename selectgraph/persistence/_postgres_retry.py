"""PostgresCheckpointStore's connections: every operation, retried when its connection dies.

Each store operation is one transaction (a read: statements that change nothing),
so when the server drops the connection under it (``pg_terminate_backend``, a
restart, a proxy's idle cut) the whole operation runs again on another
connection. The pool never tests a connection before lending it (that was a
round trip on every save); the retry is the check. psycopg_pool discards a
connection that comes back broken, and :meth:`Database.run` asks it once per
loss to test the idle ones (:meth:`~psycopg_pool.AsyncConnectionPool.check`),
since one kill usually takes down all of them.

A save is idempotent by version: a retried save whose first attempt committed
before the connection died finds itself stored and succeeds. An operation that
is not idempotent (``replayable=False``) is not run again when the connection
died during its COMMIT, since that COMMIT may have been applied.

Connections are made by :func:`quick_connection_class`: a connection attempt the
server cut off is retried at once, instead of after the pool's fixed one-second
backoff. When the database does not answer for ``timeout`` seconds the operation
raises :class:`~selectgraph.StoreUnavailable`, never the driver's own error.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final, TypeVar

from tenacity import (
    AsyncRetrying,
    retry_if_exception_type,
    stop_after_delay,
    wait_exponential,
    wait_random,
)

from selectgraph.core._errors import StoreUnavailable

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg_pool import AsyncConnectionPool

__all__ = ["Database", "connection_lost", "quick_connection_class"]

T = TypeVar("T")

_LOST_STATES: Final = frozenset({"57P01", "57P02", "57P03"})
"""admin_shutdown, crash_shutdown, cannot_connect_now; class 08 is the connection's too."""

CONNECT_ATTEMPTS: Final = 4
"""Attempts per new connection before the pool's own (slow) backoff takes over."""


def connection_lost(exc: BaseException, conn: AsyncConnection[Any] | None = None) -> bool:
    """Whether ``exc`` says the connection (or the server) failed, not the operation.

    Args:
        exc: What the operation raised.
        conn: The connection it ran on, when it got one.
    """
    import psycopg
    from psycopg_pool import PoolClosed, PoolTimeout, TooManyRequests

    if isinstance(exc, PoolClosed | TooManyRequests):
        return False  # the store was closed, or is overloaded: retrying cannot help
    if isinstance(exc, PoolTimeout):
        return True  # no connection came: the server is down or restarting
    if not isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
        return False
    if conn is not None and conn.closed:
        return True
    sqlstate = getattr(exc, "sqlstate", None) or ""
    return sqlstate in _LOST_STATES or sqlstate.startswith("08")


class _Lost(Exception):
    """One attempt lost its connection; the next attempt may succeed."""


class Database:
    """A pool, and the retrying runner every store operation goes through.

    Args:
        pool: The store's pool (opened by the store).
        timeout: Seconds of failed attempts before StoreUnavailable.
        where: Names the database in errors, e.g. ``schema 'selectgraph' at host:5432``.
    """

    def __init__(
        self, pool: AsyncConnectionPool[AsyncConnection[Any]], *, timeout: float, where: str
    ) -> None:
        self.pool = pool
        """The connection pool (no check on lend: a lost connection is retried)."""
        self.timeout = timeout
        """Seconds an operation keeps retrying before StoreUnavailable."""
        self.where = where
        """The database, as errors name it."""
        self.retries = 0
        """Attempts run again after a lost connection, since the store opened."""

    async def run(
        self,
        work: Callable[[AsyncConnection[Any]], Awaitable[T]],
        *,
        transaction: bool = True,
        replayable: bool = True,
    ) -> T:
        """Run ``work`` on a pooled connection, again on another one if it dies.

        Args:
            work: The operation; it may run more than once, each time from the start.
            transaction: Run it in one transaction (reads may run without).
            replayable: Running it twice is harmless; else a connection lost during
                its COMMIT (which may have been applied) is not retried.

        Raises:
            StoreUnavailable: the database did not answer within ``timeout``.
        """
        deadline = time.monotonic() + self.timeout
        retrying = AsyncRetrying(
            retry=retry_if_exception_type(_Lost),
            stop=stop_after_delay(self.timeout),
            wait=wait_exponential(multiplier=0.01, max=0.5) + wait_random(0, 0.02),
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    if attempt.retry_state.attempt_number > 1:
                        self.retries += 1
                    return await self._attempt(work, deadline, transaction, replayable)
        except _Lost as lost:
            raise self._unavailable(lost.__cause__, "gave up reconnecting") from lost.__cause__
        raise AssertionError("unreachable: tenacity either returns or raises")

    async def _attempt(
        self,
        work: Callable[[AsyncConnection[Any]], Awaitable[T]],
        deadline: float,
        transaction: bool,
        replayable: bool,
    ) -> T:
        conn: AsyncConnection[Any] | None = None
        committing = False
        try:
            # At least a moment per attempt: the pool may hold a fresh connection already.
            async with self.pool.connection(max(deadline - time.monotonic(), 0.05)) as conn:
                if not transaction:
                    return await work(conn)
                async with conn.transaction():
                    result = await work(conn)
                    committing = True
                return result
        except Exception as exc:
            if not connection_lost(exc, conn):
                raise
            if committing and not replayable:
                raise self._unavailable(
                    exc, "the connection died during COMMIT", applied="may have been"
                ) from exc
            if conn is not None:
                # One kill usually takes every idle connection with it: test them now.
                await asyncio.shield(self.pool.check())
            raise _Lost() from exc

    def _unavailable(
        self, exc: BaseException | None, what: str, *, applied: str = "was not"
    ) -> StoreUnavailable:
        reason = f"{type(exc).__name__}: {exc}".strip().splitlines()[0] if exc else "no answer"
        if applied == "was not":
            outcome = "nothing was half-written: check the server and retry"
        else:  # a COMMIT sent and not answered: the server may have applied it
            outcome = (
                "the change may have been applied (never half-written): check the server, "
                "then look before retrying (a thread claimed this way stays claimed by its "
                "run until released)"
            )
        return StoreUnavailable(
            f"PostgreSQL store ({self.where}) did not answer for {self.timeout:g} s "
            f"({what}; last error {reason}); {outcome}, or raise the store's timeout="
        )


def quick_connection_class() -> type[AsyncConnection[Any]]:
    """An AsyncConnection whose ``connect`` retries at once a few times.

    psycopg_pool waits a second (then two, four...) after a failed connection
    attempt. A backend killed while it starts up needs no wait, only another
    attempt; a server that is really down still fails after a few tenths of a second.
    """
    from psycopg import AsyncConnection, OperationalError

    class QuickConnection(AsyncConnection[Any]):
        @classmethod
        async def connect(cls, conninfo: str = "", **kwargs: Any) -> QuickConnection:
            retrying = AsyncRetrying(
                retry=retry_if_exception_type(OperationalError),
                stop=lambda state: state.attempt_number >= CONNECT_ATTEMPTS,
                wait=wait_exponential(multiplier=0.02, max=0.2) + wait_random(0, 0.02),
                reraise=True,
            )
            async for attempt in retrying:
                with attempt:
                    return await super().connect(conninfo, **kwargs)
            raise AssertionError("unreachable: tenacity either returns or raises")

    return QuickConnection
