"""SQLite layout: a database an older selectgraph wrote opens, migrates and reads the same."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

from selectgraph.persistence import SQLiteCheckpointStore
from selectgraph.persistence._sqlite import SCHEMA_VERSION
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
