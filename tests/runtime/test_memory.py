"""A finished run is freed by reference counting: its result and trace form no cycle.

A cycle would keep every finished run's state (which may hold large lists)
alive until the cyclic garbage collector ran, and make each collection walk it.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from selectgraph import (
    END,
    Agent,
    AgentConfig,
    AgentGraph,
    ErrorPolicy,
    GraphEventType,
    GraphRunError,
    RetryPolicy,
)
from selectgraph.observe import GraphEvent
from selectgraph.testing import ScriptedProvider


@pytest.fixture
def no_automatic_gc() -> Iterator[None]:
    # An automatic collection during the run would hide a cycle by freeing it.
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _unreachable_after(run: Callable[[], Any]) -> int:
    gc.collect()
    result = run()
    assert result is not None
    del result
    return gc.collect()


def _unreachable_types_after(run: Callable[[], Any]) -> set[str]:
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        result = run()
        assert result is not None
        del result
        gc.collect()
        return {type(thing).__name__ for thing in gc.garbage}
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


def _counter_graph() -> AgentGraph:
    graph = AgentGraph("g", max_steps=None)
    graph.add_node("n", lambda s: {"x": s["x"] + 1, "big": list(range(1000))})
    graph.add_edge("n", "n", condition="x < 20")
    graph.add_edge("n", END)
    graph.set_entry("n")
    return graph


@pytest.mark.usefixtures("no_automatic_gc")
def test_a_plain_run_leaves_no_cycles() -> None:
    compiled = _counter_graph().compile()

    assert _unreachable_after(lambda: compiled.run({"x": 0})) == 0


@pytest.mark.usefixtures("no_automatic_gc")
def test_an_observed_run_leaves_no_cycles() -> None:
    compiled = _counter_graph().compile()
    seen: list[GraphEvent] = []

    def run() -> Any:
        result = compiled.run({"x": 0}, observers=[seen.append])
        seen.clear()  # what a listener keeps is its own business
        return result

    assert _unreachable_after(run) == 0


@pytest.mark.usefixtures("no_automatic_gc")
def test_a_run_with_a_subgraph_leaves_no_cycles() -> None:
    inner = _counter_graph()
    outer = AgentGraph("outer")
    outer.add_subgraph("inner", inner, projects_in=["x"], next_node=END)
    outer.set_entry("inner")
    compiled = outer.compile()

    assert _unreachable_after(lambda: compiled.run({"x": 0})) == 0


@pytest.mark.usefixtures("no_automatic_gc")
def test_a_run_of_agents_leaves_no_cycles() -> None:
    writer = Agent(AgentConfig(name="writer"), provider=ScriptedProvider(["draft"] * 5))
    editor = Agent(AgentConfig(name="editor"), provider=ScriptedProvider(["final"] * 5))
    compiled = AgentGraph.chain(writer, editor).compile()

    garbage = _unreachable_types_after(lambda: compiled.run("write a haiku"))

    # tenacity's retry objects refer to each other (small, and freed by the next
    # collection); nothing of the run itself may be caught in a cycle.
    assert not garbage & {"GraphResult", "GraphState", "Trace", "History", "AgentResult"}


def _failing_graph(**options: Any) -> AgentGraph:
    def boom(state: Any) -> None:
        raise ValueError("boom")

    graph = AgentGraph("g", **options)
    graph.add_node("load", lambda s: {"big": list(range(1000))}, next_node="boom")
    graph.add_node("boom", boom, next_node=END)
    return graph


def _failed_run(compiled: Any, **kwargs: Any) -> Callable[[], Any]:
    def run() -> Any:
        try:
            compiled.run({}, **kwargs)
        except GraphRunError as error:
            return error  # what a caller keeps of a failed run
        raise AssertionError("the run should have failed")

    return run


@pytest.mark.usefixtures("no_automatic_gc")
@pytest.mark.parametrize(
    "options",
    [{}, {"error_policy": ErrorPolicy.RETRY, "retry": RetryPolicy(max_retries=1, initial_delay=0)}],
    ids=["abort", "retried"],
)
def test_a_failed_run_leaves_no_cycles(options: dict[str, Any]) -> None:
    compiled = _failing_graph(**options).compile()

    garbage = _unreachable_types_after(_failed_run(compiled))

    assert not garbage & {"GraphResult", "GraphState", "NodeError", "ValueError", "Run", "frame"}


@pytest.mark.usefixtures("no_automatic_gc")
def test_an_observed_failed_run_leaves_no_cycles() -> None:
    compiled = _failing_graph().compile()
    seen: list[GraphEvent] = []

    assert _unreachable_after(_failed_run(compiled, observers=[seen.append])) == 0


@pytest.mark.usefixtures("no_automatic_gc")
def test_a_thousand_failed_runs_are_freed_without_the_cyclic_collector() -> None:
    compiled = _failing_graph().compile()
    run = _failed_run(compiled)

    gc.collect()
    for _ in range(1000):
        run()

    assert gc.collect() == 0


@pytest.mark.usefixtures("no_automatic_gc")
def test_a_run_failing_at_routing_or_exit_leaves_no_cycles() -> None:
    routed = AgentGraph("routed")
    routed.add_node("a", lambda s: {"x": 1})
    routed.add_conditional_edge("a", lambda s: "nowhere")
    looping = AgentGraph("looping")
    looping.add_node("a", lambda s: None)
    looping.add_edge("a", "a")

    for graph in (routed, looping):
        compiled = graph.compile()
        assert _unreachable_after(_failed_run(compiled)) == 0, graph.name


def test_the_trace_keeps_run_finished_without_the_result_but_listeners_get_it() -> None:
    seen: list[GraphEvent] = []
    graph = AgentGraph.chain(lambda s: {"x": 1})

    result = graph.run(observers=[seen.append])

    delivered, kept = seen[-1], result.trace[-1]
    assert getattr(delivered, "result", None) is result
    assert getattr(kept, "result", "missing") is None
    assert delivered == kept  # the result is not part of the event's equality


def test_a_result_and_its_trace_outlive_the_run() -> None:
    graph = AgentGraph.chain(lambda s: {"x": 1}, lambda s: {"y": s["x"] + 1})

    result = graph.run()
    gc.collect()

    assert result.state["y"] == 2
    assert [e.type for e in result.trace][-1] == GraphEventType.RUN_FINISHED


async def test_a_run_in_flight_is_one_coroutine_frame_above_its_node() -> None:
    # Thousands of concurrent runs each hold what their walk awaits through: the walk
    # itself awaits the node, with no coroutine of the engine's in between.
    release = asyncio.Event()

    async def node(state: Any) -> dict[str, int]:
        await release.wait()
        return {"x": 1}

    compiled = AgentGraph.chain(node).compile()
    task = asyncio.ensure_future(compiled.arun({}))
    for _ in range(5):
        await asyncio.sleep(0)
    chain = []
    awaited: Any = task.get_coro()
    while awaited is not None and hasattr(awaited, "cr_code"):
        chain.append(awaited.cr_code.co_name)
        awaited = awaited.cr_await
    release.set()
    result = await task

    assert chain[:2] == ["walk", "node"]
    assert result.state["x"] == 1
