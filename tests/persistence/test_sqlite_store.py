"""SQLiteCheckpointStore: durability settings, migrations, crash recovery and linear storage."""

from __future__ import annotations

import json
import multiprocessing
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from selectgraph import GraphState, StoreError
from selectgraph.persistence import CheckpointChain, SQLiteCheckpointStore
from selectgraph.persistence._sqlite import SCHEMA_VERSION

ROOT = Path(__file__).resolve().parents[2]
PROSE = (ROOT / "README.md").read_text() + (ROOT / "docs" / "concepts.md").read_text()


def test_durability_settings(tmp_path: Path) -> None:
    store = SQLiteCheckpointStore(tmp_path / "c.db", timeout=2.5)
    conn = store._conn
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 2500
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert repr(store) == f"SQLiteCheckpointStore({str(tmp_path / 'c.db')!r})"
    store.close()


def test_migrations_run_once_and_are_recorded(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    SQLiteCheckpointStore(path).close()
    SQLiteCheckpointStore(path).close()
    with sqlite3.connect(path) as conn:
        recorded = conn.execute("SELECT version FROM schema_version ORDER BY version").fetchall()
        assert recorded == [(version,) for version in range(1, SCHEMA_VERSION + 1)]
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    assert {"runs", "checkpoints", "writes", "schema_version"} <= tables
    assert {"threads", "thread_runs", "queue", "events"} <= tables
    conn.close()


def test_a_database_from_a_newer_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    SQLiteCheckpointStore(path).close()
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("INSERT INTO schema_version VALUES (?)", (SCHEMA_VERSION + 1,))
    conn.close()
    with pytest.raises(StoreError, match="upgrade selectgraph") as caught:
        SQLiteCheckpointStore(path)
    assert str(path) in str(caught.value)


def test_a_file_that_is_not_a_database_is_a_store_error(tmp_path: Path) -> None:
    path = tmp_path / "notadb.txt"
    path.write_text("hello, this is not SQLite\n" * 10)
    with pytest.raises(StoreError, match="not a SQLite database") as caught:
        SQLiteCheckpointStore(path)
    assert str(path) in str(caught.value)
    assert path.read_text() == "hello, this is not SQLite\n" * 10  # left as it was


def test_a_missing_folder_is_a_store_error(tmp_path: Path) -> None:
    path = tmp_path / "nodir" / "x.db"
    with pytest.raises(StoreError, match="does not exist") as caught:
        SQLiteCheckpointStore(path)
    assert str(tmp_path / "nodir") in str(caught.value)
    assert not (tmp_path / "nodir").exists()


def test_storage_grows_linearly_with_steps(tmp_path: Path) -> None:
    """1,000 steps of a ~10 KB state, one key changed a step: not 1,000 copies of the state."""
    path = tmp_path / "c.db"
    store = SQLiteCheckpointStore(path)
    data: dict[str, object] = {f"note{i:02d}": PROSE[i * 100 : (i + 1) * 100] for i in range(100)}
    assert 10_000 <= len(json.dumps(GraphState(data=data).to_dict())) <= 12_000
    chain = CheckpointChain("loop")
    sizes = []
    for step in range(1, 1001):
        data["step"] = step
        state = GraphState(data=dict(data)).to_dict()
        checkpoint = chain.next(step=step, state=state)
        store.save(checkpoint, expected_version=checkpoint.version - 1)
        if step in (500, 1000):
            store._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # all pages into the file
            sizes.append(path.stat().st_size)
    head = store.head("loop")
    assert head is not None
    assert head.version == 1000
    assert store.load_state(head.checkpoint_id) == state  # the full state, not the delta
    assert GraphState.from_dict(store.load_state(head.checkpoint_id)).data == data
    assert len(store.list("loop")) == 1000  # the whole history is kept
    store.close()
    # 1,000 full copies would take ~10 MB; even 20 snapshots (one every 50) ~100 KiB compressed.
    assert sizes[1] < 200 * 1024, f"{sizes[1] / 1024:.0f} KiB after 1,000 steps"
    # Linear: the second 500 steps cost no more than the first (which include the empty file).
    assert sizes[1] - sizes[0] <= sizes[0]


def _open_and_close(path: str, barrier: Any) -> None:
    barrier.wait()
    SQLiteCheckpointStore(path).close()


def test_processes_opening_a_new_file_at_once_all_succeed(tmp_path: Path) -> None:
    # Switching a new file to WAL needs it to itself, and SQLite does not wait
    # for that: openers racing on a fresh file used to fail "database is locked".
    context = multiprocessing.get_context("spawn")
    path = str(tmp_path / "race.db")
    barrier = context.Barrier(4)
    workers = [context.Process(target=_open_and_close, args=(path, barrier)) for _ in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
    assert [worker.exitcode for worker in workers] == [0, 0, 0, 0]


def test_an_opener_waits_for_a_writer_holding_a_new_file(tmp_path: Path) -> None:
    path = tmp_path / "held.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN EXCLUSIVE")
    opened: list[SQLiteCheckpointStore] = []
    started = threading.Event()

    def open_store() -> None:
        started.set()
        opened.append(SQLiteCheckpointStore(path, timeout=60))

    opener = threading.Thread(target=open_store)
    opener.start()
    started.wait()
    holder.execute("COMMIT")  # before or during the opener's switch: it must succeed either way
    holder.close()
    opener.join(120)
    assert len(opened) == 1
    assert opened[0]._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    opened[0].close()
