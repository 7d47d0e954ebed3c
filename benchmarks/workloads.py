"""Workloads: the same trivial graphs built with selectgraph and with LangGraph.

Each builder returns a zero-argument callable that performs one measured unit
of work (one run), so the harness can time both libraries identically.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Annotated, Any, TypedDict

from selectgraph import END, AgentGraph, GraphState, append

LOOP_STEPS = 1000
BIG_ITEMS = 10_000
BIG_STEPS = 100

Workload = Callable[[], Any]


class Counter(TypedDict):
    x: int


class Big(TypedDict):
    items: Annotated[list[int], append]
    i: int


def _inc(state: GraphState) -> dict[str, int]:
    return {"x": state["x"] + 1}


def _add_item(state: GraphState) -> dict[str, Any]:
    return {"items": [state["i"]], "i": state["i"] + 1}


# ---------------------------------------------------------------- selectgraph
def selectgraph_linear3(**options: Any) -> Workload:
    """A three-node chain; one run."""
    graph = AgentGraph.chain(_inc, _inc, _inc, **options).compile()
    return lambda: graph.run({"x": 0})


def selectgraph_loop(**options: Any) -> Workload:
    """One node looping on a conditional back-edge LOOP_STEPS times; one run."""
    graph = AgentGraph("loop", max_steps=None, **options)
    graph.add_node("n", _inc)
    graph.add_edge("n", "n", condition=f"x < {LOOP_STEPS}")
    graph.add_edge("n", END)
    graph.set_entry("n")
    compiled = graph.compile()
    return lambda: compiled.run({"x": 0})


def selectgraph_bigstate(**options: Any) -> Workload:
    """BIG_STEPS steps each appending one item to a BIG_ITEMS-item list; one run."""
    graph = AgentGraph("big", state_schema=Big, max_steps=None, **options)
    graph.add_node("n", _add_item)
    graph.add_edge("n", "n", condition=f"i < {BIG_STEPS}")
    graph.add_edge("n", END)
    graph.set_entry("n")
    compiled = graph.compile()
    items = list(range(BIG_ITEMS))
    return lambda: compiled.run({"items": items, "i": 0})


def selectgraph_keys(keys: int, steps: int = 100) -> Workload:
    """A loop over a state holding ``keys`` keys; each step writes one of them."""
    graph = AgentGraph("keys", max_steps=None)
    graph.add_node("n", lambda s: {"k0": s["k0"] + 1})
    graph.add_edge("n", "n", condition=f"k0 < {steps}")
    graph.add_edge("n", END)
    graph.set_entry("n")
    compiled = graph.compile()
    data = {f"k{i}": 0 for i in range(keys)}
    return lambda: compiled.run(data)


# ------------------------------------------------------------------ LangGraph
class LGBig(TypedDict):
    items: Annotated[list[int], operator.add]
    i: int


def _lg_inc(state: Counter) -> dict[str, int]:
    return {"x": state["x"] + 1}


def _lg_add_item(state: LGBig) -> dict[str, Any]:
    return {"items": [state["i"]], "i": state["i"] + 1}


def langgraph_linear3() -> Workload:
    """LangGraph: a three-node chain; one invoke."""
    from langgraph.graph import END as LG_END
    from langgraph.graph import START, StateGraph

    builder = StateGraph(Counter)
    for name in ("a", "b", "c"):
        builder.add_node(name, _lg_inc)
    builder.add_edge(START, "a")
    builder.add_edge("a", "b")
    builder.add_edge("b", "c")
    builder.add_edge("c", LG_END)
    graph = builder.compile()
    return lambda: graph.invoke({"x": 0})


def langgraph_loop() -> Workload:
    """LangGraph: one node looping on a conditional edge LOOP_STEPS times; one invoke."""
    from langchain_core.runnables import RunnableConfig
    from langgraph.graph import END as LG_END
    from langgraph.graph import START, StateGraph

    builder = StateGraph(Counter)
    builder.add_node("n", _lg_inc)
    builder.add_edge(START, "n")
    builder.add_conditional_edges("n", lambda s: "n" if s["x"] < LOOP_STEPS else LG_END)
    graph = builder.compile()
    config: RunnableConfig = {"recursion_limit": LOOP_STEPS + 10}
    return lambda: graph.invoke({"x": 0}, config)


def langgraph_bigstate() -> Workload:
    """LangGraph: BIG_STEPS steps appending to a BIG_ITEMS-item list; one invoke."""
    from langchain_core.runnables import RunnableConfig
    from langgraph.graph import END as LG_END
    from langgraph.graph import START, StateGraph

    builder = StateGraph(LGBig)
    builder.add_node("n", _lg_add_item)
    builder.add_edge(START, "n")
    builder.add_conditional_edges("n", lambda s: "n" if s["i"] < BIG_STEPS else LG_END)
    graph = builder.compile()
    items = list(range(BIG_ITEMS))
    config: RunnableConfig = {"recursion_limit": BIG_STEPS + 10}
    return lambda: graph.invoke({"items": items, "i": 0}, config)
