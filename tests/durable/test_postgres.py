"""The key durable-run paths against PostgreSQL (skipped without a server, except under CI)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from selectgraph import CheckpointConflict, GraphResult, GraphRunError, ResumeError
from tests.durable import _restart
from tests.durable._support import Calls, pending, triggers
from tests.durable.test_durability import STEPS, _counter, _expected_after
from tests.durable.test_failure_cancel import _flaky_pipeline
from tests.durable.test_parallel_interrupts import _scatter
from tests.durable.test_single_writer import _Gate, _race
from tests.persistence.conftest import Harness


def test_pause_answer_and_replay_from_postgres(pg: Harness, tmp_path: Path) -> None:
    log = tmp_path / "log"
    first = _restart.build(log).run({}, checkpoint_store=pg.store, run_id="pg")
    assert first.interrupt_id == "pg|2:review|0"
    # Another graph and another connection: as after a restart.
    other = pg.reopen()
    second = _restart.build(log).resume(pending(first), "yes", checkpoint_store=other)
    assert second.interrupt_id == "pg|2:review|1"
    final = _restart.build(log).resume(pending(second), "ok", checkpoint_store=pg.reopen())
    assert final.state.data["published"] == "draft on checkpoints (yes/ok)"
    assert _restart.counts(log) == {
        "prepare": 1,
        "review_pre": 3,
        "once": 1,
        "review_mid": 2,
        "review_post": 1,
        "publish": 1,
    }
    assert triggers(pg.store, "pg")[-1] == "end"


def test_two_resumers_on_postgres_one_wins(pg: Harness, tmp_path: Path) -> None:
    log = tmp_path / "log"
    paused = _restart.build(log).run({}, checkpoint_store=pg.store, run_id="race")
    interrupt_id = paused.interrupt_id
    assert interrupt_id is not None
    stores = [pg.reopen(), pg.reopen()]
    gate = _Gate()
    for store in stores:
        gate.wrap(store)
    graphs = [_restart.build(log), _restart.build(log)]
    outcomes = _race(
        [
            lambda: graphs[0].resume(interrupt_id, "a", checkpoint_store=stores[0]),
            lambda: graphs[1].resume(interrupt_id, "b", checkpoint_store=stores[1]),
        ]
    )
    assert sorted(type(o).__name__ for o in outcomes) == sorted(
        [GraphResult.__name__, CheckpointConflict.__name__]
    ), outcomes
    assert _restart.counts(log).get("review_mid") == 1
    with pytest.raises(ResumeError):
        _restart.build(log).resume(interrupt_id, "late", checkpoint_store=pg.store)


def test_scatter_interrupts_replay_from_postgres(pg: Harness) -> None:
    calls = Calls()
    result = _scatter(calls).run({}, checkpoint_store=pg.store, run_id="sc")
    answers = {i.id: str(i.payload["topic"]).upper() for i in result.interrupts}
    final = _scatter(calls).resume(answers, checkpoint_store=pg.reopen())
    assert final.state.data["answers"] == ["x=X", "y=Y", "z=Z"]
    assert calls["join"] == 1


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
def test_durability_modes_on_postgres(pg: Harness, durability: Any) -> None:
    graph = _counter(Calls())
    run_id = f"d-{durability}"
    result = graph.run({}, checkpoint_store=pg.store, run_id=run_id, durability=durability)
    history = graph.get_history(run_id, checkpoint_store=pg.reopen())
    assert history[0].values == dict(result.state.data)
    if durability == "exit":
        assert len(history) == 1
    else:
        assert len(history) == STEPS + 2
        for snapshot in history:
            assert snapshot.values == _expected_after(snapshot.step)


def test_failure_then_continue_on_postgres(pg: Harness) -> None:
    calls = Calls()
    broken = {"b": True}
    with pytest.raises(GraphRunError):
        _flaky_pipeline(calls, broken).run({}, checkpoint_store=pg.store, run_id="f")
    broken["b"] = False
    final = _flaky_pipeline(calls, broken).run(None, checkpoint_store=pg.reopen(), run_id="f")
    assert dict(final.state.data) == {"a": 1, "b": 2, "c": 3}
    assert calls.order == ["a", "b", "b", "c"]
