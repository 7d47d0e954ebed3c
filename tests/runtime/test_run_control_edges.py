"""Edge cases of run control found in review: whose task a token cancels, nested walks,
failures while stopping, usage of a stopped node, and async observer queues around them."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from selectgraph import (
    END,
    Agent,
    AgentConfig,
    AgentGraph,
    CancellationToken,
    GuardrailBlocked,
    InMemoryCheckpointStore,
    InterruptRequest,
)
from selectgraph.guardrails import RegexBlock
from selectgraph.observe import AsyncAgentObserver, GraphEvent, _delivery, drain_sync
from selectgraph.providers import LocalProvider


def _cancelling_graph(token: CancellationToken) -> AgentGraph:
    graph = AgentGraph("g", cancellation_token=token)

    async def a(state: Any) -> dict[str, Any]:
        token.cancel()  # a node decides the run should stop
        return {"x": 1}

    async def b(state: Any) -> dict[str, Any]:
        return {"y": 1}

    graph.add_node("a", a, next_node="b")
    graph.add_node("b", b, next_node=END)
    return graph


@pytest.mark.parametrize("cancelled_before", [False, True])
def test_a_token_never_cancels_the_callers_task(cancelled_before: bool) -> None:
    token = CancellationToken()
    if cancelled_before:
        token.cancel()

    async def main() -> str:
        result = await _cancelling_graph(token).arun({})
        await asyncio.sleep(0.02)  # a cancel leaking to this task would raise here
        return result.stop_reason

    assert asyncio.run(main()) == "cancelled"


def test_the_callers_own_cancel_is_not_swallowed_by_a_token() -> None:
    token = CancellationToken()
    graph = AgentGraph("g", cancellation_token=token)

    async def slow(state: Any) -> dict[str, Any]:
        await asyncio.sleep(10)
        return {}

    graph.add_node("a", slow, next_node=END)

    async def main() -> None:
        task = asyncio.create_task(graph.arun({}))
        await asyncio.sleep(0.05)
        task.cancel()
        token.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())


def _looping_subgraph(**options: Any) -> AgentGraph:
    def tick(state: Any) -> dict[str, Any]:
        time.sleep(0.05)
        return {"n": state.get("n", 0) + 1}

    sub = AgentGraph("sub", max_steps=None)
    sub.add_node("tick", tick)
    sub.add_edge("tick", END, condition="n >= 20")
    sub.add_edge("tick", "tick")
    outer = AgentGraph("outer", max_steps=None, **options)
    outer.add_node("sub", sub, next_node=END)
    return outer


def test_the_time_budget_is_checked_before_nodes_inside_a_subgraph() -> None:
    started = time.perf_counter()
    result = _looping_subgraph(max_duration=0.2).run({"n": 0})
    assert result.stop_reason == "time_budget"
    assert time.perf_counter() - started < 0.6  # 20 ticks would take 1 s


def test_a_token_is_checked_before_nodes_inside_a_subgraph() -> None:
    token = CancellationToken()
    threading.Timer(0.2, token.cancel).start()
    started = time.perf_counter()
    result = _looping_subgraph(cancellation_token=token).run({"n": 0})
    assert result.stop_reason == "cancelled"
    assert time.perf_counter() - started < 0.6


class _Quiet(AsyncAgentObserver):
    async def a_on_event(self, event: GraphEvent) -> None:
        return None


def test_a_failure_while_stopping_still_ends_the_run_and_frees_its_queue() -> None:
    token = CancellationToken()
    graph = AgentGraph("g", cancellation_token=token, output_guardrails=[RegexBlock("secret")])

    def a(state: Any) -> dict[str, Any]:
        state.last_output = "a secret answer"
        return {}

    async def b(state: Any) -> dict[str, Any]:
        await asyncio.sleep(5)
        return {}

    graph.add_node("a", a, next_node="b")
    graph.add_node("b", b, next_node=END)
    events: list[GraphEvent] = []

    async def main() -> None:
        asyncio.get_running_loop().call_later(0.1, token.cancel)
        with pytest.raises(GuardrailBlocked):
            await graph.arun({}, observers=[_Quiet(), events.append], run_id="stop-fails")

    asyncio.run(main())
    drain_sync(5)
    assert type(events[-1]).__name__ == "RunFailed"
    assert "stop-fails" not in _delivery._active
    assert not any(d.run_id == "stop-fails" for d in _delivery._working)


def test_the_calls_of_a_stopped_node_count_in_its_usage() -> None:
    agent = Agent(AgentConfig(name="w", max_tokens=50), provider=LocalProvider())

    async def two_calls(state: Any, context: Any) -> dict[str, Any]:
        first = await agent.arun("first question " * 5)
        second = await agent.arun("second question " * 5)  # refused by the budget
        return {"a": first.content, "b": second.content}

    graph = AgentGraph("g", max_total_tokens=120)
    graph.add_node("n", two_calls, next_node=END)
    store = InMemoryCheckpointStore()

    result = graph.run({}, checkpoint_store=store, run_id="usage-1")

    assert result.stop_reason == "token_budget"
    assert result.total_usage.total_tokens > 0  # the first call was made and paid for
    saved = store.list("usage-1")[-1].metadata.get("usage")
    assert saved is not None
    assert saved["calls"] == 1


def test_drain_does_not_wait_for_a_run_still_going_on() -> None:
    class Starts(AsyncAgentObserver):
        async def a_on_node_start(self, run_id: str, node_name: str, step: int) -> None:
            return None

    graph = AgentGraph("g")

    async def slow(state: Any) -> dict[str, Any]:
        await asyncio.sleep(1.5)
        return {}

    graph.add_node("a", slow, next_node=END)

    async def main() -> tuple[float, Any]:
        run = asyncio.create_task(graph.arun({}, observers=[Starts()]))
        await asyncio.sleep(0.2)
        started = time.perf_counter()
        summary = await graph.drain(timeout=1.0)
        took = time.perf_counter() - started
        await run
        return took, summary

    took, summary = asyncio.run(main())
    assert took < 0.5
    assert not summary.timed_out


def test_a_resumed_runs_observer_calls_follow_the_paused_runs_one_at_a_time() -> None:
    class Slow(AsyncAgentObserver):
        def __init__(self) -> None:
            self.active = 0
            self.most = 0
            self.order: list[str] = []

        async def a_on_event(self, event: GraphEvent) -> None:
            self.active += 1
            self.most = max(self.most, self.active)
            await asyncio.sleep(0.01)
            self.order.append(type(event).__name__)
            self.active -= 1

    def ask(state: Any) -> Any:
        state["ok"] = yield InterruptRequest("ok?")

    graph = AgentGraph("hitl")
    graph.add_node("a", lambda s: {"x": 1}, next_node="ask")
    graph.add_node("ask", ask, next_node="b")
    graph.add_node("b", lambda s: {"y": 1}, next_node=END)
    watcher = Slow()

    paused = graph.run({}, observers=[watcher], run_id="resumed-order")
    graph.resume(paused.interrupts[0].id, "yes", observers=[watcher])
    drain_sync(5)

    assert watcher.most == 1
    assert watcher.order.index("RunPaused") < watcher.order.index("RunResumed")
    assert watcher.order[-1] == "RunFinished"


def test_a_budget_stop_inside_a_fan_out_still_reports_its_end() -> None:
    from selectgraph.observe import ParallelFinished, ParallelStarted

    local = LocalProvider()

    def agent(name: str) -> Agent:
        return Agent(AgentConfig(name=name, max_tokens=50), provider=local)

    graph = AgentGraph("p", max_total_tokens=120)
    graph.add_node("first", agent("first"))
    for name in ("a", "b", "c"):
        graph.add_node(name, agent(name))
    graph.add_parallel_nodes("team", ["a", "b", "c"])
    graph.add_node("join", lambda s: {"done": True}, next_node=END)
    graph.add_edge("first", "team")
    graph.add_edge("team", "join")

    result = graph.run("hello there", observers=[lambda event: None])

    assert result.stop_reason == "token_budget"
    started = [e for e in result.trace if isinstance(e, ParallelStarted)]
    finished = [e for e in result.trace if isinstance(e, ParallelFinished)]
    assert len(started) == len(finished) == 1
    assert finished[0].cancelled == ("a", "b", "c")
    assert finished[0].succeeded == ()
