"""Single writer: of two resumers of one paused run exactly one wins; the other runs nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from selectgraph import (
    CheckpointConflict,
    CheckpointStore,
    FileCheckpointStore,
    GraphResult,
    ResumeError,
    SQLiteCheckpointStore,
)
from selectgraph.persistence import Checkpoint
from tests.durable import _restart
from tests.durable.test_restart import ROOT, in_new_process


class _Gate:
    """Holds every "answer" save until both resumers reach theirs (both read the same head)."""

    def __init__(self) -> None:
        self.barrier = threading.Barrier(2, timeout=20)

    def wrap(self, store: CheckpointStore) -> None:
        original = store.save

        def save(checkpoint: Checkpoint, *, expected_version: int) -> None:
            if checkpoint.metadata.get("trigger") == "answer":
                self.barrier.wait()
            original(checkpoint, expected_version=expected_version)

        store.save = save  # type: ignore[method-assign]


def _race(resumers: list[Any]) -> list[GraphResult | BaseException]:
    outcomes: list[GraphResult | BaseException] = [RuntimeError("did not finish")] * 2

    def attempt(index: int) -> None:
        try:
            outcomes[index] = resumers[index]()
        except BaseException as error:  # the outcome under test
            outcomes[index] = error

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return outcomes


@pytest.mark.parametrize("kind", ["file", "sqlite"])
@pytest.mark.parametrize("first_live", [True, False], ids=["live-vs-replay", "replay-vs-replay"])
def test_two_resumers_in_threads_one_wins(tmp_path: Path, kind: str, first_live: bool) -> None:
    log = tmp_path / "log"
    opened: list[CheckpointStore] = []

    def open_store() -> CheckpointStore:
        store: CheckpointStore = (
            SQLiteCheckpointStore(tmp_path / "x.db")
            if kind == "sqlite"
            else FileCheckpointStore(tmp_path / "checkpoints")
        )
        opened.append(store)
        return store

    graph = _restart.build(log)
    first_store = open_store()
    paused = graph.run({}, checkpoint_store=first_store, run_id="race")
    interrupt_id = paused.interrupt_id
    assert interrupt_id is not None
    gate = _Gate()
    stores = [first_store if first_live else open_store(), open_store()]
    for store in stores:
        gate.wrap(store)
    # Two graph objects (and stores): the first may find the live paused run, the
    # second never does (another graph), so it replays from the store.
    graphs = [graph if first_live else _restart.build(log), _restart.build(log)]
    outcomes = _race(
        [
            lambda: graphs[0].resume(interrupt_id, "yes", checkpoint_store=stores[0]),
            lambda: graphs[1].resume(interrupt_id, "no", checkpoint_store=stores[1]),
        ]
    )
    try:
        won = [o for o in outcomes if isinstance(o, GraphResult)]
        lost = [o for o in outcomes if isinstance(o, CheckpointConflict)]
        assert len(won) == 1, outcomes
        assert len(lost) == 1, outcomes
        (winner,) = won
        assert winner.interrupt_id == "race|2:review|1"  # it went on to the next question
        counted = _restart.counts(log)
        assert counted.get("review_mid", 0) == 1  # only the winner went past the yield
        assert counted["once"] == 1
        assert counted["prepare"] == 1
        # The store holds the winner's answer, once.
        head = stores[1].head("race")
        assert head is not None
        answer = head.interrupts[interrupt_id]
        assert answer["answered"] is True
        assert answer["answer"] == ("yes" if outcomes[0] is winner else "no")
        assert [c.metadata["trigger"] for c in stores[1].list("race")].count("answer") == 1
        # The loser cannot answer the same question again.
        with pytest.raises(ResumeError):
            _restart.build(log).resume(interrupt_id, "late", checkpoint_store=stores[1])
    finally:
        for store in opened:
            store.close()


def test_two_processes_race_on_sqlite_and_exactly_one_wins(tmp_path: Path) -> None:
    db, log = tmp_path / "x.db", tmp_path / "log"
    started = in_new_process("start", str(db), str(log), "duel")
    (interrupt_id,) = started["interrupts"]
    race_dir = tmp_path / "barrier"
    race_dir.mkdir()
    env = {**os.environ, "SELECTGRAPH_TEST_RACE_DIR": str(race_dir)}
    command = [sys.executable, "-m", "tests.durable._restart", "resume", str(db), str(log)]
    racers = [
        subprocess.Popen(
            [*command, interrupt_id, answer],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for answer in ("left", "right")
    ]
    reports = []
    for racer in racers:
        out, err = racer.communicate(timeout=60)
        assert racer.returncode == 0, err
        reports.append(json.loads(out.strip().splitlines()[-1]))
    assert sorted(r["outcome"] for r in reports) == ["conflict", "ok"]
    (winner,) = [r for r in reports if r["outcome"] == "ok"]
    assert winner["interrupts"] == ["duel|2:review|1"]
    counted = _restart.counts(log)
    assert counted["prepare"] == 1
    assert counted["once"] == 1
    assert counted["review_mid"] == 1  # the loser's node never got past its replayed yield
    # The answers are saved before anything runs: the loser did not even start its replay.
    assert counted["review_pre"] == 2


def test_two_answers_to_different_branch_questions_race_and_the_loser_retries(
    tmp_path: Path,
) -> None:
    """Answering x and y of a three-way scatter at once: one wins; the retry then succeeds."""
    from tests.durable._support import Calls
    from tests.durable.test_parallel_interrupts import _scatter

    calls = Calls()
    db = tmp_path / "x.db"
    with SQLiteCheckpointStore(db) as store:
        paused = _scatter(calls).run({}, checkpoint_store=store, run_id="s")
        ids = {str(i.payload["topic"]): i.id for i in paused.interrupts}
        racers = [SQLiteCheckpointStore(db), SQLiteCheckpointStore(db)]
        gate = _Gate()
        for racer in racers:
            gate.wrap(racer)
        outcomes = _race(
            [
                lambda: _scatter(calls).resume(ids["x"], "X", checkpoint_store=racers[0]),
                lambda: _scatter(calls).resume(ids["y"], "Y", checkpoint_store=racers[1]),
            ]
        )
        for racer in racers:
            racer.close()
        assert sorted(type(o).__name__ for o in outcomes) == ["CheckpointConflict", "GraphResult"]
        lost = 0 if isinstance(outcomes[0], CheckpointConflict) else 1
        topic = "xy"[lost]
        retried = _scatter(calls).resume(ids[topic], topic.upper(), checkpoint_store=store)
        assert [i.id for i in retried.interrupts] == [ids["z"]]
        final = _scatter(calls).resume(ids["z"], "Z", checkpoint_store=store)
    assert final.state.data["answers"] == ["x=X", "y=Y", "z=Z"]
    assert calls["answered:x"] == calls["answered:y"] == calls["answered:z"] == 1
    assert calls["join"] == 1
