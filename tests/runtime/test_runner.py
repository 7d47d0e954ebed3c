"""The step loop: execution order, results, errors with recoverable state, sync and async paths."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import pytest
from pydantic import BaseModel

from selectgraph import (
    END,
    AgentGraph,
    GraphState,
    NodeContext,
    NodeContractError,
    NodeError,
    NodeResult,
    StateValidationError,
    append,
    goto,
)
from selectgraph.observe import NodeFinished, NodeStarted, RunFinished, RunStarted


def _inc(state: GraphState) -> dict[str, Any]:
    return {"x": state.get("x", 0) + 1}


def test_linear_graph_runs_nodes_in_order_and_merges_updates() -> None:
    graph = AgentGraph.chain(_inc, _inc, _inc)

    result = graph.run({"x": 0})

    assert result.node_order == ["_inc", "_inc_2", "_inc_3"]
    assert result.state["x"] == 3
    assert result.steps == 3
    assert result.stop_reason == "end"
    assert result.quality == "clean"


def test_chain_accepts_explicit_names() -> None:
    graph = AgentGraph.chain(_inc, _inc, names=["first", "second"])

    assert graph.run({"x": 0}).node_order == ["first", "second"]


def test_run_accepts_a_prompt_string_as_the_first_user_message() -> None:
    def echo(state: GraphState) -> dict[str, Any]:
        return {"seen": state.messages[-1].text}

    result = AgentGraph.chain(echo).run("hello")

    assert result.state["seen"] == "hello"


def test_run_does_not_mutate_the_callers_input() -> None:
    graph = AgentGraph("g", reducers={"log": append})
    graph.add_node("a", lambda s: {"log": ["a"]}, next_node=END).set_entry("a")
    log = ["seed"]
    data = {"log": log}

    result = graph.run(data)

    assert result.state["log"] == ["seed", "a"]
    assert log == ["seed"]
    assert data == {"log": ["seed"]}


def test_running_twice_from_the_same_input_gives_the_same_result() -> None:
    graph = AgentGraph.chain(_inc, _inc)
    first = graph.run({"x": 1})
    second = graph.run({"x": 1})

    assert first.state.data == second.state.data
    assert first.node_order == second.node_order


def test_async_nodes_run_with_arun() -> None:
    async def slow_inc(state: GraphState) -> dict[str, Any]:
        await asyncio.sleep(0)
        return {"x": state["x"] + 1}

    graph = AgentGraph.chain(slow_inc, _inc)
    result = asyncio.run(graph.arun({"x": 0}))

    assert result.state["x"] == 2


def test_run_drives_async_graphs_too() -> None:
    async def slow_inc(state: GraphState) -> dict[str, Any]:
        await asyncio.sleep(0)
        return {"x": state["x"] + 1}

    assert AgentGraph.chain(slow_inc).run({"x": 0}).state["x"] == 1


async def test_run_inside_a_running_event_loop_uses_a_worker_thread() -> None:
    async def slow_inc(state: GraphState) -> dict[str, Any]:
        await asyncio.sleep(0)
        return {"x": state["x"] + 1}

    # Called from inside this test's loop: must not raise "loop already running".
    result = AgentGraph.chain(slow_inc).run({"x": 5})

    assert result.state["x"] == 6


def test_sync_graph_runs_without_an_event_loop() -> None:
    graph = AgentGraph.chain(_inc).compile()

    assert graph.is_async is False
    with pytest.raises(RuntimeError):
        asyncio.get_running_loop()  # the test itself has no loop...
    assert graph.run({"x": 0}).state["x"] == 1  # ...and run() does not need one


def test_node_receives_context_when_it_takes_two_arguments() -> None:
    seen: list[tuple[str, int, int]] = []

    def node(state: GraphState, context: NodeContext) -> dict[str, Any]:
        seen.append((context.node, context.step, context.visit))
        return {"n": state.get("n", 0) + 1}

    graph = AgentGraph("g")
    graph.add_node("a", node)
    graph.add_edge("a", "a", condition="n < 3")
    graph.add_edge("a", END)
    graph.set_entry("a")

    graph.run()

    assert seen == [("a", 1, 1), ("a", 2, 2), ("a", 3, 3)]


def test_context_gives_a_revisited_node_its_previous_result() -> None:
    previous: list[Any] = []

    def node(state: GraphState, context: NodeContext) -> dict[str, Any]:
        previous.append(context.previous.output if context.previous else None)
        return {"n": state.get("n", 0) + 1}

    graph = AgentGraph("g")
    graph.add_node("a", node)
    graph.add_edge("a", "a", condition="n < 2")
    graph.add_edge("a", END)
    graph.set_entry("a")
    graph.run()

    assert previous == [None, {"n": 1}]


def test_node_results_and_history_record_every_execution() -> None:
    graph = AgentGraph("g")
    graph.add_node("a", lambda s: {"__last_output__": "hi", "x": 1}, next_node="b")
    graph.add_node("b", lambda s: None, next_node=END)
    graph.set_entry("a")

    result = graph.run()

    a_result = result.node_results["a"][0]
    assert isinstance(a_result, NodeResult)
    assert (a_result.node, a_result.step, a_result.visit, a_result.outcome) == (
        "a",
        1,
        1,
        "success",
    )
    assert a_result.output == {"__last_output__": "hi", "x": 1}
    assert a_result.content == "hi"
    assert result.content == "hi"
    assert [name for name, _ in result.state.history] == ["a", "b"]
    assert list(result.node_results) == ["a", "b"]


def test_node_results_exclude_history_from_an_earlier_run() -> None:
    graph = AgentGraph.chain(_inc)
    first = graph.run({"x": 0})

    second = graph.run(first.state)

    assert len(second.state.history) == 2
    assert [r.step for r in second.node_results["_inc"]] == [1]


def test_trace_lists_events_in_order() -> None:
    result = AgentGraph.chain(_inc, _inc).run({"x": 0})

    kinds = [type(event).__name__ for event in result.trace]
    assert kinds == [
        "RunStarted",
        "NodeStarted",
        "NodeFinished",
        "EdgeFired",
        "NodeStarted",
        "NodeFinished",
        "EdgeFired",
        "RunFinished",
    ]
    started = [e for e in result.trace if isinstance(e, NodeStarted)]
    assert [e.step for e in started] == [1, 2]
    assert all(e.run_id == result.run_id for e in result.trace)
    finished = [e for e in result.trace if isinstance(e, NodeFinished)]
    assert all(e.duration_ms >= 0 for e in finished)
    assert started[0].timestamp <= finished[0].timestamp
    last = result.trace[-1]
    assert isinstance(last, RunFinished)
    assert last.stop_reason == result.stop_reason
    assert last.result is None  # listeners get the result; the trace, which it holds, does not


def test_observers_see_the_same_events_as_the_trace() -> None:
    seen: list[Any] = []
    result = AgentGraph.chain(_inc).run({"x": 0}, observers=[seen.append])

    assert seen == list(result.trace)
    assert isinstance(seen[0], RunStarted)


def test_a_failing_observer_does_not_break_the_run(caplog: pytest.LogCaptureFixture) -> None:
    def broken(event: Any) -> None:
        raise ValueError("observer bug")

    result = AgentGraph.chain(_inc).run({"x": 0}, observers=[broken])

    assert result.state["x"] == 1
    assert "observer bug" in caplog.text


def test_node_exception_propagates_with_the_state_before_the_failure() -> None:
    def boom(state: GraphState) -> dict[str, Any]:
        raise ValueError("boom")

    graph = AgentGraph("g", reducers={"log": append})
    graph.add_node("a", lambda s: {"log": ["a"]}, next_node="b")
    graph.add_node("b", boom, next_node="c")
    graph.add_node("c", lambda s: {"log": ["c"]}, next_node=END)
    graph.set_entry("a")

    with pytest.raises(NodeError) as caught:
        graph.run()

    error = caught.value
    assert error.category == "node_exception"
    assert error.node == "b"
    assert error.step == 2
    assert isinstance(error.__cause__, ValueError)
    assert "boom" in str(error)
    assert error.state is not None
    assert error.state["log"] == ["a"]
    assert error.result is not None
    assert error.result.quality == "failed"
    assert error.result.node_order == ["a", "b"]
    assert type(error.result.trace[-1]).__name__ == "RunFailed"


def test_node_returning_an_unsupported_type_is_a_contract_error() -> None:
    graph = AgentGraph.chain(lambda s: 42)

    with pytest.raises(NodeContractError, match="returned int 42"):
        graph.run()


def test_declared_writes_are_enforced() -> None:
    graph = AgentGraph("g")
    graph.add_node("a", lambda s: {"draft": "x", "extra": 1}, writes=["draft"], next_node=END)
    graph.set_entry("a")

    with pytest.raises(NodeContractError, match="'extra'"):
        graph.run()


def test_missing_required_output_is_an_error() -> None:
    graph = AgentGraph("g")
    graph.add_node("a", lambda s: {}, writes=["draft"], next_node=END)
    graph.set_entry("a")

    with pytest.raises(NodeContractError, match="did not write required output 'draft'"):
        graph.run()


def test_declared_reads_must_exist_before_the_node_runs() -> None:
    graph = AgentGraph("g")
    graph.add_node("a", lambda s: {"y": s["outline"]}, reads=["outline"], next_node=END)
    graph.set_entry("a")

    with pytest.raises(NodeContractError, match="reads 'outline'"):
        graph.run()
    assert graph.run({"outline": "o"}).state["y"] == "o"


def test_stale_optional_outputs_are_cleared_on_revisit() -> None:
    def writer(state: GraphState) -> dict[str, Any]:
        visit = state.get("visit", 0) + 1
        out: dict[str, Any] = {"visit": visit, "draft": f"v{visit}"}
        if visit == 1:
            out["note"] = "only on the first visit"
        return out

    graph = AgentGraph("g")
    graph.add_node("w", writer, writes=["visit", "draft"], optional_writes=["note"])
    graph.add_edge("w", "w", condition="visit < 2")
    graph.add_edge("w", END)
    graph.set_entry("w")

    result = graph.run()

    assert result.state["draft"] == "v2"
    assert "note" not in result.state


def test_goto_from_a_node_overrides_its_edges() -> None:
    graph = AgentGraph("g")
    graph.add_node("a", lambda s: goto("c", {"via": "goto"}), next_node="b", destinations=["c"])
    graph.add_node("b", lambda s: {"via": "edge"}, next_node=END)
    graph.add_node("c", lambda s: None, next_node=END)
    graph.set_entry("a")

    result = graph.run()

    assert result.node_order == ["a", "c"]
    assert result.state["via"] == "goto"
    assert result.fired_edges == [("a", "c"), ("c", END)]


class _Typed(BaseModel):
    count: int = 0
    notes: Annotated[list[str], append] = []


def test_schema_fills_defaults_and_validates_at_entry() -> None:
    graph = AgentGraph("g", state_schema=_Typed)
    graph.add_node("a", lambda s: {"count": s["count"] + 1, "notes": ["a"]}, next_node=END)
    graph.set_entry("a")

    result = graph.run()

    assert result.state.data == {"count": 1, "notes": ["a"]}
    with pytest.raises(StateValidationError) as caught:
        graph.run({"count": "many"})
    assert caught.value.fields == ["count"]


def test_schema_rejects_unknown_input_keys() -> None:
    graph = AgentGraph("g", state_schema=_Typed)
    graph.add_node("a", lambda s: None, next_node=END).set_entry("a")

    with pytest.raises(StateValidationError, match="'cnt'"):
        graph.run({"cnt": 1})


def test_schema_rejects_a_node_writing_an_unknown_field() -> None:
    graph = AgentGraph("g", state_schema=_Typed)
    graph.add_node("a", lambda s: {"cuont": 1}, next_node=END).set_entry("a")

    with pytest.raises(StateValidationError, match="node 'a' wrote 'cuont'"):
        graph.run()


def test_schema_validates_at_exit_with_the_state_recoverable() -> None:
    graph = AgentGraph("g", state_schema=_Typed)
    graph.add_node("a", lambda s: {"count": "not a number"}, next_node=END).set_entry("a")

    with pytest.raises(StateValidationError) as caught:
        graph.run()

    assert caught.value.fields == ["count"]
    assert caught.value.state is not None
    assert caught.value.state["count"] == "not a number"


def test_a_compiled_graph_is_callable_like_a_node() -> None:
    compiled = AgentGraph.chain(_inc, _inc).compile()

    final = compiled(GraphState(data={"x": 10}))

    assert final["x"] == 12


# ------------------------------------------------ a node returning another run's state


def _other_run_state() -> GraphState:
    other = AgentGraph("other")
    other.add_node("o1", lambda s: {"found": "x"}, next_node="o2")
    other.add_node("o2", lambda s: {"more": 1}, next_node=END)
    return other.run(GraphState.from_prompt("hi")).state


def test_returning_another_runs_state_takes_its_data_but_not_its_history() -> None:
    foreign = _other_run_state()
    graph = AgentGraph("g")
    graph.add_node("adopt", lambda s: foreign, next_node="after")
    graph.add_node("after", lambda s: {"done": True}, next_node=END)

    result = graph.run()

    assert [name for name, _ in result.state.history] == ["adopt", "after"]
    assert list(result.node_results) == ["adopt", "after"]
    assert result.state["found"] == "x"
    assert result.state["more"] == 1
    # This run had no messages yet, so all of the other run's count as new.
    assert result.state.messages == foreign.messages


def test_returning_another_runs_state_with_unrelated_messages_is_refused() -> None:
    foreign = _other_run_state()
    graph = AgentGraph("g")
    graph.add_node("adopt", lambda s: foreign, next_node=END)

    with pytest.raises(NodeContractError, match="another run") as info:
        graph.run(GraphState.from_prompt("something else"))

    assert info.value.node == "adopt"


def test_a_nested_run_started_from_this_runs_state_adds_only_its_new_messages() -> None:
    from selectgraph import Message

    inner = AgentGraph("inner")
    inner.add_node(
        "say", lambda s: s.messages.append(Message.assistant("inner says")), next_node=END
    )
    outer = AgentGraph("outer")
    outer.add_node("nest", lambda s: inner.run(s.snapshot()).state, next_node=END)

    result = outer.run(GraphState.from_prompt("hello"))

    assert [m.text for m in result.state.messages] == ["hello", "inner says"]
    assert [name for name, _ in result.state.history] == ["nest"]


# ----------------------------------------- a wrong type in a schema field names its writer


class Typed(BaseModel):
    count: int = 0
    label: str = ""


def test_a_wrong_type_in_a_schema_field_names_the_node_that_wrote_it() -> None:
    graph = AgentGraph("g", state_schema=Typed)
    graph.add_node("first", lambda s: {"count": "many"}, next_node="second")
    graph.add_node("second", lambda s: {"label": "ok"}, next_node=END)

    with pytest.raises(StateValidationError) as info:
        graph.run()

    assert info.value.node == "first"
    assert info.value.step == 1
    assert "count" in str(info.value)
    assert "node 'first'" in str(info.value)


def test_a_defaulted_second_parameter_is_the_functions_own_not_the_context() -> None:
    graph = AgentGraph("bound")
    for name in ("a", "b"):
        graph.add_node(name, lambda state, name=name: {name: name})  # binds the loop variable
    graph.add_edge("a", "b")
    graph.add_edge("b", END)
    assert graph.run({}).state.data == {"a": "a", "b": "b"}

    def named(state: GraphState, context: NodeContext | None = None) -> dict[str, Any]:
        return {"node": None if context is None else context.node}

    def annotated(state: GraphState, info: NodeContext | None = None) -> dict[str, Any]:
        return {"step": None if info is None else info.step}

    graph = AgentGraph("ctx")
    graph.add_node("named", named)
    graph.add_node("annotated", annotated)
    graph.add_edge("named", "annotated")
    graph.add_edge("annotated", END)
    assert graph.run({}).state.data == {"node": "named", "step": 2}
