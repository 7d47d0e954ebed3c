"""Every run ends with exactly one terminal event, however it stops.

An observer that opens a span at RunStarted must be able to close it: after
success (RunFinished), an error (RunFailed), or a stop from outside, such as a
cancelled task, a timeout or Ctrl-C (RunCancelled).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Iterator, Mapping
from typing import Any

import pytest

from selectgraph import (
    END,
    AgentGraph,
    AgentObserver,
    AsyncAgentObserver,
    InMemoryCheckpointStore,
    drain_observers,
)
from selectgraph.observe import (
    GraphEvent,
    GraphEventType,
    NodeStarted,
    RunCancelled,
    RunFailed,
    RunFinished,
)

TERMINAL = {GraphEventType.RUN_FINISHED, GraphEventType.RUN_FAILED, GraphEventType.RUN_CANCELLED}


def _terminal(events: list[GraphEvent]) -> list[GraphEvent]:
    return [e for e in events if e.type in TERMINAL]


def _slow_graph(started: asyncio.Event) -> AgentGraph:
    async def slow(state: Any) -> None:
        started.set()
        await asyncio.sleep(10)

    graph = AgentGraph("g")
    graph.add_node("first", lambda s: {"x": 1}, next_node="slow")
    graph.add_node("slow", slow, next_node=END)
    return graph


async def test_a_cancelled_run_emits_run_cancelled_naming_the_node() -> None:
    started = asyncio.Event()
    seen: list[GraphEvent] = []
    task = asyncio.ensure_future(_slow_graph(started).arun(observers=[seen.append]))
    await started.wait()

    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    [event] = _terminal(seen)
    assert isinstance(event, RunCancelled)
    assert (event.reason, event.node, event.step) == ("cancelled", "slow", 2)


async def test_a_timed_out_run_emits_run_cancelled() -> None:
    seen: list[GraphEvent] = []

    with pytest.raises(TimeoutError):
        await asyncio.wait_for(
            _slow_graph(asyncio.Event()).arun(observers=[seen.append]), timeout=0.05
        )

    assert [type(e) for e in _terminal(seen)] == [RunCancelled]


class _Calls(AgentObserver):
    """Records the seed methods it is called with, by name."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def on_graph_start(self, *args: Any) -> None:
        self.calls.append(("on_graph_start", args))

    def on_node_start(self, *args: Any) -> None:
        self.calls.append(("on_node_start", args))

    def on_node_end(self, *args: Any) -> None:
        self.calls.append(("on_node_end", args))

    def on_graph_end(self, *args: Any) -> None:
        self.calls.append(("on_graph_end", args))

    def on_graph_error(self, *args: Any) -> None:
        self.calls.append(("on_graph_error", args))


class _AsyncCalls(AsyncAgentObserver):
    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    async def a_on_node_start(self, *args: Any) -> None:
        self.calls.append(("a_on_node_start", args))

    async def a_on_graph_error(self, *args: Any) -> None:
        self.calls.append(("a_on_graph_error", args))


async def test_an_agent_observer_of_a_run_stopped_from_outside_gets_on_graph_error() -> None:
    observer, queued = _Calls(), _AsyncCalls()

    with pytest.raises(TimeoutError):
        await asyncio.wait_for(
            _slow_graph(asyncio.Event()).arun(observers=[observer, queued]), timeout=0.05
        )
    await drain_observers()

    # The node that was running never ends, but the run does: one terminal call.
    assert [name for name, _ in observer.calls] == [
        "on_graph_start",
        "on_node_start",
        "on_node_end",
        "on_node_start",
        "on_graph_error",
    ]
    _, graph_name, node, error = observer.calls[-1][1]
    assert (graph_name, node) == ("g", "slow")
    assert isinstance(error, asyncio.CancelledError)
    assert "stopped from outside (cancelled)" in str(error)
    assert [name for name, _ in queued.calls][-1] == "a_on_graph_error"
    assert queued.calls[-1][1][2] == "slow"


async def test_an_astream_consumer_that_stops_reading_gets_the_run_cancelled() -> None:
    seen: list[GraphEvent] = []
    stream = _slow_graph(asyncio.Event()).astream(observers=[seen.append])
    assert isinstance(stream, AsyncGenerator)

    async for event in stream:
        if event.type == GraphEventType.NODE_STARTED and getattr(event, "node", "") == "slow":
            break
    await stream.aclose()

    assert [type(e) for e in _terminal(seen)] == [RunCancelled]


def test_keyboard_interrupt_in_a_node_emits_run_cancelled_and_propagates() -> None:
    def interrupted(state: Any) -> None:
        raise KeyboardInterrupt

    seen: list[GraphEvent] = []
    graph = AgentGraph("g")
    graph.add_node("work", interrupted, next_node=END)

    with pytest.raises(KeyboardInterrupt):
        graph.run(observers=[seen.append])

    [event] = _terminal(seen)
    assert isinstance(event, RunCancelled)
    assert (event.reason, event.node) == ("interrupted", "work")


class _Broken(Mapping[str, Any]):
    """A mapping whose contents cannot be read: the merge fails outside any node."""

    def __getitem__(self, key: str) -> Any:
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        raise RuntimeError("unreadable update")

    def __len__(self) -> int:
        return 1


def test_an_unexpected_error_still_emits_run_failed() -> None:
    seen: list[GraphEvent] = []
    graph = AgentGraph("g")
    graph.add_node("odd", lambda s: _Broken(), next_node=END)

    with pytest.raises(RuntimeError, match="unreadable update"):
        graph.run(observers=[seen.append])

    [event] = _terminal(seen)
    assert isinstance(event, RunFailed)
    assert "unreadable update" in event.error
    assert event.node == "odd"


def test_successful_and_failed_runs_still_end_with_one_terminal_event() -> None:
    def boom(state: Any) -> None:
        raise ValueError("no")

    ok: list[GraphEvent] = []
    AgentGraph.chain(lambda s: {"x": 1}).run(observers=[ok.append])
    failed: list[GraphEvent] = []
    with pytest.raises(Exception, match="no"):
        AgentGraph.chain(boom).run(observers=[failed.append])

    assert [type(e) for e in _terminal(ok)] == [RunFinished]
    assert [type(e) for e in _terminal(failed)] == [RunFailed]


def test_a_raising_sync_observer_is_counted_on_the_result(caplog: Any) -> None:
    def breaks(event: Any) -> None:
        raise RuntimeError("observer bug")

    graph = AgentGraph(observers=[breaks])
    graph.add_node("a", lambda s: {"x": 1})
    graph.add_edge("a", END)

    result = graph.run({})

    assert result.state.data["x"] == 1
    # RunStarted, NodeStarted, NodeFinished, EdgeFired (RunFinished comes after the result).
    assert result.observer_errors == 4
    assert "observer bug" in caplog.text


def test_node_finished_waits_for_an_edge_that_can_fail_only_without_checkpoints() -> None:
    graph = AgentGraph("order")
    graph.add_node("a", lambda s: {"x": 1})
    graph.add_node("b", lambda s: {"x": 2}, next_node=END)
    graph.add_conditional_edge("a", lambda state: "b")

    def after(seen: list[GraphEvent], node: str) -> list[str]:
        start = next(i for i, e in enumerate(seen) if isinstance(e, NodeStarted) and e.node == node)
        return [type(e).__name__ for e in seen[start + 1 : start + 4]]

    quick: list[GraphEvent] = []
    graph.run({}, observers=[quick.append])
    # A conditional edge may fail: the node's completion waits until it resolved.
    assert after(quick, "a")[:2] == ["NodeFinished", "EdgeFired"]

    stored: list[GraphEvent] = []
    graph.run({}, checkpoint_store=InMemoryCheckpointStore(), observers=[stored.append])
    # With checkpoints it comes first, to be stored with the node's checkpoint.
    assert after(stored, "a") == ["NodeFinished", "CheckpointSaved", "EdgeFired"]
    assert after(stored, "b") == ["NodeFinished", "CheckpointSaved", "EdgeFired"]


def test_a_conditional_nodes_completion_is_stored_with_its_checkpoint() -> None:
    store = InMemoryCheckpointStore()
    seen_while_b_ran: list[tuple[Any, Any]] = []

    def b(state: Any) -> dict[str, Any]:
        # What a watcher in another process, or a resume after a crash here, would read.
        seen_while_b_ran.extend(
            (e.event.get("event"), e.event.get("node")) for e in store.read_events("cond-1")
        )
        return {"x": 2}

    graph = AgentGraph("order")
    graph.add_node("a", lambda s: {"x": 1})
    graph.add_node("b", b, next_node=END)
    graph.add_conditional_edge("a", lambda state: "b")
    graph.run({}, checkpoint_store=store, run_id="cond-1", durability="sync")

    assert ("NodeFinished", "a") in seen_while_b_ran
