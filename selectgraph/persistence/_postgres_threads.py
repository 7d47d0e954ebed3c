"""PostgresCheckpointStore's threads: their tables, queries and primitives (coroutines).

Four tables (migration 2): ``threads`` (a row per thread, holding its owner and
last run), ``thread_runs`` (its runs, each with the checkpoint it started from),
``queue`` (tickets of waiting inputs) and ``events`` (each run's event log, a
packed row per batch). Each primitive is one transaction; one that changes a
thread locks its row (``SELECT ... FOR UPDATE``) first, before any run's row
(the order a save takes them in too, so none deadlocks); a thread's queue
changes under a transaction-scoped advisory lock, since its row may not exist.

Every primitive runs through ``Database.run`` (``_postgres_retry.py``), so a
dropped connection costs a retry. Two are not idempotent and are not run again
when their COMMIT went unanswered: a claim (run twice, it would find its own
claim) and an append of events (it would append them twice).
"""

from __future__ import annotations

import builtins
import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from selectgraph.core._errors import ResumeError, StateSerializationError
from selectgraph.persistence._event_pack import pack_events, unpacked
from selectgraph.persistence._json_data import json_bytes
from selectgraph.persistence._thread_portal import PortalThreadKeeping
from selectgraph.persistence._thread_records import claimed, encode_metadata, released, updated
from selectgraph.persistence._threads import Claim, StoredEvent, Thread, ThreadRun, decide_claim

if TYPE_CHECKING:
    from psycopg import AsyncConnection

    from selectgraph.persistence._postgres_retry import Database

__all__ = ["THREAD_QUERIES", "THREAD_TABLES", "PostgresThreads"]

THREAD_TABLES: Final = (
    """CREATE TABLE {schema}.threads (
        thread_id text PRIMARY KEY,
        created_at timestamptz NOT NULL,
        updated_at timestamptz NOT NULL,
        metadata jsonb NOT NULL DEFAULT '{}',
        runs bigint NOT NULL DEFAULT 0,
        last_run text,
        owner text,
        ttl double precision,
        expires_at timestamptz
    )""",
    'CREATE INDEX threads_by_update ON {schema}.threads (updated_at DESC, thread_id COLLATE "C")',
    "CREATE INDEX threads_by_expiry ON {schema}.threads (expires_at) WHERE expires_at IS NOT NULL",
    """CREATE TABLE {schema}.thread_runs (
        thread_id text NOT NULL REFERENCES {schema}.threads (thread_id) ON DELETE CASCADE,
        seq bigint NOT NULL,
        run_id text NOT NULL,
        created_at timestamptz NOT NULL,
        strategy text NOT NULL,
        start_from text,
        superseded text,
        PRIMARY KEY (thread_id, seq)
    )""",
    "CREATE INDEX thread_runs_by_run ON {schema}.thread_runs (thread_id, run_id, seq)",
    """CREATE TABLE {schema}.queue (
        pos bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        thread_id text NOT NULL,
        ticket text NOT NULL,
        until timestamptz NOT NULL,
        UNIQUE (thread_id, ticket)
    )""",
    # A row per batch (the events one save or append stored), packed.
    """CREATE TABLE {schema}.events (
        run_id text NOT NULL REFERENCES {schema}.runs (run_id) ON DELETE CASCADE,
        first_seq bigint NOT NULL,
        last_seq bigint NOT NULL,
        body bytea NOT NULL,
        PRIMARY KEY (run_id, last_seq)
    )""",
)
"""Migration 2: the thread tables."""

_THREAD_COLUMNS: Final = (
    "thread_id, created_at, updated_at, metadata, runs, last_run, owner, ttl, expires_at"
)

THREAD_QUERIES: Final = {
    "thread": f"SELECT {_THREAD_COLUMNS} FROM {{schema}}.threads WHERE thread_id = %s",
    "lock_thread": (
        f"SELECT {_THREAD_COLUMNS} FROM {{schema}}.threads WHERE thread_id = %s FOR UPDATE"
    ),
    "new_thread": (
        "INSERT INTO {schema}.threads (thread_id, created_at, updated_at) VALUES (%s, %s, %s) "
        "ON CONFLICT DO NOTHING RETURNING thread_id"
    ),
    "write_thread": (
        "UPDATE {schema}.threads SET created_at = %s, updated_at = %s, metadata = %s::jsonb, "
        "runs = %s, last_run = %s, owner = %s, ttl = %s, expires_at = %s WHERE thread_id = %s"
    ),
    "touch_thread": (
        "UPDATE {schema}.threads SET updated_at = %s, expires_at = %s WHERE thread_id = %s"
    ),
    "threads": f"SELECT {_THREAD_COLUMNS} FROM {{schema}}.threads ",
    "threads_order": 'ORDER BY updated_at DESC, thread_id COLLATE "C" LIMIT %s',
    "delete_thread": "DELETE FROM {schema}.threads WHERE thread_id = %s",
    "expired": (
        "SELECT thread_id FROM {schema}.threads WHERE expires_at <= %s "
        "OR (%s::timestamptz IS NOT NULL AND owner IS NULL AND updated_at < %s) "
        'ORDER BY created_at, thread_id COLLATE "C"'
    ),
    "owner_start": (
        "SELECT start_from FROM {schema}.thread_runs WHERE thread_id = %s AND run_id = %s "
        "ORDER BY seq LIMIT 1"
    ),
    "head_id": (
        "SELECT checkpoint_id FROM {schema}.checkpoints WHERE run_id = %s "
        "ORDER BY version DESC LIMIT 1"
    ),
    "add_thread_run": (
        "INSERT INTO {schema}.thread_runs (thread_id, seq, run_id, created_at, strategy, "
        "start_from, superseded) VALUES (%s, %s, %s, %s, %s, %s, %s)"
    ),
    "drop_thread_runs": "DELETE FROM {schema}.thread_runs WHERE thread_id = %s AND run_id = %s",
    "thread_runs": (
        "SELECT thread_id, run_id, seq, created_at, strategy, start_from, superseded "
        "FROM {schema}.thread_runs WHERE thread_id = %s ORDER BY seq"
    ),
    "thread_run_ids": "SELECT DISTINCT run_id FROM {schema}.thread_runs WHERE thread_id = %s",
    "count_runs": "SELECT count(*) FROM {schema}.checkpoints WHERE run_id = ANY(%s)",
    "delete_runs": "DELETE FROM {schema}.runs WHERE run_id = ANY(%s)",
    "thread_bytes": """
        WITH r AS (SELECT DISTINCT run_id FROM {schema}.thread_runs WHERE thread_id = %s)
        SELECT (SELECT coalesce(sum(octet_length(body)), 0) FROM {schema}.checkpoints
                WHERE run_id IN (SELECT run_id FROM r))
            + (SELECT coalesce(sum(octet_length(w.body)), 0) FROM {schema}.writes w
                JOIN {schema}.checkpoints c USING (checkpoint_id)
                WHERE c.run_id IN (SELECT run_id FROM r))
            + (SELECT coalesce(sum(octet_length(body)), 0) FROM {schema}.events
                WHERE run_id IN (SELECT run_id FROM r))""",
    # A thread's queue changes one transaction at a time (its row may not exist yet).
    "lock_queue": "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
    "drop_lapsed": "DELETE FROM {schema}.queue WHERE thread_id = %s AND until <= %s",
    "front": "SELECT ticket FROM {schema}.queue WHERE thread_id = %s ORDER BY pos LIMIT 1",
    "enqueue": (
        "INSERT INTO {schema}.queue (thread_id, ticket, until) VALUES (%s, %s, %s) "
        "ON CONFLICT (thread_id, ticket) DO UPDATE SET until = EXCLUDED.until RETURNING pos"
    ),
    "ahead": "SELECT count(*) FROM {schema}.queue WHERE thread_id = %s AND pos < %s",
    "dequeue": "DELETE FROM {schema}.queue WHERE thread_id = %s AND ticket = %s",
    "drop_queue": "DELETE FROM {schema}.queue WHERE thread_id = %s",
    # One round trip: the batch's seqs follow the run's last, kept on its runs row
    # (which the caller holds locked) so a save can number its events in one statement.
    "add_events": (
        "WITH bumped AS (UPDATE {schema}.runs SET last_seq = last_seq + %s WHERE run_id = %s "
        "RETURNING last_seq) INSERT INTO {schema}.events (run_id, first_seq, last_seq, body) "
        "SELECT %s, last_seq - %s + 1, last_seq, %s FROM bumped RETURNING last_seq"
    ),
    # A batch holds one event at least: ``limit`` rows are enough.
    "events": (
        "SELECT first_seq, body FROM {schema}.events WHERE run_id = %s AND last_seq > %s "
        "ORDER BY last_seq LIMIT %s"
    ),
}
"""The thread primitives' statements; ``{schema}`` is replaced by the store's schema."""


def _utc(moment: dt.datetime) -> dt.datetime:
    return moment.astimezone(dt.UTC)


def _thread(row: Sequence[Any]) -> Thread:
    thread_id, created, changed, metadata, runs, last_run, owner, ttl, expires = row
    return Thread(
        thread_id=thread_id,
        created_at=_utc(created),
        updated_at=_utc(changed),
        metadata=metadata,
        runs=int(runs),
        last_run=last_run,
        owner=owner,
        ttl=ttl,
        expires_at=None if expires is None else _utc(expires),
    )


def _thread_run(row: Sequence[Any]) -> ThreadRun:
    thread_id, run_id, seq, created, strategy, start_from, superseded = row
    return ThreadRun(
        thread_id=thread_id,
        run_id=run_id,
        seq=int(seq),
        created_at=_utc(created),
        strategy=strategy,
        start_from=start_from,
        superseded=superseded,
    )


class PostgresThreads(PortalThreadKeeping):
    """The thread primitives of :class:`~selectgraph.PostgresCheckpointStore`."""

    schema: str
    _q: dict[str, str]
    _db: Database
    """Runs each primitive as one transaction, again if its connection dies."""

    async def _thread_on(
        self, conn: AsyncConnection[Any], thread_id: str, *, lock: bool = False
    ) -> Thread | None:
        cursor = await conn.execute(self._q["lock_thread" if lock else "thread"], (thread_id,))
        row = await cursor.fetchone()
        return None if row is None else _thread(row)

    async def _write_thread(self, conn: AsyncConnection[Any], thread: Thread) -> None:
        await conn.execute(
            self._q["write_thread"],
            (
                thread.created_at,
                thread.updated_at,
                encode_metadata(thread.metadata).decode(),
                thread.runs,
                thread.last_run,
                thread.owner,
                thread.ttl,
                thread.expires_at,
                thread.thread_id,
            ),
        )

    async def _insert_events(
        self, conn: AsyncConnection[Any], run_id: str, events: builtins.list[bytes]
    ) -> int:
        """Append ``events`` to the run's log (its runs row locked); the last one's seq."""
        count = len(events)
        cursor = await conn.execute(
            self._q["add_events"], (count, run_id, run_id, count, pack_events(events))
        )
        row = await cursor.fetchone()
        assert row is not None  # INSERT ... SELECT of one aggregate row inserts one row
        return int(row[0])

    async def _lock_queue(self, conn: AsyncConnection[Any], thread_id: str) -> None:
        await conn.execute(self._q["lock_queue"], (f"selectgraph:{self.schema}:{thread_id}",))

    async def _front_ticket(
        self, conn: AsyncConnection[Any], thread_id: str, now: dt.datetime
    ) -> str | None:
        await self._lock_queue(conn, thread_id)
        # Tickets whose lease ran out belong to waiters that are gone.
        await conn.execute(self._q["drop_lapsed"], (thread_id, now))
        cursor = await conn.execute(self._q["front"], (thread_id,))
        row = await cursor.fetchone()
        return None if row is None else str(row[0])

    async def _lock_or_create(
        self, conn: AsyncConnection[Any], thread_id: str, now: dt.datetime
    ) -> Thread | None:
        """The thread, its row locked; or None, a placeholder row made (and locked) for it.

        A racing first claim waits on the new row's key, then finds the thread taken.
        """
        while True:
            thread = await self._thread_on(conn, thread_id, lock=True)
            if thread is not None:
                return thread
            cursor = await conn.execute(self._q["new_thread"], (thread_id, now, now))
            if await cursor.fetchone() is not None:
                return None
            # Another claim made it since (and, if it is gone again, deleted it): re-read.

    async def _claim_thread(
        self,
        thread_id: str,
        run_id: str,
        strategy: str,
        ticket: str | None,
        metadata: dict[str, Any],
        ttl: float | None,
        now: dt.datetime,
    ) -> Claim:
        async def work(conn: AsyncConnection[Any]) -> Claim:
            thread = await self._lock_or_create(conn, thread_id, now)
            owner_start = None
            if thread is not None and thread.owner is not None:
                cursor = await conn.execute(self._q["owner_start"], (thread_id, thread.owner))
                row = await cursor.fetchone()
                owner_start = None if row is None else row[0]
            decision = decide_claim(
                thread,
                run_id,
                strategy,
                front_ticket=await self._front_ticket(conn, thread_id, now),
                ticket=ticket,
                superseded_start=owner_start,
            )
            start_from = decision.start_from
            if decision.start_after_run is not None:
                cursor = await conn.execute(self._q["head_id"], (decision.start_after_run,))
                head = await cursor.fetchone()
                if head is None:  # a run with no checkpoint yet leaves the state where it started
                    cursor = await conn.execute(
                        self._q["owner_start"], (thread_id, decision.start_after_run)
                    )
                    head = await cursor.fetchone()
                start_from = None if head is None else head[0]
            if decision.delete_superseded and decision.superseded is not None:
                # Its checkpoints, writes and events go with its runs row (ON DELETE CASCADE).
                await conn.execute(self._q["delete_run"], (decision.superseded,))
                await conn.execute(self._q["drop_thread_runs"], (thread_id, decision.superseded))
            if ticket is not None:
                await conn.execute(self._q["dequeue"], (thread_id, ticket))
            owned, record = claimed(
                thread, thread_id, run_id, strategy, decision, start_from, metadata, ttl, now
            )
            await conn.execute(
                self._q["add_thread_run"],
                (
                    thread_id,
                    record.seq,
                    run_id,
                    now,
                    record.strategy,
                    record.start_from,
                    record.superseded,
                ),
            )
            await self._write_thread(conn, owned)
            return Claim(owned, record, start_from, decision.superseded)

        return await self._db.run(work, replayable=False)

    async def _release_thread(self, thread_id: str, run_id: str, now: dt.datetime) -> bool:
        async def work(conn: AsyncConnection[Any]) -> bool:
            thread = await self._thread_on(conn, thread_id, lock=True)
            if thread is None or thread.owner != run_id:
                return False
            await self._write_thread(conn, released(thread, now))
            return True

        return await self._db.run(work)

    async def _get_thread(self, thread_id: str) -> Thread | None:
        async def work(conn: AsyncConnection[Any]) -> Thread | None:
            return await self._thread_on(conn, thread_id)

        return await self._db.run(work, transaction=False)

    async def _list_threads(
        self, metadata: dict[str, Any], limit: int | None
    ) -> builtins.list[Thread]:
        where: builtins.list[str] = []
        params: builtins.list[Any] = []
        for key, value in metadata.items():
            try:
                wanted = json_bytes(value, f"metadata[{key!r}]").decode()
            except StateSerializationError:
                return []  # stored metadata is JSON data: nothing else equals it
            where.append("metadata -> %s = %s::jsonb")
            params += [key, wanted]
        query = self._q["threads"]
        if where:
            query += "WHERE " + " AND ".join(where) + " "

        async def work(conn: AsyncConnection[Any]) -> builtins.list[Thread]:
            cursor = await conn.execute(query + self._q["threads_order"], [*params, limit])
            return [_thread(row) for row in await cursor.fetchall()]

        return await self._db.run(work, transaction=False)

    async def _thread_runs(self, thread_id: str) -> builtins.list[ThreadRun]:
        async def work(conn: AsyncConnection[Any]) -> builtins.list[ThreadRun]:
            cursor = await conn.execute(self._q["thread_runs"], (thread_id,))
            return [_thread_run(row) for row in await cursor.fetchall()]

        return await self._db.run(work, transaction=False)

    async def _update_thread(
        self,
        thread_id: str,
        metadata: dict[str, Any] | None,
        ttl: float | None,
        now: dt.datetime,
    ) -> Thread:
        async def work(conn: AsyncConnection[Any]) -> Thread:
            thread = await self._thread_on(conn, thread_id, lock=True)
            if thread is None:
                raise ResumeError(f"thread {thread_id!r} does not exist in this store")
            changed = updated(thread, metadata, ttl, now)
            await self._write_thread(conn, changed)
            return changed

        return await self._db.run(work)

    async def _delete_thread(self, thread_id: str) -> int:
        async def work(conn: AsyncConnection[Any]) -> int:
            await self._thread_on(conn, thread_id, lock=True)  # its runs' savers wait
            cursor = await conn.execute(self._q["thread_run_ids"], (thread_id,))
            runs = [row[0] for row in await cursor.fetchall()]
            cursor = await conn.execute(self._q["count_runs"], (runs,))
            row = await cursor.fetchone()
            # The runs' checkpoints, writes and events cascade; so do the thread's run rows.
            await conn.execute(self._q["delete_runs"], (runs,))
            await conn.execute(self._q["delete_thread"], (thread_id,))
            await self._lock_queue(conn, thread_id)
            await conn.execute(self._q["drop_queue"], (thread_id,))
            return int(row[0]) if row is not None else 0

        return await self._db.run(work)

    async def _expired_threads(
        self, now: dt.datetime, idle_before: dt.datetime | None
    ) -> builtins.list[str]:
        async def work(conn: AsyncConnection[Any]) -> builtins.list[str]:
            cursor = await conn.execute(self._q["expired"], (now, idle_before, idle_before))
            return [row[0] for row in await cursor.fetchall()]

        return await self._db.run(work, transaction=False)

    async def _thread_bytes(self, thread_id: str) -> int:
        async def work(conn: AsyncConnection[Any]) -> int:
            cursor = await conn.execute(self._q["thread_bytes"], (thread_id,))
            row = await cursor.fetchone()
            return int(row[0]) if row is not None else 0

        return await self._db.run(work, transaction=False)

    async def _enqueue(
        self, thread_id: str, ticket: str, until: dt.datetime, now: dt.datetime
    ) -> int:
        async def work(conn: AsyncConnection[Any]) -> int:
            await self._lock_queue(conn, thread_id)
            # A renewed ticket keeps its place (and its pos).
            cursor = await conn.execute(self._q["enqueue"], (thread_id, ticket, until))
            row = await cursor.fetchone()
            assert row is not None  # INSERT ... RETURNING always returns the row
            await conn.execute(self._q["drop_lapsed"], (thread_id, now))
            cursor = await conn.execute(self._q["ahead"], (thread_id, row[0]))
            ahead = await cursor.fetchone()
            return int(ahead[0]) if ahead is not None else 0

        return await self._db.run(work)

    async def _dequeue(self, thread_id: str, ticket: str) -> None:
        async def work(conn: AsyncConnection[Any]) -> None:
            await self._lock_queue(conn, thread_id)
            await conn.execute(self._q["dequeue"], (thread_id, ticket))

        return await self._db.run(work)

    async def _append_events(self, run_id: str, events: builtins.list[bytes]) -> int:
        async def work(conn: AsyncConnection[Any]) -> int:
            cursor = await conn.execute(self._q["lock_run"], (run_id,))  # saves of the run wait
            if await cursor.fetchone() is None or not events:
                return 0  # a run with no checkpoint here
            return await self._insert_events(conn, run_id, events)

        return await self._db.run(work, replayable=False)

    async def _read_events(
        self, run_id: str, after: int, limit: int | None
    ) -> builtins.list[StoredEvent]:
        async def work(conn: AsyncConnection[Any]) -> builtins.list[Any]:
            cursor = await conn.execute(self._q["events"], (run_id, after, limit))
            return await cursor.fetchall()

        rows = await self._db.run(work, transaction=False)
        return unpacked(rows, run_id, after, limit, f"table {self.schema}.events")
