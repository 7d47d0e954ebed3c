"""Graph-level input guardrails and fast_route_fn on runs that keep checkpoints."""

from __future__ import annotations

from typing import Any

import pytest

from selectgraph import END, AgentGraph, GuardrailBlocked, InMemoryCheckpointStore
from selectgraph.guardrails import RegexBlock


def _graph() -> AgentGraph:
    graph = AgentGraph(
        "g",
        input_guardrails=[RegexBlock(r"drop table", reason="sql")],
        fast_route_fn=lambda state: "b" if "quick" in state.messages[-1].text else None,
    )
    graph.add_node("a", lambda state: {"a": 1}, next_node="b")
    graph.add_node("b", lambda state: {"b": 1}, next_node=END)
    return graph


def test_input_guardrails_block_a_run_with_a_checkpoint_store() -> None:
    with pytest.raises(GuardrailBlocked):
        _graph().run("drop table x", checkpoint_store=InMemoryCheckpointStore())


def test_fast_route_fn_applies_to_a_run_with_a_checkpoint_store() -> None:
    result = _graph().run("quick one", checkpoint_store=InMemoryCheckpointStore())
    assert result.node_order == ["b"]


def test_without_a_store_both_apply() -> None:
    graph = _graph()
    assert graph.run("quick one").node_order == ["b"]
    with pytest.raises(GuardrailBlocked):
        graph.run("drop table x")


def test_an_input_rewrite_reaches_the_nodes_and_an_output_block_keeps_the_result() -> None:
    from selectgraph.guardrails import RedactEmails

    seen: list[str] = []

    def echo(state: Any) -> dict[str, Any]:
        seen.append(state.messages[-1].text)
        return {"__last_output__": "secret plan: " + state.messages[-1].text}

    graph = AgentGraph(
        "g", input_guardrails=[RedactEmails()], output_guardrails=[RegexBlock("secret plan")]
    )
    graph.add_node("echo", echo, next_node=END)

    with pytest.raises(GuardrailBlocked) as caught:
        graph.run("write to ann@example.com")

    assert seen == ["write to [email]"]
    assert caught.value.stage == "output"
    assert caught.value.result is not None
    assert caught.value.result.steps == 1


def test_async_input_guardrails_run_before_the_first_node() -> None:
    async def no_shouting(text: str) -> bool:
        return not text.isupper()

    graph = AgentGraph("g", input_guardrails=[no_shouting])
    graph.add_node("a", lambda state: {"a": 1}, next_node=END)

    assert graph.run("calm").state.data["a"] == 1
    with pytest.raises(GuardrailBlocked, match="no_shouting"):
        graph.run("LOUD")


def test_output_guardrails_must_be_synchronous() -> None:
    async def later(text: str) -> bool:
        return True

    with pytest.raises(TypeError, match="must be synchronous"):
        AgentGraph("g", output_guardrails=[later])


def test_a_fast_route_to_a_missing_node_is_a_clear_error() -> None:
    from selectgraph import RoutingError

    graph = AgentGraph("g", fast_route_fn=lambda state: "nowhere")
    graph.add_node("a", lambda state: {"a": 1}, next_node=END)

    with pytest.raises(RoutingError, match="fast_route_fn returned 'nowhere'"):
        graph.run("x")
