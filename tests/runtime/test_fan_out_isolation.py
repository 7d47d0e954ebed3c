"""Fail-fast fan-outs start nothing after a failure, with a concurrency limit too (issue 27).

``max_concurrency`` queues branches behind a limit; under ``fail_all`` a queued
branch must not take the slot a failed branch frees. Async nodes (asyncio tasks)
and blocking ones (worker threads) alike.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from selectgraph import END, AgentGraph, BranchError, Scatter


def _fan_out(node: Any, limit: int, count: int = 5) -> AgentGraph:
    graph = AgentGraph("g", max_concurrency=limit)
    graph.add_node("plan", lambda state: {})
    graph.add_node("work", node)
    graph.add_node("done", lambda state: {}, next_node=END)
    graph.add_edge("work", "done")
    graph.add_conditional_edge(
        "plan", lambda state: [Scatter("work", {"i": i}) for i in range(count)]
    )
    return graph


@pytest.mark.parametrize("blocking", [False, True], ids=["async", "threads"])
def test_with_one_slot_nothing_starts_after_the_failed_branch(blocking: bool) -> None:
    started: list[int] = []

    def sync_work(state: Any) -> dict[str, Any]:
        started.append(state["i"])
        if state["i"] == 1:
            raise RuntimeError("boom")
        return {}

    async def async_work(state: Any) -> dict[str, Any]:
        return sync_work(state)

    graph = _fan_out(sync_work if blocking else async_work, limit=1)

    with pytest.raises(BranchError, match="boom"):
        graph.run({})
    assert started == [0, 1]


def test_with_two_slots_the_running_sibling_is_cancelled_and_no_other_starts() -> None:
    started: list[int] = []
    never = asyncio.Event()

    async def work(state: Any) -> dict[str, Any]:
        started.append(state["i"])
        if state["i"] == 1:
            raise RuntimeError("boom")
        await never.wait()  # branch 0 is still running when branch 1 fails
        return {}

    with pytest.raises(BranchError, match="boom"):
        _fan_out(work, limit=2).run({})
    assert started == [0, 1]


def test_continue_others_still_runs_every_branch() -> None:
    started: list[str] = []

    def member(name: str, fails: bool = False) -> Any:
        async def work(state: Any) -> dict[str, Any]:
            started.append(name)
            if fails:
                raise RuntimeError("boom")
            return {name: True}

        return work

    graph = AgentGraph("g", max_concurrency=1)
    graph.add_node("start", lambda state: {})
    graph.add_node("a", member("a"))
    graph.add_node("b", member("b", fails=True))
    graph.add_node("c", member("c"))
    graph.add_parallel_nodes("all", ["a", "b", "c"], failure_mode="continue_others")
    graph.add_edge("start", "all")
    graph.add_edge("all", END)

    result = graph.run({})

    assert result.quality == "degraded"
    assert started == ["a", "b", "c"]
    assert (result.state.data["a"], result.state.data["c"]) == (True, True)
