"""PostgresCheckpointStore: checkpoints in PostgreSQL, for several machines sharing runs.

Uses psycopg 3 with a connection pool. Every operation runs through
``_postgres_retry.Database.run``: when the server (or a proxy) drops its
connection, during a long LLM call or mid-save, the operation runs again on
another connection, and a database that stays silent for ``timeout`` seconds
raises :class:`~selectgraph.StoreUnavailable`. Each save is one
transaction that locks the run's row in the heads table (``SELECT ... FOR
UPDATE``) for the version check: of two writers resuming one run, exactly one
commits, the other gets :class:`~selectgraph.CheckpointConflict`. A save after a
run's first is one statement instead (``_postgres_sql.py``'s ``quick_save``): the
version bump, the checkpoint and its events, atomic on their own, with the full
transaction as the way out when it finds the run elsewhere than expected.

Threads (see ``_threads.py``) live in four more tables (``_postgres_threads.py``).
A save that names a thread locks the thread's row before the run's (the order
every writer takes them in, so none deadlocks), checks that its run still owns
the thread and appends the run's events, all in its one transaction.

The pool belongs to an event loop on a thread of its own, so the store works
from any event loop and from sync code alike. Install the ``postgres`` extra:
``pip install "selectgraph[postgres]"``.
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Final, Self

from selectgraph.core._errors import (
    CheckpointConflict,
    CheckpointNotFound,
    StoreError,
    StoreUnavailable,
)
from selectgraph.persistence._base import Portal, check_list_args, check_save, rebased_child
from selectgraph.persistence._checkpoint import Checkpoint
from selectgraph.persistence._codec import (
    decode_row,
    decode_writes,
    encode_body,
    encode_events,
    encode_writes,
)
from selectgraph.persistence._delta import materialize
from selectgraph.persistence._event_pack import pack_events
from selectgraph.persistence._postgres_direct import DirectWriter
from selectgraph.persistence._postgres_retry import Database, quick_connection_class
from selectgraph.persistence._postgres_sql import (
    KIND_CODES,
    KIND_NAMES,
    MIGRATIONS,
    QUERIES,
    SCHEMA_VERSION,
)
from selectgraph.persistence._postgres_threads import THREAD_QUERIES, PostgresThreads
from selectgraph.persistence._thread_records import check_owner, expiry

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg_pool import AsyncConnectionPool

__all__ = ["PostgresCheckpointStore"]

DEFAULT_TIMEOUT: Final = 10.0
"""Seconds a store waits for an answer by default: a restart fits, a dead host is told soon."""


async def _why_not(url: str) -> str:
    """Why a connection to ``url`` fails, in a line; the pool only logs its attempts."""
    from psycopg import AsyncConnection

    try:
        async with asyncio.timeout(2.0):
            conn = await AsyncConnection.connect(url, connect_timeout=2)
    except TimeoutError:
        return "no answer"
    except Exception as exc:  # any failure is a reason to report, none is raised
        return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    await conn.close()
    return "it answers now"


class PostgresCheckpointStore(PostgresThreads):
    """Checkpoints in a PostgreSQL database: durable, shared, one writer per run.

    The tables live in their own schema (``selectgraph`` unless told), created
    and upgraded by numbered migrations recorded in ``<schema>.schema_version``
    (a schema an older selectgraph made gains the thread tables at open).
    Opening the store connects and migrates, so a wrong URL fails here.

    A connection the server drops (a restart, ``pg_terminate_backend``, a proxy)
    costs a retry, not a failed run: each operation is one transaction, run again
    on a fresh connection (a save is idempotent by version).

    Args:
        url: A libpq connection string, e.g. ``postgresql://user@host:5432/db``.
        schema: The schema holding the tables.
        min_size: Connections the pool keeps open.
        max_size: Connections the pool opens at most.
        timeout: Seconds the store waits for the database to answer (to open, for
            a connection, while reconnecting after losing one) before it raises
            StoreUnavailable; long enough to ride out a server restart.

    Raises:
        ImportError: psycopg is not installed (the ``postgres`` extra).
        StoreUnavailable: no server answered within ``timeout`` (at open, or later
            from any operation).
        StoreError: ``url`` is not a connection string, or the schema was made by a
            newer selectgraph.
    """

    _batches_in_one_transaction: ClassVar[bool] = True
    """Its ``save_batch`` stores a batch whole or not at all (see ``batch_saver``)."""

    def __init__(
        self,
        url: str,
        *,
        schema: str = "selectgraph",
        min_size: int = 1,
        max_size: int = 4,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        try:
            from psycopg import ProgrammingError, sql
            from psycopg.conninfo import conninfo_to_dict
            from psycopg_pool import AsyncConnectionPool
        except ImportError as exc:  # pragma: no cover - the dev extra installs it
            raise ImportError(
                'PostgresCheckpointStore needs psycopg: pip install "selectgraph[postgres]"'
            ) from exc
        if type(schema) is not str or not schema:
            raise ValueError(f"schema must be a non-empty string, got {schema!r}")
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        try:
            settings = conninfo_to_dict(url)
        except (ProgrammingError, TypeError):
            # Not echoed: a malformed URL may hold a password next to the fault.
            raise StoreError(
                "PostgresCheckpointStore: url is not a libpq connection string; expected "
                "postgresql://user@host:5432/dbname or key=value pairs"
            ) from None
        self.schema = schema
        """The schema holding the tables."""
        quoted = sql.Identifier(schema).as_string(None)
        self._q = {
            name: text.replace("{schema}", quoted)
            for name, text in {**QUERIES, **THREAD_QUERIES}.items()
        }
        self._schema_sql = quoted
        self._portal = Portal("selectgraph-postgres")
        kwargs: dict[str, Any] = {"autocommit": True}
        if "connect_timeout" not in settings:  # libpq's default waits forever for a SYN
            kwargs["connect_timeout"] = max(2, round(timeout))
        self._pool: AsyncConnectionPool[AsyncConnection[Any]] = AsyncConnectionPool(
            url,
            connection_class=quick_connection_class(),
            min_size=min_size,
            max_size=max_size,
            timeout=timeout,
            # A pool that gave up reconnecting starts afresh on the next request,
            # instead of waiting out its growing backoff after the server is back.
            reconnect_timeout=timeout,
            open=False,
            kwargs=kwargs,
            name="selectgraph-checkpoints",
        )
        where = f"schema {schema!r} at {settings.get('host', 'localhost')}:"
        where += str(settings.get("port", 5432))
        self._db = Database(self._pool, timeout=timeout, where=where)
        self._direct = DirectWriter(url, kwargs)
        try:
            self._portal.call(self._open(url, timeout))
        except BaseException:
            self._portal.call(self._pool.close())
            self._portal.close()
            raise

    def __repr__(self) -> str:
        return f"PostgresCheckpointStore(schema={self.schema!r})"

    async def _open(self, url: str, timeout: float) -> None:
        from psycopg_pool import PoolTimeout

        try:
            await self._pool.open(wait=True, timeout=timeout)
        except PoolTimeout as exc:
            raise StoreUnavailable(
                f"PostgreSQL store ({self._db.where}) could not connect within {timeout:g} s "
                f"of opening ({await _why_not(url)}): check the URL and that the server is "
                "up, or raise timeout="
            ) from exc
        await self._db.run(self._migrate)

    async def _migrate(self, conn: AsyncConnection[Any]) -> None:
        """Bring the schema up to SCHEMA_VERSION, in one transaction."""
        # One migrator at a time across processes; the lock ends with the transaction.
        await conn.execute(
            "SELECT pg_advisory_xact_lock(hashtext(%s))", (f"selectgraph:{self.schema}",)
        )
        await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {self._schema_sql}")
        await conn.execute(
            f"CREATE TABLE IF NOT EXISTS {self._schema_sql}.schema_version "
            "(version integer NOT NULL)"
        )
        cursor = await conn.execute(f"SELECT max(version) FROM {self._schema_sql}.schema_version")
        row = await cursor.fetchone()
        current = (row[0] if row else None) or 0
        if current > SCHEMA_VERSION:
            raise StoreError(
                f"schema {self.schema!r} has checkpoint schema version {current}; this "
                f"selectgraph knows versions up to {SCHEMA_VERSION}: upgrade selectgraph"
            )
        for version, statements in MIGRATIONS:
            if version > current:
                for statement in statements:
                    await conn.execute(statement.replace("{schema}", self._schema_sql))
                await conn.execute(
                    f"INSERT INTO {self._schema_sql}.schema_version (version) VALUES (%s)",
                    (version,),
                )

    # -- rows ------------------------------------------------------------------

    _unsealed: frozenset[str] | None = None
    """Checkpoints stored before checksums (read unchecked); loaded on first read."""

    async def _load_unsealed(self, conn: AsyncConnection[Any]) -> frozenset[str]:
        if self._unsealed is None:
            cursor = await conn.execute(f"SELECT checkpoint_id FROM {self._schema_sql}.unsealed")
            self._unsealed = frozenset(row[0] for row in await cursor.fetchall())
        return self._unsealed

    def _checkpoint(
        self,
        row: Sequence[Any],
        writes: dict[str, builtins.list[Any]],
        unsealed: frozenset[str] = frozenset(),
    ) -> Checkpoint:
        run_id, checkpoint_id, parent_id, version, step, kind, created_at, body = row
        location = f"table {self.schema}.checkpoints"
        header = {
            "run_id": run_id,
            "checkpoint_id": checkpoint_id,
            "parent_id": parent_id,
            "version": version,
            "step": step,
            "kind": KIND_NAMES.get(kind, kind),
            "created_at": created_at,
        }
        return decode_row(
            header,
            body,
            writes,
            location=location,
            run_id=str(run_id),
            sealed=checkpoint_id not in unsealed,
        )

    async def _rows(
        self, conn: AsyncConnection[Any], rows: builtins.list[Any]
    ) -> builtins.list[Checkpoint]:
        writes: dict[str, dict[str, builtins.list[Any]]] = {}
        unsealed = await self._load_unsealed(conn) if rows else frozenset()
        if rows:
            cursor = await conn.execute(self._q["writes"], ([row[1] for row in rows],))
            for checkpoint_id, task_id, body in await cursor.fetchall():
                writes.setdefault(checkpoint_id, {})[task_id] = decode_writes(
                    body,
                    checkpoint_id,
                    task_id,
                    location=f"table {self.schema}.writes",
                    sealed=checkpoint_id not in unsealed,
                )
        return [self._checkpoint(row, writes.get(row[1], {}), unsealed) for row in rows]

    async def _chain_on(self, conn: AsyncConnection[Any], checkpoint_id: str) -> dict[str, Any]:
        cursor = await conn.execute(self._q["chain"], (checkpoint_id,))
        rows = await cursor.fetchall()
        if not rows:
            raise CheckpointNotFound(checkpoint_id)
        unsealed = await self._load_unsealed(conn)
        return materialize([self._checkpoint(row, {}, unsealed) for row in rows], owned=True)

    async def _cursor(
        self, conn: AsyncConnection[Any], run_id: str, checkpoint_id: str | None
    ) -> int | None:
        if checkpoint_id is None:
            return None
        cursor = await conn.execute(self._q["cursor"], (checkpoint_id, run_id))
        row = await cursor.fetchone()
        if row is None:
            raise CheckpointNotFound(checkpoint_id, where=f"run {run_id!r}")
        return int(row[0])

    # -- work, on the portal's loop --------------------------------------------

    async def _save(self, checkpoint: Checkpoint, expected_version: int) -> None:
        body = encode_body(checkpoint)  # encoding errors surface before the transaction
        events = encode_events(checkpoint.events, checkpoint.run_id)
        await self._save_encoded(checkpoint, expected_version, body, events)

    async def _save_encoded(
        self,
        checkpoint: Checkpoint,
        expected_version: int,
        body: bytes,
        events: builtins.list[bytes],
        *,
        quick: bool = True,
    ) -> None:
        if quick and expected_version > 0:
            query, params = self._quick_statement(checkpoint, expected_version, body, events)
            done = await self._db.run(
                lambda conn: self._quick_save(conn, query, params), transaction=False
            )
            if done:
                return
        # Replayable: a retry whose first attempt committed finds itself stored.
        await self._db.run(
            lambda conn: self._save_on(conn, checkpoint, expected_version, body, events)
        )

    def _quick_statement(
        self,
        checkpoint: Checkpoint,
        expected_version: int,
        body: bytes,
        events: builtins.list[bytes],
    ) -> tuple[str, dict[str, Any]]:
        """A save after the run's first as one statement (atomic on its own), and its values."""
        thread = checkpoint.metadata.get("thread_id")
        params = {
            "thread": None if thread is None else str(thread),
            "version": checkpoint.version,
            "count": len(events),
            "run": checkpoint.run_id,
            "expected": expected_version,
            "id": checkpoint.checkpoint_id,
            "parent": checkpoint.parent_id,
            "step": checkpoint.step,
            "kind": KIND_CODES[checkpoint.kind],
            "at": checkpoint.created_at,
            "body": body,
            "events": pack_events(events) if events else b"",
        }
        return self._q["quick_save" if thread is None else "quick_thread_save"], params

    async def _quick_save(
        self, conn: AsyncConnection[Any], query: str, params: dict[str, Any]
    ) -> bool:
        """Run the quick save statement; False: take the full path.

        A run's first save, a version that moved (a conflict, or this save's own retry
        after a lost answer), a thread the run no longer owns and an id already stored
        all leave nothing saved here, and the full path tells them apart.
        """
        import psycopg

        try:
            cursor = await conn.execute(query, params)
        except psycopg.errors.UniqueViolation:
            return False  # the id is stored already: the full path says by whom
        row = await cursor.fetchone()
        return row is not None and row[0] == 1

    async def _save_on(
        self,
        conn: AsyncConnection[Any],
        checkpoint: Checkpoint,
        expected_version: int,
        body: bytes,
        events: builtins.list[bytes],
    ) -> None:
        import psycopg

        named = checkpoint.metadata.get("thread_id")
        thread_id = None if named is None else str(named)
        thread = None
        if thread_id is not None:
            # The thread's row before the run's: a claim holds it while it reads the
            # run's head or deletes the run, so the two never interleave (or deadlock).
            thread = await self._thread_on(conn, thread_id, lock=True)
            # Before the version check: a rolled-back run has no head left to
            # conflict with, and must hear that it lost the thread.
            check_owner(thread, thread_id, checkpoint.run_id)
        cursor = await conn.execute(self._q["lock_run"], (checkpoint.run_id,))
        row = await cursor.fetchone()
        if row is None:
            # A first save: create the head row (a racing first writer waits on
            # its unique key), then lock it like any other.
            await conn.execute(self._q["new_run"], (checkpoint.run_id,))
            cursor = await conn.execute(self._q["lock_run"], (checkpoint.run_id,))
            row = await cursor.fetchone()
        actual = int(row[0]) if row is not None else 0
        if actual != expected_version:
            cursor = await conn.execute(self._q["owner"], (checkpoint.checkpoint_id,))
            if await cursor.fetchone() == (checkpoint.run_id, checkpoint.version):
                return  # this very save was committed before: a retry
            raise CheckpointConflict(
                checkpoint.run_id, expected_version=expected_version, actual_version=actual
            )
        cursor = await conn.execute(
            self._q["set_version"], (checkpoint.version, len(events), checkpoint.run_id)
        )
        bumped = await cursor.fetchone()
        assert bumped is not None  # the row is locked above
        try:
            await conn.execute(
                self._q["insert"],
                (
                    checkpoint.checkpoint_id,
                    checkpoint.run_id,
                    checkpoint.version,
                    checkpoint.parent_id,
                    checkpoint.step,
                    KIND_CODES[checkpoint.kind],
                    checkpoint.created_at,
                    body,
                ),
            )
        except psycopg.errors.UniqueViolation as exc:
            raise ValueError(
                f"checkpoint id {checkpoint.checkpoint_id!r} is already stored"
            ) from exc
        if thread_id is not None:
            assert thread is not None  # check_owner refused a missing thread
            moment = checkpoint.created_at
            await conn.execute(
                self._q["touch_thread"], (moment, expiry(thread.ttl, moment), thread_id)
            )
        if events:
            last = int(bumped[0])
            await conn.execute(
                self._q["put_events"],
                (checkpoint.run_id, last - len(events) + 1, last, pack_events(events)),
            )

    async def _load(self, checkpoint_id: str) -> Checkpoint:
        async def work(conn: AsyncConnection[Any]) -> Checkpoint:
            cursor = await conn.execute(
                self._q["select"] + "WHERE c.checkpoint_id = %s", (checkpoint_id,)
            )
            row = await cursor.fetchone()
            if row is None:
                raise CheckpointNotFound(checkpoint_id)
            return (await self._rows(conn, [row]))[0]

        return await self._db.run(work, transaction=False)

    async def _load_state(self, checkpoint_id: str) -> dict[str, Any]:
        async def work(conn: AsyncConnection[Any]) -> dict[str, Any]:
            return await self._chain_on(conn, checkpoint_id)

        return await self._db.run(work, transaction=False)

    async def _list(
        self, run_id: str, limit: int | None, before: str | None, after: str | None
    ) -> builtins.list[Checkpoint]:
        async def work(conn: AsyncConnection[Any]) -> builtins.list[Checkpoint]:
            before_v = await self._cursor(conn, run_id, before)
            after_v = await self._cursor(conn, run_id, after)
            where = ["c.run_id = %s"]
            params: builtins.list[Any] = [run_id]
            if before_v is not None:
                where.append("c.version < %s")
                params.append(before_v)
            if after_v is not None:
                where.append("c.version > %s")
                params.append(after_v)
            backwards = limit is not None and before_v is not None and after_v is None
            query = self._q["select"] + "WHERE " + " AND ".join(where)
            query += " ORDER BY c.version DESC" if backwards else " ORDER BY c.version"
            if limit is not None:
                query += " LIMIT %s"
                params.append(limit)
            cursor = await conn.execute(query, params)
            rows = await cursor.fetchall()
            if backwards:
                rows.reverse()
            return await self._rows(conn, rows)

        return await self._db.run(work, transaction=False)

    async def _delete(self, checkpoint_id: str) -> bool:
        async def work(conn: AsyncConnection[Any]) -> bool:
            cursor = await conn.execute(self._q["owner"], (checkpoint_id,))
            owner = await cursor.fetchone()
            if owner is None:
                return False
            await conn.execute(self._q["lock_run"], (owner[0],))  # writers of the run wait
            cursor = await conn.execute(
                self._q["select"] + "WHERE c.checkpoint_id = %s", (checkpoint_id,)
            )
            row = await cursor.fetchone()
            if row is None:  # deleted meanwhile
                return False
            deleted = (await self._rows(conn, [row]))[0]
            cursor = await conn.execute(
                self._q["select"] + "WHERE c.run_id = %s AND c.version > %s AND c.parent_id = %s",
                (owner[0], owner[1], checkpoint_id),
            )
            states: dict[str, dict[str, Any]] = {}
            # As stored: the writes table's rows stay where they are.
            unsealed = await self._load_unsealed(conn)
            for child in [self._checkpoint(row, {}, unsealed) for row in await cursor.fetchall()]:
                needed = [child.checkpoint_id]
                if deleted.parent_id is not None:
                    needed.append(deleted.parent_id)
                for cid in needed:
                    if child.kind == "delta" and cid not in states:
                        states[cid] = await self._chain_on(conn, cid)
                rebased = rebased_child(deleted, child, states.__getitem__)
                await conn.execute(
                    self._q["rewrite"],
                    (
                        rebased.parent_id,
                        KIND_CODES[rebased.kind],
                        encode_body(rebased),
                        rebased.checkpoint_id,
                    ),
                )
            await conn.execute(self._q["delete"], (checkpoint_id,))
            return True

        return await self._db.run(work)

    async def _delete_run(self, run_id: str) -> int:
        async def work(conn: AsyncConnection[Any]) -> int:
            await conn.execute(self._q["lock_run"], (run_id,))
            cursor = await conn.execute(self._q["count_run"], (run_id,))
            row = await cursor.fetchone()
            await conn.execute(self._q["delete_run"], (run_id,))
            return int(row[0]) if row is not None else 0

        return await self._db.run(work)

    async def _head(self, run_id: str) -> Checkpoint | None:
        async def work(conn: AsyncConnection[Any]) -> Checkpoint | None:
            cursor = await conn.execute(
                self._q["select"] + "WHERE c.run_id = %s ORDER BY c.version DESC LIMIT 1",
                (run_id,),
            )
            row = await cursor.fetchone()
            return (await self._rows(conn, [row]))[0] if row is not None else None

        return await self._db.run(work, transaction=False)

    async def _list_runs(self, limit: int | None) -> builtins.list[str]:
        query = self._q["runs"]
        params: builtins.list[Any] = []
        if limit is not None:
            query += " LIMIT %s"
            params.append(limit)

        async def work(conn: AsyncConnection[Any]) -> builtins.list[str]:
            cursor = await conn.execute(query, params)
            return [row[0] for row in await cursor.fetchall()]

        return await self._db.run(work, transaction=False)

    async def _put_writes(
        self, run_id: str, checkpoint_id: str, task_id: str, writes: builtins.list[Any]
    ) -> None:
        body = encode_writes(writes, checkpoint_id, task_id)

        async def work(conn: AsyncConnection[Any]) -> None:
            cursor = await conn.execute(self._q["owner"], (checkpoint_id,))
            owner = await cursor.fetchone()
            if owner is None or owner[0] != run_id:
                raise CheckpointNotFound(checkpoint_id, where=f"run {run_id!r}")
            cursor = await conn.execute(self._q["lock_run"], (run_id,))
            head = await cursor.fetchone()
            actual = int(head[0]) if head is not None else 0
            if actual != owner[1]:
                raise CheckpointConflict(run_id, expected_version=owner[1], actual_version=actual)
            await conn.execute(self._q["put_writes"], (checkpoint_id, task_id, body))

        return await self._db.run(work)

    # -- public API ------------------------------------------------------------

    async def asave(self, checkpoint: Checkpoint, *, expected_version: int) -> None:
        """See :meth:`CheckpointStore.asave`."""
        check_save(checkpoint, expected_version)
        await self._portal.acall(self._save(checkpoint, expected_version))

    async def aload(self, checkpoint_id: str) -> Checkpoint:
        """See :meth:`CheckpointStore.aload`."""
        return await self._portal.acall(self._load(checkpoint_id))

    async def aload_state(self, checkpoint_id: str) -> dict[str, Any]:
        """See :meth:`CheckpointStore.aload_state`."""
        return await self._portal.acall(self._load_state(checkpoint_id))

    async def alist(
        self,
        run_id: str,
        *,
        limit: int | None = None,
        before: str | None = None,
        after: str | None = None,
    ) -> builtins.list[Checkpoint]:
        """See :meth:`CheckpointStore.alist`."""
        check_list_args(limit)
        return await self._portal.acall(self._list(run_id, limit, before, after))

    async def adelete(self, checkpoint_id: str) -> bool:
        """See :meth:`CheckpointStore.adelete`."""
        return await self._portal.acall(self._delete(checkpoint_id))

    async def adelete_run(self, run_id: str) -> int:
        """See :meth:`CheckpointStore.adelete_run`."""
        return await self._portal.acall(self._delete_run(run_id))

    async def ahead(self, run_id: str) -> Checkpoint | None:
        """See :meth:`CheckpointStore.ahead`."""
        return await self._portal.acall(self._head(run_id))

    async def aruns(self, *, limit: int | None = None) -> builtins.list[str]:
        """See :meth:`CheckpointStore.aruns`."""
        check_list_args(limit)
        return await self._portal.acall(self._list_runs(limit))

    async def aput_writes(
        self, run_id: str, checkpoint_id: str, task_id: str, writes: Sequence[Any]
    ) -> None:
        """See :meth:`CheckpointStore.aput_writes`."""
        if type(task_id) is not str or not task_id:
            raise ValueError(f"task_id must be a non-empty string, got {task_id!r}")
        await self._portal.acall(
            self._put_writes(run_id, checkpoint_id, task_id, builtins.list(writes))
        )

    async def aclose(self) -> None:
        """See :meth:`CheckpointStore.aclose`."""
        self._direct.close()
        if not self._portal.closed:
            await self._portal.acall(self._pool.close())
            self._portal.close()

    def save(self, checkpoint: Checkpoint, *, expected_version: int) -> None:
        """See :meth:`CheckpointStore.asave`."""
        check_save(checkpoint, expected_version)
        body = encode_body(checkpoint)  # encoding errors surface before the transaction
        events = encode_events(checkpoint.events, checkpoint.run_id)
        quick = expected_version > 0
        if quick:
            # From sync code the quick statement runs on a connection in this thread
            # (see _postgres_direct.py); what it cannot settle goes to the pool.
            query, params = self._quick_statement(checkpoint, expected_version, body, events)
            done = self._direct.quick_save(query, params)
            if done:
                return
            quick = done is None  # refused: the full path says why; not tried: try again
        self._portal.call(
            self._save_encoded(checkpoint, expected_version, body, events, quick=quick)
        )

    def save_batch(self, checkpoints: Sequence[Checkpoint]) -> None:
        """Save consecutive checkpoints of one run, each on the one before it, all or none.

        As :meth:`save` each with ``expected_version=checkpoint.version - 1``, in
        order (durability ``"async"`` hands over what queued up behind a busy
        writer). After the run's first save they go as one pipelined transaction on
        the direct connection (about one round trip); a batch that cannot (the run's
        first save, a conflict, a lost connection) takes the pool's full path, in one
        transaction too, which tells those apart.
        """
        for checkpoint in checkpoints:
            check_save(checkpoint, checkpoint.version - 1)
        encoded = [
            (
                checkpoint,
                encode_body(checkpoint),
                encode_events(checkpoint.events, checkpoint.run_id),
            )
            for checkpoint in checkpoints
        ]
        if encoded and encoded[0][0].version > 1:
            statements = [
                self._quick_statement(checkpoint, checkpoint.version - 1, body, events)
                for checkpoint, body, events in encoded
            ]
            if self._direct.quick_batch(statements):
                return
        # One transaction on the pool, idempotent by version: a batch that committed
        # unanswered finds itself stored; a conflict leaves nothing of it.
        self._portal.call(self._db.run(lambda conn: self._save_batch_on(conn, encoded)))

    async def _save_batch_on(
        self,
        conn: AsyncConnection[Any],
        encoded: builtins.list[tuple[Checkpoint, bytes, builtins.list[bytes]]],
    ) -> None:
        for checkpoint, body, events in encoded:
            await self._save_on(conn, checkpoint, checkpoint.version - 1, body, events)

    def load(self, checkpoint_id: str) -> Checkpoint:
        """See :meth:`CheckpointStore.aload`."""
        return self._portal.call(self._load(checkpoint_id))

    def load_state(self, checkpoint_id: str) -> dict[str, Any]:
        """See :meth:`CheckpointStore.aload_state`."""
        return self._portal.call(self._load_state(checkpoint_id))

    def list(
        self,
        run_id: str,
        *,
        limit: int | None = None,
        before: str | None = None,
        after: str | None = None,
    ) -> builtins.list[Checkpoint]:
        """See :meth:`CheckpointStore.alist`."""
        check_list_args(limit)
        return self._portal.call(self._list(run_id, limit, before, after))

    def delete(self, checkpoint_id: str) -> bool:
        """See :meth:`CheckpointStore.adelete`."""
        return self._portal.call(self._delete(checkpoint_id))

    def delete_run(self, run_id: str) -> int:
        """See :meth:`CheckpointStore.adelete_run`."""
        return self._portal.call(self._delete_run(run_id))

    def head(self, run_id: str) -> Checkpoint | None:
        """See :meth:`CheckpointStore.ahead`."""
        return self._portal.call(self._head(run_id))

    def runs(self, *, limit: int | None = None) -> builtins.list[str]:
        """See :meth:`CheckpointStore.aruns`."""
        check_list_args(limit)
        return self._portal.call(self._list_runs(limit))

    def put_writes(
        self, run_id: str, checkpoint_id: str, task_id: str, writes: Sequence[Any]
    ) -> None:
        """See :meth:`CheckpointStore.aput_writes`."""
        if type(task_id) is not str or not task_id:
            raise ValueError(f"task_id must be a non-empty string, got {task_id!r}")
        self._portal.call(self._put_writes(run_id, checkpoint_id, task_id, builtins.list(writes)))

    def close(self) -> None:
        """See :meth:`CheckpointStore.aclose`."""
        self._direct.close()
        if not self._portal.closed:
            self._portal.call(self._pool.close())
            self._portal.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
