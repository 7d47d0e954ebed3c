"""What resume() is given (pause, observers, durability) applies to the continued run."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from selectgraph import (
    END,
    AgentGraph,
    CheckpointStore,
    GraphEvent,
    GraphState,
    InterruptRequest,
    PauseToken,
)
from selectgraph.observe._events import InterruptRaised, RunPaused, RunResumed
from tests.durable._support import Calls, pending, triggers


def _build(calls: Calls) -> AgentGraph:
    def ask(state: GraphState) -> Generator[Any, Any, Any]:
        calls.hit("ask")
        state.data["answer"] = yield InterruptRequest("go?")

    graph = AgentGraph("opts")
    graph.add_node("ask", ask)
    graph.add_node("after", lambda s: {"after": True})
    graph.add_node("last", lambda s: {"last": True})
    graph.add_edge("ask", "after")
    graph.add_edge("after", "last")
    graph.add_edge("last", END)
    return graph


def _paused(store: CheckpointStore, calls: Calls, live: bool) -> tuple[AgentGraph, str]:
    graph = _build(calls)
    result = graph.run({}, checkpoint_store=store, run_id="o")
    assert result.interrupt_id is not None
    return (graph if live else _build(calls)), result.interrupt_id


def _live_and_replay(test: Any) -> Any:
    return pytest.mark.parametrize(
        "live",
        [
            pytest.param(True, id="live"),
            pytest.param(False, id="replay"),
        ],
    )(test)


@_live_and_replay
def test_resume_with_a_set_pause_token_pauses_after_the_node(
    store: CheckpointStore, live: bool
) -> None:
    calls = Calls()
    graph, interrupt_id = _paused(store, calls, live)
    token = PauseToken()
    token.pause()
    result = graph.resume(interrupt_id, "yes", checkpoint_store=store, pause=token)
    assert result.stop_reason == "paused"
    assert result.state.data == {"answer": "yes"}
    snapshot = graph.get_state("o", checkpoint_store=store)
    assert snapshot.after == "ask"
    assert snapshot.next == ("after",)


@_live_and_replay
def test_resume_reports_to_its_observers(store: CheckpointStore, live: bool) -> None:
    calls = Calls()
    graph, interrupt_id = _paused(store, calls, live)
    seen: list[GraphEvent] = []
    result = graph.resume(interrupt_id, "yes", checkpoint_store=store, observers=[seen.append])
    assert result.stop_reason == "end"
    assert any(isinstance(event, RunResumed) for event in seen)
    assert seen[-1].type == result.trace[-1].type


@_live_and_replay
def test_resume_with_exit_durability_writes_only_at_the_stop(
    store: CheckpointStore, live: bool
) -> None:
    calls = Calls()
    graph, interrupt_id = _paused(store, calls, live)
    before = len(triggers(store, "o"))
    graph.resume(interrupt_id, "yes", checkpoint_store=store, durability="exit")
    assert triggers(store, "o")[before:] == ["answer", "end"]


def test_a_live_resume_is_reported_as_live(store: CheckpointStore) -> None:
    calls = Calls()
    graph = _build(calls)
    paused = graph.run({}, checkpoint_store=store, run_id="o")
    assert isinstance(paused.trace[-1], RunPaused)
    raised = [e for e in paused.trace if isinstance(e, InterruptRaised)]
    assert [(e.node, e.interrupt_id, e.prompt) for e in raised] == [
        ("ask", paused.interrupt_id, "go?")
    ]
    final = graph.resume(pending(paused), "yes", checkpoint_store=store)
    resumed = [e for e in final.trace if isinstance(e, RunResumed)]
    assert [(e.checkpoint_id, e.live) for e in resumed] == [(paused.checkpoint_id, True)]
    assert final.checkpoint_id == store.head("o").checkpoint_id  # type: ignore[union-attr]
    replayed = _build(calls)
    paused = replayed.run({}, checkpoint_store=store, run_id="o2")
    final = _build(calls).resume(pending(paused), "yes", checkpoint_store=store)
    resumed = [e for e in final.trace if isinstance(e, RunResumed)]
    assert [e.live for e in resumed] == [False]


def test_a_resume_result_is_the_same_live_or_replayed(store: CheckpointStore) -> None:
    def ask(state: GraphState) -> Generator[Any, Any, Any]:
        state.data["answer"] = yield InterruptRequest("q")

    def build() -> AgentGraph:
        graph = AgentGraph("same")
        graph.add_node("s", lambda s: {"s": 1})
        graph.add_node("ask", ask)
        graph.add_node("z", lambda s: {"z": 1}, next_node=END)
        graph.add_edge("s", "ask")
        graph.add_edge("ask", "z")
        return graph

    results = []
    for live in (True, False):
        graph = build()
        paused = graph.run({}, checkpoint_store=store, run_id=f"run-{live}")
        if not live:
            graph = build()
        results.append(graph.resume(pending(paused), "y", checkpoint_store=store))
    live_result, replayed = results
    assert dict(live_result.state.data) == dict(replayed.state.data)
    assert live_result.steps == replayed.steps
    assert live_result.node_order == replayed.node_order
    assert [type(e) for e in live_result.trace] == [type(e) for e in replayed.trace]
