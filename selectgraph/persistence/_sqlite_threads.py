"""SQLiteCheckpointStore's threads: their tables and primitives, each one transaction.

Four tables (migration 2): ``threads`` (a row per thread, holding its owner
and last run, so a claim reads one row), ``thread_runs`` (a row per run of a
thread, with the checkpoint it started from), ``queue`` (tickets of inputs
waiting for a thread) and ``events`` (each run's event log, a packed row per
batch, appended in the transaction that saves its checkpoint). Every primitive
here is one ``BEGIN IMMEDIATE`` transaction of the store.
"""

from __future__ import annotations

import builtins
import datetime as dt
import json
import sqlite3
import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Final

from selectgraph.core._errors import ResumeError
from selectgraph.persistence._event_pack import pack_events, unpacked
from selectgraph.persistence._thread_base import ThreadKeeping
from selectgraph.persistence._thread_records import (
    check_owner,
    claimed,
    encode_metadata,
    expiry,
    holds,
    released,
    updated,
)
from selectgraph.persistence._threads import Claim, StoredEvent, Thread, ThreadRun, decide_claim

__all__ = ["THREAD_TABLES", "SQLiteThreads", "micros"]

THREAD_TABLES: Final = (
    # Threads. Times are microseconds since the epoch; metadata is JSON text.
    """CREATE TABLE threads (
        thread_id TEXT PRIMARY KEY,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        metadata BLOB NOT NULL,
        runs INTEGER NOT NULL,
        last_run TEXT,
        owner TEXT,
        ttl REAL,
        expires_at INTEGER
    )""",
    "CREATE INDEX threads_by_update ON threads (updated_at DESC, thread_id)",
    "CREATE INDEX threads_by_expiry ON threads (expires_at) WHERE expires_at IS NOT NULL",
    """CREATE TABLE thread_runs (
        thread_id TEXT NOT NULL REFERENCES threads (thread_id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        run_id TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        strategy TEXT NOT NULL,
        start_from TEXT,
        superseded TEXT,
        PRIMARY KEY (thread_id, seq)
    ) WITHOUT ROWID""",
    "CREATE INDEX thread_runs_by_run ON thread_runs (thread_id, run_id, seq)",
    # pos orders a thread's tickets: a new one gets a rowid above every live one.
    """CREATE TABLE queue (
        pos INTEGER PRIMARY KEY,
        thread_id TEXT NOT NULL,
        ticket TEXT NOT NULL,
        until INTEGER NOT NULL,
        UNIQUE (thread_id, ticket)
    )""",
    # A row per batch (the events one save or append stored), packed.
    """CREATE TABLE events (
        id INTEGER PRIMARY KEY,
        run_key INTEGER NOT NULL REFERENCES runs (run_key) ON DELETE CASCADE,
        first_seq INTEGER NOT NULL,
        last_seq INTEGER NOT NULL,
        body BLOB NOT NULL,
        UNIQUE (run_key, last_seq)
    )""",
)
"""Migration 2: the thread tables."""

_EPOCH: Final = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)

_THREAD: Final = (
    "SELECT thread_id, created_at, updated_at, metadata, runs, last_run, owner, ttl, expires_at "
    "FROM threads "
)
_THREAD_RUN: Final = (
    "SELECT thread_id, run_id, seq, created_at, strategy, start_from, superseded FROM thread_runs "
)
_HEAD_ID: Final = (
    "SELECT c.checkpoint_id FROM checkpoints c JOIN runs r USING (run_key) "
    "WHERE r.run_id = ? ORDER BY c.version DESC LIMIT 1"
)
"""A run's head checkpoint id, found through the (run_key, version) index."""
_THREAD_RUN_KEYS: Final = (
    "SELECT r.run_key FROM runs r WHERE r.run_id IN "
    "(SELECT run_id FROM thread_runs WHERE thread_id = ?)"
)


def micros(created_at: dt.datetime) -> int:
    """Microseconds since the epoch: exact, unlike a float timestamp."""
    delta = created_at - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _time(stored: int) -> dt.datetime:
    return _EPOCH + dt.timedelta(microseconds=stored)


def _maybe_micros(moment: dt.datetime | None) -> int | None:
    return None if moment is None else micros(moment)


def _thread(row: Sequence[Any]) -> Thread:
    thread_id, created, changed, metadata, runs, last_run, owner, ttl, expires = row
    return Thread(
        thread_id=thread_id,
        created_at=_time(created),
        updated_at=_time(changed),
        metadata=json.loads(metadata),
        runs=runs,
        last_run=last_run,
        owner=owner,
        ttl=ttl,
        expires_at=None if expires is None else _time(expires),
    )


def _thread_run(row: Sequence[Any]) -> ThreadRun:
    thread_id, run_id, seq, created, strategy, start_from, superseded = row
    return ThreadRun(
        thread_id=thread_id,
        run_id=run_id,
        seq=seq,
        created_at=_time(created),
        strategy=strategy,
        start_from=start_from,
        superseded=superseded,
    )


class SQLiteThreads(ThreadKeeping):
    """The thread primitives of :class:`~selectgraph.SQLiteCheckpointStore`."""

    path: Path
    _lock: threading.RLock
    _conn: sqlite3.Connection
    _transaction: Callable[[], AbstractContextManager[sqlite3.Connection]]

    @staticmethod
    def _thread_on(conn: sqlite3.Connection, thread_id: str) -> Thread | None:
        row = conn.execute(_THREAD + "WHERE thread_id = ?", (thread_id,)).fetchone()
        return None if row is None else _thread(row)

    @staticmethod
    def _write_thread(conn: sqlite3.Connection, thread: Thread, *, new: bool) -> None:
        values = (
            micros(thread.created_at),
            micros(thread.updated_at),
            encode_metadata(thread.metadata),
            thread.runs,
            thread.last_run,
            thread.owner,
            thread.ttl,
            _maybe_micros(thread.expires_at),
            thread.thread_id,
        )
        if new:
            conn.execute(
                "INSERT INTO threads (created_at, updated_at, metadata, runs, last_run, owner, "
                "ttl, expires_at, thread_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                values,
            )
        else:
            conn.execute(
                "UPDATE threads SET created_at = ?, updated_at = ?, metadata = ?, runs = ?, "
                "last_run = ?, owner = ?, ttl = ?, expires_at = ? WHERE thread_id = ?",
                values,
            )

    @staticmethod
    def _start_of(conn: sqlite3.Connection, thread_id: str, run_id: str) -> str | None:
        """Where ``run_id`` started on the thread (its first ThreadRun's start_from)."""
        row = conn.execute(
            "SELECT start_from FROM thread_runs WHERE thread_id = ? AND run_id = ? "
            "ORDER BY seq LIMIT 1",
            (thread_id, run_id),
        ).fetchone()
        return None if row is None else row[0]

    def _check_owner(
        self, conn: sqlite3.Connection, thread_id: str, run_id: str, now: dt.datetime
    ) -> None:
        thread = self._thread_on(conn, thread_id)
        check_owner(thread, thread_id, run_id)
        assert thread is not None  # check_owner refuses a missing thread
        conn.execute(
            "UPDATE threads SET updated_at = ?, expires_at = ? WHERE thread_id = ?",
            (micros(now), _maybe_micros(expiry(thread.ttl, now)), thread_id),
        )

    @staticmethod
    def _insert_events(
        conn: sqlite3.Connection,
        run_key: int,
        events: builtins.list[bytes],
        run_dict: bytes | None,
    ) -> int:
        """Append ``events`` to the run's log (packed against its ``run_dict``); the last seq."""
        # One statement: the batch's seqs follow the run's last (the write lock is held).
        (last,) = conn.execute(
            "INSERT INTO events (run_key, first_seq, last_seq, body) "
            "SELECT ?, last + 1, last + ?, ? FROM (SELECT coalesce(max(last_seq), 0) AS last "
            "FROM events WHERE run_key = ?) RETURNING last_seq",
            (run_key, len(events), pack_events(events, run_dict), run_key),
        ).fetchone()
        return int(last)

    @staticmethod
    def _front_ticket(conn: sqlite3.Connection, thread_id: str, now: dt.datetime) -> str | None:
        # Tickets whose lease ran out belong to waiters that are gone.
        conn.execute(
            "DELETE FROM queue WHERE thread_id = ? AND until <= ?", (thread_id, micros(now))
        )
        row = conn.execute(
            "SELECT ticket FROM queue WHERE thread_id = ? ORDER BY pos LIMIT 1", (thread_id,)
        ).fetchone()
        return None if row is None else str(row[0])

    def _claim_thread(
        self,
        thread_id: str,
        run_id: str,
        strategy: str,
        ticket: str | None,
        metadata: dict[str, Any],
        ttl: float | None,
        now: dt.datetime,
    ) -> Claim:
        with self._transaction() as conn:
            thread = self._thread_on(conn, thread_id)
            owner_start = None
            if thread is not None and thread.owner is not None:
                owner_start = self._start_of(conn, thread_id, thread.owner)
            decision = decide_claim(
                thread,
                run_id,
                strategy,
                front_ticket=self._front_ticket(conn, thread_id, now),
                ticket=ticket,
                superseded_start=owner_start,
            )
            start_from = decision.start_from
            if decision.start_after_run is not None:
                head = conn.execute(_HEAD_ID, (decision.start_after_run,)).fetchone()
                # A run with no checkpoint yet leaves the state where it started.
                start_from = (
                    head[0]
                    if head is not None
                    else self._start_of(conn, thread_id, decision.start_after_run)
                )
            if decision.delete_superseded and decision.superseded is not None:
                # Its checkpoints, writes and events go with its runs row (ON DELETE CASCADE).
                conn.execute("DELETE FROM runs WHERE run_id = ?", (decision.superseded,))
                conn.execute(
                    "DELETE FROM thread_runs WHERE thread_id = ? AND run_id = ?",
                    (thread_id, decision.superseded),
                )
            if ticket is not None:
                conn.execute(
                    "DELETE FROM queue WHERE thread_id = ? AND ticket = ?", (thread_id, ticket)
                )
            owned, record = claimed(
                thread, thread_id, run_id, strategy, decision, start_from, metadata, ttl, now
            )
            self._write_thread(conn, owned, new=thread is None)  # first: runs refer to it
            conn.execute(
                "INSERT INTO thread_runs (thread_id, seq, run_id, created_at, strategy, "
                "start_from, superseded) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    thread_id,
                    record.seq,
                    run_id,
                    micros(now),
                    record.strategy,
                    record.start_from,
                    record.superseded,
                ),
            )
            return Claim(owned, record, start_from, decision.superseded)

    def _release_thread(self, thread_id: str, run_id: str, now: dt.datetime) -> bool:
        with self._transaction() as conn:
            thread = self._thread_on(conn, thread_id)
            if thread is None or thread.owner != run_id:
                return False
            self._write_thread(conn, released(thread, now), new=False)
            return True

    def _get_thread(self, thread_id: str) -> Thread | None:
        with self._lock:
            return self._thread_on(self._conn, thread_id)

    def _list_threads(self, metadata: dict[str, Any], limit: int | None) -> builtins.list[Thread]:
        found: builtins.list[Thread] = []
        if limit == 0:
            return found
        with self._lock:
            # Filtered here, not in SQL: JSON equality is Python's, as in the other stores.
            for row in self._conn.execute(_THREAD + "ORDER BY updated_at DESC, thread_id"):
                thread = _thread(row)
                if holds(thread.metadata, metadata):
                    found.append(thread)
                    if len(found) == limit:
                        break
        return found

    def _thread_runs(self, thread_id: str) -> builtins.list[ThreadRun]:
        with self._lock:
            rows = self._conn.execute(
                _THREAD_RUN + "WHERE thread_id = ? ORDER BY seq", (thread_id,)
            ).fetchall()
        return [_thread_run(row) for row in rows]

    def _update_thread(
        self,
        thread_id: str,
        metadata: dict[str, Any] | None,
        ttl: float | None,
        now: dt.datetime,
    ) -> Thread:
        with self._transaction() as conn:
            thread = self._thread_on(conn, thread_id)
            if thread is None:
                raise ResumeError(f"thread {thread_id!r} does not exist in this store")
            changed = updated(thread, metadata, ttl, now)
            self._write_thread(conn, changed, new=False)
            return changed

    def _delete_thread(self, thread_id: str) -> int:
        with self._transaction() as conn:
            (count,) = conn.execute(
                f"SELECT count(*) FROM checkpoints WHERE run_key IN ({_THREAD_RUN_KEYS})",
                (thread_id,),
            ).fetchone()
            # The runs' checkpoints, writes and events cascade; so do the thread's run rows.
            conn.execute(f"DELETE FROM runs WHERE run_key IN ({_THREAD_RUN_KEYS})", (thread_id,))
            conn.execute("DELETE FROM threads WHERE thread_id = ?", (thread_id,))
            conn.execute("DELETE FROM queue WHERE thread_id = ?", (thread_id,))
            return int(count)

    def _expired_threads(
        self, now: dt.datetime, idle_before: dt.datetime | None
    ) -> builtins.list[str]:
        idle = _maybe_micros(idle_before)
        with self._lock:
            rows = self._conn.execute(
                "SELECT thread_id FROM threads WHERE expires_at <= ? "
                "OR (? IS NOT NULL AND owner IS NULL AND updated_at < ?) "
                "ORDER BY created_at, thread_id",
                (micros(now), idle, idle),
            ).fetchall()
        return [row[0] for row in rows]

    def _thread_bytes(self, thread_id: str) -> int:
        with self._lock:
            (total,) = self._conn.execute(
                f"""SELECT
                    (SELECT coalesce(sum(length(body)), 0) FROM checkpoints
                        WHERE run_key IN ({_THREAD_RUN_KEYS}))
                    + (SELECT coalesce(sum(length(w.body)), 0) FROM writes w
                        JOIN checkpoints c ON c.id = w.checkpoint
                        WHERE c.run_key IN ({_THREAD_RUN_KEYS}))
                    + (SELECT coalesce(sum(length(body)), 0) FROM events
                        WHERE run_key IN ({_THREAD_RUN_KEYS}))""",
                (thread_id, thread_id, thread_id),
            ).fetchone()
        return int(total)

    def _enqueue(self, thread_id: str, ticket: str, until: dt.datetime, now: dt.datetime) -> int:
        with self._transaction() as conn:
            renewed = conn.execute(  # a renewed ticket keeps its place
                "UPDATE queue SET until = ? WHERE thread_id = ? AND ticket = ?",
                (micros(until), thread_id, ticket),
            ).rowcount
            if not renewed:
                conn.execute(
                    "INSERT INTO queue (thread_id, ticket, until) VALUES (?, ?, ?)",
                    (thread_id, ticket, micros(until)),
                )
            self._front_ticket(conn, thread_id, now)  # drops lapsed tickets
            (ahead,) = conn.execute(
                "SELECT count(*) FROM queue WHERE thread_id = ? AND pos < "
                "(SELECT pos FROM queue WHERE thread_id = ? AND ticket = ?)",
                (thread_id, thread_id, ticket),
            ).fetchone()
            return int(ahead)

    def _dequeue(self, thread_id: str, ticket: str) -> None:
        with self._transaction() as conn:
            conn.execute(
                "DELETE FROM queue WHERE thread_id = ? AND ticket = ?", (thread_id, ticket)
            )

    def _append_events(self, run_id: str, events: builtins.list[bytes]) -> int:
        with self._transaction() as conn:
            row = conn.execute(
                "SELECT r.run_key, d.event_dict FROM runs r LEFT JOIN run_dicts d "
                "USING (run_key) WHERE r.run_id = ?",
                (run_id,),
            ).fetchone()
            if row is None or not events:
                return 0
            return self._insert_events(conn, row[0], events, row[1])

    def _read_events(
        self, run_id: str, after: int, limit: int | None
    ) -> builtins.list[StoredEvent]:
        with self._lock:
            # A batch holds one event at least: ``limit`` rows are enough.
            rows = self._conn.execute(
                "SELECT e.first_seq, e.body FROM events e JOIN runs r USING (run_key) "
                "WHERE r.run_id = ? AND e.last_seq > ? ORDER BY e.last_seq LIMIT ?",
                (run_id, after, -1 if limit is None else limit),
            ).fetchall()
            found = self._conn.execute(
                "SELECT d.event_dict FROM run_dicts d JOIN runs r USING (run_key) "
                "WHERE r.run_id = ?",
                (run_id,),
            ).fetchone()
        run_dict = None if found is None else found[0]
        return unpacked(rows, run_id, after, limit, f"{self.path} events", run_dict)
