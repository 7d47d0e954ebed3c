"""Graphs inside graphs: graph-as-node passthrough, projection boundaries, nesting."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from pydantic import BaseModel

from selectgraph import END, AgentGraph, GraphState, NodeError, append
from selectgraph.observe import NodeStarted


class Research(BaseModel):
    query: str = ""
    findings: Annotated[list[str], append] = []


class Pipeline(BaseModel):
    topic: str = ""
    results: Annotated[list[str], append] = []
    log: Annotated[list[str], append] = []


def _research_graph() -> AgentGraph:
    graph = AgentGraph("research", state_schema=Research)
    graph.add_node("search", lambda s: {"findings": [f"found {s['query']}"]}, next_node="analyze")
    graph.add_node("analyze", lambda s: {"findings": ["analyzed"]}, next_node=END)
    graph.set_entry("search")
    return graph


def test_subgraph_with_input_and_output_maps() -> None:
    parent = AgentGraph("pipeline", state_schema=Pipeline)
    parent.add_node("plan", lambda s: {"topic": "qubits", "log": ["plan"]}, next_node="research")
    parent.add_subgraph(
        "research",
        _research_graph(),
        input_map={"topic": "query"},
        output_map={"findings": "results"},
        next_node="write",
    )
    parent.add_node("write", lambda s: {"log": [f"wrote {len(s['results'])}"]}, next_node=END)
    parent.set_entry("plan")

    result = parent.run()

    assert result.state["results"] == ["found qubits", "analyzed"]
    assert result.state["log"] == ["plan", "wrote 2"]
    assert result.node_order == ["plan", "research", "write"]
    assert result.steps == 3


def test_subgraph_events_are_nested_under_the_subgraph_node() -> None:
    parent = AgentGraph("pipeline", state_schema=Pipeline)
    parent.add_subgraph("research", _research_graph(), input_map={"topic": "query"}, next_node=END)
    parent.set_entry("research")

    result = parent.run({"topic": "t"})

    nested = [e for e in result.trace if isinstance(e, NodeStarted) and e.namespace]
    assert [(e.namespace, e.node, e.graph) for e in nested] == [
        (("research",), "search", "research"),
        (("research",), "analyze", "research"),
    ]
    assert result.node_order == ["research"]


def test_default_projection_copies_nothing_in_and_name_matches_out() -> None:
    class Child(BaseModel):
        topic: str = "child default"
        note: str = ""

    child = AgentGraph("child", state_schema=Child)
    child.add_node("c", lambda s: {"note": f"saw {s['topic']}"}, next_node=END)
    child.set_entry("c")

    class Parent(BaseModel):
        topic: str = "parent topic"
        note: str = ""

    parent = AgentGraph("parent", state_schema=Parent)
    parent.add_subgraph("sub", child, next_node=END)
    parent.set_entry("sub")

    result = parent.run()

    assert result.state["note"] == "saw child default"
    assert result.state["topic"] == "child default"  # matched by name on the way out


def test_projects_sets_move_only_the_named_fields() -> None:
    class State(BaseModel):
        seed: int = 5
        doubled: int = -1
        scratch: str = "outer"

    child = AgentGraph("child", state_schema=State)
    child.add_node(
        "c",
        lambda s: {"doubled": s["seed"] * 2, "scratch": "inner", "seed": 0},
        next_node=END,
    )
    child.set_entry("c")
    parent = AgentGraph("parent", state_schema=State)
    parent.add_subgraph("sub", child, projects_in=["seed"], projects_out=["doubled"], next_node=END)
    parent.set_entry("sub")

    result = parent.run()

    assert result.state.data == {"seed": 5, "doubled": 10, "scratch": "outer"}


def test_graph_as_node_passes_the_whole_state_and_writes_back_whole_values() -> None:
    inner = AgentGraph("inner", reducers={"log": append})
    inner.add_node("i1", lambda s: {"log": ["i1"], "count": s["count"] + 1}, next_node="i2")
    inner.add_node("i2", lambda s: {"log": ["i2"]}, next_node=END)
    inner.set_entry("i1")

    outer = AgentGraph("outer", reducers={"log": append})
    outer.add_node("o1", lambda s: {"log": ["o1"], "count": 1}, next_node="inner")
    outer.add_node("inner", inner, next_node="o2")
    outer.add_node("o2", lambda s: {"log": ["o2"]}, next_node=END)
    outer.set_entry("o1")

    result = outer.run({"untouched": "yes"})

    # The child started from the parent's log and appended to it; its final
    # value replaces the parent's, so nothing is appended twice.
    assert result.state["log"] == ["o1", "i1", "i2", "o2"]
    assert result.state["count"] == 2
    assert result.state["untouched"] == "yes"
    assert result.node_order == ["o1", "inner", "o2"]


def test_subgraphs_nest_to_any_depth() -> None:
    def level(name: str, child: AgentGraph | None) -> AgentGraph:
        graph = AgentGraph(name, reducers={"path": append})
        graph.add_node("work", lambda s: {"path": [name]})
        if child is None:
            graph.add_edge("work", END)
        else:
            graph.add_edge("work", "deeper")
            graph.add_subgraph("deeper", child, next_node=END)
        graph.set_entry("work")
        return graph

    graph = level("one", level("two", level("three", None)))
    result = graph.run()

    assert result.state["path"] == ["one", "two", "three"]
    namespaces = {e.namespace for e in result.trace if isinstance(e, NodeStarted)}
    assert namespaces == {(), ("deeper",), ("deeper", "deeper")}


def test_failure_inside_a_subgraph_names_both_nodes() -> None:
    def boom(state: GraphState) -> dict[str, Any]:
        raise RuntimeError("inner boom")

    child = AgentGraph("child")
    child.add_node("bad", boom, next_node=END)
    child.set_entry("bad")
    parent = AgentGraph("parent")
    parent.add_node("ok", lambda s: {"ok": True}, next_node="sub")
    parent.add_subgraph("sub", child, next_node=END)
    parent.set_entry("ok")

    with pytest.raises(NodeError) as caught:
        parent.run()

    error = caught.value
    assert error.node == "sub"
    assert error.state is not None
    assert error.state["ok"] is True
    inner = error.__cause__
    assert isinstance(inner, NodeError)
    assert inner.node == "bad"
    assert isinstance(inner.__cause__, RuntimeError)


def test_async_subgraph_runs_inside_a_sync_parent_with_run() -> None:
    async def inner_node(state: GraphState) -> dict[str, Any]:
        return {"value": 42}

    child = AgentGraph("child")
    child.add_node("c", inner_node, next_node=END)
    child.set_entry("c")
    parent = AgentGraph("parent")
    parent.add_node("sub", child, next_node=END)
    parent.set_entry("sub")

    assert parent.compile().is_async is True
    assert parent.run().state["value"] == 42
