"""Error policies, retries, step and visit limits, loop and stall detection."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, TypedDict

import pytest

from selectgraph import (
    END,
    AgentGraph,
    ErrorPolicy,
    GraphState,
    LoopAction,
    LoopDetected,
    MaxStepsAction,
    MaxStepsExceeded,
    NodeError,
    RetryPolicy,
    StateValidationError,
    VisitLimitExceeded,
    append,
    goto,
    merge,
)
from selectgraph.core._sentinels import EndType
from selectgraph.observe import LoopDetected as LoopDetectedEvent
from selectgraph.observe import NodeRetried, StallDetected

FAST_RETRY = RetryPolicy(max_retries=3, initial_delay=0.0, max_delay=0.0, jitter=0.0)


class Flaky:
    """Fails ``failures`` times, then returns an update; records the state it saw each time."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls = 0
        self.seen: list[Any] = []

    def __call__(self, state: GraphState) -> dict[str, Any]:
        self.calls += 1
        self.seen.append(state.get("partial"))
        state["partial"] = f"attempt {self.calls}"  # written through the view, then lost on failure
        if self.calls <= self.failures:
            raise ConnectionError(f"transient {self.calls}")
        return {"done": True}


def _single(node: Any, **graph_options: Any) -> AgentGraph:
    graph = AgentGraph("g", **graph_options)
    graph.add_node("a", node, next_node=END)
    graph.set_entry("a")
    return graph


def test_abort_is_the_default_policy() -> None:
    with pytest.raises(NodeError):
        _single(Flaky(1)).run()


def test_retry_policy_retries_with_a_fresh_state_each_attempt() -> None:
    flaky = Flaky(2)
    result = _single(flaky, error_policy=ErrorPolicy.RETRY, retry=FAST_RETRY).run()

    assert flaky.calls == 3
    assert flaky.seen == [None, None, None]  # a failed attempt's writes never reached the state
    assert result.state["done"] is True
    assert result.state["partial"] == "attempt 3"
    assert result.node_results["a"][0].attempts == 3
    assert result.quality == "clean"
    retried = [e for e in result.trace if isinstance(e, NodeRetried)]
    assert [(e.attempt, e.error) for e in retried] == [
        (1, "ConnectionError: transient 1"),
        (2, "ConnectionError: transient 2"),
    ]


def test_retry_gives_up_after_max_retries_and_aborts() -> None:
    flaky = Flaky(10)
    graph = _single(flaky, error_policy=ErrorPolicy.RETRY, retry=FAST_RETRY)

    with pytest.raises(NodeError) as caught:
        graph.run()

    assert flaky.calls == 4
    assert isinstance(caught.value.__cause__, ConnectionError)


def test_retry_waits_with_exponential_backoff() -> None:
    flaky = Flaky(3)
    policy = RetryPolicy(max_retries=3, initial_delay=0.01, multiplier=2.0, max_delay=1.0, jitter=0)
    result = _single(flaky, error_policy=ErrorPolicy.RETRY, retry=policy).run()

    delays = [e.delay_s for e in result.trace if isinstance(e, NodeRetried)]
    assert delays == pytest.approx([0.01, 0.02, 0.04])


def test_retry_only_retries_the_listed_exception_types() -> None:
    flaky = Flaky(1)
    policy = RetryPolicy(max_retries=3, initial_delay=0, jitter=0, retry_on=(TimeoutError,))

    with pytest.raises(NodeError):
        _single(flaky, error_policy=ErrorPolicy.RETRY, retry=policy).run()
    assert flaky.calls == 1


def test_error_retry_limit_is_shorthand_for_a_retry_policy() -> None:
    flaky = Flaky(10)
    graph = _single(flaky, error_policy=ErrorPolicy.RETRY, error_retry_limit=1)

    assert graph.compile().settings.retry.max_retries == 1
    with pytest.raises(NodeError):
        graph.run()
    assert flaky.calls == 2


async def test_async_nodes_are_retried_too() -> None:
    calls = 0

    async def flaky(state: GraphState) -> dict[str, Any]:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0)
        if calls < 2:
            raise ConnectionError("once")
        return {"ok": True}

    graph = _single(flaky, error_policy=ErrorPolicy.RETRY, retry=FAST_RETRY)
    result = await graph.arun()

    assert calls == 2
    assert result.state["ok"] is True


def test_per_node_policy_overrides_the_graph_policy() -> None:
    flaky = Flaky(1)
    graph = AgentGraph("g", error_policy=ErrorPolicy.ABORT)
    graph.add_node("a", flaky, error_policy=ErrorPolicy.RETRY, retry=FAST_RETRY, next_node=END)
    graph.set_entry("a")

    assert graph.run().state["done"] is True


def test_skip_records_the_error_and_continues_along_success_edges() -> None:
    def boom(state: GraphState) -> dict[str, Any]:
        raise ValueError("bad input")

    graph = AgentGraph("g", error_policy=ErrorPolicy.SKIP)
    graph.add_node("a", boom, next_node="b")
    graph.add_node("b", lambda s: {"b": True}, next_node=END)
    graph.set_entry("a")

    result = graph.run()

    assert result.node_order == ["a", "b"]
    assert result.state["b"] is True
    assert result.quality == "degraded"
    (error,) = result.state.errors
    assert (error["node"], error["step"], error["type"], error["error"]) == (
        "a",
        1,
        "ValueError",
        "bad input",
    )
    assert result.node_results["a"][0].outcome == "skipped"


def test_on_failure_edge_routes_to_recovery_before_skip_or_abort() -> None:
    def boom(state: GraphState) -> dict[str, Any]:
        raise ValueError("down")

    graph = AgentGraph("g")
    graph.add_node("fetch", boom)
    graph.add_node("cache", lambda s: {"source": "cache"}, next_node=END)
    graph.add_node("use", lambda s: {"source": "live"}, next_node=END)
    graph.add_edge("fetch", "use")
    graph.add_edge("fetch", "cache", on="failure")
    graph.set_entry("fetch")

    result = graph.run()

    assert result.node_order == ["fetch", "cache"]
    assert result.state["source"] == "cache"
    assert result.quality == "degraded"
    assert result.state.errors[0]["handled_by"] == "on_failure edge"
    assert result.node_results["fetch"][0].outcome == "failure"


def test_on_failure_applies_after_retries_are_exhausted() -> None:
    flaky = Flaky(10)
    graph = AgentGraph("g", error_policy=ErrorPolicy.RETRY, retry=FAST_RETRY)
    graph.add_node("a", flaky, next_node=END)
    graph.add_node("recover", lambda s: {"recovered": True}, next_node=END)
    graph.add_edge("a", "recover", on="failure")
    graph.set_entry("a")

    result = graph.run()

    assert flaky.calls == 4
    assert result.state["recovered"] is True
    assert result.state.errors[0]["attempts"] == 4


def _loop(**graph_options: Any) -> AgentGraph:
    graph = AgentGraph("g", **graph_options)
    graph.add_node("n", lambda s: {"i": s.get("i", 0) + 1})
    graph.add_edge("n", "n")
    graph.set_entry("n")
    return graph


def test_max_steps_returns_last_state_by_default_and_reports_the_cut() -> None:
    result = _loop(max_steps=5).run()

    assert result.steps == 5
    assert result.state["i"] == 5
    assert result.stop_reason == "max_steps"
    # A run cut off before END never looks clean.
    assert result.max_steps_reached is True
    assert result.quality == "degraded"


def test_the_default_max_steps_of_50_is_reported_too() -> None:
    result = _loop().run()

    assert (result.steps, result.stop_reason) == (50, "max_steps")
    assert result.max_steps_reached is True
    assert result.quality == "degraded"
    assert result.trace[-1].quality == "degraded"  # type: ignore[attr-defined]


def test_max_steps_return_with_flag_also_flags_the_state_itself() -> None:
    result = _loop(max_steps=5, on_max_steps=MaxStepsAction.RETURN_WITH_FLAG).run()

    assert result.max_steps_reached is True
    assert result.quality == "degraded"
    assert result.state.metadata == {"max_steps_reached": True}
    # RETURN_LAST reports the cut on the result only: the state is as the nodes left it.
    assert _loop(max_steps=5).run().state.metadata == {}


def test_a_flagged_state_reaches_the_parent_graph() -> None:
    inner = _loop(max_steps=3, on_max_steps=MaxStepsAction.RETURN_WITH_FLAG)
    outer = AgentGraph("outer")
    outer.add_node("inner", inner, next_node=END)

    assert outer.run({}).state.metadata.get("max_steps_reached") is True


def test_max_steps_throw_raises_with_the_partial_result() -> None:
    with pytest.raises(MaxStepsExceeded) as caught:
        _loop(max_steps=5, on_max_steps=MaxStepsAction.THROW).run()

    assert caught.value.state is not None
    assert caught.value.state["i"] == 5
    assert caught.value.result is not None
    assert caught.value.result.stop_reason == "max_steps"


def test_max_steps_none_means_no_limit() -> None:
    graph = AgentGraph("g", max_steps=None)
    graph.add_node("n", lambda s: {"i": s.get("i", 0) + 1})
    graph.add_edge("n", "n", condition="i < 200")
    graph.add_edge("n", END)
    graph.set_entry("n")

    assert graph.run().steps == 200


def test_max_visits_fails_the_node_so_failure_edges_apply() -> None:
    graph = AgentGraph("g")
    graph.add_node("draft", lambda s: {"n": s.get("n", 0) + 1}, max_visits=3)
    graph.add_edge("draft", "draft")
    graph.add_node("give_up", lambda s: {"gave_up": True}, next_node=END)
    graph.add_edge("draft", "give_up", on="failure")
    graph.set_entry("draft")

    result = graph.run()

    assert result.node_order == ["draft"] * 4 + ["give_up"]
    assert result.state["n"] == 3
    assert result.state.errors[0]["type"] == "VisitLimitExceeded"


def test_max_visits_without_a_failure_edge_raises() -> None:
    graph = AgentGraph("g")
    graph.add_node("draft", lambda s: {"n": s.get("n", 0) + 1}, max_visits=2)
    graph.add_edge("draft", "draft")
    graph.set_entry("draft")

    with pytest.raises(VisitLimitExceeded, match="max_visits=2"):
        graph.run()


def _ping_pong(**graph_options: Any) -> AgentGraph:
    # Deterministic and stateless: a and b hand control back and forth forever.
    graph = AgentGraph("g", max_steps=100, **graph_options)
    graph.add_node("a", lambda s: {"turn": "b"}, next_node="b")
    graph.add_node("b", lambda s: {"turn": "a"}, next_node="a")
    graph.set_entry("a")
    return graph


def test_loop_detection_raises_on_an_identical_revisit() -> None:
    with pytest.raises(LoopDetected) as caught:
        _ping_pong().run()

    error = caught.value
    # Tracking starts at the first revisit (step 3), and the state it then holds
    # is a baseline token, so the repeat is proven at b's second tracked visit.
    assert error.node == "b"
    assert error.result is not None
    assert error.result.loops_detected == 1
    assert error.result.stop_reason == "loop"
    assert error.result.steps == 5


def test_loop_detection_stop_returns_the_result() -> None:
    result = _ping_pong(on_loop=LoopAction.STOP).run()

    assert result.stop_reason == "loop"
    assert result.loops_detected == 1
    assert result.quality == "degraded"
    events = [e for e in result.trace if isinstance(e, LoopDetectedEvent)]
    assert [(e.node, e.first_step) for e in events] == [("b", 4)]
    assert result.node_order == ["a", "b", "a", "b", "a"]


def test_loop_detection_warn_counts_and_continues() -> None:
    result = _ping_pong(on_loop=LoopAction.WARN, stall_threshold=None).run()

    assert result.stop_reason == "max_steps"
    assert result.loops_detected > 10


def test_loop_detection_ignores_loops_that_make_progress() -> None:
    result = _loop(max_steps=50).run()

    assert result.loops_detected == 0


def test_loop_detection_sees_a_value_that_returns_to_an_earlier_one() -> None:
    # x toggles 0,1,0,1...: the state repeats although every step writes.
    graph = AgentGraph("g", max_steps=50, on_loop=LoopAction.STOP)
    graph.add_node("t", lambda s: {"x": 1 - s.get("x", 0)}, next_node="t")
    graph.set_entry("t")

    result = graph.run({"x": 0})

    assert result.stop_reason == "loop"
    assert result.steps < 10


class Tally(TypedDict):
    seen: Annotated[list[int], append]
    totals: Annotated[dict[str, int], merge]
    turn: int


def test_loop_detection_follows_fields_merged_by_reducers() -> None:
    # Every step appends: the list grows, so no state repeats.
    growing = AgentGraph("g", state_schema=Tally, max_steps=30, on_loop=LoopAction.STOP)
    growing.add_node("t", lambda s: {"seen": [1], "turn": 1 - s["turn"]}, next_node="t")
    growing.set_entry("t")
    assert growing.run({"seen": [], "totals": {}, "turn": 0}).stop_reason == "max_steps"

    # Merging the same entry again changes nothing: the toggle repeats the state.
    settled = AgentGraph("g", state_schema=Tally, max_steps=30, on_loop=LoopAction.STOP)
    settled.add_node("t", lambda s: {"totals": {"a": 1}, "turn": 1 - s["turn"]}, next_node="t")
    settled.set_entry("t")
    result = settled.run({"seen": [], "totals": {}, "turn": 0})
    assert result.stop_reason == "loop"
    assert result.state["totals"] == {"a": 1}


def test_an_unknown_key_beside_a_reducer_key_fails_and_leaves_the_state_alone() -> None:
    graph = AgentGraph("g", state_schema=Tally, max_steps=5)
    graph.add_node("t", lambda s: {"seen": [7], "bogus": 1}, next_node=END)
    graph.set_entry("t")

    with pytest.raises(StateValidationError, match="'bogus'") as caught:
        graph.run({"seen": [1], "totals": {}, "turn": 0})

    assert "'t'" in str(caught.value)


def test_loop_detection_can_be_disabled() -> None:
    result = _ping_pong(enable_loop_detection=False, stall_threshold=None).run()

    assert result.stop_reason == "max_steps"
    assert result.loops_detected == 0


def test_stall_detection_fires_after_threshold_unchanged_steps() -> None:
    graph = AgentGraph("g", max_steps=12, enable_loop_detection=False, stall_threshold=3)
    graph.add_node("idle", lambda s: None, next_node="idle")
    graph.set_entry("idle")

    result = graph.run()

    stalls = [e for e in result.trace if isinstance(e, StallDetected)]
    assert result.stalls == len(stalls) == 4  # steps 3, 6, 9 and 12
    assert [e.step for e in stalls] == [3, 6, 9, 12]
    assert all(e.unchanged_steps == 3 for e in stalls)


def test_stall_detection_resets_when_the_state_changes() -> None:
    graph = AgentGraph("g", max_steps=12, enable_loop_detection=False, stall_threshold=3)
    # Changes the state every other step, so never three unchanged steps in a row.
    graph.add_node("n", lambda s: {"i": s.get("i", 0) + 1} if s.get("flip") else None)
    graph.add_node("flip", lambda s: {"flip": not s.get("flip", False)})
    graph.add_edge("n", "flip")
    graph.add_edge("flip", "n")
    graph.set_entry("n")

    assert graph.run().stalls == 0


def test_a_straight_chain_of_nodes_that_change_nothing_stalls() -> None:
    result = AgentGraph.chain(lambda s: None, lambda s: {}, lambda s: None, lambda s: None).run()

    # Four no-op steps in a row, no node revisited: a stall after the third.
    stalls = [e for e in result.trace if isinstance(e, StallDetected)]
    assert [(e.step, e.node, e.unchanged_steps) for e in stalls] == [(3, "step_3", 3)]
    assert result.stalls == 1
    assert result.loops_detected == 0


def test_a_chain_that_rewrites_the_same_object_stalls_but_a_new_value_does_not() -> None:
    same = AgentGraph.chain(*[lambda s: {"x": s["x"]}] * 3).run({"x": [1, 2]})
    new = AgentGraph.chain(*[lambda s: {"x": [*s["x"], 0]}] * 3).run({"x": [1, 2]})

    assert (same.stalls, new.stalls) == (1, 0)


def test_a_chain_whose_router_writes_is_not_a_stall() -> None:
    graph = AgentGraph("g")
    names: list[str | EndType] = ["a", "b", "c", "d"]

    def hop_to(after: str | EndType) -> Any:
        return lambda s: goto(after, update={"hops": s.get("hops", 0) + 1})

    for name, after in zip(names, [*names[1:], END], strict=True):
        assert isinstance(name, str)
        graph.add_node(name, lambda s: None)
        graph.add_conditional_edge(name, hop_to(after))

    assert graph.run().stalls == 0


def test_loop_detection_costs_nothing_until_a_node_repeats() -> None:
    result = AgentGraph.chain(lambda s: None, lambda s: None).run()

    assert result.loops_detected == 0
    assert result.stalls == 0
