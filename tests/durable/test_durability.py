"""Durability modes (sync, async, exit) and what get_history shows of each step."""

from __future__ import annotations

import itertools
from collections.abc import Generator
from typing import Any

import pytest

from selectgraph import (
    END,
    AgentGraph,
    CheckpointStore,
    GraphState,
    InterruptRequest,
)
from tests.durable._support import Calls, pending, triggers

STEPS = 6


def _counter(calls: Calls) -> AgentGraph:
    """start, then ``tick`` five times: each step's state is known in advance."""

    def tick(state: GraphState) -> dict[str, Any]:
        calls.hit("tick")
        n = state.data["n"] + 1
        return {"n": n, "seen": [*state.data["seen"], n], f"k{n}": n * n}

    graph = AgentGraph("counter")
    graph.add_node("start", lambda s: {"n": 0, "seen": []})
    graph.add_node("tick", tick)
    graph.add_edge("start", "tick")
    graph.add_conditional_edge("tick", lambda s: "tick" if s.data["n"] < STEPS - 1 else END)
    return graph


def _expected_after(step: int) -> dict[str, Any]:
    """The data after ``step`` nodes ran (0: the input)."""
    if step == 0:
        return {}
    data: dict[str, Any] = {"n": 0, "seen": []}
    for n in range(1, step):
        data["n"] = n
        data["seen"] = [*data["seen"], n]
        data[f"k{n}"] = n * n
    return data


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
def test_every_mode_ends_in_the_same_state(store: CheckpointStore, durability: Any) -> None:
    reference = _counter(Calls()).run({})
    calls = Calls()
    result = _counter(calls).run({}, checkpoint_store=store, run_id="d", durability=durability)
    assert result.stop_reason == "end"
    assert dict(result.state.data) == dict(reference.state.data)
    assert calls["tick"] == STEPS - 1
    snapshot = _counter(calls).get_state("d", checkpoint_store=store)
    assert snapshot.values == dict(reference.state.data)
    assert snapshot.step == STEPS
    assert snapshot.next == ()


@pytest.mark.parametrize("durability", ["sync", "async"])
def test_sync_and_async_save_every_step_by_the_time_run_returns(
    store: CheckpointStore, durability: Any
) -> None:
    _counter(Calls()).run({}, checkpoint_store=store, run_id="d", durability=durability)
    # Read at once: an async run's background writes were all stored before it returned.
    assert triggers(store, "d") == ["input", *["node_complete"] * STEPS, "end"]
    versions = [c.version for c in store.list("d")]
    assert versions == list(range(1, STEPS + 3))


async def test_arun_with_async_durability_has_every_checkpoint_on_return(
    store: CheckpointStore,
) -> None:
    await _counter(Calls()).arun({}, checkpoint_store=store, run_id="d", durability="async")
    assert triggers(store, "d") == ["input", *["node_complete"] * STEPS, "end"]


def test_exit_writes_only_when_the_run_stops(store: CheckpointStore) -> None:
    result = _counter(Calls()).run({}, checkpoint_store=store, run_id="d", durability="exit")
    assert triggers(store, "d") == ["end"]
    assert result.checkpoint_id == store.list("d")[0].checkpoint_id


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
def test_an_interrupt_is_saved_whatever_the_mode(store: CheckpointStore, durability: Any) -> None:
    calls = Calls()

    def ask(state: GraphState) -> Generator[Any, Any, Any]:
        calls.hit("ask")
        answer = yield InterruptRequest("go?")
        state.data["answer"] = answer

    def build() -> AgentGraph:
        graph = AgentGraph("ask")
        graph.add_node("first", lambda s: {"first": True})
        graph.add_node("ask", ask)
        graph.add_edge("first", "ask")
        graph.add_edge("ask", END)
        return graph

    result = build().run({}, checkpoint_store=store, run_id="i", durability=durability)
    assert triggers(store, "i")[-1] == "interrupt"
    if durability == "exit":
        assert triggers(store, "i") == ["interrupt"]
    snapshot = build().get_state("i", checkpoint_store=store)
    assert snapshot.values == {"first": True}
    # Replay from the store (another graph object), in the same mode.
    final = build().resume(pending(result), "yes", checkpoint_store=store, durability=durability)
    assert dict(final.state.data) == {"first": True, "answer": "yes"}
    assert triggers(store, "i")[-1] == "end"


@pytest.mark.parametrize("durability", ["sync", "async"])
def test_history_is_newest_first_and_each_snapshot_is_the_state_after_its_step(
    store: CheckpointStore, durability: Any
) -> None:
    graph = _counter(Calls())
    graph.run({}, checkpoint_store=store, run_id="h", durability=durability)
    history = graph.get_history("h", checkpoint_store=store)
    assert len(history) == STEPS + 2
    assert [s.checkpoint_id for s in history] == [
        c.checkpoint_id for c in reversed(store.list("h"))
    ]
    assert [s.metadata["trigger"] for s in history] == ["end", *["node_complete"] * STEPS, "input"]
    assert [s.step for s in history] == [STEPS, *range(STEPS, -1, -1)]
    for snapshot in history:
        assert snapshot.values == _expected_after(snapshot.step), snapshot.step
        assert snapshot.run_id == "h"
    # Each names its parent; the created_at times never go back.
    for newer, older in itertools.pairwise(history):
        assert newer.parent_id == older.checkpoint_id
        assert newer.created_at >= older.created_at
    assert history[-1].parent_id is None
    assert history[-1].next == ("start",)
    # Taken after tick, whose edge is conditional: the run routes from it again.
    assert history[1].after == "tick"
    assert history[1].next == ()
    assert history[-2].after == "start"
    assert history[-2].next == ("tick",)  # a static edge: known without routing
    assert graph.get_history("h", checkpoint_store=store, limit=2) == history[:2]


def test_history_of_an_unknown_run_is_an_error(store: CheckpointStore) -> None:
    from selectgraph import ResumeError

    with pytest.raises(ResumeError, match="'ghost'"):
        _counter(Calls()).get_history("ghost", checkpoint_store=store)
    with pytest.raises(ResumeError, match="'ghost'"):
        _counter(Calls()).get_state("ghost", checkpoint_store=store)


def test_an_unknown_durability_is_refused(store: CheckpointStore) -> None:
    with pytest.raises(ValueError, match="durability"):
        _counter(Calls()).run({}, checkpoint_store=store, durability="eventually")  # type: ignore[arg-type]
