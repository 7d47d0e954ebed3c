"""Processes racing on one thread, in the durable stores (file, SQLite, PostgreSQL).

The outcome never depends on timing: processes meet at a barrier or wait for
an event, and whatever order the race takes, the assertions hold (exactly one
claim wins; a run saves nothing after it lost its thread; the new run starts
from the old one's head at the claim, or from where a rolled-back run began).
"""

from __future__ import annotations

import multiprocessing
from typing import Any

import pytest

from tests.persistence._thread_worker import WAIT, claim, keep_saving, take_over
from tests.persistence.conftest import Harness
from tests.persistence.test_threads import save

CONTEXT = multiprocessing.get_context("spawn")


def run_processes(processes: list[Any], results: Any) -> list[Any]:
    """Start the processes, collect one result from each, and join them."""
    for process in processes:
        process.start()
    try:
        found = [results.get(timeout=WAIT * 2) for _ in processes]
    finally:
        for process in processes:
            process.join(WAIT)
            if process.is_alive():  # pragma: no cover - only when a test hangs
                process.kill()
                process.join()
    errors = [item[1] for item in found if item[0] == "error"]
    assert not errors, "\n".join(errors)
    assert all(process.exitcode == 0 for process in processes)
    return found


@pytest.mark.slow
@pytest.mark.parametrize("thread_state", ["idle", "new"])
def test_of_claims_racing_for_a_thread_exactly_one_wins(
    durable: Harness, thread_state: str
) -> None:
    store: Any = durable.store
    head = None
    if thread_state == "idle":
        store.claim_thread("t", "before")
        head = save(store, "before", "t", 1).checkpoint_id
        store.release_thread("t", "before")
    racers = 4
    barrier = CONTEXT.Barrier(racers)
    results = CONTEXT.Queue()
    processes = [
        CONTEXT.Process(target=claim, args=(durable.spec, "t", f"racer-{i}", barrier, results))
        for i in range(racers)
    ]
    found = run_processes(processes, results)
    winners = [run for run, outcome, _ in found if outcome == "won"]
    assert len(winners) == 1, found
    (winner,) = winners
    assert [start for _, outcome, start in found if outcome == "won"] == [head]
    assert sorted(owner for _, outcome, owner in found if outcome == "busy") == [winner] * 3
    thread = store.get_thread("t")
    assert thread is not None
    assert thread.owner == winner
    assert thread.runs == (2 if thread_state == "idle" else 1)
    assert [r.run_id for r in store.thread_runs("t")][-1:] == [winner]


def race_a_saver(durable: Harness, strategy: str) -> tuple[Any, Any, Any]:
    """Run A saving on thread "t" while another process claims "t" with ``strategy``."""
    ready, claimed = CONTEXT.Event(), CONTEXT.Event()
    results = CONTEXT.Queue()
    saver = CONTEXT.Process(
        target=keep_saving,
        args=(durable.spec, "t", "A", 3, 200, ready, claimed, results),
    )
    claimer = CONTEXT.Process(
        target=take_over, args=(durable.spec, "t", "B", strategy, ready, claimed, results)
    )
    found = {item[0]: item for item in run_processes([saver, claimer], results)}
    return found["saver"], found["claimer"], durable.store


def test_a_run_interrupted_mid_save_saves_nothing_after_the_claim(durable: Harness) -> None:
    store: Any = durable.store
    store.claim_thread("t", "A")
    (_, saved, refused, later), (_, start_from, superseded), _ = race_a_saver(durable, "interrupt")
    assert superseded == "A"
    assert len(saved) >= 3
    # Every save of A after the claim was refused, and only those.
    assert refused in (None, "ThreadTakenOver")  # None: the claim came after the window
    assert later == ["ThreadTakenOver"] * 3
    # B starts from A's head at the claim, which is A's last save: nothing landed after.
    head = store.head("A")
    assert start_from == saved[-1] == head.checkpoint_id
    assert [c.checkpoint_id for c in store.list("A")] == saved
    events = store.read_events("A")
    assert [e.seq for e in events] == list(range(1, 2 * len(saved) + 1))  # no gap, no extra
    assert [e.event["n"] for e in events] == [n for n in range(1, len(saved) + 1) for _ in "ab"]
    thread = store.get_thread("t")
    assert thread.owner == "B"
    assert thread.last_run == "B"


def test_a_run_rolled_back_mid_save_leaves_nothing(durable: Harness) -> None:
    store: Any = durable.store
    store.claim_thread("t", "before")
    start = save(store, "before", "t", 1).checkpoint_id
    store.release_thread("t", "before")
    assert store.claim_thread("t", "A").start_from == start
    (_, saved, refused, later), (_, start_from, superseded), _ = race_a_saver(durable, "rollback")
    assert superseded == "A"
    assert len(saved) >= 3
    assert start_from == start  # where A started
    # A's run is gone, and no save of A landed after the claim.
    assert refused in (None, "CheckpointConflict", "ThreadTakenOver")
    assert all(outcome in ("CheckpointConflict", "ThreadTakenOver") for outcome in later)
    assert store.head("A") is None
    assert store.list("A") == []
    assert store.read_events("A") == []
    assert [r.run_id for r in store.thread_runs("t")] == ["before", "B"]
    assert store.head("before").checkpoint_id == start
