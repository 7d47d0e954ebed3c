"""SQLite layout: a database an older selectgraph wrote opens, migrates and reads the same."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from benchmarks import checkpoints
from selectgraph import CheckpointDecodeError
from selectgraph.persistence import SQLiteCheckpointStore
from selectgraph.persistence._sqlite import PAGE_SIZE, SCHEMA_VERSION
from tests.persistence.fixtures.make_sqlite_v3 import DB, EXPECTED, contents, loop, summary


def test_a_schema_3_database_opens_and_reads_as_it_did(tmp_path: Path) -> None:
    """``sqlite_v3.db`` was written by schema 3's selectgraph; its JSON is what that one read."""
    path = tmp_path / "old.db"
    shutil.copyfile(DB, path)
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT max(version) FROM schema_version").fetchone() == (3,)
    conn.close()
    store = SQLiteCheckpointStore(path)
    try:
        assert summary(contents(store)) == json.loads(EXPECTED.read_text())
    finally:
        store.close()
    with sqlite3.connect(path) as conn:
        recorded = conn.execute("SELECT max(version) FROM schema_version").fetchone()
    conn.close()
    assert recorded == (SCHEMA_VERSION,)


def test_a_migrated_database_takes_new_checkpoints_and_events(tmp_path: Path) -> None:
    """Old runs fork and gain events after the migration; old rows and new ones read together."""
    path = tmp_path / "old.db"
    shutil.copyfile(DB, path)
    store = SQLiteCheckpointStore(path)
    try:
        old = store.list("long")
        result = loop(70).run(
            None, checkpoint_store=store, checkpoint_id=old[30].checkpoint_id, run_id="new"
        )
        assert result.state["n"] == 70
        new = store.list("new")
        assert new[0].metadata["forked_from"] == old[30].checkpoint_id
        assert store.load_state(new[-1].checkpoint_id)["data"]["n"] == 70
        assert [e.seq for e in store.read_events("new")][:3] == [1, 2, 3]
        seq = store.append_events("long", [{"type": "custom", "data": {"after": "migration"}}])
        events = store.read_events("long")
        assert [e.seq for e in events] == list(range(1, seq + 1))
        assert events[-1].event == {"type": "custom", "data": {"after": "migration"}}
        assert store.list("long") == old
    finally:
        store.close()


def _benchmark_loop(path: Path, steps: int) -> int:
    """The checkpoint benchmark's loop (a ~10 KB context, a status a step), run on ``path``."""
    store = SQLiteCheckpointStore(path)
    try:
        graph = checkpoints._selectgraph_loop(steps)
        result = graph.run(checkpoints._start(), checkpoint_store=store, run_id="bench")
        assert result.state["n"] == steps
        assert len(store.list("bench")) == steps + 2
    finally:
        store.close()
    return sum(p.stat().st_size for p in path.parent.iterdir())


def test_a_step_costs_a_few_hundred_bytes_with_its_events(tmp_path: Path) -> None:
    """The benchmark's loop, 400 steps: schema 3 left 272 KiB, schema 6 about 120 KiB."""
    path = tmp_path / "db" / "c.db"
    path.parent.mkdir()
    size = _benchmark_loop(path, 400)
    assert size < 180 * 1024, f"{size / 1024:.0f} KiB after 400 steps"
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA page_size").fetchone() == (PAGE_SIZE,)
        dicts = conn.execute("SELECT body_dict, event_dict FROM run_dicts").fetchall()
        assert len(dicts) == 1
        assert all(dicts[0])
        markers = {bytes(b)[5:6] for (b,) in conn.execute("SELECT body FROM checkpoints")}
        assert b"r" in markers  # deltas deflated against the run's dictionary
        assert b"s" in markers  # snapshots against the start of its first one
        deltas = "SELECT body FROM checkpoints WHERE kind = 1 AND length(body) > 100"
        large = {bytes(b)[5:6] for (b,) in conn.execute(deltas)}
        assert large == {b"s"}  # the context set again every 100 steps: against it too
        batches = {bytes(b)[:1] for (b,) in conn.execute("SELECT body FROM events")}
        assert b"r" in batches
    finally:
        conn.close()


def store_first_id(path: Path) -> str:
    """The id of the database's first checkpoint (a run's first: a snapshot)."""
    conn = sqlite3.connect(path)
    try:
        (found,) = conn.execute("SELECT checkpoint_id FROM checkpoints ORDER BY id").fetchone()
    finally:
        conn.close()
    return str(found)


def test_a_missing_run_dictionary_is_named(tmp_path: Path) -> None:
    """Rows deflated against a run's dictionary cannot be read without it: say so, and where."""
    path = tmp_path / "db" / "c.db"
    path.parent.mkdir()
    _benchmark_loop(path, 5)
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("DELETE FROM run_dicts")
    conn.close()
    store = SQLiteCheckpointStore(path)
    try:
        with pytest.raises(CheckpointDecodeError, match="dictionary, which is missing"):
            store.list("bench")
        with pytest.raises(CheckpointDecodeError, match="state dictionary, which is missing"):
            store.load(store_first_id(path))
        with pytest.raises(CheckpointDecodeError, match="run's dictionary, which is missing"):
            store.read_events("bench")
    finally:
        store.close()


def test_a_run_dictionary_is_set_once(tmp_path: Path) -> None:
    """Later saves and appends use the dictionary the run has, never replace it."""
    path = tmp_path / "db" / "c.db"
    path.parent.mkdir()
    _benchmark_loop(path, 3)
    conn = sqlite3.connect(path)
    first = conn.execute("SELECT body_dict, event_dict, state_dict FROM run_dicts").fetchall()
    conn.close()
    store = SQLiteCheckpointStore(path)
    try:
        store.append_events("bench", [{"type": "custom", "data": {"i": i}} for i in range(9)])
        fork = store.list("bench")[1]
        checkpoints._selectgraph_loop(8).run(
            None, checkpoint_store=store, checkpoint_id=fork.checkpoint_id, run_id="fork"
        )
        assert [e.event["data"] for e in store.read_events("bench")[-9:]] == [
            {"i": i} for i in range(9)
        ]
    finally:
        store.close()
    conn = sqlite3.connect(path)
    rows = conn.execute(
        "SELECT body_dict, event_dict, state_dict FROM run_dicts ORDER BY run_key"
    ).fetchall()
    conn.close()
    assert rows[0] == first[0]
    assert len(rows) == 2
