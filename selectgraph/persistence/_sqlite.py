"""SQLiteCheckpointStore: checkpoints in one SQLite file (WAL), safe across threads and processes.

Durability: ``synchronous=FULL`` in WAL mode fsyncs the log at every commit, so
a saved checkpoint survives a crash or a power cut; a crash mid-save rolls the
save back whole. Writers take the database's write lock up front (``BEGIN
IMMEDIATE``), so the head-version check and the insert happen with no other
writer in between, and wait up to ``timeout`` seconds for it.

Storage stays linear in the number of steps: rows hold deltas (most bodies
are a few dozen bytes), run ids are stored once, and bodies are compressed.
What a run repeats step after step is stored once per run (``run_dicts``):
one of its deltas, one of its event batches and the start of its first
snapshot, which later bodies and batches are deflated against. New files use
1 KiB pages, since every table and index takes a page at least.

Threads (see ``_threads.py``) live in four more tables (``_sqlite_threads.py``);
a save that names a thread checks, in its transaction, that its run still owns
it, and appends the run's events there too.
"""

from __future__ import annotations

import builtins
import os
import sqlite3
import threading
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

from tenacity import (
    Retrying,
    retry_if_exception,
    stop_after_delay,
    wait_random_exponential,
)

from selectgraph.core._errors import (
    CheckpointConflict,
    CheckpointDecodeError,
    CheckpointNotFound,
    StoreError,
)
from selectgraph.persistence._base import BlockingStore, rebased_child
from selectgraph.persistence._checkpoint import Checkpoint, id_time
from selectgraph.persistence._codec import (
    body_json,
    decode_row,
    decode_writes,
    encode_body,
    encode_events,
    encode_writes,
    inflate,
    run_dict_of,
    seal_body,
    state_dict_of,
    uses_state_dict,
)
from selectgraph.persistence._event_pack import event_lines
from selectgraph.persistence._sqlite_threads import THREAD_TABLES, SQLiteThreads, micros

__all__ = ["SQLiteCheckpointStore"]

_ID_HASH_MASK: Final = (1 << 23) - 1
"""The bits of an id's CRC-32 kept as its hash: what SQLite stores in three bytes."""

_MIGRATIONS: Final[tuple[tuple[int, tuple[str, ...]], ...]] = (
    (
        1,
        (
            """CREATE TABLE runs (
                run_key INTEGER PRIMARY KEY,
                run_id TEXT NOT NULL UNIQUE,
                version INTEGER NOT NULL
            )""",
            # Kept small, since there is a row per step: parent_id NULL means "the run's
            # previous checkpoint" (nearly always), '' means none; created_at NULL means
            # "the time in the checkpoint id"; ids are found through a hash
            # (id_hash), not a second copy of the id in an index.
            """CREATE TABLE checkpoints (
                id INTEGER PRIMARY KEY,
                run_key INTEGER NOT NULL REFERENCES runs (run_key) ON DELETE CASCADE,
                version INTEGER NOT NULL,
                id_hash INTEGER NOT NULL,
                checkpoint_id TEXT NOT NULL,
                parent_id TEXT,
                step INTEGER NOT NULL,
                kind INTEGER NOT NULL,
                created_at INTEGER,
                body BLOB NOT NULL,
                UNIQUE (run_key, version)
            )""",
            "CREATE INDEX checkpoints_by_id ON checkpoints (id_hash)",
            """CREATE TABLE writes (
                checkpoint INTEGER NOT NULL REFERENCES checkpoints (id) ON DELETE CASCADE,
                task_id TEXT NOT NULL,
                body BLOB NOT NULL,
                PRIMARY KEY (checkpoint, task_id)
            ) WITHOUT ROWID""",
        ),
    ),
    (2, THREAD_TABLES),
    # Bodies and writes carry a CRC-32 from here on (see _codec.py). Rows written
    # before (ids below sealed_from.id) are read unchecked; every later one must
    # have its checksum. The version also tells an older selectgraph not to read them.
    (
        3,
        (
            "CREATE TABLE sealed_from (id INTEGER NOT NULL)",
            "INSERT INTO sealed_from SELECT coalesce(max(id), 0) + 1 FROM checkpoints",
        ),
    ),
    # Each run's dictionaries (see _codec.seal_body, _event_pack.pack_events): set once,
    # in the transaction that first stores a body or batch deflated against them.
    # Apart from runs, whose row every save rewrites.
    (
        4,
        (
            """CREATE TABLE run_dicts (
                run_key INTEGER PRIMARY KEY REFERENCES runs (run_key) ON DELETE CASCADE,
                body_dict BLOB,
                event_dict BLOB
            )""",
        ),
    ),
    # The event log keyed by (run, last seq) itself: the table was a rowid table plus a
    # unique index holding the same keys again, an entry per batch.
    (
        5,
        (
            """CREATE TABLE events_by_run (
                run_key INTEGER NOT NULL REFERENCES runs (run_key) ON DELETE CASCADE,
                last_seq INTEGER NOT NULL,
                first_seq INTEGER NOT NULL,
                body BLOB NOT NULL,
                PRIMARY KEY (run_key, last_seq)
            ) WITHOUT ROWID""",
            "INSERT INTO events_by_run (run_key, last_seq, first_seq, body) "
            "SELECT run_key, last_seq, first_seq, body FROM events",
            "DROP TABLE events",
            "ALTER TABLE events_by_run RENAME TO events",
            # Ids' hashes cut to 23 bits (id_hash): three bytes in a row and in the index
            # instead of six, and still few ids to a hash.
            f"UPDATE checkpoints SET id_hash = id_hash & {_ID_HASH_MASK}",
        ),
    ),
    # A run's state dictionary: the start of its first snapshot, zlib-compressed; later
    # snapshots are deflated against it (see _codec.seal_body).
    (6, ("ALTER TABLE run_dicts ADD COLUMN state_dict BLOB",)),
)
"""Schema changes in order; a database records the last one applied in ``schema_version``."""

SCHEMA_VERSION: Final = _MIGRATIONS[-1][0]

PAGE_SIZE: Final = 1024
"""Bytes per database page of a file this store creates."""

_COMPRESS_OVER: Final = 512
"""A delta longer than this is not made a run's body dictionary (it is zlib-compressed alone)."""
_EVENTS_FOR_DICT: Final = 4
"""A batch of this many events or more may become the run's event dictionary (a step of a
loop: its checkpoint, the edge, the next node's start and end)."""

_KIND_CODES: Final = {"snapshot": 0, "delta": 1}
_KIND_NAMES: Final = {0: "snapshot", 1: "delta"}

_PARENT: Final = """CASE
    WHEN c.parent_id IS NULL THEN (
        SELECT p.checkpoint_id FROM checkpoints p
        WHERE p.run_key = c.run_key AND p.version < c.version
        ORDER BY p.version DESC LIMIT 1)
    WHEN c.parent_id = '' THEN NULL
    ELSE c.parent_id END"""
"""The parent's id, resolving the stored shorthands."""

_COLUMNS: Final = (
    f"c.id, c.version, r.run_id, c.checkpoint_id, {_PARENT}, c.step, c.kind, c.created_at, c.body, "
    "(SELECT d.body_dict FROM run_dicts d WHERE d.run_key = c.run_key)"
)
_BY_ID: Final = "c.id_hash = ? AND c.checkpoint_id = ?"
_SELECT: Final = f"SELECT {_COLUMNS} FROM checkpoints c JOIN runs r USING (run_key) "

_CHAIN: Final = f"""
WITH RECURSIVE chain (id, parent, kind, depth) AS (
    SELECT c.id, {_PARENT}, c.kind, 0 FROM checkpoints c WHERE {_BY_ID}
    UNION ALL
    SELECT c.id, {_PARENT}, c.kind, chain.depth + 1
    FROM checkpoints c JOIN chain ON c.id_hash = id_hash(chain.parent)
        AND c.checkpoint_id = chain.parent
    WHERE chain.kind = 1 AND chain.depth < 10000
)
SELECT {_COLUMNS}
FROM chain JOIN checkpoints c ON c.id = chain.id JOIN runs r ON r.run_key = c.run_key
ORDER BY chain.depth DESC
"""

_BEFORE_SAVE: Final = """
SELECT EXISTS (SELECT 1 FROM checkpoints WHERE id_hash = ?1 AND checkpoint_id = ?2),
    r.run_key, r.version, d.body_dict, d.event_dict, d.state_dict IS NOT NULL,
    (SELECT p.checkpoint_id FROM checkpoints p WHERE p.run_key = r.run_key AND p.version < ?3
        ORDER BY p.version DESC LIMIT 1)
FROM (SELECT 1) LEFT JOIN runs r ON r.run_id = ?4 LEFT JOIN run_dicts d USING (run_key)
"""
"""What a save reads first, in one statement: whether its id is taken; the run's key,
head version and dictionaries (NULLs for a new run); the id of the checkpoint before it."""


def _stored_parent(parent_id: str | None, previous_id: str | None) -> str | None:
    """The parent as stored: NULL when it is the run's previous checkpoint, '' for none."""
    if parent_id is None:
        return ""
    return None if previous_id == parent_id else parent_id


def _previous_id(conn: sqlite3.Connection, run_key: int, version: int) -> str | None:
    """The id of the run's checkpoint before ``version``, if any."""
    row = conn.execute(
        "SELECT checkpoint_id FROM checkpoints WHERE run_key = ? AND version < ? "
        "ORDER BY version DESC LIMIT 1",
        (run_key, version),
    ).fetchone()
    return None if row is None else str(row[0])


_RUNS: Final = """
SELECT r.run_id FROM runs r JOIN checkpoints c ON c.id = (
    SELECT h.id FROM checkpoints h WHERE h.run_key = r.run_key ORDER BY h.version DESC LIMIT 1)
ORDER BY coalesce(c.created_at, id_micros(c.checkpoint_id)) DESC, r.run_id
"""
"""Runs with checkpoints, newest head ``created_at`` (NULL: the time in its id) first."""


def id_hash(checkpoint_id: str | None) -> int | None:
    """The 23-bit hash that finds a checkpoint id in the ``checkpoints_by_id`` index."""
    return None if checkpoint_id is None else zlib.crc32(checkpoint_id.encode()) & _ID_HASH_MASK


def id_micros(checkpoint_id: str) -> int | None:
    """:func:`micros` of the time in a checkpoint id (what a NULL ``created_at`` stands for)."""
    created = id_time(checkpoint_id)
    return None if created is None else micros(created)


def _use_wal(conn: sqlite3.Connection, timeout: float) -> None:
    """Put the database in WAL mode, once per file.

    The mode is stored in the file, so a second opener finds it set and
    changes nothing. Switching needs the file to itself and SQLite does not
    wait on its busy handler for that, so two processes opening a new file at
    once retry here rather than fail with "database is locked".
    """
    for attempt in Retrying(
        retry=retry_if_exception(_locked),
        wait=wait_random_exponential(multiplier=0.01, max=0.5),
        stop=stop_after_delay(timeout),
        reraise=True,
    ):
        with attempt:
            (mode,) = conn.execute("PRAGMA journal_mode").fetchone()
            if str(mode).lower() != "wal":
                conn.execute("PRAGMA journal_mode=WAL")


def _locked(error: BaseException) -> bool:
    return isinstance(error, sqlite3.OperationalError) and "locked" in str(error)


def _open_error(path: Path, error: sqlite3.Error) -> StoreError:
    """The typed error for a path SQLite cannot open as a checkpoint store."""
    if "not a database" in str(error) or isinstance(error, sqlite3.DatabaseError):
        what = (
            "it is not a SQLite database"
            if "not a database" in str(error)
            else f"SQLite failed: {error}"
        )
        return StoreError(
            f"cannot open SQLite checkpoint store {str(path)!r}: {what}; name a new file "
            "(it is created) or a database a SQLiteCheckpointStore made"
        )
    return StoreError(f"cannot open SQLite checkpoint store {str(path)!r}: {error}")


class SQLiteCheckpointStore(SQLiteThreads, BlockingStore):
    """Checkpoints in a SQLite database file: durable, compact, one writer per run.

    Several threads and processes may share the file; two writers resuming one
    run end with exactly one winner (:class:`~selectgraph.CheckpointConflict`
    for the other). The schema is created, and later upgraded, by numbered
    migrations recorded in a ``schema_version`` table: a database an older
    selectgraph made gains the thread tables when this store opens it.

    Args:
        path: The database file; created if missing.
        timeout: Seconds a writer waits for another's lock before failing.
    """

    def __init__(self, path: str | os.PathLike[str], *, timeout: float = 30.0) -> None:
        self.path = Path(path)
        """The database file."""
        self._lock = threading.RLock()
        if not self.path.parent.is_dir():
            raise StoreError(
                f"cannot open SQLite checkpoint store {str(self.path)!r}: its folder "
                f"{str(self.path.parent)!r} does not exist; create it first, or name a file "
                "in an existing folder"
            )
        try:
            self._conn = sqlite3.connect(
                self.path, timeout=timeout, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise _open_error(self.path, exc) from exc
        try:
            self._conn.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
            # For a new file (an existing one keeps its own): a step's rows are a few
            # hundred bytes, and every table and index takes a page at least.
            self._conn.execute(f"PRAGMA page_size={PAGE_SIZE}")
            _use_wal(self._conn, timeout)
            self._conn.execute("PRAGMA synchronous=FULL")
            self._conn.execute("PRAGMA foreign_keys=ON")
            self._conn.create_function("id_hash", 1, id_hash, deterministic=True)
            self._conn.create_function("id_micros", 1, id_micros, deterministic=True)
            self._migrate()
        except BaseException as exc:
            self._conn.close()
            if isinstance(exc, sqlite3.DatabaseError) and not _locked(exc):
                raise _open_error(self.path, exc) from exc
            raise

    def __repr__(self) -> str:
        return f"SQLiteCheckpointStore({str(self.path)!r})"

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def _migrate(self) -> None:
        with self._transaction() as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
            current = conn.execute("SELECT max(version) FROM schema_version").fetchone()[0] or 0
            if type(current) is not int or current > SCHEMA_VERSION:
                raise StoreError(
                    f"SQLite checkpoint store {str(self.path)!r} has checkpoint schema version "
                    f"{current!r}; this selectgraph knows versions up to {SCHEMA_VERSION}: "
                    "upgrade selectgraph to open it (a newer version wrote it)"
                )
            for version, statements in _MIGRATIONS:
                if version > current:
                    for statement in statements:
                        conn.execute(statement)
                    conn.execute("INSERT INTO schema_version (version) VALUES (?)", (version,))
            (sealed_from,) = conn.execute("SELECT min(id) FROM sealed_from").fetchone()
            self._sealed_from = sealed_from if type(sealed_from) is int else 1

    # -- rows ------------------------------------------------------------------

    def _checkpoint(
        self,
        row: Sequence[Any],
        writes: dict[str, builtins.list[Any]],
        states: dict[str, bytes | None] | None = None,
    ) -> Checkpoint:
        """A row as a checkpoint; ``states`` keeps state dictionaries read for earlier rows."""
        row_id, version, run_id, checkpoint_id, parent_id, step, kind, created_at, body, words = row
        state_dict = None
        if uses_state_dict(body):
            states = {} if states is None else states
            if run_id not in states:
                states[run_id] = self._state_dict(str(run_id))
            state_dict = states[run_id]
        header = {
            "run_id": run_id,
            "checkpoint_id": checkpoint_id,
            "parent_id": parent_id,
            "version": version,
            "step": step,
            "kind": _KIND_NAMES.get(kind, kind),
            "created_at": (
                created_at
                if created_at is not None
                else id_time(checkpoint_id)
                if type(checkpoint_id) is str
                else None
            ),
        }
        location = f"{self.path} checkpoints row {row_id}"
        return decode_row(
            header,
            body,
            writes,
            location=location,
            run_id=str(run_id),
            sealed=type(row_id) is not int or row_id >= self._sealed_from,
            run_dict=words,
            state_dict=state_dict,
        )

    def _state_dict(self, run_id: str) -> bytes | None:
        """The run's state dictionary, inflated (None if it has none)."""
        with self._lock:
            row = self._conn.execute(
                "SELECT d.state_dict FROM run_dicts d JOIN runs r USING (run_key) "
                "WHERE r.run_id = ?",
                (run_id,),
            ).fetchone()
        if row is None or row[0] is None:
            return None

        def fail(path: str, reason: str) -> CheckpointDecodeError:
            return CheckpointDecodeError(
                run_id, path, reason, location=f"{self.path} run_dicts", run_id=run_id
            )

        return inflate(bytes(row[0]), zlib.MAX_WBITS, None, fail, "state_dict")

    def _rows(
        self, conn: sqlite3.Connection, rows: builtins.list[Any]
    ) -> builtins.list[Checkpoint]:
        found: dict[int, dict[str, builtins.list[Any]]] = {}
        if rows:
            ids = {row[0]: row for row in rows}
            stored = conn.execute(
                "SELECT checkpoint, task_id, body FROM writes WHERE checkpoint BETWEEN ? AND ?",
                (min(ids), max(ids)),
            )
            for row_id, task_id, body in stored:
                if row_id in ids:
                    found.setdefault(row_id, {})[str(task_id)] = decode_writes(
                        body,
                        str(ids[row_id][3]),
                        str(task_id),
                        location=f"{self.path} writes",
                        run_id=str(ids[row_id][2]),
                        sealed=row_id >= self._sealed_from,
                    )
        states: dict[str, bytes | None] = {}
        return [self._checkpoint(row, found.get(row[0], {}), states) for row in rows]

    def _find(self, conn: sqlite3.Connection, checkpoint_id: str) -> Any:
        return conn.execute(
            _SELECT + "WHERE " + _BY_ID, (id_hash(checkpoint_id), checkpoint_id)
        ).fetchone()

    # -- primitives ------------------------------------------------------------

    def _save(self, checkpoint: Checkpoint, expected_version: int) -> None:
        self._save_all([(checkpoint, expected_version)])

    def _save_batch(self, checkpoints: Sequence[Checkpoint]) -> None:
        self._save_all([(checkpoint, checkpoint.version - 1) for checkpoint in checkpoints])

    def _save_all(self, saves: builtins.list[tuple[Checkpoint, int]]) -> None:
        """Store each (checkpoint, expected version) in order, in one transaction."""
        # Encoding errors surface before the transaction.
        encoded = [
            (
                checkpoint,
                expected,
                body_json(checkpoint),
                encode_events(checkpoint.events, checkpoint.run_id),
            )
            for checkpoint, expected in saves
        ]
        with self._transaction() as conn:
            for checkpoint, expected, raw, events in encoded:
                self._save_in(conn, checkpoint, expected, raw, events)

    def _save_in(
        self,
        conn: sqlite3.Connection,
        checkpoint: Checkpoint,
        expected_version: int,
        raw: bytes,
        events: builtins.list[bytes],
    ) -> None:
        thread_id = checkpoint.metadata.get("thread_id")
        created = checkpoint.created_at
        if thread_id is not None:  # in this transaction: a claim cannot slip in between
            # Before the version check: a rolled-back run has no head left to
            # conflict with, and must hear that it lost the thread.
            self._check_owner(conn, str(thread_id), checkpoint.run_id, created)
        taken, *found = conn.execute(
            _BEFORE_SAVE,
            (
                id_hash(checkpoint.checkpoint_id),
                checkpoint.checkpoint_id,
                checkpoint.version,
                checkpoint.run_id,
            ),
        ).fetchone()
        row = None if found[0] is None else found
        actual = row[1] if row is not None else 0
        if actual != expected_version:
            mine = self._find(conn, checkpoint.checkpoint_id) if taken else None
            if mine is not None and (mine[2], mine[1]) == (
                checkpoint.run_id,
                checkpoint.version,
            ):
                return  # this very save was committed before: a retry
            raise CheckpointConflict(
                checkpoint.run_id, expected_version=expected_version, actual_version=actual
            )
        if taken:
            raise ValueError(f"checkpoint id {checkpoint.checkpoint_id!r} is already stored")
        if row is None:
            run_key = conn.execute(
                "INSERT INTO runs (run_id, version) VALUES (?, ?)",
                (checkpoint.run_id, checkpoint.version),
            ).lastrowid
            assert run_key is not None  # an INSERT always sets it
        else:
            run_key = row[0]
            conn.execute(
                "UPDATE runs SET version = ? WHERE run_key = ?", (checkpoint.version, run_key)
            )
        body_dict, event_dict = self._run_dicts(
            conn, run_key, row, raw if checkpoint.kind == "delta" else None, events
        )
        state_dict = None
        if checkpoint.kind == "snapshot" and len(raw) > _COMPRESS_OVER:
            state_dict = self._snapshot_dict(conn, run_key, checkpoint.run_id, row, raw)
        elif len(raw) > _COMPRESS_OVER and row is not None and row[4]:
            # A large delta mostly sets a big value again with a small change in it.
            state_dict = self._state_dict(checkpoint.run_id)
        conn.execute(
            "INSERT INTO checkpoints (run_key, version, id_hash, checkpoint_id, parent_id, "
            "step, kind, created_at, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                run_key,
                checkpoint.version,
                id_hash(checkpoint.checkpoint_id),
                checkpoint.checkpoint_id,
                _stored_parent(checkpoint.parent_id, None if row is None else row[5]),
                checkpoint.step,
                _KIND_CODES[checkpoint.kind],
                None if created == id_time(checkpoint.checkpoint_id) else micros(created),
                seal_body(checkpoint, raw, body_dict, state_dict),
            ),
        )
        if events:
            self._insert_events(conn, run_key, events, event_dict)

    @staticmethod
    def _run_dicts(
        conn: sqlite3.Connection,
        run_key: int,
        row: Sequence[Any] | None,
        delta: bytes | None,
        events: builtins.list[bytes],
    ) -> tuple[bytes | None, bytes | None]:
        """The run's dictionaries for this save; a missing one is made of it, if it fits.

        A body dictionary is a delta's (a snapshot is unlike the steps after it),
        an event one a batch of a node's events (a start, an end, a checkpoint).
        """
        body_dict, event_dict = (row[2], row[3]) if row is not None else (None, None)
        new_body = delta is not None and body_dict is None and len(delta) <= _COMPRESS_OVER
        new_events = event_dict is None and len(events) >= _EVENTS_FOR_DICT
        if new_body or new_events:
            body_dict = run_dict_of(delta) if new_body and delta is not None else body_dict
            event_dict = run_dict_of(event_lines(events)) if new_events else event_dict
            conn.execute(
                "INSERT INTO run_dicts (run_key, body_dict, event_dict) VALUES (?, ?, ?) "
                "ON CONFLICT (run_key) DO UPDATE SET body_dict = excluded.body_dict, "
                "event_dict = excluded.event_dict",
                (run_key, body_dict, event_dict),
            )
        return body_dict, event_dict

    def _snapshot_dict(
        self,
        conn: sqlite3.Connection,
        run_key: int,
        run_id: str,
        row: Sequence[Any] | None,
        raw: bytes,
    ) -> bytes:
        """The state dictionary a snapshot is deflated against: the run's, or made of it."""
        if row is not None and row[4]:
            found = self._state_dict(run_id)
            if found is not None:
                return found
        made = state_dict_of(raw)
        conn.execute(
            "INSERT INTO run_dicts (run_key, state_dict) VALUES (?, ?) "
            "ON CONFLICT (run_key) DO UPDATE SET state_dict = excluded.state_dict",
            (run_key, zlib.compress(made, 6)),
        )
        return made

    def _load(self, checkpoint_id: str) -> Checkpoint:
        with self._lock:
            row = self._find(self._conn, checkpoint_id)
            if row is None:
                raise CheckpointNotFound(checkpoint_id)
            return self._rows(self._conn, [row])[0]

    def _chain(self, checkpoint_id: str) -> builtins.list[Checkpoint]:
        with self._lock:
            rows = self._conn.execute(_CHAIN, (id_hash(checkpoint_id), checkpoint_id)).fetchall()
        if not rows:
            raise CheckpointNotFound(checkpoint_id)
        states: dict[str, bytes | None] = {}
        return [self._checkpoint(row, {}, states) for row in rows]

    def _cursor(self, run_id: str, checkpoint_id: str | None) -> int | None:
        if checkpoint_id is None:
            return None
        row = self._find(self._conn, checkpoint_id)
        if row is None or row[2] != run_id:
            raise CheckpointNotFound(checkpoint_id, where=f"run {run_id!r}")
        return int(row[1])

    def _list(
        self, run_id: str, limit: int | None, before: str | None, after: str | None
    ) -> builtins.list[Checkpoint]:
        with self._lock:
            before_v, after_v = self._cursor(run_id, before), self._cursor(run_id, after)
            where = ["r.run_id = ?"]
            params: builtins.list[Any] = [run_id]
            if before_v is not None:
                where.append("c.version < ?")
                params.append(before_v)
            if after_v is not None:
                where.append("c.version > ?")
                params.append(after_v)
            backwards = limit is not None and before_v is not None and after_v is None
            sql = _SELECT + "WHERE " + " AND ".join(where)
            sql += " ORDER BY c.version DESC" if backwards else " ORDER BY c.version"
            if limit is not None:
                sql += " LIMIT ?"
                params.append(limit)
            rows = self._conn.execute(sql, params).fetchall()
            if backwards:
                rows.reverse()
            return self._rows(self._conn, rows)

    def _delete(self, checkpoint_id: str) -> bool:
        with self._transaction() as conn:
            row = self._find(conn, checkpoint_id)
            if row is None:
                return False
            deleted = self._rows(conn, [row])[0]
            (run_key,) = conn.execute(
                "SELECT run_key FROM checkpoints WHERE id = ?", (row[0],)
            ).fetchone()
            children = conn.execute(  # those whose parent, stored or implied, is this one
                _SELECT + f"WHERE c.run_key = ? AND c.version > ? AND {_PARENT} = ?",
                (run_key, row[1], checkpoint_id),
            ).fetchall()
            rebased = [  # as stored: the writes table's rows stay where they are
                (child[0], rebased_child(deleted, self._checkpoint(child, {}), self.load_state))
                for child in children
            ]
            conn.execute("DELETE FROM checkpoints WHERE id = ?", (row[0],))
            for row_id, child in rebased:  # without the run's dictionary: rebasing is rare
                conn.execute(
                    "UPDATE checkpoints SET parent_id = ?, kind = ?, body = ? WHERE id = ?",
                    (
                        _stored_parent(child.parent_id, _previous_id(conn, run_key, child.version)),
                        _KIND_CODES[child.kind],
                        encode_body(child),
                        row_id,
                    ),
                )
            return True

    def _delete_run(self, run_id: str) -> int:
        with self._transaction() as conn:
            count = conn.execute(
                "SELECT count(*) FROM checkpoints c JOIN runs r USING (run_key) WHERE r.run_id = ?",
                (run_id,),
            ).fetchone()[0]
            conn.execute("DELETE FROM runs WHERE run_id = ?", (run_id,))
            return int(count)

    def _head(self, run_id: str) -> Checkpoint | None:
        with self._lock:
            row = self._conn.execute(
                _SELECT + "WHERE r.run_id = ? ORDER BY c.version DESC LIMIT 1", (run_id,)
            ).fetchone()
            return self._rows(self._conn, [row])[0] if row is not None else None

    def _list_runs(self, limit: int | None) -> builtins.list[str]:
        sql = _RUNS
        params: builtins.list[Any] = []
        if limit is not None:
            sql += "LIMIT ?"
            params.append(limit)
        with self._lock:
            return [row[0] for row in self._conn.execute(sql, params)]

    def _put_writes(
        self, run_id: str, checkpoint_id: str, task_id: str, writes: builtins.list[Any]
    ) -> None:
        body = encode_writes(writes, checkpoint_id, task_id)
        with self._transaction() as conn:
            row = self._find(conn, checkpoint_id)
            if row is None or row[2] != run_id:
                raise CheckpointNotFound(checkpoint_id, where=f"run {run_id!r}")
            head = conn.execute("SELECT version FROM runs WHERE run_id = ?", (run_id,)).fetchone()
            if row[1] != head[0]:
                raise CheckpointConflict(run_id, expected_version=row[1], actual_version=head[0])
            conn.execute(
                "INSERT OR REPLACE INTO writes (checkpoint, task_id, body) VALUES (?, ?, ?)",
                (row[0], task_id, body),
            )

    def _close(self) -> None:
        with self._lock:
            self._conn.close()
