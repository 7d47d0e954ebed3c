"""Graph-level input guardrails and fast_route_fn on runs that keep checkpoints."""

from __future__ import annotations

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


@pytest.mark.xfail(strict=True, reason="_execute skips input_guardrails when a store is given")
def test_input_guardrails_block_a_run_with_a_checkpoint_store() -> None:
    with pytest.raises(GuardrailBlocked):
        _graph().run("drop table x", checkpoint_store=InMemoryCheckpointStore())


@pytest.mark.xfail(strict=True, reason="_execute skips fast_route_fn when a store is given")
def test_fast_route_fn_applies_to_a_run_with_a_checkpoint_store() -> None:
    result = _graph().run("quick one", checkpoint_store=InMemoryCheckpointStore())
    assert result.node_order == ["b"]


def test_without_a_store_both_apply() -> None:
    graph = _graph()
    assert graph.run("quick one").node_order == ["b"]
    with pytest.raises(GuardrailBlocked):
        graph.run("drop table x")
