"""Routing through real graphs: static, conditional, router, goto and failure edges."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Annotated, Any, TypedDict

import pytest

from selectgraph import (
    END,
    AgentGraph,
    EdgeError,
    GraphResult,
    GraphState,
    NodeError,
    RoutingError,
    append,
    goto,
    update,
)
from selectgraph.core._sentinels import EndType
from selectgraph.graph import Directive
from selectgraph.observe import EdgeFired

# --------------------------------------------------------------------------- helpers


class Recorder:
    """Node functions that record that they ran."""

    def __init__(self) -> None:
        self.ran: list[str] = []

    def node(self, name: str, **writes: Any) -> Callable[[GraphState], dict[str, Any]]:
        def run(state: GraphState) -> dict[str, Any]:
            self.ran.append(name)
            return dict(writes)

        run.__name__ = name
        return run


def noop(state: GraphState) -> None:
    return None


def fail(state: GraphState) -> None:
    raise ValueError("kaput")


def fired(result: GraphResult) -> list[tuple[str, str | EndType, str, str]]:
    """``(source, target, kind, label)`` of every EdgeFired event of the run."""
    return [
        (e.source, e.target, e.kind, e.label)
        for e in result.trace
        if isinstance(e, EdgeFired) and not e.namespace
    ]


def with_router(
    router: Callable[[GraphState], Any],
    path_map: Mapping[Hashable, str | EndType] | Sequence[str | EndType] | None = None,
    first: Callable[[GraphState], Any] | None = None,
) -> tuple[AgentGraph, Recorder]:
    """``start`` (writes x=1) routed by ``router`` to ``left`` / ``right`` / END."""
    recorder = Recorder()
    graph = AgentGraph("routed")
    # destinations keep both branches reachable whatever the path_map says.
    graph.add_node("start", first or recorder.node("start", x=1), destinations=["left", "right"])
    graph.add_node("left", recorder.node("left", side="left"), next_node=END)
    graph.add_node("right", recorder.node("right", side="right"), next_node=END)
    graph.add_conditional_edge("start", router, path_map)
    graph.set_entry("start")
    return graph, recorder


def conditional(*conditions: tuple[str, str | Callable[[GraphState], Any]]) -> AgentGraph:
    """``start`` with edges ``(target, condition)`` in order, plus a fallback to ``other``."""
    recorder = Recorder()
    graph = AgentGraph("cond")
    graph.add_node("start", noop)
    for target in dict.fromkeys([*(target for target, _ in conditions), "other"]):
        graph.add_node(target, recorder.node(target, went=target), next_node=END)
    for target, condition in conditions:
        graph.add_edge("start", target, condition=condition)
    graph.add_edge("start", "other")
    graph.set_entry("start")
    return graph


# ---------------------------------------------------------------------- static edges


def test_static_edge_runs_its_target_next() -> None:
    recorder = Recorder()
    graph = AgentGraph("g")
    graph.add_node("a", recorder.node("a"))
    graph.add_node("b", recorder.node("b"))
    graph.add_edge("a", "b")
    graph.add_edge("b", END)
    graph.set_entry("a")

    result = graph.run()

    assert recorder.ran == ["a", "b"]
    assert result.fired_edges == [("a", "b"), ("b", END)]
    assert result.stop_reason == "end"


def test_next_node_declares_the_same_edge_as_add_edge() -> None:
    by_keyword = AgentGraph("g")
    by_keyword.add_node("a", noop, next_node="b")
    by_keyword.add_node("b", noop, next_node=END)
    by_keyword.set_entry("a")
    by_edge = AgentGraph("g")
    by_edge.add_node("a", noop)
    by_edge.add_node("b", noop)
    by_edge.add_edge("a", "b")
    by_edge.add_edge("b", END)
    by_edge.set_entry("a")

    assert by_keyword.compile().edges == by_edge.compile().edges


def test_static_edge_fires_as_kind_static() -> None:
    graph = AgentGraph("g")
    graph.add_node("a", noop, next_node=END)
    graph.set_entry("a")

    assert fired(graph.run()) == [("a", END, "static", "")]


def test_static_edge_label_is_reported_on_edge_fired() -> None:
    graph = AgentGraph("g")
    graph.add_node("a", noop)
    graph.add_edge("a", END, label="done")
    graph.set_entry("a")

    assert fired(graph.run()) == [("a", END, "static", "done")]


# ----------------------------------------------------------------- conditional edges


def test_true_condition_takes_its_edge() -> None:
    graph = conditional(("high", "score >= 8"))

    result = graph.run({"score": 9})

    assert result.node_order == ["start", "high"]
    assert fired(result)[0] == ("start", "high", "condition", "score >= 8")


def test_false_condition_falls_back_to_the_unconditional_edge() -> None:
    graph = conditional(("high", "score >= 8"))

    result = graph.run({"score": 3})

    assert result.node_order == ["start", "other"]
    assert fired(result)[0] == ("start", "other", "static", "")


def test_conditions_are_tried_in_declaration_order_and_the_first_match_wins() -> None:
    graph = conditional(("low", "score > 1"), ("high", "score > 5"))

    assert graph.run({"score": 9}).node_order == ["start", "low"]


def test_later_condition_matches_when_earlier_ones_do_not() -> None:
    graph = conditional(("high", "score > 5"), ("low", "score > 1"))

    assert graph.run({"score": 3}).node_order == ["start", "low"]


def test_fallback_declared_first_is_still_tried_last() -> None:
    graph = AgentGraph("g")
    graph.add_node("start", noop)
    graph.add_node("high", noop, next_node=END)
    graph.add_node("other", noop, next_node=END)
    graph.add_edge("start", "other")
    graph.add_edge("start", "high", condition="score > 5")
    graph.set_entry("start")

    assert graph.run({"score": 9}).node_order == ["start", "high"]
    assert graph.run({"score": 1}).node_order == ["start", "other"]


def test_condition_may_subscript_a_state_key() -> None:
    graph = conditional(("high", "scores['math'] >= 8 and 'urgent' in tags"))

    result = graph.run({"scores": {"math": 9}, "tags": ["urgent"]})

    assert result.node_order == ["start", "high"]


def test_condition_is_evaluated_on_the_state_after_the_node_merged() -> None:
    graph = AgentGraph("g")
    graph.add_node("start", lambda state: {"score": 10})
    graph.add_node("high", noop, next_node=END)
    graph.add_node("other", noop, next_node=END)
    graph.add_edge("start", "high", condition="score > 5")
    graph.add_edge("start", "other")
    graph.set_entry("start")

    assert graph.run({"score": 0}).node_order == ["start", "high"]


def test_custom_label_replaces_the_condition_text_on_edge_fired() -> None:
    graph = AgentGraph("g")
    graph.add_node("start", noop)
    graph.add_node("high", noop, next_node=END)
    graph.add_edge("start", "high", condition="score > 5", label="good enough")
    graph.add_edge("start", END)
    graph.set_entry("start")

    assert fired(graph.run({"score": 9}))[0] == ("start", "high", "condition", "good enough")


def is_high(state: GraphState) -> bool:
    return bool(state["score"] > 5)


async def is_high_async(state: GraphState) -> bool:
    return bool(state["score"] > 5)


def test_predicate_condition_takes_its_edge_and_is_labelled_by_name() -> None:
    graph = conditional(("high", is_high))

    result = graph.run({"score": 9})

    assert result.node_order == ["start", "high"]
    assert fired(result)[0] == ("start", "high", "condition", "is_high")


def test_false_predicate_falls_back() -> None:
    graph = conditional(("high", is_high))

    assert graph.run({"score": 1}).node_order == ["start", "other"]


def test_async_predicate_works_with_the_blocking_run() -> None:
    graph = conditional(("high", is_high_async))

    assert graph.compile().is_async
    assert graph.run({"score": 9}).node_order == ["start", "high"]


async def test_async_predicate_works_with_arun() -> None:
    graph = conditional(("high", is_high_async), ("low", "score > 0"))

    result = await graph.arun({"score": 2})

    assert result.node_order == ["start", "low"]


def test_predicates_and_expressions_mix_in_declaration_order() -> None:
    graph = conditional(("low", "score > 0"), ("high", is_high))

    assert graph.run({"score": 9}).node_order == ["start", "low"]


def test_no_match_and_no_fallback_raises_routing_error_listing_the_edges_tried() -> None:
    recorder = Recorder()
    graph = AgentGraph("g")
    graph.add_node("start", recorder.node("start", x=1))
    graph.add_node("high", recorder.node("high"), next_node=END)
    graph.add_edge("start", "high", condition="score > 5")
    graph.add_edge("start", END, condition=is_high)
    graph.set_entry("start")

    with pytest.raises(RoutingError) as info:
        graph.run({"score": 1})

    error = info.value
    assert recorder.ran == ["start"]
    assert error.node == "start"
    assert error.category == "routing_error"
    assert "no edge matched after node 'start'" in str(error)
    assert "edges tried: start -> high [score > 5]; start -> END [is_high]" in str(error)
    assert error.state is not None
    assert error.state.data == {"score": 1, "x": 1}
    assert error.result is not None
    assert error.result.quality == "failed"


def test_condition_naming_a_missing_key_raises_edge_error_saying_so() -> None:
    graph = conditional(("high", "missing > 5"))

    with pytest.raises(EdgeError) as info:
        graph.run({"score": 1})

    assert "condition 'missing > 5' on edge start -> high [missing > 5]" in str(info.value)
    assert "state has no key 'missing'" in str(info.value)
    assert isinstance(info.value.__cause__, KeyError)
    assert info.value.category == "edge_exception"


def test_missing_key_is_reported_when_there_is_no_fallback_too() -> None:
    graph = AgentGraph("g")
    graph.add_node("start", noop)
    graph.add_edge("start", END, condition="missing == 1")
    graph.add_edge("start", END, condition=is_high)
    graph.set_entry("start")

    with pytest.raises(EdgeError, match=r"state has no key 'missing'"):
        graph.run({"score": 1})


def test_predicate_that_raises_becomes_edge_error_with_its_cause() -> None:
    def broken(state: GraphState) -> bool:
        raise ZeroDivisionError("no")

    graph = conditional(("high", broken))

    with pytest.raises(EdgeError) as info:
        graph.run({"score": 1})

    assert "condition 'broken' on edge start -> high [broken] failed" in str(info.value)
    assert "ZeroDivisionError: no" in str(info.value)
    assert isinstance(info.value.__cause__, ZeroDivisionError)
    assert info.value.node == "start"


def test_edge_error_stops_the_run_before_any_further_node() -> None:
    graph = conditional(("high", "missing > 5"))

    with pytest.raises(EdgeError) as info:
        graph.run({"score": 1})

    assert info.value.result is not None
    assert info.value.result.node_order == ["start"]


# --------------------------------------------------------------------------- routers


def route_by_side(state: GraphState) -> str:
    return str(state["side_wanted"])


def test_router_returning_a_node_name_routes_there() -> None:
    graph, recorder = with_router(route_by_side)

    result = graph.run({"side_wanted": "right"})

    assert recorder.ran == ["start", "right"]
    assert fired(result)[0] == ("start", "right", "router", "route_by_side")


def test_router_returning_end_stops_the_run() -> None:
    graph, recorder = with_router(lambda state: END)

    result = graph.run()

    assert recorder.ran == ["start"]
    assert result.fired_edges == [("start", END)]
    assert result.stop_reason == "end"


def test_router_returning_a_dict_path_map_key_goes_to_its_node() -> None:
    graph, recorder = with_router(lambda state: "go-left", {"go-left": "left", "stop": END})

    graph.run()

    assert recorder.ran == ["start", "left"]


def test_router_returning_a_path_map_key_that_means_end_stops() -> None:
    graph, recorder = with_router(lambda state: "stop", {"go-left": "left", "stop": END})

    graph.run()

    assert recorder.ran == ["start"]


def test_router_with_a_list_path_map_returns_node_names() -> None:
    graph, recorder = with_router(lambda state: "right", ["left", "right"])

    graph.run()

    assert recorder.ran == ["start", "right"]


@pytest.mark.parametrize(("approved", "expected"), [(True, "left"), (False, "right")])
def test_router_returning_a_bool_uses_bool_path_map_keys(approved: bool, expected: str) -> None:
    graph, recorder = with_router(
        lambda state: state["approved"] is True, {True: "left", False: "right"}
    )

    graph.run({"approved": approved})

    assert recorder.ran == ["start", expected]


def test_router_returning_a_value_outside_its_path_map_raises_routing_error() -> None:
    graph, recorder = with_router(lambda state: "left", {"go-left": "left"})

    with pytest.raises(RoutingError) as info:
        graph.run()

    assert "returned 'left', which is not in its path_map (allowed: 'go-left')" in str(info.value)
    assert recorder.ran == ["start"]


def test_router_returning_an_unknown_node_raises_routing_error_naming_it() -> None:
    graph, recorder = with_router(lambda state: "nowhere")

    with pytest.raises(RoutingError) as info:
        graph.run()

    error = info.value
    assert "returned 'nowhere', which is not a node of this graph or END" in str(error)
    assert "nodes: left, right, start" in str(error)
    assert error.node == "start"
    assert recorder.ran == ["start"]


def test_routing_error_keeps_the_state_for_recovery() -> None:
    graph, _ = with_router(lambda state: "nowhere")

    with pytest.raises(RoutingError) as info:
        graph.run({"y": 2})

    error = info.value
    assert error.state is not None
    assert error.state.data == {"y": 2, "x": 1}
    assert error.result is not None
    assert error.result.node_order == ["start"]
    assert error.result.stop_reason == "error"


def test_router_returning_the_string_end_gets_a_hint() -> None:
    graph, _ = with_router(lambda state: "END")

    with pytest.raises(RoutingError, match=r"did you mean selectgraph\.END\?"):
        graph.run()


def test_router_returning_update_without_target_applies_it_and_ends_the_run() -> None:
    graph, _recorder = with_router(lambda state: update(x=2))

    result = graph.run()

    assert result.stop_reason == "end"
    assert result.state["x"] == 2
    assert [name for name, _ in result.state.history] == ["start"]
    fired = [e for e in result.trace if isinstance(e, EdgeFired)]
    assert [(e.source, e.target, e.kind) for e in fired] == [("start", END, "router")]


def test_router_update_without_target_after_unmatched_conditions_ends_the_run() -> None:
    graph = AgentGraph("routed")
    graph.add_node("start", lambda s: {"x": 1})
    graph.add_node("never", lambda s: None, next_node=END)
    graph.add_edge("start", "never", condition="x > 5")
    graph.add_conditional_edge("start", lambda s: update(revisions=s.get("revisions", 0) + 1))

    result = graph.run()

    assert result.stop_reason == "end"
    assert result.state["revisions"] == 1
    assert result.steps == 1


def _sync_router_returning_a_coroutine(state: GraphState) -> Any:
    return async_router(state)  # forgot to await, or a plain def around an async call


def test_a_plain_router_returning_a_coroutine_is_an_edge_error_naming_the_edge() -> None:
    graph, _ = with_router(_sync_router_returning_a_coroutine)

    # filterwarnings=error turns a "coroutine was never awaited" warning into a failure.
    with pytest.raises(EdgeError) as info:
        graph.run()

    assert "_sync_router_returning_a_coroutine" in str(info.value)
    assert "coroutine" in str(info.value)
    assert "async def" in str(info.value)
    assert info.value.node == "start"
    assert info.value.state is not None
    assert info.value.state["x"] == 1


async def test_a_plain_predicate_returning_a_coroutine_is_an_edge_error_with_arun() -> None:
    graph = AgentGraph("g")
    graph.add_node("start", lambda s: {"level": 9})
    graph.add_node("high", lambda s: None, next_node=END)
    graph.add_edge("start", "high", condition=lambda s: is_high_async(s))
    graph.add_edge("start", END)

    with pytest.raises(EdgeError, match="returned coroutine") as info:
        await graph.arun()

    assert info.value.state is not None


def test_router_unhashable_return_with_path_map_raises_routing_error() -> None:
    graph, _ = with_router(lambda state: {"to": "left"}, {"left": "left"})

    with pytest.raises(RoutingError, match=r"returned unhashable \{'to': 'left'\}"):
        graph.run()


class Tally(TypedDict, total=False):
    items: Annotated[list[str], append]
    seen: list[str]
    side: str


def test_router_goto_update_is_merged_through_reducers_before_the_next_node() -> None:
    def router(state: GraphState) -> Directive:
        return goto("left", {"items": ["from router"]})

    def left(state: GraphState) -> dict[str, Any]:
        return {"seen": list(state["items"])}

    graph = AgentGraph("g", state_schema=Tally)
    graph.add_node("start", lambda state: {"items": ["from start"]})
    graph.add_node("left", left, next_node=END)
    graph.add_conditional_edge("start", router, ["left"])
    graph.set_entry("start")

    result = graph.run({"items": ["input"]})

    assert result.state.data["seen"] == ["input", "from start", "from router"]
    assert fired(result)[0] == ("start", "left", "router", "router")


def test_router_goto_may_target_any_path_map_destination() -> None:
    graph, recorder = with_router(lambda state: goto("right"), {"r": "right", "l": "left"})

    graph.run()

    assert recorder.ran == ["start", "right"]


def test_router_goto_outside_its_path_map_targets_raises_routing_error() -> None:
    graph, recorder = with_router(lambda state: goto("right"), {"l": "left"})

    with pytest.raises(RoutingError, match=r"goto\('right'\), which is not among its path_map"):
        graph.run()

    assert recorder.ran == ["start"]


async def async_router(state: GraphState) -> str:
    return "right"


def test_async_router_routes_with_the_blocking_run() -> None:
    graph, recorder = with_router(async_router, ["left", "right"])

    result = graph.run()

    assert recorder.ran == ["start", "right"]
    assert fired(result)[0] == ("start", "right", "router", "async_router")


async def test_async_router_routes_with_arun() -> None:
    graph, recorder = with_router(async_router, ["left", "right"])

    await graph.arun()

    assert recorder.ran == ["start", "right"]


def test_router_that_raises_becomes_edge_error_naming_the_edge() -> None:
    def picky(state: GraphState) -> str:
        raise LookupError("cannot decide")

    graph, recorder = with_router(picky, ["left"])

    with pytest.raises(EdgeError) as info:
        graph.run()

    error = info.value
    assert error.category == "edge_exception"
    assert "router 'picky' on edge start -> router picky failed" in str(error)
    assert "LookupError: cannot decide" in str(error)
    assert isinstance(error.__cause__, LookupError)
    assert error.node == "start"
    assert recorder.ran == ["start"]


def test_async_router_that_raises_becomes_edge_error_with_its_cause() -> None:
    async def picky(state: GraphState) -> str:
        raise LookupError("cannot decide")

    graph, _ = with_router(picky, ["left"])

    with pytest.raises(EdgeError) as info:
        graph.run()

    assert isinstance(info.value.__cause__, LookupError)


def test_a_router_s_write_is_merged_before_the_next_node_runs() -> None:
    def meddler(state: GraphState) -> str:
        state.data["x"] = 99  # seed 004's routers write their state
        return "left"

    graph, recorder = with_router(meddler, ["left"])

    result = graph.run()

    assert result.state.data["x"] == 99
    assert recorder.ran == ["start", "left"]


def test_a_router_that_deletes_a_key_fails_with_the_state_untouched() -> None:
    def meddler(state: GraphState) -> str:
        del state.data["x"]
        return "left"

    graph, _ = with_router(meddler, ["left"])

    with pytest.raises(EdgeError) as info:
        graph.run()

    assert info.value.state is not None
    assert info.value.state.data["x"] == 1


def test_conditions_are_tried_before_the_router() -> None:
    graph, recorder = with_router(lambda state: "right", ["right"])
    graph.add_edge("start", "left", condition="x == 1")

    graph.run()

    assert recorder.ran == ["start", "left"]


# ------------------------------------------------------------------ goto() from nodes


def test_node_goto_overrides_its_edges() -> None:
    recorder = Recorder()
    graph = AgentGraph("g")
    graph.add_node("a", lambda state: goto("c", {"x": 1}), next_node="b", destinations=["c"])
    graph.add_node("b", recorder.node("b"), next_node=END)
    graph.add_node("c", recorder.node("c"), next_node=END)
    graph.set_entry("a")

    result = graph.run()

    assert recorder.ran == ["c"]
    assert result.state.data == {"x": 1}
    assert fired(result) == [("a", "c", "goto", ""), ("c", END, "static", "")]


def test_node_goto_end_stops_the_run() -> None:
    recorder = Recorder()
    graph = AgentGraph("g")
    graph.add_node("a", lambda state: goto(END), next_node="b")
    graph.add_node("b", recorder.node("b"), next_node=END)
    graph.set_entry("a")

    result = graph.run()

    assert recorder.ran == []
    assert result.fired_edges == [("a", END)]


def test_node_goto_to_an_unknown_node_raises_routing_error() -> None:
    graph = AgentGraph("g")
    graph.add_node("a", lambda state: goto("ghost"), next_node=END)
    graph.set_entry("a")

    with pytest.raises(RoutingError) as info:
        graph.run()

    assert "node 'a' returned goto('ghost'), which is not a node of this graph" in str(info.value)
    assert info.value.node == "a"


def test_node_goto_outside_its_declared_destinations_raises_routing_error() -> None:
    recorder = Recorder()
    graph = AgentGraph("g")
    graph.add_node("a", lambda state: goto("c"), destinations=["b"])
    graph.add_node("b", recorder.node("b"), next_node=END)
    graph.add_node("c", recorder.node("c"), next_node=END)
    graph.add_edge("a", "c", condition="never == 1")
    graph.set_entry("a")

    with pytest.raises(RoutingError) as info:
        graph.run()

    assert "returned goto('c') but declares destinations=['b']" in str(info.value)
    assert recorder.ran == []


def test_node_update_directive_writes_and_follows_the_edges() -> None:
    graph = AgentGraph("g")
    graph.add_node("a", lambda state: update(score=9))
    graph.add_node("high", noop, next_node=END)
    graph.add_edge("a", "high", condition="score > 5")
    graph.add_edge("a", END)
    graph.set_entry("a")

    result = graph.run()

    assert result.node_order == ["a", "high"]
    assert result.state.data == {"score": 9}


# ------------------------------------------------------------------- failure routing


def recovering_graph(recorder: Recorder, first: Callable[[GraphState], Any]) -> AgentGraph:
    graph = AgentGraph("g")
    graph.add_node("work", first, next_node="done")
    graph.add_node("done", recorder.node("done"), next_node=END)
    graph.add_node("recover", recorder.node("recover", recovered=True), next_node=END)
    graph.add_edge("work", "recover", on="failure")
    graph.set_entry("work")
    return graph


def test_failure_edge_routes_a_failed_node_to_recovery() -> None:
    recorder = Recorder()

    result = recovering_graph(recorder, fail).run()

    assert recorder.ran == ["recover"]
    assert result.state.data == {"recovered": True}
    assert result.fired_edges == [("work", "recover"), ("recover", END)]


def test_run_routed_through_a_failure_edge_is_degraded() -> None:
    result = recovering_graph(Recorder(), fail).run()

    assert result.quality == "degraded"
    assert result.stop_reason == "end"


def test_failure_routed_by_an_edge_is_recorded_in_state_errors() -> None:
    result = recovering_graph(Recorder(), fail).run()

    assert len(result.state.errors) == 1
    record = result.state.errors[0]
    assert record["node"] == "work"
    assert record["type"] == "ValueError"
    assert record["error"] == "kaput"
    assert record["handled_by"] == "on_failure edge"
    assert result.node_results["work"][0].outcome == "failure"


def test_failure_edge_is_not_taken_on_success() -> None:
    recorder = Recorder()

    result = recovering_graph(recorder, noop).run()

    assert recorder.ran == ["done"]
    assert result.quality == "clean"
    assert result.state.errors == []


def test_node_failure_without_failure_edge_raises_node_error() -> None:
    graph = AgentGraph("g")
    graph.add_node("work", fail, next_node=END)
    graph.set_entry("work")

    with pytest.raises(NodeError) as info:
        graph.run()

    assert isinstance(info.value.__cause__, ValueError)


def test_failure_edges_may_be_conditional() -> None:
    recorder = Recorder()
    graph = recovering_graph(recorder, fail)
    graph.add_node("retry_later", recorder.node("retry_later"), next_node=END)
    graph.add_edge("work", "retry_later", condition="attempts_left > 0", on="failure")

    graph.run({"attempts_left": 1})

    assert recorder.ran == ["retry_later"]


def test_failure_router_decides_for_failed_nodes() -> None:
    recorder = Recorder()
    graph = AgentGraph("g")
    graph.add_node("work", fail, next_node=END)
    graph.add_node("recover", recorder.node("recover"), next_node=END)
    graph.add_conditional_edge("work", lambda state: "recover", ["recover"], on="failure")
    graph.set_entry("work")

    result = graph.run()

    assert recorder.ran == ["recover"]
    assert fired(result)[0][:3] == ("work", "recover", "router")


@pytest.mark.parametrize(("node", "quality"), [(noop, "clean"), (fail, "degraded")])
def test_always_edge_is_taken_after_success_and_after_failure(
    node: Callable[[GraphState], Any], quality: str
) -> None:
    recorder = Recorder()
    graph = AgentGraph("g")
    graph.add_node("work", node)
    graph.add_node("next", recorder.node("next"), next_node=END)
    graph.add_edge("work", "next", on="always")
    graph.set_entry("work")

    result = graph.run()

    assert recorder.ran == ["next"]
    assert result.quality == quality


# ----------------------------------------------------------------- fired edges, trace


def test_fired_edges_and_trace_report_every_edge_with_kind_and_label() -> None:
    def route(state: GraphState) -> str:
        return "finish"

    graph = AgentGraph("g")
    graph.add_node("start", lambda state: {"score": 9})
    graph.add_node("check", lambda state: goto("mid"), destinations=["mid"])
    graph.add_node("mid", noop)
    graph.add_node("finish", noop, next_node=END)
    graph.add_edge("start", "check", condition="score > 5")
    graph.add_edge("start", END)
    graph.add_conditional_edge("mid", route, ["finish"])
    graph.set_entry("start")

    result = graph.run()

    assert result.fired_edges == [
        ("start", "check"),
        ("check", "mid"),
        ("mid", "finish"),
        ("finish", END),
    ]
    assert fired(result) == [
        ("start", "check", "condition", "score > 5"),
        ("check", "mid", "goto", ""),
        ("mid", "finish", "router", "route"),
        ("finish", END, "static", ""),
    ]


def test_edge_fired_events_carry_the_step_of_their_source() -> None:
    graph = AgentGraph("g")
    graph.add_node("a", noop, next_node="b")
    graph.add_node("b", noop, next_node=END)
    graph.set_entry("a")

    result = graph.run()

    steps = [e.step for e in result.trace if isinstance(e, EdgeFired)]
    assert steps == [1, 2]


def test_failure_edge_fires_with_its_label() -> None:
    graph = recovering_graph(Recorder(), fail)
    graph.add_edge("work", END, condition="give_up == True", on="failure", label="give up")

    result = graph.run({"give_up": True})

    assert fired(result) == [("work", END, "condition", "give up")]


def test_static_failure_edge_fires_with_its_label() -> None:
    graph = AgentGraph("g")
    graph.add_node("work", fail, next_node=END)
    graph.add_node("recover", noop, next_node=END)
    graph.add_edge("work", "recover", on="failure", label="fallback")
    graph.set_entry("work")

    assert fired(graph.run())[0] == ("work", "recover", "static", "fallback")
