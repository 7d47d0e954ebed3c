"""astream(): the run's events, live, from the same source as the trace and observers."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from selectgraph import END, AgentGraph, GraphEventType, GraphState, NodeError, Observer
from selectgraph.observe import EdgeFired, GraphEvent, NodeFinished, RunFailed, RunFinished


def _graph() -> AgentGraph:
    async def slow(state: GraphState) -> dict[str, Any]:
        await asyncio.sleep(0.01)
        return {"n": state.get("n", 0) + 1}

    graph = AgentGraph("g")
    graph.add_node("a", slow, next_node="b")
    graph.add_node("b", slow, next_node=END)
    graph.set_entry("a")
    return graph


async def test_astream_yields_every_event_then_the_result() -> None:
    events = [event async for event in _graph().astream()]

    assert [e.type for e in events] == [
        GraphEventType.RUN_STARTED,
        GraphEventType.NODE_STARTED,
        GraphEventType.NODE_FINISHED,
        GraphEventType.EDGE_FIRED,
        GraphEventType.NODE_STARTED,
        GraphEventType.NODE_FINISHED,
        GraphEventType.EDGE_FIRED,
        GraphEventType.RUN_FINISHED,
    ]
    final = events[-1]
    assert isinstance(final, RunFinished)
    assert final.result is not None
    assert final.result.state["n"] == 2
    assert list(final.result.trace) == events


async def test_astream_delivers_events_while_the_run_is_still_going() -> None:
    seen_before_end: list[str] = []
    async for event in _graph().astream():
        if isinstance(event, NodeFinished) and event.node == "a":
            seen_before_end.append("a finished")
        if isinstance(event, RunFinished):
            break
    assert seen_before_end == ["a finished"]


async def test_astream_streams_a_synchronous_graph_too() -> None:
    graph = AgentGraph.chain(lambda s: {"x": 1}, lambda s: {"y": 2})
    events = [event async for event in graph.astream()]

    assert isinstance(events[-1], RunFinished)
    assert [e.target for e in events if isinstance(e, EdgeFired)] == ["step_2", END]


async def test_a_synchronous_graph_streams_in_lockstep_with_its_consumer() -> None:
    # Each node (on the run's worker thread) waits until the consumer has seen the
    # previous node finish, so every item arrives while the consumer is waiting: each
    # must wake it from the other thread, or the run and the test hang.
    seen = threading.Semaphore(0)

    def step(state: GraphState) -> dict[str, Any]:
        assert seen.acquire(timeout=30), "the consumer never saw the previous node"
        return {"n": state.get("n", 0) + 1}

    graph = AgentGraph("lockstep", max_steps=None)
    graph.add_node("a", step)
    graph.add_edge("a", "a", condition="n < 20")
    graph.add_edge("a", END)
    graph.set_entry("a")
    seen.release()  # the first node needs no earlier one
    finished = 0
    async for event in graph.astream({"n": 0}):
        if isinstance(event, NodeFinished):
            finished += 1
            seen.release()
        if isinstance(event, RunFinished):
            assert event.result is not None
            assert event.result.state["n"] == 20
    assert finished == 20


async def test_astream_raises_after_delivering_run_failed() -> None:
    def boom(state: GraphState) -> None:
        raise ValueError("nope")

    received: list[GraphEvent] = []

    async def consume() -> None:
        async for event in AgentGraph.chain(boom).astream():
            received.append(event)

    with pytest.raises(NodeError):
        await consume()

    assert isinstance(received[-1], RunFailed)
    assert received[-1].category == "node_exception"


async def test_leaving_the_stream_early_cancels_the_run() -> None:
    started: list[str] = []

    async def slow(state: GraphState) -> dict[str, Any]:
        started.append("x")
        await asyncio.sleep(0.05)
        return {}

    graph = AgentGraph("g", max_steps=None, enable_loop_detection=False, stall_threshold=None)
    graph.add_node("a", slow, next_node="a")
    graph.set_entry("a")

    stream = graph.astream()
    async for event in stream:
        if isinstance(event, NodeFinished):
            break
    await stream.aclose()  # type: ignore[attr-defined]
    count = len(started)
    await asyncio.sleep(0.15)
    assert len(started) == count  # no node started after the consumer left


class _Recorder(Observer):
    def __init__(self) -> None:
        self.events: list[GraphEvent] = []

    def on_event(self, event: GraphEvent) -> None:
        self.events.append(event)


def test_observers_attached_to_the_graph_see_every_run() -> None:
    recorder = _Recorder()
    graph = AgentGraph("g", observers=[recorder])
    graph.add_node("a", lambda s: None, next_node=END).set_entry("a")

    first = graph.run()
    second = graph.run()

    assert recorder.events == [*first.trace, *second.trace]
