"""Storage stays linear in what changes: a long loop over a large state is stored as deltas."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from selectgraph import (
    END,
    AgentGraph,
    CheckpointStore,
    GraphState,
    SQLiteCheckpointStore,
)

BLOB = 10_000
"""Bytes of unchanging text in the state."""


def _loop(steps: int) -> AgentGraph:
    """start (writes a ~10 KB blob) then ``tick`` until ``steps`` nodes have run."""

    def tick(state: GraphState) -> dict[str, Any]:
        return {"n": state.data["n"] + 1}

    # The blob is varied text, so compression alone cannot hide 1000 copies of it.
    blob = "".join(f"{i:05d}" for i in range(BLOB // 5))
    graph = AgentGraph("loop", max_steps=None)
    graph.add_node("start", lambda s: {"blob": blob, "n": 1})
    graph.add_node("tick", tick)
    graph.add_edge("start", "tick")
    graph.add_conditional_edge("tick", lambda s: "tick" if s.data["n"] < steps else END)
    return graph


def test_a_thousand_steps_over_a_10kb_state_store_far_less_than_a_thousand_copies(
    tmp_path: Path,
) -> None:
    db = tmp_path / "x.db"
    graph = _loop(1000)
    with SQLiteCheckpointStore(db) as store:
        result = graph.run({}, checkpoint_store=store, run_id="big", durability="sync")
        assert result.steps == 1000
        checkpoints = store.list("big")
        assert len(checkpoints) == 1002  # input, one per node, end
    with sqlite3.connect(db) as conn:
        (bodies,) = conn.execute("SELECT SUM(LENGTH(body)) FROM checkpoints").fetchone()
    size = db.stat().st_size + sum(p.stat().st_size for p in tmp_path.glob("x.db-*"))
    assert bodies < 1_000_000
    assert size < 1_000_000  # 1000 copies of the state would be over 10 MB
    with SQLiteCheckpointStore(db) as reopened:
        snapshot = graph.get_state("big", checkpoint_store=reopened)
        assert snapshot.values == dict(result.state.data)
        assert snapshot.step == 1000
        # The head's state carries the whole run's history, every node execution.
        assert len(snapshot.state.history) == 1000
        assert [name for name, _ in snapshot.state.history][:3] == ["start", "tick", "tick"]
        # And any checkpoint in the middle rebuilds to the state of its step.
        middle = checkpoints[500]
        assert reopened.load_state(middle.checkpoint_id)["data"]["n"] == middle.step


def test_the_file_store_also_keeps_deltas(tmp_path: Path) -> None:
    from selectgraph import FileCheckpointStore

    graph = _loop(60)  # the file store syncs every save: fewer steps keep this quick
    with FileCheckpointStore(tmp_path / "cp") as store:
        graph.run({}, checkpoint_store=store, run_id="f")
        assert graph.get_state("f", checkpoint_store=store).values["n"] == 60
    total = sum(p.stat().st_size for p in (tmp_path / "cp").rglob("*") if p.is_file())
    assert total < 60 * BLOB // 4


def test_get_history_with_a_limit_decodes_only_what_it_returns(
    store: CheckpointStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph = _loop(60)
    graph.run({}, checkpoint_store=store, run_id="h")
    decoded = 0
    original = GraphState.from_dict.__func__  # type: ignore[attr-defined]

    def counting(cls: type[GraphState], *args: Any, **kwargs: Any) -> GraphState:
        nonlocal decoded
        decoded += 1
        result: GraphState = original(cls, *args, **kwargs)
        return result

    monkeypatch.setattr(GraphState, "from_dict", classmethod(counting))
    history = graph.get_history("h", checkpoint_store=store, limit=3)
    assert [s.step for s in history] == [60, 60, 59]
    assert decoded <= 5
