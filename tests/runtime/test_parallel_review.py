"""Regressions found by reviewing the parallel engine: each failed before its fix."""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Callable, Iterator
from typing import Annotated, Any

import pytest
from pydantic import BaseModel

from selectgraph import (
    END,
    AgentGraph,
    BranchError,
    ErrorPolicy,
    GraphRunError,
    GraphState,
    MergePolicy,
    RetryPolicy,
    append,
    goto,
    merge,
)
from selectgraph.observe import NodeFinished, NodeRetried, NodeStarted, ParallelFinished


def _both(graph: AgentGraph, data: dict[str, Any]) -> list[Any]:
    """The result under run() (threads, no loop) and under arun() (tasks)."""
    return [graph.run(dict(data)), asyncio.run(graph.arun(dict(data)))]


@pytest.mark.parametrize("asynchronous", [False, True])
def test_goto_inside_a_branch_is_followed_with_its_write(asynchronous: bool) -> None:
    seen: list[Any] = []

    def route(state: GraphState) -> Any:
        return goto("e", update={"v": "from b"})

    async def aroute(state: GraphState) -> Any:
        return route(state)

    def e(state: GraphState) -> dict[str, Any]:
        seen.append(state.data.get("v"))
        return {"w": 1}

    graph = AgentGraph("g")
    graph.add_node("a", lambda s: {"x": 0})
    graph.add_node("b", aroute if asynchronous else route, destinations=["e"])
    graph.add_node("d", lambda s: {"d": 1})
    graph.add_node("e", e)
    graph.add_node("j", lambda s: {"j": 1})
    graph.add_edge("a", ["b", "d"])
    graph.add_edge("b", "j")
    graph.add_edge("d", "j")
    graph.add_edge("e", "j")
    graph.add_edge("j", END)
    for result in _both(graph, {}):
        assert "e" in result.node_order
        assert result.state["v"] == "from b"
        assert result.state["w"] == 1
    assert seen == ["from b", "from b"]


class Items(BaseModel):
    model_config = {"extra": "allow"}
    items: list[str] = []


@pytest.mark.parametrize(
    ("policy", "expected_k", "expected_items"),
    [(MergePolicy.FIRST_WINS, "b1", ["b1"]), (MergePolicy.APPEND, "b2", ["b1", "b2"])],
)
def test_a_nested_group_keeps_its_own_merge_rules_at_the_outer_join(
    policy: MergePolicy, expected_k: str, expected_items: list[str]
) -> None:
    graph = AgentGraph("nested")
    graph.add_node("b1", lambda s: {"k": "b1", "items": ["b1"]})
    graph.add_node("b2", lambda s: {"k": "b2", "items": ["b2"]})
    graph.add_node("z", lambda s: {"z": 1})
    graph.add_parallel_nodes("inner", ["b1", "b2"], merge_policy=policy)
    graph.add_parallel_nodes("outer", ["inner", "z"])
    graph.add_edge("outer", END)
    graph.set_entry("outer")
    for result in _both(graph, {"items": []}):
        assert result.state["k"] == expected_k
        assert result.state["items"] == expected_items
        assert result.state["z"] == 1


def test_a_retried_node_in_a_branch_is_retried_once_over() -> None:
    calls = 0

    def always(state: GraphState) -> None:
        nonlocal calls
        calls += 1
        raise ValueError("no")

    graph = AgentGraph(
        "retry",
        error_policy=ErrorPolicy.RETRY,
        retry=RetryPolicy(max_retries=2, initial_delay=0, jitter=0),
    )
    graph.add_node("bad", always)
    graph.add_node("ok", lambda s: None)
    graph.add_parallel_nodes("g", ["bad", "ok"], failure_mode="wait_all")
    graph.add_edge("g", END)
    result = asyncio.run(graph.arun({}))
    assert calls == 3
    assert len([e for e in result.trace if isinstance(e, NodeRetried)]) == 2


class Facts(BaseModel):
    facts: Annotated[dict[str, str], merge] = {}
    notes: Annotated[list[str], append] = []


def test_in_place_edits_of_a_merged_dict_keep_every_branchs_keys() -> None:
    def note(name: str) -> Callable[[GraphState], None]:
        def node(state: GraphState) -> None:
            state.data["facts"][name] = name
            state.data["notes"].append(name)

        return node

    graph = AgentGraph("dicts", state_schema=Facts)
    graph.add_node("a", note("a"))
    graph.add_node("b", note("b"))
    graph.add_parallel_nodes("g", ["a", "b"])
    graph.add_edge("g", END)
    graph.set_entry("g")
    for result in _both(graph, {"facts": {"p": "parent"}, "notes": ["n0"]}):
        assert result.state["facts"] == {"p": "parent", "a": "a", "b": "b"}
        assert result.state["notes"] == ["n0", "a", "b"]


@pytest.fixture
def no_automatic_gc() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


async def _boom(state: GraphState) -> None:
    raise ValueError("boom")


async def _fine(state: GraphState) -> dict[str, Any]:
    await asyncio.sleep(0)
    return {"y": 1}


@pytest.mark.usefixtures("no_automatic_gc")
@pytest.mark.parametrize("mode", ["fail_all", "wait_all"])
def test_a_failed_fan_out_leaves_no_cycles(mode: str) -> None:
    graph = AgentGraph("cycles")
    graph.add_node("start", lambda s: {"big": list(range(1000))})
    graph.add_node("bad", _boom)
    graph.add_node("ok", _fine)
    graph.add_parallel_nodes("grp", ["bad", "ok"], failure_mode=mode)  # type: ignore[arg-type]
    graph.add_edge("start", "grp")
    graph.add_edge("grp", END)
    compiled = graph.compile()

    async def once() -> Any:
        try:
            return await compiled.arun({})
        except GraphRunError as error:
            return error  # what a caller keeps of a failed run

    async def main() -> set[str]:
        # Inside one loop: asyncio.run() keeps an error it raises in a cycle of its own.
        await once()
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            kept = await once()
            del kept
            gc.collect()
            return {type(obj).__name__ for obj in gc.garbage}
        finally:
            gc.set_debug(0)
            gc.garbage.clear()

    garbage = asyncio.run(main())
    assert not garbage & {"GraphState", "Run", "BranchRun", "NodeError", "BranchError"}


def test_max_steps_inside_a_group_is_reported_not_skipped() -> None:
    graph = AgentGraph("limit", max_steps=2)
    graph.add_node("a", lambda s: {"x": 1})
    graph.add_node("b", lambda s: {"b": 1})
    graph.add_node("c", lambda s: {"c": 1})
    graph.add_parallel_nodes("grp", ["b", "c"])
    graph.add_edge("a", "grp")
    graph.add_edge("grp", END)
    for result in _both(graph, {}):
        assert result.stop_reason == "max_steps"
        assert result.max_steps_reached
        assert result.quality == "degraded"
        assert "b" not in result.state.data


def test_fail_all_stops_sibling_branches_before_their_next_node_on_threads() -> None:
    ran: list[str] = []

    def slow(name: str) -> Callable[[GraphState], None]:
        def node(state: GraphState) -> None:
            ran.append(name)
            time.sleep(0.2)  # ample time for the failure to be seen before x2 would start

        return node

    def fail(state: GraphState) -> None:
        time.sleep(0.01)
        raise ValueError("stop")

    graph = AgentGraph("stop")
    graph.add_node("fork", lambda s: None)
    for name in ("x1", "x2", "x3", "x4"):
        graph.add_node(name, slow(name))
    graph.add_node("bad", fail)
    graph.add_node("join", lambda s: None)
    graph.add_edge("fork", ["x1", "bad"])
    graph.add_edge("x1", "x2")
    graph.add_edge("x2", "x3")
    graph.add_edge("x3", "x4")
    graph.add_edge("x4", "join")
    graph.add_edge("bad", "join")
    graph.add_edge("join", END)
    with pytest.raises(BranchError) as caught:
        graph.run({})
    assert caught.value.branch == "bad"
    assert ran == ["x1"]


def test_a_failure_a_branch_absorbed_degrades_the_run_and_names_its_own_branch() -> None:
    graph = AgentGraph("absorbed")
    graph.add_node("b1", _boom)
    graph.add_node("b2", _fine)
    graph.add_parallel_nodes("inner", ["b1", "b2"], failure_mode="wait_all")
    graph.add_node("z", _fine)
    graph.add_parallel_nodes("outer", ["inner", "z"])
    graph.add_edge("outer", END)
    graph.set_entry("outer")
    result = asyncio.run(graph.arun({}))
    assert result.quality == "degraded"
    assert [e["branch"] for e in result.state.errors] == ["b1"]


def test_every_node_a_branch_started_is_finished_in_the_events() -> None:
    graph = AgentGraph("closed")
    graph.add_node("bad", _boom)
    graph.add_node("ok", _fine)
    graph.add_parallel_nodes("grp", ["bad", "ok"], failure_mode="wait_all")
    graph.add_edge("grp", END)
    events = list(asyncio.run(graph.arun({})).trace)
    started = [e.node for e in events if isinstance(e, NodeStarted)]
    finished = [e for e in events if isinstance(e, NodeFinished)]
    assert sorted(started) == sorted(e.node for e in finished)
    assert next(e for e in finished if e.node == "bad").outcome == "failure"


def test_a_failed_join_still_closes_the_fan_out() -> None:
    graph = AgentGraph("conflict")
    graph.add_node("a", lambda s: {"k": 1})
    graph.add_node("b", lambda s: {"k": 2})
    graph.add_parallel_nodes("grp", ["a", "b"], merge_policy=MergePolicy.ERROR)
    graph.add_node("fix", lambda s: {"fixed": True})
    graph.add_edge("grp", END)
    graph.add_edge("grp", "fix", on="failure")
    graph.add_edge("fix", END)
    graph.set_entry("grp")
    result = graph.run({})
    assert result.state["fixed"] is True
    assert any(isinstance(e, ParallelFinished) for e in result.trace)


def test_history_appended_through_a_view_and_precedence_match_a_plain_merge() -> None:
    def node(state: GraphState) -> dict[str, Any]:
        state.data["k"] = "view"
        return {"k": "returned"}

    graph = AgentGraph("precedence")
    graph.add_node("a", node)
    graph.add_node("b", lambda s: None)
    graph.add_parallel_nodes("grp", ["a", "b"])
    graph.add_edge("grp", END)
    graph.set_entry("grp")
    assert graph.run({}).state["k"] == "returned"


def test_system_exit_in_a_branch_is_never_absorbed() -> None:
    def leave(state: GraphState) -> None:
        raise SystemExit(3)

    graph = AgentGraph("exit")
    graph.add_node("bye", leave)
    graph.add_node("ok", lambda s: None)
    graph.add_parallel_nodes("grp", ["bye", "ok"], failure_mode="wait_all")
    graph.add_edge("grp", END)
    graph.set_entry("grp")
    with pytest.raises(SystemExit):
        graph.run({})


def test_context_previous_of_a_node_revisited_inside_a_branch() -> None:
    steps: list[Any] = []

    def tick(state: GraphState, context: Any) -> dict[str, Any]:
        previous = context.previous
        steps.append(None if previous is None else previous.visit)
        return {"t": state.data.get("t", 0) + 1}

    graph = AgentGraph("revisit", enable_loop_detection=False)
    graph.add_node("tick", tick)
    graph.add_node("fork", lambda s: None)
    graph.add_node("other", lambda s: None)
    graph.add_node("join", lambda s: None)
    graph.add_edge("tick", "fork", condition="t < 2")
    graph.add_edge("tick", "join")
    graph.add_node("a", lambda s: {"a": 1})
    graph.add_edge("fork", ["a", "other"])
    graph.add_edge("a", "tick")  # tick runs second in its branch, after the branch wrote
    graph.add_edge("other", "join")
    graph.add_edge("join", END)
    graph.run({})
    # tick at top level (no previous), then inside the branch: it sees its first visit.
    assert steps[:2] == [None, 1]
