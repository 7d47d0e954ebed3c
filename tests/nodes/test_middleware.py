"""Node middleware: functions around node calls that time, log, cache, retry or short-circuit."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from selectgraph import (
    END,
    Agent,
    AgentConfig,
    AgentGraph,
    NodeCall,
    NodeError,
    Scatter,
)
from selectgraph.observe import NodeFinished
from selectgraph.providers import LocalProvider


def _two_nodes(**options: Any) -> AgentGraph:
    graph = AgentGraph("g", **options)
    graph.add_node("a", lambda state: {"a": state.get("a", 0) + 1}, next_node="b")
    graph.add_node("b", lambda state: {"b": state["a"] * 10}, next_node=END)
    return graph


def test_graph_middleware_wraps_every_node_in_order_and_sees_its_output() -> None:
    seen: list[tuple[str, str, Any]] = []

    async def outer(call: NodeCall, proceed: Callable[[], Awaitable[Any]]) -> Any:
        seen.append(("outer in", call.node, dict(call.state.data)))
        output = await proceed()
        seen.append(("outer out", call.node, output))
        return output

    async def inner(call: NodeCall, proceed: Callable[[], Awaitable[Any]]) -> Any:
        seen.append(("inner in", call.node, call.attempt))
        return await proceed()

    result = _two_nodes(middleware=[outer, inner]).run({})

    assert result.state.data == {"a": 1, "b": 10}
    assert seen == [
        ("outer in", "a", {}),
        ("inner in", "a", 1),
        ("outer out", "a", {"a": 1}),
        ("outer in", "b", {"a": 1}),
        ("inner in", "b", 1),
        ("outer out", "b", {"b": 10}),
    ]
    # The engine's own events stay one source: one NodeFinished per node.
    assert [e.node for e in result.trace if isinstance(e, NodeFinished)] == ["a", "b"]


def test_a_plain_def_middleware_calls_proceed_and_gets_the_output() -> None:
    threads: list[bool] = []

    def log(call: NodeCall, proceed: Callable[[], Any]) -> Any:
        threads.append(threading.current_thread() is threading.main_thread())
        output = proceed()
        return {**output, f"{call.node}_logged": True}

    result = _two_nodes(middleware=[log]).run({})

    assert result.state.data == {"a": 1, "a_logged": True, "b": 10, "b_logged": True}
    assert threads == [False, False]  # on a worker thread, the node on the loop


def test_a_middleware_may_short_circuit_a_node_like_a_cache() -> None:
    calls: list[str] = []
    cache: dict[str, Any] = {"b": {"b": -1}}

    def node_b(state: Any) -> dict[str, Any]:
        calls.append("b")
        return {"b": 99}

    async def cached(call: NodeCall, proceed: Callable[[], Awaitable[Any]]) -> Any:
        if call.node in cache:
            return cache[call.node]
        return await proceed()

    graph = AgentGraph("g")
    graph.add_node("a", lambda state: {"a": 1}, next_node="b")
    graph.add_node("b", node_b, next_node=END, middleware=[cached])

    assert graph.run({}).state.data == {"a": 1, "b": -1}
    assert calls == []


def test_a_middleware_may_retry_a_node() -> None:
    attempts: list[int] = []

    def flaky(state: Any) -> dict[str, Any]:
        attempts.append(1)
        if len(attempts) < 3:
            raise ConnectionError("try again")
        return {"ok": True}

    async def retry(call: NodeCall, proceed: Callable[[], Awaitable[Any]]) -> Any:
        for _ in range(4):
            try:
                return await proceed()
            except ConnectionError:
                continue
        return await proceed()

    graph = AgentGraph("g")
    graph.add_node("flaky", flaky, next_node=END, middleware=[retry])

    assert graph.run({}).state.data == {"ok": True}
    assert len(attempts) == 3


def test_node_middleware_runs_inside_the_graph_s() -> None:
    order: list[str] = []

    def tag(name: str) -> Any:
        async def middleware(call: NodeCall, proceed: Callable[[], Awaitable[Any]]) -> Any:
            order.append(f"{name}:{call.node}")
            return await proceed()

        return middleware

    graph = AgentGraph("g", middleware=[tag("graph")])
    graph.add_node("a", lambda state: {}, next_node=END, middleware=[tag("node")])
    graph.run({})

    assert order == ["graph:a", "node:a"]


def test_a_failure_passes_through_middleware_to_the_node_s_error_policy() -> None:
    seen: list[str] = []

    async def watch(call: NodeCall, proceed: Callable[[], Awaitable[Any]]) -> Any:
        try:
            return await proceed()
        except RuntimeError as exc:
            seen.append(str(exc))
            raise

    def fails(state: Any) -> dict[str, Any]:
        raise RuntimeError("boom")

    graph = AgentGraph("g", middleware=[watch])
    graph.add_node("a", fails, next_node=END)

    with pytest.raises(NodeError, match="boom"):
        graph.run({})
    assert seen == ["boom"]


def test_middleware_wraps_agents_branches_and_async_nodes() -> None:
    nodes: list[str] = []

    async def record(call: NodeCall, proceed: Callable[[], Awaitable[Any]]) -> Any:
        nodes.append(call.node)
        return await proceed()

    async def slow(state: Any) -> dict[str, Any]:
        await asyncio.sleep(0)
        return {}

    graph = AgentGraph("g", middleware=[record])
    graph.add_node("writer", Agent(AgentConfig(name="writer"), provider=LocalProvider()))
    graph.add_node("work", slow)
    graph.add_node("done", lambda state: {}, next_node=END)
    graph.add_conditional_edge("writer", lambda state: [Scatter("work", {}), Scatter("work", {})])
    graph.add_edge("work", "done")

    graph.run("write something")

    assert nodes == ["writer", "work", "work", "done"]


def test_bad_middleware_is_refused_naming_where() -> None:
    with pytest.raises(TypeError, match=r"AgentGraph: middleware\[0\] must be a callable"):
        AgentGraph("g", middleware=["timing"])  # type: ignore[list-item]
    graph = AgentGraph("g")
    with pytest.raises(TypeError, match="node 'a': middleware must be a list"):
        graph.add_node("a", lambda state: {}, middleware=print)  # type: ignore[arg-type]
