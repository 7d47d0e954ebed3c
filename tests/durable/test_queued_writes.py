"""Durability "async": checkpoints queued behind the run, stored in batches, in order."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from selectgraph import (
    CheckpointConflict,
    InMemoryCheckpointStore,
    PostgresCheckpointStore,
    SQLiteCheckpointStore,
)
from selectgraph.persistence import Checkpoint, new_checkpoint_id
from selectgraph.persistence._base import batch_saver
from selectgraph.runtime._queued_writes import QueuedWrites
from tests.persistence.conftest import POSTGRES_URL, Harness


def _run_of(run_id: str, count: int, first: int = 1) -> list[Checkpoint]:
    made: list[Checkpoint] = []
    for version in range(first, first + count):
        made.append(
            Checkpoint(
                run_id=run_id,
                checkpoint_id=new_checkpoint_id(),
                version=version,
                step=version,
                parent_id=made[-1].checkpoint_id if made else None,
                values={"data": {"v": version}},
                events=({"event": "Step", "n": version},),
            )
        )
    return made


class HeldStore(SQLiteCheckpointStore):
    """Holds its first write until released; records what each transaction stored."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.release = threading.Event()
        self.writes: list[list[int]] = []

    def _save_all(self, saves: list[tuple[Checkpoint, int]]) -> None:
        self.release.wait(timeout=30)
        self.writes.append([checkpoint.version for checkpoint, _ in saves])
        super()._save_all(saves)


@pytest.fixture
def held(tmp_path: Path) -> Iterator[HeldStore]:
    store = HeldStore(tmp_path / "held.db")
    yield store
    store.close()


def test_what_queues_up_behind_a_busy_writer_is_stored_as_one_batch(held: HeldStore) -> None:
    writes = QueuedWrites(held)
    made = _run_of("r", 5)
    for checkpoint in made:
        writes.put(checkpoint)  # the first one waits in its save; the rest queue up
    held.release.set()
    asyncio.run(writes.flush(blocking=True))
    writes.close()
    assert held.writes == [[1], [2, 3, 4, 5]]
    assert [c.checkpoint_id for c in held.list("r")] == [c.checkpoint_id for c in made]


def test_a_failed_batch_fails_every_write_after_it(held: HeldStore) -> None:
    held.release.set()
    held.save(_run_of("r", 1)[0], expected_version=0)  # another writer took version 1
    held.release.clear()
    writes = QueuedWrites(held)
    for checkpoint in _run_of("r", 4):
        writes.put(checkpoint)
    held.release.set()
    with pytest.raises(CheckpointConflict):
        asyncio.run(writes.flush(blocking=True))
    writes.put(_run_of("r", 1, first=5)[0])
    with pytest.raises(CheckpointConflict):  # built on a checkpoint that was never stored
        asyncio.run(writes.flush(blocking=True))
    writes.close()
    assert held.head("r").version == 1  # type: ignore[union-attr]


def test_a_flush_given_up_on_does_not_stop_the_writer(held: HeldStore) -> None:
    writes = QueuedWrites(held)
    for checkpoint in _run_of("r", 3):
        writes.put(checkpoint)

    async def give_up() -> None:
        waiting = asyncio.ensure_future(writes.flush(blocking=False))
        await asyncio.sleep(0)
        waiting.cancel()  # cancels the futures it waits on, the write in progress too
        with pytest.raises(asyncio.CancelledError):
            await waiting

    asyncio.run(give_up())
    held.release.set()
    writes.put(_run_of("r", 1, first=4)[0])
    asyncio.run(writes.flush(blocking=True))
    writes.close()
    assert [c.version for c in held.list("r")] == [1, 2, 3, 4]


class OwnSave(SQLiteCheckpointStore):
    def save(self, checkpoint: Checkpoint, *, expected_version: int) -> None:
        super().save(checkpoint, expected_version=expected_version)


class OwnPrimitive(SQLiteCheckpointStore):
    def _save(self, checkpoint: Checkpoint, expected_version: int) -> None:
        super()._save(checkpoint, expected_version)


def test_batches_go_only_where_every_save_goes(tmp_path: Path) -> None:
    """A store whose saves pass through code of its own is given them one at a time."""
    plain = SQLiteCheckpointStore(tmp_path / "a.db")
    patched = SQLiteCheckpointStore(tmp_path / "b.db")
    patched.save = patched.save  # type: ignore[method-assign]  # as a test wraps it
    stores = [plain, patched, OwnSave(tmp_path / "c.db"), OwnPrimitive(tmp_path / "d.db")]
    try:
        assert batch_saver(plain) is not None
        assert [batch_saver(store) for store in stores[1:]] == [None, None, None]
        assert batch_saver(InMemoryCheckpointStore()) is None  # no transaction to share
        assert batch_saver(object()) is None
    finally:
        for store in stores:
            store.close()


def test_sqlite_stores_a_batch_in_one_transaction(tmp_path: Path) -> None:
    store = SQLiteCheckpointStore(tmp_path / "x.db")
    try:
        made = _run_of("r", 4)
        store.save_batch(made[:2])
        broken = [made[2], _run_of("r", 1, first=9)[0]]  # version 9 does not follow 3
        with pytest.raises(CheckpointConflict):
            store.save_batch(broken)
        assert store.head("r").version == 2  # type: ignore[union-attr]
        assert [e.seq for e in store.read_events("r")] == [1, 2]  # nothing of the failed batch
        store.save_batch(made[2:])
        assert [c.version for c in store.list("r")] == [1, 2, 3, 4]
        assert [e.event["n"] for e in store.read_events("r")] == [1, 2, 3, 4]
        assert store.load_state(made[-1].checkpoint_id) == {"data": {"v": 4}}
    finally:
        store.close()


def test_an_async_run_on_sqlite_stores_every_checkpoint(tmp_path: Path) -> None:
    from selectgraph import END, AgentGraph

    graph = AgentGraph("loop", max_steps=None)
    graph.add_node("tick", lambda s: {"n": s.data.get("n", 0) + 1})
    graph.add_edge("tick", "tick", condition="n < 200")
    graph.add_edge("tick", END)
    graph.set_entry("tick")
    store = SQLiteCheckpointStore(tmp_path / "x.db")
    try:
        result: Any = graph.run({}, checkpoint_store=store, run_id="a", durability="async")
        stored = store.list("a")
        assert [c.version for c in stored] == list(range(1, len(stored) + 1))
        assert len(stored) >= 200
        assert store.load_state(stored[-1].checkpoint_id)["data"]["n"] == 200
        seqs = [e.seq for e in store.read_events("a")]
        assert seqs == list(range(1, len(seqs) + 1))
        assert result.state.data["n"] == 200
    finally:
        store.close()


class OwnPostgresSave(PostgresCheckpointStore):
    def save(self, checkpoint: Checkpoint, *, expected_version: int) -> None:
        super().save(checkpoint, expected_version=expected_version)


def test_postgres_stores_a_batch_in_one_transaction(pg: Harness) -> None:
    store = pg.store
    assert isinstance(store, PostgresCheckpointStore)
    assert batch_saver(store) is not None
    made = _run_of("r", 6)
    store.save_batch(made[:2])  # the run's first save: the pool's full path, one transaction
    assert store._direct._conn is None
    store.save_batch(made[2:4])  # later ones: one pipelined transaction on the direct one
    assert store._direct._conn is not None
    broken = [made[4], _run_of("r", 1, first=9)[0]]  # version 9 does not follow 5
    with pytest.raises(CheckpointConflict):
        store.save_batch(broken)
    head = store.head("r")
    assert head is not None
    assert head.version == 4
    assert [e.seq for e in store.read_events("r")] == [1, 2, 3, 4]  # nothing of the failed batch
    store.save_batch(made[4:])
    assert [c.version for c in store.list("r")] == [1, 2, 3, 4, 5, 6]
    assert [e.event["n"] for e in store.read_events("r")] == [1, 2, 3, 4, 5, 6]
    assert store.load_state(made[-1].checkpoint_id) == {"data": {"v": 6}}


def test_a_postgres_batch_committed_unanswered_is_stored_once(pg: Harness) -> None:
    store = pg.store
    assert isinstance(store, PostgresCheckpointStore)
    made = _run_of("r", 4)
    store.save_batch(made[:2])
    writer = store._direct
    real = writer.quick_batch

    def committed_then_lost(statements: Any) -> bool | None:
        assert real(statements) is True
        return None  # the answer never came: the pool's transaction settles it

    writer.quick_batch = committed_then_lost  # type: ignore[method-assign]
    store.save_batch(made[2:])
    assert [c.version for c in store.list("r")] == [1, 2, 3, 4]
    assert [e.seq for e in store.read_events("r")] == [1, 2, 3, 4]


def test_postgres_batches_only_where_every_save_goes(pg: Harness) -> None:
    store = pg.store
    own = OwnPostgresSave(POSTGRES_URL, schema=store.schema)  # type: ignore[attr-defined]
    try:
        assert batch_saver(own) is None
        store.save = store.save  # type: ignore[method-assign]  # as a test wraps it
        assert batch_saver(store) is None
    finally:
        own.close()


def test_an_async_run_on_postgres_stores_every_checkpoint(pg: Harness) -> None:
    from selectgraph import END, AgentGraph

    graph = AgentGraph("loop", max_steps=None)
    graph.add_node("tick", lambda s: {"n": s.data.get("n", 0) + 1})
    graph.add_edge("tick", "tick", condition="n < 150")
    graph.add_edge("tick", END)
    graph.set_entry("tick")
    store = pg.store
    result: Any = graph.run({}, checkpoint_store=store, run_id="a", durability="async")
    stored = store.list("a")
    assert [c.version for c in stored] == list(range(1, len(stored) + 1))
    assert len(stored) >= 150
    assert store.load_state(stored[-1].checkpoint_id)["data"]["n"] == 150
    seqs = [e.seq for e in store.read_events("a")]  # type: ignore[attr-defined]
    assert seqs == list(range(1, len(seqs) + 1))
    assert result.state.data["n"] == 150
