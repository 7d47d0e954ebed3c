"""Threads in each durable store: upgrading storage an older selectgraph made, crashes, indexes."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from selectgraph.core._errors import CheckpointDecodeError, ThreadBusy, ThreadTakenOver
from selectgraph.persistence import (
    Checkpoint,
    FileCheckpointStore,
    PostgresCheckpointStore,
    SQLiteCheckpointStore,
    _file,
    _sqlite,
    _sqlite_threads,
    new_checkpoint_id,
)
from selectgraph.persistence._event_pack import pack_events, unpack_events
from tests.persistence.conftest import POSTGRES_URL, drop_schema, postgres_or_skip
from tests.persistence.test_threads import event_types, save

THREAD_TABLES = ("events", "queue", "thread_runs", "threads")


def plain(run_id: str, version: int) -> Checkpoint:
    """A checkpoint as the previous selectgraph saved it: no thread, no events."""
    return Checkpoint(
        run_id=run_id,
        checkpoint_id=new_checkpoint_id(),
        version=version,
        step=version,
        values={"data": {"n": version}},
    )


def use_threads_on_old_data(store: Any, old: Checkpoint) -> None:
    """What a store opened on old storage must do: keep the old run, keep threads."""
    assert store.head("old") == old
    assert store.read_events("old") == []
    assert store.append_events("old", [{"type": "late"}]) == 1  # an old run gains a log
    assert event_types(store, "old") == [(1, "late")]
    store.claim_thread("t", "r1", metadata={"user": "ann"})
    save(store, "r1", "t", 1, {"type": "a"})
    with pytest.raises(ThreadBusy):
        store.claim_thread("t", "r2")
    claim = store.claim_thread("t", "r2", strategy="rollback")
    assert claim.superseded == "r1"
    assert store.list("r1") == []
    assert [t.thread_id for t in store.list_threads(metadata={"user": "ann"})] == ["t"]
    assert store.delete_thread("t") == 0
    assert store.head("old") == old


# -- upgrades ----------------------------------------------------------------------------


def test_an_sqlite_database_from_before_threads_is_upgraded_in_place(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with SQLiteCheckpointStore(path) as store:
        old = plain("old", 1)
        store.save(old, expected_version=0)
    # Back to the previous selectgraph's schema: migration 1 only, its data kept.
    conn = sqlite3.connect(path)
    with conn:
        for table in (*THREAD_TABLES, "sealed_from", "run_dicts"):  # migrations 2 to 4
            conn.execute(f"DROP TABLE {table}")
        conn.execute("DELETE FROM schema_version WHERE version > 1")
    reference = sqlite3.connect(tmp_path / "v1.db")
    with reference:
        for statement in _sqlite._MIGRATIONS[0][1]:
            reference.execute(statement)
    names = "SELECT type, name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY 2"
    assert conn.execute(names).fetchall() == sorted(
        [*reference.execute(names).fetchall(), ("table", "schema_version")],
        key=lambda row: row[1],
    )
    conn.close()
    reference.close()
    with SQLiteCheckpointStore(path) as store:
        use_threads_on_old_data(store, old)
    conn = sqlite3.connect(path)
    versions = conn.execute("SELECT version FROM schema_version ORDER BY version").fetchall()
    conn.close()
    assert versions == [(v,) for v in range(1, _sqlite.SCHEMA_VERSION + 1)]


def test_a_postgres_schema_from_before_threads_is_upgraded_in_place() -> None:
    import secrets

    import psycopg
    from psycopg import sql

    postgres_or_skip()
    schema = f"sg_test_{os.getpid()}_{secrets.token_hex(4)}"
    try:
        with PostgresCheckpointStore(POSTGRES_URL, schema=schema) as store:
            old = plain("old", 1)
            store.save(old, expected_version=0)
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            for table in (*THREAD_TABLES, "unsealed"):  # the tables of migrations 2 and 3
                conn.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(schema, table)))
            conn.execute(  # and the column of migration 4
                sql.SQL("ALTER TABLE {} DROP COLUMN last_seq").format(
                    sql.Identifier(schema, "runs")
                )
            )
            conn.execute(
                sql.SQL("DELETE FROM {} WHERE version > 1").format(
                    sql.Identifier(schema, "schema_version")
                )
            )
            tables = conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s "
                "ORDER BY 1",
                (schema,),
            ).fetchall()
            assert tables == [("checkpoints",), ("runs",), ("schema_version",), ("writes",)]
        with PostgresCheckpointStore(POSTGRES_URL, schema=schema) as store:
            use_threads_on_old_data(store, old)
    finally:
        drop_schema(schema)


def test_a_postgres_event_log_from_before_migration_4_continues_its_seqs() -> None:
    import secrets

    import psycopg
    from psycopg import sql

    postgres_or_skip()
    schema = f"sg_test_{os.getpid()}_{secrets.token_hex(4)}"
    try:
        with PostgresCheckpointStore(POSTGRES_URL, schema=schema) as store:
            save(store, "r", None, 1, {"type": "a"}, {"type": "b"})
            save(store, "r", None, 2, {"type": "c"})
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:  # back to version 3
            conn.execute(
                sql.SQL("ALTER TABLE {} DROP COLUMN last_seq").format(
                    sql.Identifier(schema, "runs")
                )
            )
            conn.execute(
                sql.SQL("DELETE FROM {} WHERE version > 3").format(
                    sql.Identifier(schema, "schema_version")
                )
            )
        with PostgresCheckpointStore(POSTGRES_URL, schema=schema) as store:
            save(store, "r", None, 3, {"type": "d"})  # the one-statement save
            assert store.append_events("r", [{"type": "e"}]) == 5
            save(store, "r", None, 4, {"type": "f"})
            assert event_types(store, "r") == [
                (1, "a"),
                (2, "b"),
                (3, "c"),
                (4, "d"),
                (5, "e"),
                (6, "f"),
            ]
    finally:
        drop_schema(schema)


def test_a_postgres_save_is_one_statement_after_the_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    postgres_or_skip()
    import secrets

    from psycopg import AsyncConnection, Connection

    schema = f"sg_test_{os.getpid()}_{secrets.token_hex(4)}"
    sent: list[str] = []
    execute = AsyncConnection.execute
    execute_here = Connection.execute

    async def counted_async(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append(str(query)[:40])
        return await execute(self, query, *args, **kwargs)

    def counted_here(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append(str(query)[:40])
        return execute_here(self, query, *args, **kwargs)

    def counted(monkeypatch: pytest.MonkeyPatch) -> None:
        """Count statements on the pool's connections and on the sync writer's."""
        monkeypatch.setattr(AsyncConnection, "execute", counted_async)
        monkeypatch.setattr(Connection, "execute", counted_here)

    try:
        with PostgresCheckpointStore(POSTGRES_URL, schema=schema) as store:
            save(store, "r", None, 1, {"type": "a"})
            counted(monkeypatch)
            for version in range(2, 6):
                save(store, "r", None, version, {"type": "b"})
            monkeypatch.undo()
            assert len(sent) == 4, sent  # one per save: no BEGIN, lock, insert, COMMIT
            assert [e.seq for e in store.read_events("r")] == [1, 2, 3, 4, 5]
            head = store.head("r")
            assert head is not None
            assert head.version == 5

            store.claim_thread("t", "on-t", ttl=60)
            save(store, "on-t", "t", 1, {"type": "a"})
            sent.clear()
            counted(monkeypatch)
            later = save(store, "on-t", "t", 2, {"type": "b"})
            monkeypatch.undo()
            assert len(sent) == 1, sent  # a thread's save too
            thread = store.get_thread("t")
            assert thread is not None
            assert thread.updated_at == later.created_at  # the save touched the thread
            assert thread.expires_at == later.created_at + dt.timedelta(seconds=60)
            store.claim_thread("t", "newer", strategy="interrupt")
            with pytest.raises(ThreadTakenOver):
                save(store, "on-t", "t", 3, {"type": "c"})  # the lost thread is still refused
    finally:
        drop_schema(schema)


def test_a_file_store_folder_from_before_threads_keeps_working(tmp_path: Path) -> None:
    store = FileCheckpointStore(tmp_path)
    old = plain("old", 1)
    store.save(old, expected_version=0)
    shutil.rmtree(tmp_path / "threads")  # the previous layout: runs/ and ids/ only
    head = store._run_dir("old") / "HEAD"
    assert b"events" not in head.read_bytes()  # HEAD as the previous version wrote it
    use_threads_on_old_data(FileCheckpointStore(tmp_path), old)
    assert b'"events": 1' in head.read_bytes()


# -- the file store after a crash ----------------------------------------------------------


def fail_on(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Make os.replace raise when it would put ``name`` in place, as a crash there would."""
    real = os.replace

    def replace(src: Any, dst: Any) -> None:
        if Path(dst).name == name:
            raise OSError("simulated crash")
        real(src, dst)

    monkeypatch.setattr(os, "replace", replace)


def test_a_claim_that_crashed_before_its_commit_leaves_the_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = FileCheckpointStore(tmp_path)
    with monkeypatch.context() as patch:
        fail_on(patch, "THREAD")
        with pytest.raises(OSError, match="simulated crash"):
            store.claim_thread("t", "r1")
    assert store.get_thread("t") is None
    assert store.thread_runs("t") == []
    claim = store.claim_thread("t", "r2")  # its record replaces the crashed one's
    assert claim.run.seq == 1
    assert [r.run_id for r in store.thread_runs("t")] == ["r2"]
    store.release_thread("t", "r2")
    assert store.claim_thread("t", "r1").start_from is None  # r1's stale entry is ignored
    assert [r.run_id for r in store.thread_runs("t")] == ["r2", "r1"]


def test_a_rollback_that_crashed_before_its_commit_can_be_claimed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = FileCheckpointStore(tmp_path)
    store.claim_thread("t", "r0")
    start = save(store, "r0", "t", 1)
    store.release_thread("t", "r0")
    store.claim_thread("t", "r1")
    save(store, "r1", "t", 1)
    with monkeypatch.context() as patch:
        fail_on(patch, "THREAD")
        with pytest.raises(OSError, match="simulated crash"):
            store.claim_thread("t", "r2", strategy="rollback")
    thread = store.get_thread("t")
    assert thread is not None
    assert thread.owner == "r1"
    assert store.list("r1") == []  # but r1 is already deleted, never half there
    with pytest.raises(ThreadBusy):
        store.claim_thread("t", "r2")
    claim = store.claim_thread("t", "r2", strategy="rollback")
    assert claim.start_from == start.checkpoint_id
    assert claim.run.seq == 3
    assert [r.run_id for r in store.thread_runs("t")] == ["r0", "r2"]


def test_records_a_rollback_left_behind_are_not_listed(tmp_path: Path) -> None:
    store = FileCheckpointStore(tmp_path)
    store.claim_thread("t", "r1")
    thread_dir = store._thread_dir("t")
    record = (thread_dir / "runs" / f"{1:012d}.json").read_bytes()
    store.claim_thread("t", "r2", strategy="rollback")
    assert not (thread_dir / "runs" / f"{1:012d}.json").exists()
    # As if the process died after the commit, before it removed r1's record.
    (thread_dir / "runs" / f"{1:012d}.json").write_bytes(record)
    assert [r.run_id for r in store.thread_runs("t")] == ["r2"]


def test_events_of_a_save_that_crashed_are_ignored_then_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = FileCheckpointStore(tmp_path)
    store.claim_thread("t", "r1")
    save(store, "r1", "t", 1, {"type": "a"})
    with monkeypatch.context() as patch:
        fail_on(patch, "HEAD")
        with pytest.raises(OSError, match="simulated crash"):
            save(store, "r1", "t", 2, {"type": "lost"}, {"type": "lost"}, {"type": "lost"})
    events = store._run_dir("r1") / "events"
    assert len(list(events.iterdir())) == 2  # the crashed save's batch is there...
    assert event_types(store, "r1") == [(1, "a")]  # ...but not committed
    assert store.append_events("r1", [{"type": "b"}]) == 2
    save(store, "r1", "t", 2, {"type": "c"})
    assert event_types(store, "r1") == [(1, "a"), (2, "b"), (3, "c")]


def test_a_save_on_a_thread_that_was_never_claimed_creates_nothing(tmp_path: Path) -> None:
    store = FileCheckpointStore(tmp_path)
    with pytest.raises(ThreadTakenOver):
        save(store, "r1", "ghost", 1)
    assert list((tmp_path / "threads").iterdir()) == []
    assert store.head("r1") is None


@pytest.mark.parametrize(
    ("name", "content"),
    [("THREAD", b"{"), ("THREAD", b"{}"), ("QUEUE", b"[1]"), ("runs", b"[]"), ("by_run", b"{")],
)
def test_damaged_thread_files_are_decode_errors(tmp_path: Path, name: str, content: bytes) -> None:
    store = FileCheckpointStore(tmp_path)
    store.claim_thread("t", "r1")
    store.enqueue("t", "k", lease=60)
    thread_dir = store._thread_dir("t")
    target = {
        "THREAD": thread_dir / "THREAD",
        "QUEUE": thread_dir / "QUEUE",
        "runs": thread_dir / "runs" / f"{1:012d}.json",
        "by_run": thread_dir / "by_run" / _file._key("r1"),
    }[name]
    target.write_bytes(content)
    with pytest.raises(CheckpointDecodeError):
        store.thread_runs("t") if name == "runs" else store.claim_thread(
            "t", "r2", strategy="interrupt"
        )


# -- SQLite: a claim reads through indexes -------------------------------------------------


def test_sqlite_claims_use_indexes_not_scans(tmp_path: Path) -> None:
    with SQLiteCheckpointStore(tmp_path / "c.db") as store:
        plans = {
            "head": (_sqlite_threads._HEAD_ID, ("r",)),
            "owner start": (
                "SELECT start_from FROM thread_runs WHERE thread_id = ? AND run_id = ? "
                "ORDER BY seq LIMIT 1",
                ("t", "r"),
            ),
            "thread": (_sqlite_threads._THREAD + "WHERE thread_id = ?", ("t",)),
            "last event": ("SELECT coalesce(max(last_seq), 0) FROM events WHERE run_key = ?", (1,)),
        }
        for name, (query, params) in plans.items():
            steps = [row[3] for row in store._conn.execute("EXPLAIN QUERY PLAN " + query, params)]
            assert steps, name
            scans = [s for s in steps if s.startswith("SCAN") and "INDEX" not in s]
            assert not scans, (name, steps)
            assert any("INDEX" in step or "PRIMARY KEY" in step for step in steps), (name, steps)


def test_file_store_thread_ids_are_hashed_file_names(tmp_path: Path) -> None:
    store = FileCheckpointStore(tmp_path)
    for thread_id in ("../escape", "a/b", "x" * 256, "ünï", "C:\\x"):
        store.claim_thread(thread_id, "r")
    names = sorted(p.name for p in (tmp_path / "threads").iterdir())
    assert names == sorted(_file._key(t) for t in ("../escape", "a/b", "x" * 256, "ünï", "C:\\x"))
    assert {t.thread_id for t in store.list_threads()} == {
        "../escape",
        "a/b",
        "x" * 256,
        "ünï",
        "C:\\x",
    }


# -- packed event batches (SQLite, PostgreSQL) ---------------------------------------------


def test_event_batches_pack_small_and_unpack_exactly() -> None:
    from selectgraph.persistence._codec import encode_events

    step: list[dict[str, Any]] = [
        {
            "event": "NodeStarted",
            "type": "node_start",
            "run_id": "run-1",
            "graph": "chat",
            "step": 7,
            "timestamp": 1795720201.132025,
            "namespace": [],
            "branch": None,
            "node": "agent",
            "visit": 3,
            "node_path": ["agent"],
        },
        {
            "event": "NodeFinished",
            "type": "node_end",
            "run_id": "run-1",
            "graph": "chat",
            "step": 7,
            "timestamp": 1795720201.1331,
            "namespace": [],
            "branch": None,
            "node": "agent",
            "visit": 3,
            "duration_ms": 12.5,
            "outcome": "success",
            "attempts": 1,
            "error": None,
            "update": None,
            "node_path": ["agent"],
        },
        {"event": "CustomEvent", "type": "custom", "data": {"text": 'ünï\n\u2028 "q"'}},
    ]
    encoded = encode_events(step, "run-1")
    packed = pack_events(encoded)
    assert len(packed) * 3 < sum(map(len, encoded))  # the keys and names cost next to nothing
    assert unpack_events(packed, "run-1", 5) == step
    tiny = pack_events([b"{}"])  # too small to deflate: kept as it is
    assert tiny == b"j{}"
    assert unpack_events(tiny, "r", 1) == [{}]
    for bad in (b"x{}", b"e\xff\xff\xff", b"j[1]", b"j{"):
        with pytest.raises(CheckpointDecodeError):
            unpack_events(bad, "r", 1)


def test_a_damaged_event_row_is_a_decode_error(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    with SQLiteCheckpointStore(path) as store:
        save(store, "r1", None, 1, {"type": "a"})
        conn = sqlite3.connect(path)
        with conn:
            conn.execute("UPDATE events SET body = ?", (b"e\x00garbage",))
        conn.close()
        with pytest.raises(CheckpointDecodeError, match="events"):
            store.read_events("r1")
