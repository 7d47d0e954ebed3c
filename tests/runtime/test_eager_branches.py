"""Branches start eagerly: each in its own task from its first line, without a turn of the loop."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import pytest
from pydantic import BaseModel

from selectgraph import END, AgentGraph, BranchError, GraphState, Scatter, append
from selectgraph.runtime._branches import start_eagerly


class Fan(BaseModel):
    i: int = -1
    seen: Annotated[list[str], append] = []


def _scatter_graph(work: Any, branches: int = 3) -> AgentGraph:
    """start scatters ``branches`` copies of ``work`` (fail_all, the default), then a join."""
    graph = AgentGraph("eager", state_schema=Fan, max_steps=None)
    graph.add_node("start", lambda s: None)
    graph.add_node("work", work)
    graph.add_node("join", lambda s: None)
    graph.add_conditional_edge(
        "start", lambda s: [Scatter("work", {"i": i}) for i in range(branches)]
    )
    graph.add_edge("work", "join")
    graph.add_edge("join", END)
    graph.set_entry("start")
    return graph


async def test_each_branch_is_its_own_task_before_and_after_it_suspends() -> None:
    run_task: list[asyncio.Task[Any] | None] = []
    seen: dict[int, tuple[asyncio.Task[Any] | None, asyncio.Task[Any] | None]] = {}

    async def work(state: GraphState) -> dict[str, Any]:
        before = asyncio.current_task()
        await asyncio.sleep(0)
        seen[state["i"]] = (before, asyncio.current_task())
        return {"seen": [str(state["i"])]}

    compiled = _scatter_graph(work).compile()

    async def outer() -> Any:
        run_task.append(asyncio.current_task())
        return await compiled.arun({})

    result = await outer()
    assert sorted(result.state["seen"]) == ["0", "1", "2"]
    tasks = [seen[i][0] for i in range(3)]
    for before, after in seen.values():
        assert before is not None
        assert before is after  # the same task on both sides of the suspension
        assert before is not run_task[0]
    assert len({id(task) for task in tasks}) == 3  # one task per branch


async def test_a_branch_that_never_suspends_sees_its_own_task() -> None:
    tasks: list[asyncio.Task[Any] | None] = []

    async def work(state: GraphState) -> dict[str, Any]:
        tasks.append(asyncio.current_task())
        return {"seen": [str(state["i"])]}

    result = await _scatter_graph(work, branches=4).compile().arun({})
    assert len(result.state["seen"]) == 4
    assert None not in tasks
    assert len({id(task) for task in tasks}) == 4


async def test_asyncio_timeout_in_a_branch_cancels_that_branch_only() -> None:
    async def work(state: GraphState) -> dict[str, Any]:
        if state["i"] == 1:
            try:
                async with asyncio.timeout(0.01):
                    await asyncio.sleep(30)
            except TimeoutError:
                return {"seen": ["1 timed out"]}
        await asyncio.sleep(0.02)
        return {"seen": [str(state["i"])]}

    result = await asyncio.wait_for(_scatter_graph(work).compile().arun({}), 20)
    assert sorted(result.state["seen"]) == ["0", "1 timed out", "2"]


async def test_asyncio_timeout_around_a_quick_branch_does_not_fire_later() -> None:
    async def work(state: GraphState) -> dict[str, Any]:
        async with asyncio.timeout(0.01):
            pass  # entered and left in the branch's first step
        return {"seen": [str(state["i"])]}

    compiled = _scatter_graph(work).compile()
    result = await compiled.arun({})
    await asyncio.sleep(0.05)  # past the deadline: nothing is cancelled late
    again = await compiled.arun({})
    assert sorted(result.state["seen"]) == sorted(again.state["seen"]) == ["0", "1", "2"]


async def test_a_branch_failing_in_its_first_step_fails_the_fan_out_and_cancels_the_rest() -> None:
    finished: list[int] = []

    async def work(state: GraphState) -> dict[str, Any]:
        if state["i"] == 0:
            raise ValueError("branch zero broke")
        await asyncio.sleep(10)
        finished.append(state["i"])
        return {"seen": [str(state["i"])]}

    compiled = _scatter_graph(work).compile()
    with pytest.raises(BranchError, match="branch zero broke"):
        await asyncio.wait_for(compiled.arun({}), 20)
    assert finished == []  # the suspended siblings were cancelled, not awaited to the end


async def test_start_eagerly_runs_the_first_step_in_the_new_task() -> None:
    inside: list[asyncio.Task[Any] | None] = []

    async def quick() -> int:
        inside.append(asyncio.current_task())
        return 7

    loop = asyncio.get_running_loop()
    me = asyncio.current_task()
    task = start_eagerly(loop, quick(), me)
    assert task.done()  # no turn of the loop was needed
    assert task.result() == 7
    assert inside == [task]
    assert asyncio.current_task() is me


async def test_start_eagerly_without_a_parent_starts_the_task_as_usual() -> None:
    async def quick() -> int:
        return 7

    task = start_eagerly(asyncio.get_running_loop(), quick(), None)
    assert not task.done()
    assert await task == 7
