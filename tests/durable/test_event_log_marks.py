"""A run's stored event log across a live resume: every event once, in order."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from selectgraph import (
    END,
    AgentGraph,
    Durability,
    InMemoryCheckpointStore,
    InterruptRequest,
    SQLiteCheckpointStore,
)


def _ask(state: Any) -> Iterator[Any]:
    answer = yield InterruptRequest("Go on?")
    state.data["answer"] = answer


def _step(name: str) -> Any:
    def step(state: Any) -> dict[str, Any]:
        return {"seen": [*state.data.get("seen", []), name]}

    return step


def _graph() -> AgentGraph:
    graph = AgentGraph("marks")
    graph.add_node("ask", _ask, next_node="b")
    graph.add_node("b", _step("b"), next_node="c")
    graph.add_node("c", _step("c"), next_node=END)
    return graph


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_a_live_resume_stores_every_event_of_the_continued_run(
    kind: str, durability: Durability, tmp_path: Any
) -> None:
    store: Any = (
        InMemoryCheckpointStore() if kind == "memory" else SQLiteCheckpointStore(tmp_path / "x.db")
    )
    try:
        graph = _graph()
        paused = graph.run(None, checkpoint_store=store)
        before = [e.event["event"] for e in store.read_events(paused.run_id)]
        assert paused.interrupt_id is not None
        done = graph.resume(
            paused.interrupt_id, "yes", checkpoint_store=store, durability=durability
        )
        assert done.state.data["seen"] == ["b", "c"]
        stored = store.read_events(paused.run_id)
        assert [e.seq for e in stored] == list(range(1, len(stored) + 1))
        after = [e.event for e in stored[len(before) :]]
        # The continued part as its recorder saw it, from its first event: a live resume
        # starts a new log, which the marks of the first part must not cut short.
        steps = [
            (event["event"], event.get("node"))
            for event in after
            if event["event"] != "CheckpointSaved"
        ]
        assert steps == [
            ("RunResumed", "ask"),
            ("NodeStarted", "ask"),
            ("NodeFinished", "ask"),
            ("EdgeFired", None),
            ("NodeStarted", "b"),
            ("NodeFinished", "b"),
            ("EdgeFired", None),
            ("NodeStarted", "c"),
            ("NodeFinished", "c"),
            ("EdgeFired", None),
            ("RunFinished", None),
        ]
    finally:
        store.close()
