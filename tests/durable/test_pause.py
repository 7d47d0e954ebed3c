"""Pausing a run: pause_before / pause_after gates and a PauseToken, then continuing it."""

from __future__ import annotations

import threading
from collections.abc import Generator
from typing import Any

import pytest

from selectgraph import (
    END,
    AgentGraph,
    CheckpointStore,
    GraphState,
    InMemoryCheckpointStore,
    InterruptRequest,
    PauseToken,
    RoutingError,
)
from selectgraph.observe._events import CheckpointSaved, RunPaused, RunResumed
from tests.durable._support import Calls, pending, stored, triggers


def _pipeline(calls: Calls, token: PauseToken | None = None) -> AgentGraph:
    """a -> b -> c -> d, each appending its name; b may set a pause token."""

    def step(name: str) -> Any:
        def node(state: GraphState) -> dict[str, Any]:
            calls.hit(name)
            if name == "b" and token is not None:
                token.pause()
            return {"path": [*state.data.get("path", []), name], name: len(calls.order)}

        return node

    graph = AgentGraph("pipeline")
    for name in "abcd":
        graph.add_node(name, step(name))
    graph.add_edge("a", "b")
    graph.add_edge("b", "c")
    graph.add_edge("c", "d")
    graph.add_edge("d", END)
    return graph


def _reference() -> dict[str, Any]:
    return dict(_pipeline(Calls()).run({"seed": 1}).state.data)


def test_pause_before_stops_ahead_of_the_node_and_continuing_finishes(
    store: CheckpointStore,
) -> None:
    calls = Calls()
    graph = _pipeline(calls)
    paused = graph.run({"seed": 1}, checkpoint_store=store, run_id="pb", pause_before=["c"])
    assert paused.paused
    assert not paused.interrupted
    assert paused.stop_reason == "paused"
    assert calls.order == ["a", "b"]
    assert paused.state.data["path"] == ["a", "b"]
    event = paused.trace[-1]
    assert isinstance(event, RunPaused)
    assert event.reason == "pause_before"
    assert event.next == ("c",)
    assert event.checkpoint_id == paused.checkpoint_id
    snapshot = graph.get_state("pb", checkpoint_store=store)
    assert snapshot.next == ("c",)
    assert snapshot.metadata["trigger"] == "pause"
    assert snapshot.checkpoint_id == paused.checkpoint_id

    final = graph.run(None, checkpoint_store=store, run_id="pb", pause_before=["c"])
    assert final.stop_reason == "end"  # continuing passes the gate it paused at
    assert calls.order == ["a", "b", "c", "d"]
    assert dict(final.state.data) == _reference()
    assert final.steps == 4
    assert isinstance(final.trace[0], RunResumed)
    assert final.trace[0].checkpoint_id == paused.checkpoint_id


def test_pause_after_stops_once_the_node_is_saved(store: CheckpointStore) -> None:
    calls = Calls()
    graph = _pipeline(calls)
    paused = graph.run({"seed": 1}, checkpoint_store=store, run_id="pa", pause_after=["b"])
    assert paused.stop_reason == "paused"
    assert calls.order == ["a", "b"]
    head = store.head("pa")
    assert head is not None
    assert head.metadata["trigger"] == "node_complete"
    assert head.next == [{"after": "b"}]
    assert paused.trace[-1].reason == "pause_after"  # type: ignore[attr-defined]
    final = graph.run(None, checkpoint_store=store, run_id="pa")
    assert final.stop_reason == "end"
    assert calls.order == ["a", "b", "c", "d"]  # nothing ran twice
    assert dict(final.state.data) == _reference()


def test_a_pause_token_set_inside_a_node_pauses_after_it(store: CheckpointStore) -> None:
    calls = Calls()
    token = PauseToken()
    graph = _pipeline(calls, token)
    paused = graph.run({"seed": 1}, checkpoint_store=store, run_id="tok", pause=token)
    assert paused.paused
    assert paused.stop_reason == "paused"
    assert calls.order == ["a", "b"]
    assert paused.state.data["path"] == ["a", "b"]  # b's output was merged and saved
    assert graph.get_state("tok", checkpoint_store=store).values["path"] == ["a", "b"]
    assert paused.trace[-1].reason == "requested"  # type: ignore[attr-defined]
    token.clear()
    final = graph.run(None, checkpoint_store=store, run_id="tok", pause=token)
    assert final.stop_reason == "end"
    assert calls.order == ["a", "b", "c", "d"]
    assert dict(final.state.data) == _reference()


def test_a_token_left_set_pauses_again_after_the_next_node(store: CheckpointStore) -> None:
    calls = Calls()
    token = PauseToken()
    token.pause()
    graph = _pipeline(calls)
    for expected in (["a"], ["a", "b"], ["a", "b", "c"]):
        result = graph.run(
            None if calls.order else {"seed": 1}, checkpoint_store=store, run_id="t", pause=token
        )
        assert result.stop_reason == "paused"
        assert calls.order == expected
    final = graph.run(None, checkpoint_store=store, run_id="t")
    assert final.stop_reason == "end"
    assert dict(final.state.data) == _reference()


def test_a_threading_event_works_as_a_pause_signal(store: CheckpointStore) -> None:
    calls = Calls()
    event = threading.Event()
    event.set()
    graph = _pipeline(calls)
    paused = graph.run({"seed": 1}, checkpoint_store=store, run_id="ev", pause=event)
    assert paused.stop_reason == "paused"
    assert calls.order == ["a"]


async def test_arun_pauses_and_continues(store: CheckpointStore) -> None:
    calls = Calls()
    graph = _pipeline(calls)
    paused = await graph.arun({"seed": 1}, checkpoint_store=store, run_id="ap", pause_before=["d"])
    assert paused.stop_reason == "paused"
    final = await graph.arun(None, checkpoint_store=store, run_id="ap")
    assert dict(final.state.data) == _reference()
    assert calls.order == ["a", "b", "c", "d"]


def test_a_pause_before_gate_in_a_loop_pauses_at_every_visit(store: CheckpointStore) -> None:
    calls = Calls()

    def work(state: GraphState) -> dict[str, Any]:
        calls.hit("work")
        return {"n": state.data["n"] + 1}

    graph = AgentGraph("loop")
    graph.add_node("start", lambda s: {"n": 0})
    graph.add_node("work", work)
    graph.add_edge("start", "work")
    graph.add_conditional_edge("work", lambda s: "work" if s.data["n"] < 3 else END)
    result = graph.run({}, checkpoint_store=store, run_id="lp", pause_before=["work"])
    pauses = 1
    while result.paused:
        assert calls["work"] == pauses - 1
        result = graph.run(None, checkpoint_store=store, run_id="lp", pause_before=["work"])
        pauses += 1
    assert result.state.data["n"] == 3
    assert pauses == 4  # before each of the three visits, then the end
    assert triggers(store, "lp").count("pause") == 3


@pytest.mark.parametrize(
    "options",
    [{"pause_before": ["b"]}, {"pause_after": ["b"]}, {"pause": PauseToken()}],
    ids=["pause_before", "pause_after", "pause"],
)
def test_pausing_needs_a_store(options: dict[str, Any]) -> None:
    calls = Calls()
    with pytest.raises(ValueError, match="needs a checkpoint_store"):
        _pipeline(calls).run({"seed": 1}, **options)
    assert calls.order == []


def test_a_gate_naming_no_node_is_refused() -> None:
    store = InMemoryCheckpointStore()
    with pytest.raises(ValueError, match="'nope'"):
        _pipeline(Calls()).run({}, checkpoint_store=store, run_id="x", pause_before=["nope"])
    assert stored(store, "x") == []


def test_checkpoint_events_name_each_saved_checkpoint(store: CheckpointStore) -> None:
    calls = Calls()
    result = _pipeline(calls).run({"seed": 1}, checkpoint_store=store, run_id="ev")
    saved = [e for e in result.trace if isinstance(e, CheckpointSaved)]
    assert [(e.checkpoint_id, e.version, e.trigger) for e in saved] == stored(store, "ev")


def _fan_out(calls: Calls, *, group: bool) -> AgentGraph:
    """s -> (a, b) -> j, as a list edge or a parallel group."""

    def node(name: str) -> Any:
        def run(state: GraphState) -> dict[str, Any]:
            calls.hit(name)
            return {name: True}

        return run

    graph = AgentGraph("fan")
    for name in ("s", "a", "b", "j"):
        graph.add_node(name, node(name))
    if group:
        graph.add_parallel_nodes("team", ["a", "b"])
        graph.add_edge("s", "team")
        graph.add_edge("team", "j")
    else:
        graph.add_edge("s", ["a", "b"])
        graph.add_edge("a", "j")
        graph.add_edge("b", "j")
    graph.add_edge("j", END)
    return graph


@pytest.mark.parametrize("gate", ["pause_before", "pause_after"])
@pytest.mark.parametrize("group", [False, True], ids=["edge", "group"])
def test_a_gate_on_a_branch_node_pauses_or_is_refused(
    store: CheckpointStore, gate: str, group: bool
) -> None:
    calls = Calls()
    graph = _fan_out(calls, group=group)
    try:
        gates: dict[str, Any] = {gate: ["b"]}
        result = graph.run({}, checkpoint_store=store, run_id="g", **gates)
    except (ValueError, RoutingError) as refused:
        message = str(refused)
    else:
        message = ""
    if message:  # refusing the gate (before any branch ran) is a fine answer too
        assert "'b'" in message
        assert "fan-out" in message
        assert calls["b"] == 0
        assert calls["j"] == 0
        return
    assert result.stop_reason == "paused"
    assert calls["j"] == 0
    if gate == "pause_before":
        assert calls["b"] == 0


def test_a_token_set_in_a_branch_pauses_once_the_fan_out_joined(store: CheckpointStore) -> None:
    calls = Calls()
    token = PauseToken()
    graph = AgentGraph("fan")

    def node(name: str) -> Any:
        def run(state: GraphState) -> dict[str, Any]:
            calls.hit(name)
            if name == "a":
                token.pause()
            return {name: True}

        return run

    for name in ("s", "a", "b", "j", "k"):
        graph.add_node(name, node(name))
    graph.add_edge("s", ["a", "b"])
    graph.add_edge("a", "j")
    graph.add_edge("b", "j")
    graph.add_edge("j", "k")
    graph.add_edge("k", END)
    result = graph.run({}, checkpoint_store=store, run_id="tb", pause=token)
    assert result.stop_reason == "paused"
    assert calls.order[:1] == ["s"]
    assert sorted(calls.order[1:3]) == ["a", "b"]
    assert calls.order[3:] == ["j"]  # the branches are not cut short; the run stops at a boundary
    token.clear()
    final = graph.run(None, checkpoint_store=store, run_id="tb")
    assert final.stop_reason == "end"
    assert calls["k"] == 1
    assert calls["j"] == 1


def _gated(calls: Calls) -> AgentGraph:
    """a -> b -> c with a graph-level gate before b (seed 000's pause_nodes)."""

    def node(name: str) -> Any:
        def run(state: GraphState) -> dict[str, Any]:
            calls.hit(name)
            return {name: state.data.get("fix", 0)}

        return run

    graph = AgentGraph("gated", pause_before=["b"])
    for name in "abc":
        graph.add_node(name, node(name))
    graph.add_edge("a", "b")
    graph.add_edge("b", "c")
    graph.add_edge("c", END)
    return graph


def test_a_graph_level_gate_pauses_and_continuing_passes_it_once(store: CheckpointStore) -> None:
    calls = Calls()
    graph = _gated(calls)
    assert graph.run({}, checkpoint_store=store, run_id="gl").stop_reason == "paused"
    assert calls.order == ["a"]
    final = graph.run(None, checkpoint_store=store, run_id="gl")
    assert final.stop_reason == "end"
    assert calls.order == ["a", "b", "c"]


def test_editing_the_state_at_a_gate_then_continuing_runs_the_node(
    store: CheckpointStore,
) -> None:
    calls = Calls()
    graph = _gated(calls)
    graph.run({}, checkpoint_store=store, run_id="ed")
    graph.update_state("ed", {"fix": 7}, checkpoint_store=store)
    final = graph.run(None, checkpoint_store=store, run_id="ed")
    assert final.stop_reason == "end"
    assert dict(final.state.data) == {"a": 0, "fix": 7, "b": 7, "c": 7}


@pytest.mark.parametrize("live", [True, False], ids=["live", "replay"])
def test_answering_a_gated_generator_node_finishes_it(store: CheckpointStore, live: bool) -> None:
    calls = Calls()

    def ask(state: GraphState) -> Generator[Any, Any, Any]:
        calls.hit("ask")
        state.data["answer"] = yield InterruptRequest("approve?")

    def build() -> AgentGraph:
        graph = AgentGraph("gated-ask", pause_before=["ask"])
        graph.add_node("s", lambda s: {"s": 1})
        graph.add_node("ask", ask, next_node=END)
        graph.add_edge("s", "ask")
        return graph

    graph = build()
    assert graph.run({}, checkpoint_store=store, run_id="ga").stop_reason == "paused"
    asked = graph.run(None, checkpoint_store=store, run_id="ga")
    assert asked.interrupted
    if not live:
        graph = build()
    final = graph.resume(pending(asked), "yes", checkpoint_store=store)
    assert final.stop_reason == "end"
    assert final.state.data["answer"] == "yes"
