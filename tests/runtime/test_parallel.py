"""Parallel branches end to end: groups, list fan-out, Scatter, joins, failure modes, events."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import BaseModel

from selectgraph import (
    END,
    AgentGraph,
    BranchError,
    GraphBuildError,
    GraphState,
    MergeConflictError,
    MergePolicy,
    NodeError,
    NodeTimeout,
    RoutingError,
    Scatter,
    append,
)
from selectgraph.graph import FailureMode
from selectgraph.observe._events import NodeFinished, NodeStarted, ParallelFinished, ParallelStarted
from selectgraph.state._layered import LayeredData


class Research(BaseModel):
    question: str = ""
    topics: list[str] = []
    findings: Annotated[list[str], append] = []
    report: str = ""


def _researcher(name: str, delay: float = 0.0) -> Any:
    async def research(state: GraphState) -> dict[str, Any]:
        await asyncio.sleep(delay)
        return {"findings": [f"{name}: {state['question']}"]}

    return research


def test_a_research_team_runs_at_once_and_the_synthesizer_runs_once_after_all() -> None:
    calls: list[str] = []

    def synthesize(state: GraphState) -> dict[str, Any]:
        calls.append("synth")
        return {"report": " | ".join(state["findings"])}

    graph = AgentGraph("team", state_schema=Research)
    graph.add_node("plan", lambda s: {"question": "why"})
    # Declared fastest-last: the merge order is declaration order, not finishing order.
    graph.add_node("a", _researcher("a", 0.06))
    graph.add_node("b", _researcher("b", 0.03))
    graph.add_node("c", _researcher("c", 0.0))
    graph.add_parallel_nodes("team", ["a", "b", "c"])
    graph.add_node("synth", synthesize)
    graph.add_edge("plan", "team")
    graph.add_edge("team", "synth")
    graph.add_edge("synth", END)
    graph.set_entry("plan")

    started = time.perf_counter()
    result = graph.run({})
    elapsed = time.perf_counter() - started
    assert elapsed < 0.5  # generous for a loaded machine; the overlap itself is shown elsewhere
    assert calls == ["synth"]
    assert result.state["findings"] == ["a: why", "b: why", "c: why"]
    assert result.state["report"] == "a: why | b: why | c: why"
    assert result.node_order[0] == "plan"
    assert result.node_order[-1] == "synth"
    assert result.quality == "clean"


def test_static_list_edge_fans_out_and_joins_at_the_common_next_node() -> None:
    joined: list[dict[str, Any]] = []
    graph = AgentGraph("fan")
    graph.add_node("start", lambda s: {"n": 1})
    graph.add_node("left", lambda s: {"left": s["n"] + 1})
    graph.add_node("right", lambda s: {"right": s["n"] + 2})

    def join(state: GraphState) -> dict[str, Any]:
        joined.append(dict(state.data))
        return {"sum": state["left"] + state["right"]}

    graph.add_node("join", join)
    graph.add_edge("start", ["left", "right"])
    graph.add_edge("left", "join")
    graph.add_edge("right", "join")
    graph.add_edge("join", END)
    graph.set_entry("start")
    result = graph.run({})
    assert len(joined) == 1
    assert result.state["sum"] == 5


def test_branches_of_several_nodes_see_only_their_own_writes() -> None:
    seen: dict[str, Any] = {}

    def step(name: str, key: str) -> Any:
        def node(state: GraphState) -> dict[str, Any]:
            seen[name] = {k: state.data.get(k) for k in ("x1", "y1", "x2", "y2")}
            return {key: name}

        return node

    graph = AgentGraph("chains")
    graph.add_node("fork", lambda s: None)
    graph.add_node("x1", step("x1", "x1"))
    graph.add_node("x2", step("x2", "x2"))
    graph.add_node("y1", step("y1", "y1"))
    graph.add_node("y2", step("y2", "y2"))
    graph.add_node("join", lambda s: {"all": [s["x1"], s["x2"], s["y1"], s["y2"]]})
    graph.add_edge("fork", ["x1", "y1"])
    graph.add_edge("x1", "x2")
    graph.add_edge("x2", "join")
    graph.add_edge("y1", "y2")
    graph.add_edge("y2", "join")
    graph.add_edge("join", END)
    graph.set_entry("fork")
    result = graph.run({})
    assert result.state["all"] == ["x1", "x2", "y1", "y2"]
    assert seen["x2"]["x1"] == "x1"
    assert seen["x2"]["y1"] is None
    assert seen["x2"]["y2"] is None
    assert seen["y2"]["x1"] is None
    assert seen["y2"]["y1"] == "y1"


def test_scatter_over_a_planners_topics_into_a_subgraph() -> None:
    inner = AgentGraph("dig", state_schema=Research)
    inner.add_node("search", lambda s: {"findings": [f"found {s['question']}"]})
    inner.set_entry("search")
    inner.add_edge("search", END)

    graph = AgentGraph("scatter", state_schema=Research)
    graph.add_node("planner", lambda s: {"topics": ["ai", "ml", "db"]})
    graph.add_node("researcher", inner)
    graph.add_node("writer", lambda s: {"report": ", ".join(s["findings"])})
    graph.add_conditional_edge(
        "planner", lambda s: [Scatter("researcher", {"question": t}) for t in s["topics"]]
    )
    graph.add_edge("researcher", "writer")
    graph.add_edge("writer", END)
    graph.set_entry("planner")
    result = graph.run({})
    assert result.state["findings"] == ["found ai", "found ml", "found db"]
    assert result.state["report"] == "found ai, found ml, found db"
    assert result.state["question"] == ""  # the patch was the branches' input, not a write


def test_nested_fan_out() -> None:
    def leaf(state: GraphState) -> dict[str, Any]:
        return {"findings": [f"{state['question']}/{state['topic']}"]}

    graph = AgentGraph("nested", state_schema=Research)
    graph.add_node("start", lambda s: None)
    graph.add_node("outer", lambda s: None)
    graph.add_node("leaf", leaf)
    graph.add_node("done", lambda s: {"report": str(len(s["findings"]))})
    graph.add_conditional_edge(
        "start", lambda s: [Scatter("outer", {"question": q}) for q in ("q0", "q1")]
    )
    graph.add_conditional_edge(
        "outer", lambda s: [Scatter("leaf", {"topic": t}) for t in ("t0", "t1")]
    )
    graph.add_edge("leaf", "done")
    graph.add_edge("done", END)
    graph.set_entry("start")
    result = graph.run({})
    assert result.state["findings"] == ["q0/t0", "q0/t1", "q1/t0", "q1/t1"]


class _Free(BaseModel):
    model_config = {"extra": "allow"}


def _group_graph(mode: FailureMode, *, policy: MergePolicy = MergePolicy.LAST_WINS) -> AgentGraph:
    async def good(state: GraphState) -> dict[str, Any]:
        await asyncio.sleep(0.01)
        return {"good": True}

    async def bad(state: GraphState) -> dict[str, Any]:
        raise ValueError("bad branch")

    graph = AgentGraph("modes")
    graph.add_node("good", good)
    graph.add_node("bad", bad)
    graph.add_parallel_nodes("group", ["good", "bad"], failure_mode=mode, merge_policy=policy)
    graph.add_node("after", lambda s: {"after": True})
    graph.add_edge("group", "after")
    graph.add_edge("after", END)
    graph.set_entry("group")
    return graph


def test_fail_all_propagates_the_first_failure_naming_the_branch() -> None:
    with pytest.raises(BranchError) as caught:
        _group_graph("fail_all").run({})
    assert caught.value.branch == "bad"
    assert isinstance(caught.value.__cause__, NodeError)  # naming the failing node
    assert isinstance(caught.value.__cause__.__cause__, ValueError)
    assert "node 'bad' raised ValueError: bad branch" in str(caught.value)
    assert caught.value.state is not None
    assert "good" not in caught.value.state.data  # nothing of the fan-out was merged


def test_continue_others_keeps_the_successful_writes_and_degrades() -> None:
    result = _group_graph("continue_others").run({})
    assert result.state["good"] is True
    assert result.state["after"] is True
    assert result.quality == "degraded"
    assert [e["branch"] for e in result.state.errors] == ["bad"]


def test_wait_all_records_every_error_and_takes_the_on_failure_edge() -> None:
    graph = _group_graph("wait_all")
    graph.add_node("recover", lambda s: {"recovered": True})
    graph.add_edge("group", "recover", on="failure")
    graph.add_edge("recover", END)
    result = graph.run({})
    assert result.state["good"] is True
    assert result.state["recovered"] is True
    assert "after" not in result.state.data
    assert result.state.errors[0]["branch"] == "bad"
    assert "bad branch" in result.state.errors[0]["error"]


def test_wait_all_without_on_failure_continues_degraded() -> None:
    result = _group_graph("wait_all").run({})
    assert result.state["after"] is True
    assert result.quality == "degraded"


async def test_fail_all_really_cancels_a_sibling_that_would_write_a_file(tmp_path: Path) -> None:
    marker = tmp_path / "written"

    async def slow(state: GraphState) -> dict[str, Any]:
        await asyncio.sleep(0.2)
        marker.write_text("too late")
        return {"slow": True}

    async def failing(state: GraphState) -> dict[str, Any]:
        await asyncio.sleep(0.01)
        raise RuntimeError("stop everything")

    graph = AgentGraph("cancel")
    graph.add_node("slow", slow)
    graph.add_node("failing", failing)
    graph.add_parallel_nodes("group", ["slow", "failing"])
    graph.add_edge("group", END)
    graph.set_entry("group")
    with pytest.raises(BranchError):
        await graph.arun({})
    await asyncio.sleep(0.3)
    assert not marker.exists()


def test_merge_policies_settle_keys_without_a_reducer() -> None:
    def writer(value: int) -> Any:
        return lambda s: {"x": value, f"only{value}": True}

    def build(policy: MergePolicy) -> AgentGraph:
        graph = AgentGraph("policy")
        graph.add_node("w1", writer(1))
        graph.add_node("w2", writer(2))
        graph.add_parallel_nodes("g", ["w1", "w2"], merge_policy=policy)
        graph.add_edge("g", END)
        graph.set_entry("g")
        return graph

    last = build(MergePolicy.LAST_WINS).run({}).state.data
    assert last["x"] == 2
    assert last["only1"] is True
    assert last["only2"] is True
    assert build(MergePolicy.FIRST_WINS).run({}).state["x"] == 1
    with pytest.raises(MergeConflictError) as caught:
        build(MergePolicy.ERROR).run({})
    assert caught.value.key == "x"
    assert caught.value.branches == ["w1", "w2"]


def test_append_in_the_seed_style_does_not_duplicate_the_parents_items() -> None:
    def add(item: str) -> Any:
        def node(state: GraphState) -> GraphState:
            state.data["items"].append(item)  # the seed-004 style: mutate and return
            return state

        return node

    graph = AgentGraph("append")
    graph.add_node("a", add("a"))
    graph.add_node("b", add("b"))
    graph.add_parallel_nodes("g", ["a", "b"], merge_policy=MergePolicy.APPEND)
    graph.add_edge("g", END)
    graph.set_entry("g")
    assert graph.run({"items": ["parent"]}).state["items"] == ["parent", "a", "b"]


def test_reducer_fields_take_seed_style_writes_from_every_branch() -> None:
    def add(item: str) -> Any:
        def node(state: GraphState) -> None:
            state.data["findings"].append(item)

        return node

    graph = AgentGraph("reduce", state_schema=Research)
    graph.add_node("a", add("a"))
    graph.add_node("b", add("b"))
    graph.add_parallel_nodes("g", ["a", "b"])
    graph.add_edge("g", END)
    graph.set_entry("g")
    assert graph.run({"findings": ["p"]}).state["findings"] == ["p", "a", "b"]


def test_merge_fn_overrides_the_policy() -> None:
    def merge_research(branch_states: list[GraphState]) -> GraphState:
        combined = GraphState()
        findings = [s.data.get("finding", "") for s in branch_states]
        combined.data["all_findings"] = findings
        combined.data["__last_output__"] = "\n\n".join(findings)
        return combined

    graph = AgentGraph("merge_fn")
    graph.add_node("a", lambda s: {"finding": "A"})
    graph.add_node("b", lambda s: {"finding": "B"})
    graph.add_parallel_nodes("team", ["a", "b"], merge_fn=merge_research)
    graph.add_edge("team", END)
    graph.set_entry("team")
    result = graph.run({})
    assert result.state["all_findings"] == ["A", "B"]
    assert result.state.last_output == "A\n\nB"


def test_same_inputs_give_the_same_final_state_whatever_finishes_first() -> None:
    async def jitter(state: GraphState) -> dict[str, Any]:
        await asyncio.sleep(0.001 * (hash(state["topic"]) % 7))
        return {"findings": [state["topic"]], "last": state["topic"]}

    graph = AgentGraph("determinism", state_schema=_Free)
    graph.add_node("plan", lambda s: None)
    graph.add_node("work", jitter)
    graph.add_conditional_edge(
        "plan", lambda s: [Scatter("work", {"topic": f"t{i}"}) for i in range(20)]
    )
    graph.add_edge("work", END)
    graph.set_entry("plan")
    finals = [graph.run({"findings": []}).state.data for _ in range(3)]
    assert finals[0] == finals[1] == finals[2]
    assert finals[0]["last"] == "t19"


def test_max_concurrency_bounds_running_branches() -> None:
    running = 0
    peak = 0

    async def work(state: GraphState) -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.005)
        running -= 1

    graph = AgentGraph("bounded", max_concurrency=4)
    graph.add_node("plan", lambda s: None)
    graph.add_node("work", work)
    graph.add_conditional_edge("plan", lambda s: [Scatter("work", {"i": i}) for i in range(12)])
    graph.add_edge("work", END)
    graph.set_entry("plan")
    graph.run({})
    assert peak == 4


def test_sync_nodes_in_a_group_run_on_threads_and_overlap() -> None:
    threads: set[str] = set()

    def blocking(state: GraphState) -> None:
        threads.add(threading.current_thread().name)
        time.sleep(0.1)

    graph = AgentGraph("threads")
    names = [f"n{i}" for i in range(8)]
    for name in names:
        graph.add_node(name, blocking)
    graph.add_parallel_nodes("g", names)
    graph.add_edge("g", END)
    graph.set_entry("g")
    for runner in (graph.run, lambda i: asyncio.run(graph.arun(i))):
        threads.clear()
        started = time.perf_counter()
        runner({})
        assert time.perf_counter() - started < 0.1 * 8 / 2  # sequential would take 0.8 s
        assert len(threads) > 1


def test_a_node_past_its_timeout_fails_with_node_timeout_and_can_be_retried() -> None:
    attempts = 0

    async def slow_once(state: GraphState) -> dict[str, Any]:
        nonlocal attempts
        attempts += 1
        if attempts == 1:
            await asyncio.sleep(1)
        return {"ok": True}

    from selectgraph import ErrorPolicy, RetryPolicy

    graph = AgentGraph("timeout")
    graph.add_node(
        "slow",
        slow_once,
        timeout=0.05,
        error_policy=ErrorPolicy.RETRY,
        retry=RetryPolicy(max_retries=1, initial_delay=0, jitter=0),
    )
    graph.add_edge("slow", END)
    graph.set_entry("slow")
    assert graph.run({}).state["ok"] is True
    assert attempts == 2

    plain = AgentGraph("timeout2")
    plain.add_node("slow", lambda s: time.sleep(0.3), timeout=0.05)
    plain.add_edge("slow", END)
    plain.set_entry("slow")
    with pytest.raises(NodeTimeout):
        plain.run({})


def test_bad_groups_are_compile_errors() -> None:
    graph = AgentGraph("bad")
    graph.add_node("a", lambda s: None)
    graph.add_parallel_nodes("unknown_member", ["a", "ghost"])
    graph.add_parallel_nodes("empty", [])
    graph.add_edge("unknown_member", "empty")
    graph.add_edge("empty", END)
    graph.set_entry("unknown_member")
    with pytest.raises(GraphBuildError) as caught:
        graph.compile()
    text = str(caught.value)
    assert "ghost" in text
    assert "empty" in text


@pytest.mark.parametrize(
    ("option", "value"),
    [("merge_policy", "last"), ("max_concurrency", 0), ("failure_mode", "sometimes")],
)
def test_bad_group_options_are_refused(option: str, value: Any) -> None:
    graph = AgentGraph("bad")
    graph.add_node("a", lambda s: None)
    with pytest.raises((TypeError, ValueError)) as caught:
        graph.add_parallel_nodes("g", ["a"], **{option: value})
    assert option in str(caught.value)


def test_a_scatter_to_an_unknown_node_is_a_routing_error_before_any_branch_runs() -> None:
    ran: list[str] = []
    graph = AgentGraph("scatter_bad")
    graph.add_node("plan", lambda s: None)
    graph.add_node("work", lambda s: ran.append("work"))
    graph.add_conditional_edge("plan", lambda s: [Scatter("work", {}), Scatter("nowhere", {})])
    graph.add_edge("work", END)
    graph.set_entry("plan")
    with pytest.raises(RoutingError) as caught:
        graph.run({})
    assert "nowhere" in str(caught.value)
    assert ran == []


def test_parallel_events_and_branch_identity() -> None:
    graph = AgentGraph("events")
    graph.add_node("a", lambda s: {"a": 1})
    graph.add_node("b", lambda s: {"b": 1})
    graph.add_parallel_nodes("g", ["a", "b"])
    graph.add_node("w", lambda s: None)
    graph.add_conditional_edge("g", lambda s: [Scatter("w", {"i": i}) for i in range(2)])
    graph.add_edge("w", END)
    graph.set_entry("g")
    events = list(graph.run({}).trace)
    started = [e for e in events if isinstance(e, ParallelStarted)]
    finished = [e for e in events if isinstance(e, ParallelFinished)]
    assert [e.source for e in started] == ["g", "g"]
    assert started[0].branches == ("a", "b")
    assert started[1].branches == ("g[0]", "g[1]")
    assert len(finished) == 2
    inner = [e for e in events if isinstance(e, NodeStarted | NodeFinished) and e.node in "abw"]
    assert {(e.node, e.branch.label) for e in inner if e.branch is not None} == {
        ("a", "a"),
        ("b", "b"),
        ("w", "g[0]"),
        ("w", "g[1]"),
    }
    assert all(e.branch is not None for e in inner)
    outer = [e for e in events if isinstance(e, NodeStarted) and e.node == "g"]
    assert all(e.branch is None for e in outer)


def test_branches_read_the_parents_state_without_copying_it() -> None:
    big = {f"k{i}": i for i in range(10_000)}
    seen: list[Any] = []

    def work(state: GraphState) -> dict[str, Any]:
        layer = state._live.data  # type: ignore[attr-defined]  # the branch's data
        seen.append(layer.base if isinstance(layer, LayeredData) else layer)
        return {"seen": state["k1"] + state["i"]}

    graph = AgentGraph("big", state_schema=_Free)
    graph.add_node("plan", lambda s: None)
    graph.add_node("w", work)
    graph.add_conditional_edge("plan", lambda s: [Scatter("w", {"i": i}) for i in range(100)])
    graph.add_edge("w", END)
    result = graph.run(big)
    # Every branch read through to the one parent dict: nothing was copied per branch.
    assert len(seen) == 100
    assert all(base is result.state.data for base in seen)
    assert result.state["seen"] == 100


def test_a_fan_out_in_a_subgraph_run_by_a_branch_keeps_the_outer_branch_as_parent() -> None:
    leaf = AgentGraph("leaf")
    leaf.add_node("work", lambda s: {})
    leaf.add_edge("work", END)
    mid = AgentGraph("mid")
    mid.add_node("split", lambda s: {})
    mid.add_subgraph("inner", leaf)
    mid.add_conditional_edge("split", lambda s: [Scatter("inner", {}), Scatter("inner", {})])
    mid.add_edge("inner", END)
    outer = AgentGraph("outer")
    outer.add_node("start", lambda s: {})
    outer.add_subgraph("mid", mid)
    outer.add_conditional_edge("start", lambda s: [Scatter("mid", {}), Scatter("mid", {})])
    outer.add_edge("mid", END)
    events: list[Any] = []
    outer.run({}, observers=[events.append])
    chains = {
        tuple((ref.source, ref.index) for ref in event.branch.chain)
        for event in events
        if isinstance(event, NodeStarted) and event.node == "work" and event.branch is not None
    }
    assert chains == {
        (("start", 0), ("split", 0)),
        (("start", 0), ("split", 1)),
        (("start", 1), ("split", 0)),
        (("start", 1), ("split", 1)),
    }


def test_wait_all_with_every_branch_failing_records_each_and_continues_degraded() -> None:
    def bad(state: GraphState) -> None:
        raise ValueError("boom")

    graph = AgentGraph("all_fail")
    graph.add_node("a", bad)
    graph.add_node("b", bad)
    graph.add_parallel_nodes("g", ["a", "b"], failure_mode="wait_all")
    graph.add_node("after", lambda s: {"after": 1})
    graph.add_edge("g", "after")
    graph.add_edge("after", END)
    result = graph.run({})
    assert result.state["after"] == 1
    assert [e["branch"] for e in result.state.errors] == ["a", "b"]
    assert result.quality == "degraded"

    continuing = AgentGraph("all_fail_continue")
    continuing.add_node("a", bad)
    continuing.add_node("b", bad)
    continuing.add_parallel_nodes("g", ["a", "b"], failure_mode="continue_others")
    continuing.add_edge("g", END)
    with pytest.raises(BranchError):  # nothing succeeded: the group fails as a node
        continuing.run({})


def test_a_groups_own_events_share_its_step_and_what_follows_comes_after_its_members() -> None:
    graph = AgentGraph("steps")
    graph.add_node("a", lambda s: {"a": 1})
    graph.add_node("b", lambda s: {"b": 1})
    graph.add_parallel_nodes("g", ["a", "b"])
    graph.add_node("after", lambda s: None)
    graph.add_edge("g", "after")
    graph.add_edge("after", END)
    events = list(graph.run({}).trace)
    own = [
        e for e in events if getattr(e, "node", None) == "g" or getattr(e, "source", None) == "g"
    ]
    assert {e.step for e in own} == {1}
    members = [e for e in events if isinstance(e, NodeStarted) and e.node in ("a", "b")]
    assert {e.step for e in members} == {2}
    after = next(e for e in events if isinstance(e, NodeStarted) and e.node == "after")
    assert after.step == 3


def test_synchronous_subgraphs_in_branches_overlap_under_arun() -> None:
    def nap(state: GraphState) -> dict[str, Any]:
        time.sleep(0.1)
        return {"done": True}

    inner = AgentGraph("inner")
    inner.add_node("nap", nap)
    inner.add_edge("nap", END)
    graph = AgentGraph("outer")
    graph.add_node("plan", lambda s: None)
    graph.add_node("sub", inner)
    graph.add_conditional_edge("plan", lambda s: [Scatter("sub", {"i": i}) for i in range(6)])
    graph.add_edge("sub", END)
    started = time.perf_counter()
    result = asyncio.run(graph.arun({}))
    assert time.perf_counter() - started < 0.1 * 6 / 2  # sequential would take 0.6 s
    assert result.state["done"] is True


async def test_astream_gets_events_emitted_on_worker_threads() -> None:
    inner = AgentGraph("inner")
    inner.add_node("nap", lambda s: time.sleep(0.01))
    inner.add_edge("nap", END)
    graph = AgentGraph("outer")
    graph.add_node("plan", lambda s: None)
    graph.add_node("sub", inner)
    graph.add_conditional_edge("plan", lambda s: [Scatter("sub", {}) for _ in range(4)])
    graph.add_edge("sub", END)
    seen = [event async for event in graph.astream({})]
    inner_starts = [e for e in seen if isinstance(e, NodeStarted) and e.node == "nap"]
    assert len(inner_starts) == 4
    assert {e.branch.label for e in inner_starts if e.branch is not None} == {
        f"plan[{i}]" for i in range(4)
    }
