"""A failed or cancelled run leaves a checkpoint to continue from once the cause is fixed."""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Generator
from typing import Annotated, Any

import pytest
from pydantic import BaseModel

from selectgraph import (
    END,
    AgentGraph,
    CheckpointConflict,
    CheckpointStore,
    GraphRunError,
    GraphState,
    InterruptRequest,
    ResumeError,
    append,
)
from tests.durable._support import Calls, pending, triggers


def _flaky_pipeline(calls: Calls, broken: dict[str, bool]) -> AgentGraph:
    """a -> b -> c; b raises while ``broken["b"]`` is set."""

    def a(state: GraphState) -> dict[str, Any]:
        calls.hit("a")
        return {"a": 1}

    def b(state: GraphState) -> dict[str, Any]:
        calls.hit("b")
        if broken["b"]:
            raise RuntimeError("b is broken")
        return {"b": state.data["a"] + 1}

    def c(state: GraphState) -> dict[str, Any]:
        calls.hit("c")
        return {"c": state.data["b"] + 1}

    graph = AgentGraph("flaky")
    graph.add_node("a", a)
    graph.add_node("b", b)
    graph.add_node("c", c)
    graph.add_edge("a", "b")
    graph.add_edge("b", "c")
    graph.add_edge("c", END)
    return graph


def test_a_failed_node_leaves_an_error_checkpoint_to_continue_from(
    store: CheckpointStore,
) -> None:
    calls = Calls()
    broken = {"b": True}
    graph = _flaky_pipeline(calls, broken)
    with pytest.raises(GraphRunError, match="b is broken") as caught:
        graph.run({}, checkpoint_store=store, run_id="f")
    head = store.head("f")
    assert head is not None
    assert head.metadata["trigger"] == "error"
    assert "b is broken" in head.metadata["error"]
    assert head.next == ["b"]
    assert head.step == 1  # b's failed visit is rolled back
    assert caught.value.result is not None
    assert caught.value.result.checkpoint_id == head.checkpoint_id
    snapshot = graph.get_state("f", checkpoint_store=store)
    assert snapshot.values == {"a": 1}
    assert snapshot.next == ("b",)

    broken["b"] = False
    final = graph.run(None, checkpoint_store=store, run_id="f")
    assert final.stop_reason == "end"
    assert dict(final.state.data) == {"a": 1, "b": 2, "c": 3}
    assert calls.order == ["a", "b", "b", "c"]  # a is not run again
    assert final.steps == 3
    assert [r.visit for r in final.node_results["b"]] == [1]
    assert triggers(store, "f") == [
        "input",
        "node_complete",
        "error",
        "node_complete",
        "node_complete",
        "end",
    ]


def test_a_failing_router_resumes_by_routing_again(store: CheckpointStore) -> None:
    """The node completed and routing failed: next is 'route after it', the node is kept."""
    calls = Calls()
    broken = {"route": True}

    def route(state: GraphState) -> str:
        if broken["route"]:
            raise RuntimeError("router is broken")
        return "c"

    def b(state: GraphState) -> dict[str, Any]:
        calls.hit("b")
        return {"b": 2}

    graph = AgentGraph("router")
    graph.add_node("a", lambda s: {"a": 1})
    graph.add_node("b", b)
    graph.add_node("c", lambda s: {"c": 3}, next_node=END)
    graph.add_edge("a", "b")
    graph.add_conditional_edge("b", route, ["c"])
    with pytest.raises(GraphRunError, match="router is broken"):
        graph.run({}, checkpoint_store=store, run_id="r")
    head = store.head("r")
    assert head is not None
    assert head.metadata["trigger"] == "error"
    assert head.next == [{"after": "b"}]
    broken["route"] = False
    final = graph.run(None, checkpoint_store=store, run_id="r")
    assert dict(final.state.data) == {"a": 1, "b": 2, "c": 3}
    assert calls["b"] == 1


def test_continuing_a_run_that_ended_is_refused(store: CheckpointStore) -> None:
    graph = _flaky_pipeline(Calls(), {"b": False})
    graph.run({}, checkpoint_store=store, run_id="done")
    before = triggers(store, "done")
    with pytest.raises(ResumeError, match="finished"):
        graph.run(None, checkpoint_store=store, run_id="done")
    assert triggers(store, "done") == before


def _slow_pipeline(calls: Calls, entered: asyncio.Event, hang: dict[str, bool]) -> AgentGraph:
    async def a(state: GraphState) -> dict[str, Any]:
        calls.hit("a")
        return {"a": 1}

    async def b(state: GraphState) -> dict[str, Any]:
        calls.hit("b")
        if hang["b"]:
            entered.set()
            await asyncio.Event().wait()  # until cancelled
        return {"b": 2}

    async def c(state: GraphState) -> dict[str, Any]:
        calls.hit("c")
        return {"c": 3}

    graph = AgentGraph("slow")
    graph.add_node("a", a)
    graph.add_node("b", b)
    graph.add_node("c", c)
    graph.add_edge("a", "b")
    graph.add_edge("b", "c")
    graph.add_edge("c", END)
    return graph


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
async def test_a_cancelled_arun_leaves_a_cancel_checkpoint(
    store: CheckpointStore, durability: Any
) -> None:
    calls = Calls()
    entered = asyncio.Event()
    hang = {"b": True}
    graph = _slow_pipeline(calls, entered, hang)
    task = asyncio.ensure_future(
        graph.arun({}, checkpoint_store=store, run_id="c", durability=durability)
    )
    await asyncio.wait_for(entered.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    head = store.head("c")
    assert head is not None
    assert head.metadata["trigger"] == "cancel"
    assert head.next == ["b"]
    assert graph.get_state("c", checkpoint_store=store).values == {"a": 1}

    hang["b"] = False
    final = await graph.arun(None, checkpoint_store=store, run_id="c", durability=durability)
    assert final.stop_reason == "end"
    assert dict(final.state.data) == {"a": 1, "b": 2, "c": 3}
    assert calls.order == ["a", "b", "b", "c"]


def test_a_keyboard_interrupt_in_a_sync_run_leaves_a_cancel_checkpoint(
    store: CheckpointStore,
) -> None:
    calls = Calls()
    stop = {"now": True}

    def b(state: GraphState) -> dict[str, Any]:
        calls.hit("b")
        if stop["now"]:
            raise KeyboardInterrupt
        return {"b": 2}

    def build() -> AgentGraph:
        graph = AgentGraph("ctrl-c")
        graph.add_node("a", lambda s: {"a": 1})
        graph.add_node("b", b, next_node=END)
        graph.add_edge("a", "b")
        return graph

    with pytest.raises(KeyboardInterrupt):
        build().run({}, checkpoint_store=store, run_id="k")
    head = store.head("k")
    assert head is not None
    assert head.metadata["trigger"] == "cancel"
    assert head.next == ["b"]
    stop["now"] = False
    final = build().run(None, checkpoint_store=store, run_id="k")
    assert dict(final.state.data) == {"a": 1, "b": 2}


class _Out(BaseModel):
    out: Annotated[list[str], append] = []


def _failing_fan_out(calls: Calls, broken: dict[str, bool], *, group: bool) -> AgentGraph:
    """s -> (a, b) -> j, as a list edge or a parallel group; b raises while broken."""

    def node(name: str) -> Any:
        def run(state: GraphState) -> dict[str, Any]:
            calls.hit(name)
            if name == "b" and broken["b"]:
                raise RuntimeError("b is broken")
            return {"out": [name]}

        return run

    graph = AgentGraph("fan", state_schema=_Out)
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


def test_a_failed_parallel_group_continues_without_rerunning_the_node_before_it(
    store: CheckpointStore,
) -> None:
    calls = Calls()
    broken = {"b": True}
    with pytest.raises(GraphRunError, match="b is broken"):
        _failing_fan_out(calls, broken, group=True).run({}, checkpoint_store=store, run_id="g")
    head = store.head("g")
    assert head is not None
    assert head.next == ["team"]
    broken["b"] = False
    final = _failing_fan_out(calls, broken, group=True).run(
        None, checkpoint_store=store, run_id="g"
    )
    assert final.state.data["out"] == ["s", "a", "b", "j"]
    assert calls["s"] == 1
    assert calls["j"] == 1


def test_a_failed_fan_out_edge_continues_without_rerunning_its_source(
    store: CheckpointStore,
) -> None:
    calls = Calls()
    broken = {"b": True}
    with pytest.raises(GraphRunError, match="b is broken"):
        _failing_fan_out(calls, broken, group=False).run({}, checkpoint_store=store, run_id="e")
    broken["b"] = False
    final = _failing_fan_out(calls, broken, group=False).run(
        None, checkpoint_store=store, run_id="e"
    )
    assert calls["s"] == 1
    assert final.state.data["out"] == ["s", "a", "b", "j"]


@pytest.mark.parametrize("live", [True, False], ids=["live", "replay"])
def test_a_generator_failing_after_its_answer_keeps_the_answer(
    store: CheckpointStore, live: bool
) -> None:
    calls = Calls()
    broken = {"after": True}

    def ask(state: GraphState) -> Generator[Any, Any, Any]:
        calls.hit("ask")
        answer = yield InterruptRequest("publish?")
        if broken["after"]:
            raise RuntimeError("the publish step is broken")
        state.data["answer"] = answer

    def build() -> AgentGraph:
        graph = AgentGraph("fail-after")
        graph.add_node("s", lambda s: {"s": 1})
        graph.add_node("ask", ask, next_node=END)
        graph.add_edge("s", "ask")
        return graph

    graph = build()
    result = graph.run({}, checkpoint_store=store, run_id="fa")
    if not live:
        graph = build()
    with pytest.raises(GraphRunError, match="publish step is broken"):
        graph.resume(pending(result), "yes", checkpoint_store=store)
    broken["after"] = False
    final = graph.run(None, checkpoint_store=store, run_id="fa")
    assert final.stop_reason == "end"  # not a second "publish?" for the same visit
    assert final.state.data["answer"] == "yes"


def test_another_writer_mid_run_stops_the_run_with_a_conflict(store: CheckpointStore) -> None:
    """update_state while a node runs: the run's next save conflicts and nothing more runs."""
    calls = Calls()
    entered, release = threading.Event(), threading.Event()

    def slow(state: GraphState) -> dict[str, Any]:
        calls.hit("slow")
        entered.set()
        release.wait(10)
        return {"slow": True}

    graph = AgentGraph("conflict")
    graph.add_node("a", lambda s: {"a": 1})
    graph.add_node("slow", slow)
    graph.add_node("c", _counted(calls, "c"), next_node=END)
    graph.add_edge("a", "slow")
    graph.add_edge("slow", "c")
    outcome: list[BaseException | object] = []

    def run() -> None:
        try:
            outcome.append(graph.run({}, checkpoint_store=store, run_id="w"))
        except BaseException as error:  # the outcome under test
            outcome.append(error)

    worker = threading.Thread(target=run)
    worker.start()
    assert entered.wait(10)
    graph.update_state("w", {"fixed": True}, checkpoint_store=store)
    release.set()
    worker.join(10)
    assert len(outcome) == 1
    assert isinstance(outcome[0], CheckpointConflict)
    assert calls["c"] == 0
    assert triggers(store, "w") == ["input", "node_complete", "update"]


def _counted(calls: Calls, name: str) -> Any:
    def node(state: GraphState) -> dict[str, Any]:
        calls.hit(name)
        return {name: 1}

    return node


def _writes(name: str) -> Any:
    return lambda state: {name: 1}


def test_a_failed_background_write_surfaces(store: CheckpointStore) -> None:
    """durability="async": a save that fails on the writer thread fails the run."""
    saves = {"n": 0}
    original = store.save

    def failing(checkpoint: Any, *, expected_version: int) -> None:
        saves["n"] += 1
        if saves["n"] == 3:
            raise OSError("disk full")
        original(checkpoint, expected_version=expected_version)

    store.save = failing  # type: ignore[method-assign]
    graph = AgentGraph("chain")
    for name in "abcde":
        graph.add_node(name, _writes(name))
    for source, target in itertools.pairwise("abcde"):
        graph.add_edge(source, target)
    graph.add_edge("e", END)
    with pytest.raises(OSError, match="disk full"):
        graph.run({}, checkpoint_store=store, run_id="bg", durability="async")
    assert [c.version for c in store.list("bg")] == [1, 2]


@pytest.mark.parametrize("durability", ["async", "exit"])
def test_a_failure_is_saved_and_continued_whatever_the_mode(
    store: CheckpointStore, durability: Any
) -> None:
    calls = Calls()
    broken = {"b": True}
    with pytest.raises(GraphRunError):
        _flaky_pipeline(calls, broken).run(
            {}, checkpoint_store=store, run_id="m", durability=durability
        )
    head = store.head("m")
    assert head is not None
    assert head.metadata["trigger"] == "error"
    assert head.next == ["b"]
    assert store.load_state(head.checkpoint_id)["data"] == {"a": 1}
    broken["b"] = False
    final = _flaky_pipeline(calls, broken).run(
        None, checkpoint_store=store, run_id="m", durability=durability
    )
    assert dict(final.state.data) == {"a": 1, "b": 2, "c": 3}
    assert calls.order == ["a", "b", "b", "c"]
    expected = ["error", "end"] if durability == "exit" else None
    if expected is not None:
        assert triggers(store, "m") == expected
