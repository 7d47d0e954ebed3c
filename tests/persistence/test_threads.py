"""Threads in every store (memory, file, SQLite, PostgreSQL): claims, saves, queues, events.

Each test runs against the four stores with the same expectations: the
in-memory store is the reference, the durable ones must agree with it.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import secrets
from collections.abc import Callable
from typing import Any

import pytest

from selectgraph.core._errors import (
    CheckpointConflict,
    ResumeError,
    StateSerializationError,
    ThreadBusy,
    ThreadIdError,
    ThreadTakenOver,
)
from selectgraph.persistence import Checkpoint, CheckpointStore, _thread_base, new_checkpoint_id
from selectgraph.persistence import _thread_portal as thread_portal
from selectgraph.persistence._threads import Claim, ThreadStore
from tests.persistence.conftest import Harness

T0 = dt.datetime(2026, 11, 23, 9, 0, tzinfo=dt.UTC)

ODD_IDS = [
    "ünïcödé — 日本語 🧵",
    " with  spaces ",
    "a/b/../c\\d",
    'it\'s "quoted" `x` $HOME %s ?*',
    "CON",
    ".",
    "x" * 256,
]


class Clock:
    """The time the thread methods see (``_now`` of both thread mixins), moved by hand."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> dt.datetime:
        return self.now

    def advance(self, seconds: float) -> dt.datetime:
        self.now += dt.timedelta(seconds=seconds)
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """A fake clock for claims, releases, queues and pruning."""
    fake = Clock()
    monkeypatch.setattr(_thread_base, "_now", fake)
    monkeypatch.setattr(thread_portal, "_now", fake)
    return fake


def threads(harness: Harness) -> Any:
    """The harness's store, as a ThreadStore (every shipped store is one)."""
    store = harness.store
    assert isinstance(store, ThreadStore)
    return store


def save(
    store: CheckpointStore,
    run_id: str,
    thread_id: str | None,
    version: int,
    *events: dict[str, Any],
    at: dt.datetime | None = None,
) -> Checkpoint:
    """Save version ``version`` of ``run_id`` on ``thread_id``, the way the runtime does."""
    checkpoint = Checkpoint(
        run_id=run_id,
        checkpoint_id=new_checkpoint_id(),
        version=version,
        step=version,
        values={"data": {"n": version}},
        metadata={} if thread_id is None else {"thread_id": thread_id},
        events=events or ({"type": "node_start", "node": f"n{version}"},),
        created_at=at or dt.datetime.now(dt.UTC),
    )
    store.save(checkpoint, expected_version=version - 1)
    return checkpoint


def event_types(store: Any, run_id: str, **kwargs: Any) -> list[tuple[int, str]]:
    """The run's stored events as (seq, type)."""
    return [(e.seq, e.event["type"]) for e in store.read_events(run_id, **kwargs)]


def snapshot(store: Any, thread_id: str, *runs: str) -> Any:
    """Everything a refused claim or save must leave as it was."""
    return (
        store.get_thread(thread_id),
        store.thread_runs(thread_id),
        {run: store.list(run) for run in runs},
        {run: store.read_events(run) for run in runs},
    )


# -- claims ----------------------------------------------------------------------------


def test_every_store_keeps_threads(harness: Harness) -> None:
    assert isinstance(harness.store, ThreadStore)


def test_claiming_a_new_thread(harness: Harness, clock: Clock) -> None:
    store = threads(harness)
    assert store.get_thread("t") is None
    assert store.thread_runs("t") == []
    claim = store.claim_thread("t", "r1", metadata={"user": "ann"})
    assert isinstance(claim, Claim)
    assert claim.start_from is None
    assert claim.superseded is None
    thread = claim.thread
    assert (thread.thread_id, thread.owner, thread.last_run, thread.runs) == ("t", "r1", "r1", 1)
    assert thread.created_at == thread.updated_at == T0
    assert thread.metadata == {"user": "ann"}
    assert thread.busy
    assert thread.ttl is None
    assert thread.expires_at is None
    run = claim.run
    assert (run.thread_id, run.run_id, run.seq, run.created_at) == ("t", "r1", 1, T0)
    assert (run.strategy, run.start_from, run.superseded) == ("new", None, None)
    assert store.get_thread("t") == thread
    assert store.thread_runs("t") == [run]


def test_an_idle_thread_continues_from_its_last_runs_head(harness: Harness, clock: Clock) -> None:
    store = threads(harness)
    store.claim_thread("t", "r1", metadata={"user": "ann", "title": "a"}, ttl=60)
    save(store, "r1", "t", 1)
    head = save(store, "r1", "t", 2)
    clock.advance(5)
    assert store.release_thread("t", "r1") is True
    assert store.release_thread("t", "r1") is False  # no longer the owner
    idle = store.get_thread("t")
    assert idle is not None
    assert not idle.busy
    assert idle.last_run == "r1"
    assert idle.updated_at == clock.now
    assert idle.expires_at == clock.now + dt.timedelta(seconds=60)  # a release renews it
    clock.advance(5)
    claim = store.claim_thread("t", "r2", metadata={"title": "b"})
    assert claim.start_from == head.checkpoint_id
    assert claim.superseded is None
    assert claim.run.strategy == "new"
    assert claim.run.seq == 2
    thread = claim.thread
    assert thread.metadata == {"user": "ann", "title": "b"}  # merged
    assert (thread.owner, thread.last_run, thread.runs) == ("r2", "r2", 2)
    assert thread.created_at == T0
    assert thread.updated_at == clock.now
    assert thread.ttl == 60
    assert thread.expires_at == clock.now + dt.timedelta(seconds=60)
    assert [r.run_id for r in store.thread_runs("t")] == ["r1", "r2"]


def test_a_claim_starts_from_the_head_as_it_is_now(harness: Harness) -> None:
    store = threads(harness)
    store.claim_thread("t", "r1")
    before = save(store, "r1", "t", 1)
    head = save(store, "r1", "t", 2)
    store.release_thread("t", "r1")
    assert store.delete(head.checkpoint_id)  # e.g. a time-travel edit dropped the head
    assert store.claim_thread("t", "r2").start_from == before.checkpoint_id


@pytest.mark.parametrize("strategy", ["reject", "enqueue"])
def test_a_busy_thread_refuses_and_nothing_changes(
    harness: Harness, clock: Clock, strategy: Any
) -> None:
    store = threads(harness)
    store.claim_thread("t", "r1")
    save(store, "r1", "t", 1)
    before = snapshot(store, "t", "r1", "r2")
    clock.advance(1)
    with pytest.raises(ThreadBusy, match="is busy") as caught:
        store.claim_thread("t", "r2", strategy=strategy, metadata={"x": 1}, ttl=5)
    assert (caught.value.thread_id, caught.value.owner) == ("t", "r1")
    assert snapshot(store, "t", "r1", "r2") == before
    with pytest.raises(ValueError, match="already owns"):
        store.claim_thread("t", "r1")
    with pytest.raises(ValueError, match="multitask_strategy"):
        store.claim_thread("t", "r2", strategy="shout")
    assert snapshot(store, "t", "r1", "r2") == before


def test_interrupt_takes_the_thread_from_the_owners_head(harness: Harness, clock: Clock) -> None:
    store = threads(harness)
    store.claim_thread("t", "r1")
    save(store, "r1", "t", 1, {"type": "a"})
    head = save(store, "r1", "t", 2, {"type": "b"})
    claim = store.claim_thread("t", "r2", strategy="interrupt")
    assert claim.start_from == head.checkpoint_id
    assert claim.superseded == "r1"
    assert (claim.run.strategy, claim.run.superseded, claim.run.seq) == ("interrupt", "r1", 2)
    assert (claim.thread.owner, claim.thread.last_run) == ("r2", "r2")
    before = snapshot(store, "t", "r1")
    with pytest.raises(ThreadTakenOver) as caught:
        save(store, "r1", "t", 3, {"type": "lost"})
    assert (caught.value.run_id, caught.value.thread_id, caught.value.owner) == ("r1", "t", "r2")
    assert snapshot(store, "t", "r1") == before  # nothing written, no event appended
    assert store.head("r1") == head
    assert event_types(store, "r1") == [(1, "a"), (2, "b")]  # the old run's log stays
    save(store, "r2", "t", 1)
    assert store.release_thread("t", "r1") is False
    assert [(r.run_id, r.strategy) for r in store.thread_runs("t")] == [
        ("r1", "new"),
        ("r2", "interrupt"),
    ]


def test_interrupting_an_owner_with_no_checkpoint_starts_from_its_start(
    harness: Harness,
) -> None:
    store = threads(harness)
    store.claim_thread("t", "r1")
    store.claim_thread("t", "r2", strategy="interrupt")
    claim = store.claim_thread("t", "r3", strategy="interrupt")
    assert claim.start_from is None
    assert claim.superseded == "r2"


def test_a_run_that_saved_nothing_leaves_the_thread_where_it_started(harness: Harness) -> None:
    # e.g. a run whose input failed after its claim, or a process that died first
    store = threads(harness)
    store.claim_thread("t", "r1")
    head = save(store, "r1", "t", 1)
    store.release_thread("t", "r1")
    assert store.claim_thread("t", "r2").start_from == head.checkpoint_id
    store.release_thread("t", "r2")  # no checkpoint
    assert store.claim_thread("t", "r3").start_from == head.checkpoint_id
    interrupting = store.claim_thread("t", "r4", strategy="interrupt")
    assert interrupting.start_from == head.checkpoint_id  # r3 saved nothing either
    assert interrupting.superseded == "r3"


def test_rollback_deletes_the_owners_run_and_starts_where_it_started(
    harness: Harness, clock: Clock
) -> None:
    store = threads(harness)
    store.claim_thread("t", "r1")
    start = save(store, "r1", "t", 1, {"type": "kept"})
    store.release_thread("t", "r1")
    second = store.claim_thread("t", "r2")
    assert second.start_from == start.checkpoint_id
    save(store, "r2", "t", 1, {"type": "doomed"})
    doomed = save(store, "r2", "t", 2, {"type": "doomed"})
    store.put_writes("r2", doomed.checkpoint_id, "task", [{"x": 1}])
    claim = store.claim_thread("t", "r3", strategy="rollback")
    assert claim.start_from == start.checkpoint_id
    assert claim.superseded == "r2"
    assert (claim.run.seq, claim.run.strategy, claim.run.superseded) == (3, "rollback", "r2")
    assert (claim.thread.runs, claim.thread.owner, claim.thread.last_run) == (3, "r3", "r3")
    # r2 is gone: its checkpoints, writes and events, and its place in the thread.
    assert store.head("r2") is None
    assert store.list("r2") == []
    assert store.read_events("r2") == []
    assert "r2" not in store.runs()
    assert [(r.run_id, r.seq) for r in store.thread_runs("t")] == [("r1", 1), ("r3", 3)]
    # r1 (where r2 started) is untouched.
    assert store.head("r1") == start
    assert event_types(store, "r1") == [(1, "kept")]
    # r2 writes nothing more: its run is gone (a conflict) and it lost the thread.
    with pytest.raises(CheckpointConflict):
        save(store, "r2", "t", 3)
    with pytest.raises(ThreadTakenOver):
        save(store, "r2", "t", 1)
    assert store.list("r2") == []
    assert store.read_events("r2") == []


def test_rolling_back_a_first_run_starts_from_nothing(harness: Harness) -> None:
    store = threads(harness)
    store.claim_thread("t", "r1")
    save(store, "r1", "t", 1)
    claim = store.claim_thread("t", "r2", strategy="rollback")
    assert claim.start_from is None
    assert claim.superseded == "r1"
    assert store.list("r1") == []
    assert store.delete_run("r1") == 0
    assert [r.run_id for r in store.thread_runs("t")] == ["r2"]


def test_claims_on_an_idle_thread_take_it_whatever_the_strategy(harness: Harness) -> None:
    store = threads(harness)
    for number, strategy in enumerate(["reject", "enqueue", "interrupt", "rollback"]):
        run_id = f"r{number}"
        claim = store.claim_thread("t", run_id, strategy=strategy)
        assert claim.superseded is None
        assert claim.run.strategy == "new"
        save(store, run_id, "t", 1)
        assert store.release_thread("t", run_id)
    assert len(store.thread_runs("t")) == 4


# -- queues ----------------------------------------------------------------------------


def test_enqueue_runs_inputs_in_arrival_order(harness: Harness, clock: Clock) -> None:
    store = threads(harness)
    store.claim_thread("t", "r1")
    assert store.enqueue("t", "a", lease=30) == 0
    assert store.enqueue("t", "b", lease=30) == 1
    assert store.enqueue("t", "a", lease=30) == 0  # renewed: keeps its place
    with pytest.raises(ThreadBusy, match="is busy"):
        store.claim_thread("t", "r2", strategy="enqueue", ticket="a")
    store.release_thread("t", "r1")
    # Idle now, but "a" came first: "b", and inputs with no ticket, wait.
    with pytest.raises(ThreadBusy, match="queued") as caught:
        store.claim_thread("t", "r3", strategy="enqueue", ticket="b")
    assert caught.value.owner is None
    with pytest.raises(ThreadBusy, match="queued"):
        store.claim_thread("t", "r4")
    claim = store.claim_thread("t", "r2", strategy="enqueue", ticket="a")
    assert claim.thread.owner == "r2"
    assert store.enqueue("t", "b", lease=30) == 0  # "a" left the queue with its claim
    store.release_thread("t", "r2")
    store.dequeue("t", "b")  # "b" gave up
    store.dequeue("t", "b")  # twice is harmless
    store.dequeue("elsewhere", "b")
    assert store.claim_thread("t", "r4").thread.owner == "r4"


def test_a_lapsed_ticket_is_skipped(harness: Harness, clock: Clock) -> None:
    store = threads(harness)
    store.claim_thread("t", "r1")
    store.release_thread("t", "r1")
    assert store.enqueue("t", "dead", lease=5) == 0
    assert store.enqueue("t", "alive", lease=60) == 1
    with pytest.raises(ThreadBusy, match="queued"):
        store.claim_thread("t", "r2", strategy="enqueue", ticket="alive")
    clock.advance(10)  # "dead"'s waiter stopped renewing it
    claim = store.claim_thread("t", "r2", strategy="enqueue", ticket="alive")
    assert claim.thread.owner == "r2"
    assert store.enqueue("t", "late", lease=60) == 0  # "dead" was dropped, "alive" dequeued


def test_renewing_keeps_a_ticket_alive(harness: Harness, clock: Clock) -> None:
    store = threads(harness)
    assert store.enqueue("t", "a", lease=5) == 0
    assert store.enqueue("t", "b", lease=60) == 1
    for _ in range(3):
        clock.advance(4)
        assert store.enqueue("t", "a", lease=5) == 0
    assert store.enqueue("t", "b", lease=60) == 1
    clock.advance(6)
    assert store.enqueue("t", "b", lease=60) == 0


# -- saves -----------------------------------------------------------------------------


def test_a_save_by_a_run_that_does_not_own_the_thread_writes_nothing(harness: Harness) -> None:
    store = threads(harness)
    store.claim_thread("t", "r1")
    save(store, "r1", "t", 1)
    before = snapshot(store, "t", "r1", "stranger")
    with pytest.raises(ThreadTakenOver) as caught:
        save(store, "stranger", "t", 1, {"type": "x"})
    assert caught.value.owner == "r1"
    assert snapshot(store, "t", "r1", "stranger") == before
    assert store.head("stranger") is None
    assert "stranger" not in store.runs()
    assert store.append_events("stranger", [{"type": "y"}]) == 0  # no checkpoint: no log
    with pytest.raises(ThreadTakenOver) as unknown:
        save(store, "r1", "nowhere", 2)
    assert unknown.value.owner is None
    assert store.head("r1") == before[2]["r1"][-1]


def test_the_last_run_of_an_idle_thread_may_still_save(harness: Harness, clock: Clock) -> None:
    store = threads(harness)
    store.claim_thread("t", "r1", ttl=60)
    save(store, "r1", "t", 1)
    store.release_thread("t", "r1")
    later = clock.advance(30)
    save(store, "r1", "t", 2, at=later)  # e.g. its final checkpoint, written after release
    thread = store.get_thread("t")
    assert thread is not None
    assert thread.updated_at == later
    assert thread.expires_at == later + dt.timedelta(seconds=60)  # a save renews the ttl
    store.claim_thread("t", "r2")
    store.release_thread("t", "r2")
    with pytest.raises(ThreadTakenOver):
        save(store, "r1", "t", 3)


def test_runs_without_a_thread_save_as_before(harness: Harness) -> None:
    store = threads(harness)
    first = save(store, "plain", None, 1, {"type": "a"})
    save(store, "plain", None, 2, {"type": "b"}, {"type": "c"})
    assert store.head("plain").version == 2
    assert event_types(store, "plain") == [(1, "a"), (2, "b"), (3, "c")]
    assert store.load(first.checkpoint_id) == first  # events are never part of the record
    assert store.load(first.checkpoint_id).events == ()


# -- events ----------------------------------------------------------------------------


def test_events_are_stored_with_their_checkpoint_and_read_in_order(harness: Harness) -> None:
    store = threads(harness)
    store.claim_thread("t", "r1")
    first = save(store, "r1", "t", 1, {"type": "run_start", "n": 1}, {"type": "node_start"})
    save(store, "r1", "t", 2, {"type": "node_end", "data": {"ü": [1, 2.5, None, True]}})
    save(store, "r1", "t", 3, {"type": "node_start"}, {"type": "node_end"}, {"type": "step"})
    types = ["run_start", "node_start", "node_end", "node_start", "node_end", "step"]
    assert event_types(store, "r1") == list(enumerate(types, 1))
    assert store.read_events("r1")[2].event == {
        "type": "node_end",
        "data": {"ü": [1, 2.5, None, True]},
    }
    assert store.read_events("r1")[0].run_id == "r1"
    # Read on from any seq: no gap, no duplicate, whatever the page size.
    for page in (1, 2, 4, 10):
        seen: list[int] = []
        after = 0
        while batch := store.read_events("r1", after=after, limit=page):
            seen += [e.seq for e in batch]
            after = batch[-1].seq
        assert seen == list(range(1, 7)), page
    assert event_types(store, "r1", after=4) == [(5, "node_end"), (6, "step")]
    assert store.read_events("r1", after=6) == []
    assert store.read_events("r1", limit=0) == []
    # A retried save (committed already) appends nothing.
    store.save(first, expected_version=0)
    assert len(store.read_events("r1")) == 6
    # Events after the last checkpoint (the run's end) go on the same log.
    assert store.append_events("r1", [{"type": "run_end"}, {"type": "done"}]) == 8
    assert store.append_events("r1", []) == 0
    assert event_types(store, "r1", after=6) == [(7, "run_end"), (8, "done")]
    save(store, "r1", "t", 4, {"type": "more"})
    assert event_types(store, "r1", after=7) == [(8, "done"), (9, "more")]
    assert store.read_events("nobody") == []
    assert store.append_events("nobody", [{"type": "x"}]) == 0
    with pytest.raises(ValueError, match="after"):
        store.read_events("r1", after=-1)
    with pytest.raises(ValueError, match="limit"):
        store.read_events("r1", limit=-1)


def test_deleting_a_run_deletes_its_events(harness: Harness) -> None:
    store = threads(harness)
    save(store, "r1", None, 1, {"type": "a"})
    assert store.delete_run("r1") == 1
    assert store.read_events("r1") == []
    save(store, "r1", None, 1, {"type": "again"})  # a run of the same id starts a new log
    assert event_types(store, "r1") == [(1, "again")]


def test_an_event_that_is_not_json_fails_the_save_before_anything_is_written(
    harness: Harness,
) -> None:
    from selectgraph.core._errors import StateSerializationError

    store = threads(harness)
    store.claim_thread("t", "r1")
    with pytest.raises(StateSerializationError):
        save(store, "r1", "t", 1, {"type": "bad", "value": object()})
    assert store.head("r1") is None
    assert store.read_events("r1") == []


# -- threads as records ------------------------------------------------------------------


def test_update_thread(harness: Harness, clock: Clock) -> None:
    store = threads(harness)
    store.claim_thread("t", "r1", metadata={"user": "ann", "title": "a"})
    clock.advance(10)
    thread = store.update_thread("t", metadata={"title": "b", "tags": ["x", "y"]})
    assert thread.metadata == {"user": "ann", "title": "b", "tags": ["x", "y"]}
    assert thread.updated_at == clock.now
    assert thread.expires_at is None
    assert thread.owner == "r1"  # still busy
    clock.advance(10)
    thread = store.update_thread("t", ttl=30)
    assert thread.ttl == 30
    assert thread.expires_at == clock.now + dt.timedelta(seconds=30)
    clock.advance(10)
    thread = store.update_thread("t")  # no new ttl: the expiry stays
    assert thread.expires_at == clock.now + dt.timedelta(seconds=20)
    assert store.get_thread("t") == thread
    with pytest.raises(ResumeError, match="does not exist"):
        store.update_thread("nowhere", metadata={"a": 1})
    with pytest.raises(ValueError, match="ttl"):
        store.update_thread("t", ttl=0)
    with pytest.raises(TypeError, match="metadata"):
        store.update_thread("t", metadata={1: "x"})


def test_list_threads(harness: Harness, clock: Clock) -> None:
    store = threads(harness)
    for name, user in [("a", "ann"), ("b", "bob"), ("c", "ann"), ("d", "ann")]:
        clock.advance(1)
        store.claim_thread(name, f"run-{name}", metadata={"user": user, "n": {"deep": [1]}})
    clock.advance(1)
    store.update_thread("a", metadata={"pinned": True})  # now the most recently updated
    assert [t.thread_id for t in store.list_threads()] == ["a", "d", "c", "b"]
    assert [t.thread_id for t in store.list_threads(metadata={"user": "ann"})] == ["a", "d", "c"]
    assert [t.thread_id for t in store.list_threads(metadata={"user": "ann"}, limit=2)] == [
        "a",
        "d",
    ]
    assert [t.thread_id for t in store.list_threads(metadata={"n": {"deep": [1]}})] == [
        "a",
        "d",
        "c",
        "b",
    ]
    assert store.list_threads(metadata={"n": {"deep": []}}) == []
    assert [t.thread_id for t in store.list_threads(metadata={"pinned": True, "user": "ann"})] == [
        "a"
    ]
    assert store.list_threads(metadata={"user": "zoe"}) == []
    assert store.list_threads(metadata={"missing": None}) == []
    assert store.list_threads(limit=0) == []
    assert store.list_threads()[0] == store.get_thread("a")
    # Same update time: in thread id order.
    clock.advance(1)
    for name in ["d", "b"]:
        store.update_thread(name)
    assert [t.thread_id for t in store.list_threads(limit=3)] == ["b", "d", "a"]
    with pytest.raises(ValueError, match="limit"):
        store.list_threads(limit=-1)


def test_delete_thread(harness: Harness, clock: Clock) -> None:
    store = threads(harness)
    store.claim_thread("t", "r1")
    save(store, "r1", "t", 1)
    save(store, "r1", "t", 2)
    store.release_thread("t", "r1")
    store.claim_thread("t", "r2")
    save(store, "r2", "t", 1)
    store.enqueue("t", "waiting", lease=60)
    save(store, "elsewhere", None, 1)
    assert store.delete_thread("t") == 3
    assert store.get_thread("t") is None
    assert store.thread_runs("t") == []
    for run in ("r1", "r2"):
        assert store.list(run) == []
        assert store.read_events(run) == []
    assert store.runs() == ["elsewhere"]
    assert store.enqueue("t", "new", lease=60) == 0  # the queue went too
    assert store.delete_thread("t") == 0
    assert store.delete_thread("never") == 0
    claim = store.claim_thread("t", "r3")  # the id can be used again: a new thread
    assert claim.run.seq == 1
    assert claim.start_from is None


def test_prune_threads(harness: Harness, clock: Clock) -> None:
    store = threads(harness)
    store.claim_thread("expiring", "r1", ttl=60)
    save(store, "r1", "expiring", 1, at=T0)
    store.release_thread("expiring", "r1")
    store.claim_thread("idle", "r2")
    store.release_thread("idle", "r2")
    store.claim_thread("busy", "r3")
    store.claim_thread("renewed", "r4", ttl=60)
    save(store, "r4", "renewed", 1, at=T0 + dt.timedelta(seconds=50))
    assert store.prune_threads(now=T0 + dt.timedelta(seconds=59)) == []
    assert store.prune_threads(now=T0 + dt.timedelta(seconds=61)) == ["expiring"]
    assert store.get_thread("expiring") is None
    assert store.list("r1") == []
    hour = dt.timedelta(hours=1)
    assert store.prune_threads(older_than=hour, now=T0 + dt.timedelta(seconds=90)) == []
    # Two hours on: "idle" is old, "renewed" (busy) expired; "busy" has no ttl and stays.
    pruned = store.prune_threads(older_than=hour, now=T0 + dt.timedelta(hours=2))
    assert sorted(pruned) == ["idle", "renewed"]
    assert [t.thread_id for t in store.list_threads()] == ["busy"]
    assert store.list("r4") == []


def test_prune_by_age_spares_busy_and_recent_threads(harness: Harness, clock: Clock) -> None:
    store = threads(harness)
    store.claim_thread("idle", "r1")
    store.release_thread("idle", "r1")
    store.claim_thread("busy", "r2")
    clock.advance(1800)
    store.claim_thread("recent", "r3")
    store.release_thread("recent", "r3")
    hour = dt.timedelta(hours=1)
    assert store.prune_threads(older_than=hour, now=T0 + dt.timedelta(minutes=59)) == []
    assert store.prune_threads(older_than=hour, now=T0 + dt.timedelta(minutes=61)) == ["idle"]
    assert sorted(t.thread_id for t in store.list_threads()) == ["busy", "recent"]
    clock.advance(10_000)
    assert store.prune_threads(older_than=dt.timedelta(0)) == ["recent"]
    assert [t.thread_id for t in store.list_threads()] == ["busy"]
    with pytest.raises(ValueError, match="older_than"):
        store.prune_threads(older_than=dt.timedelta(seconds=-1))


def test_a_ttl_expires_even_a_busy_thread(harness: Harness, clock: Clock) -> None:
    store = threads(harness)
    store.claim_thread("t", "r1", ttl=10)
    save(store, "r1", "t", 1, at=T0)
    assert store.prune_threads(now=T0 + dt.timedelta(seconds=10)) == ["t"]
    assert store.list("r1") == []
    with pytest.raises(CheckpointConflict):  # its run is gone
        save(store, "r1", "t", 2)
    with pytest.raises(ThreadTakenOver):  # and so is its thread
        save(store, "r1", "t", 1)


def test_thread_bytes(harness: Harness) -> None:
    store = threads(harness)
    noise = secrets.token_hex  # stores compress: random text keeps its size in check
    assert store.thread_bytes("t") == 0
    store.claim_thread("t", "r1")
    assert store.thread_bytes("t") == 0
    cp = save(store, "r1", "t", 1, {"type": "a", "text": noise(1000)})
    one = store.thread_bytes("t")
    assert one > 1000  # the event is counted
    store.put_writes("r1", cp.checkpoint_id, "task", [{"blob": noise(500)}])
    two = store.thread_bytes("t")
    assert two > one + 500
    store.append_events("r1", [{"type": "end", "text": noise(300)}])
    three = store.thread_bytes("t")
    assert three > two + 300
    save(store, "other", None, 1, {"type": "a", "text": noise(5000)})
    assert store.thread_bytes("t") == three  # another run's records are not the thread's
    store.release_thread("t", "r1")
    store.claim_thread("t", "r1")  # continued: a second record of the same run
    assert store.thread_bytes("t") == three  # counted once
    store.claim_thread("t", "r2", strategy="rollback")
    assert store.thread_bytes("t") == 0
    store.delete_thread("t")
    assert store.thread_bytes("t") == 0


# -- thread ids --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad", ["", "a|b", "x" * 257, "line\nbreak", "nul\x00", "del\x7f", "lone \ud800", 5]
)
def test_thread_ids_a_store_cannot_hold_are_refused(harness: Harness, bad: Any) -> None:
    store = threads(harness)
    calls: list[Callable[[], Any]] = [
        lambda: store.claim_thread(bad, "r"),
        lambda: store.release_thread(bad, "r"),
        lambda: store.get_thread(bad),
        lambda: store.thread_runs(bad),
        lambda: store.update_thread(bad, metadata={"a": 1}),
        lambda: store.delete_thread(bad),
        lambda: store.thread_bytes(bad),
        lambda: store.enqueue(bad, "ticket", lease=5),
        lambda: store.dequeue(bad, "ticket"),
    ]
    for call in calls:
        with pytest.raises(ThreadIdError):
            call()
    with pytest.raises(ThreadIdError):
        asyncio.run(store.aclaim_thread(bad, "r"))
    assert store.list_threads() == []


def test_thread_ids_are_stored_verbatim(harness: Harness) -> None:
    store = threads(harness)
    for number, thread_id in enumerate(ODD_IDS):
        run_id = f"run {thread_id}"  # run ids are caller data too
        claim = store.claim_thread(thread_id, run_id, metadata={"n": number})
        assert claim.thread.thread_id == thread_id
        assert claim.run.thread_id == thread_id
        save(store, run_id, thread_id, 1, {"type": "x", "thread": thread_id})
        found = store.get_thread(thread_id)
        assert found is not None
        assert found.thread_id == thread_id
        assert found.owner == run_id
        assert [r.run_id for r in store.thread_runs(thread_id)] == [run_id]
        assert store.read_events(run_id)[0].event["thread"] == thread_id
        assert store.enqueue(thread_id, "ticket", lease=60) == 0
    listed = {t.thread_id: t.metadata["n"] for t in store.list_threads()}
    assert listed == {thread_id: n for n, thread_id in enumerate(ODD_IDS)}
    # Ids that differ only in case or by a prefix are different threads.
    store.claim_thread("Thread", "upper")
    store.claim_thread("thread", "lower")
    store.claim_thread("thread/", "slash")
    assert store.get_thread("Thread").owner == "upper"
    assert store.get_thread("thread").owner == "lower"
    for thread_id in ODD_IDS:
        assert store.delete_thread(thread_id) == 1
    assert {t.thread_id for t in store.list_threads()} == {"Thread", "thread", "thread/"}


# -- async twins and other handles -----------------------------------------------------------


async def test_async_twins(harness: Harness, clock: Clock) -> None:
    store = threads(harness)
    claim = await store.aclaim_thread("t", "r1", metadata={"user": "ann"}, ttl=60)
    assert claim.thread.owner == "r1"
    checkpoint = Checkpoint(
        run_id="r1",
        checkpoint_id=new_checkpoint_id(),
        version=1,
        step=1,
        values={},
        metadata={"thread_id": "t"},
        events=({"type": "a"},),
    )
    await store.asave(checkpoint, expected_version=0)
    assert await store.aappend_events("r1", [{"type": "b"}]) == 2
    assert [e.seq for e in await store.aread_events("r1", after=1)] == [2]
    assert await store.athread_bytes("t") > 0
    assert await store.aenqueue("t", "k", lease=5) == 0
    await store.adequeue("t", "k")
    with pytest.raises(ThreadBusy):
        await store.aclaim_thread("t", "r2")
    assert await store.arelease_thread("t", "r1") is True
    assert (await store.aget_thread("t")).owner is None
    assert [t.thread_id for t in await store.alist_threads(metadata={"user": "ann"})] == ["t"]
    assert [r.run_id for r in await store.athread_runs("t")] == ["r1"]
    updated = await store.aupdate_thread("t", metadata={"title": "x"})
    assert updated.metadata == {"user": "ann", "title": "x"}
    assert await store.aprune_threads(older_than=dt.timedelta(hours=1)) == []
    assert await store.adelete_thread("t") == 1
    assert await store.aget_thread("t") is None
    await store.aclaim_thread("u", "r3", ttl=1)
    assert await store.aprune_threads(now=T0 + dt.timedelta(seconds=2)) == ["u"]


def test_another_handle_sees_the_same_threads(harness: Harness) -> None:
    store = threads(harness)
    store.claim_thread("t", "r1")
    save(store, "r1", "t", 1, {"type": "a"})
    other: Any = harness.reopen()
    assert other.get_thread("t") == store.get_thread("t")
    with pytest.raises(ThreadBusy):
        other.claim_thread("t", "r2")
    other.claim_thread("t", "r2", strategy="interrupt")
    with pytest.raises(ThreadTakenOver):
        save(store, "r1", "t", 2)
    assert event_types(other, "r1") == [(1, "a")]


def test_metadata_must_be_json_data(harness: Harness) -> None:
    store = threads(harness)
    with pytest.raises(TypeError, match="metadata"):
        store.claim_thread("t", "r1", metadata=["not", "a", "mapping"])
    with pytest.raises(StateSerializationError, match="thread metadata"):
        store.claim_thread("t", "r1", metadata={"when": dt.datetime.now()})
    with pytest.raises(StateSerializationError, match="thread metadata"):
        store.list_threads(metadata={"obj": object()})
    with pytest.raises(ValueError, match="ttl"):
        store.claim_thread("t", "r1", ttl=-1)
    with pytest.raises(ValueError, match="lease"):
        store.enqueue("t", "k", lease=0)
    assert store.get_thread("t") is None
