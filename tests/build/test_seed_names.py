"""Seed 004's and seed 000's names for things selectgraph calls otherwise."""

from __future__ import annotations

import pytest

from selectgraph import (
    END,
    AgentGraph,
    GraphExecutionError,
    GraphNode,
    GraphRunError,
    InMemoryCheckpointStore,
    NodeError,
    VisitLimitExceeded,
)
from selectgraph.orchestration import GraphExecutionError as SeedError
from selectgraph.orchestration import GraphNode as SeedNode


def _fails(state: object) -> dict[str, int]:
    raise RuntimeError("boom")


def test_abort_raises_a_graph_execution_error_as_the_seed_says() -> None:
    graph = AgentGraph("g")
    graph.add_node("a", _fails, next_node=END)

    with pytest.raises(GraphExecutionError) as caught:
        graph.run({})

    assert isinstance(caught.value, NodeError)
    assert GraphExecutionError is GraphRunError is SeedError


def test_a_compiled_graph_s_nodes_are_graph_nodes() -> None:
    graph = AgentGraph("g")
    graph.add_node("a", lambda state: {"x": 1}, next_node=END, max_visits=2)

    node = graph.compile().nodes["a"]

    assert isinstance(node, GraphNode)
    assert SeedNode is GraphNode
    assert (node.name, node.max_visits) == ("a", 2)


def test_max_iterations_means_max_visits() -> None:
    graph = AgentGraph("g", enable_loop_detection=False)
    graph.add_node("a", lambda state: {"n": state.get("n", 0) + 1}, max_iterations=2)
    graph.add_edge("a", "a")

    assert graph.compile().nodes["a"].max_visits == 2
    with pytest.raises(VisitLimitExceeded, match="visit 3 but max_visits=2"):
        graph.run({})


def test_max_iterations_and_a_different_max_visits_are_refused() -> None:
    graph = AgentGraph("g")

    with pytest.raises(ValueError, match="max_iterations is seed 004's name for max_visits"):
        graph.add_node("a", lambda state: {}, max_visits=2, max_iterations=3)
    graph.add_node("b", lambda state: {}, max_visits=2, max_iterations=2, next_node=END)


def test_pause_nodes_pauses_before_them_as_seed_000_says() -> None:
    graph = AgentGraph("g", pause_nodes=["b"])
    graph.add_node("a", lambda state: {"x": 1}, next_node="b")
    graph.add_node("b", lambda state: {"y": 1}, next_node=END)
    store = InMemoryCheckpointStore()

    paused = graph.run({}, checkpoint_store=store)

    assert (paused.stop_reason, paused.state.data) == ("paused", {"x": 1})
    done = graph.run(None, checkpoint_store=store, run_id=paused.run_id)
    assert done.state.data == {"x": 1, "y": 1}
    assert graph.compile().settings.pause_before == frozenset({"b"})
