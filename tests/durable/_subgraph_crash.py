"""Graphs with subgraphs whose inner node kills its process the first time it runs.

``python -m tests.durable._subgraph_crash HOW DB LOG`` starts run ``"r"`` of the
graph built for HOW on the SQLite store at DB; the inner node ``crash`` calls
``os._exit`` unless LOG already records a crash, so the first process dies inside
the subgraph with no chance to write anything. The test then continues the run in
its own process and counts, in LOG, how often each node really ran.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import sys
from pathlib import Path
from typing import Any

from selectgraph import END, AgentGraph, GraphState, SQLiteCheckpointStore
from tests.durable._restart import counts, log

HOWS = ("add_subgraph", "graph", "nested", "async", "arun")
"""How the subgraph is nested: a projected subgraph, a graph used as a node, a subgraph
inside a subgraph, async nodes run with ``arun``, and synchronous nodes run with
``arun`` (the subgraph node then runs on a worker thread, without an event loop)."""


def _inner(log_path: Path, is_async: bool) -> AgentGraph:
    """first -> second -> crash -> last, each appending to ``steps``."""

    def step(name: str) -> Any:
        def node(state: GraphState) -> dict[str, Any]:
            first_crash = name == "crash" and "crash" not in counts(log_path)
            log(log_path, name)
            if first_crash:
                os._exit(17)  # killed mid-subgraph: nothing after this is written
            return {"steps": [*state.data.get("steps", []), name]}

        async def anode(state: GraphState) -> dict[str, Any]:
            return node(state)

        return anode if is_async else node

    inner = AgentGraph("inner")
    names = ["first", "second", "crash", "last"]
    for name in names:
        inner.add_node(name, step(name))
    for source, target in itertools.pairwise(names):
        inner.add_edge(source, target)
    inner.add_edge("last", END)
    return inner


def build(how: str, log_path: Path) -> AgentGraph:
    """before -> sub (the inner graph, nested as ``how`` says) -> after."""

    def before(state: GraphState) -> dict[str, Any]:
        log(log_path, "before")
        return {"steps": ["before"]}

    def after(state: GraphState) -> dict[str, Any]:
        log(log_path, "after")
        return {"steps": [*state.data["steps"], "after"]}

    inner = _inner(log_path, how == "async")
    if how == "nested":
        middle = AgentGraph("middle")

        def lead(state: GraphState) -> dict[str, Any]:
            log(log_path, "lead")
            return {"lead": True}

        middle.add_node("lead", lead)
        middle.add_node("deeper", inner)
        middle.add_edge("lead", "deeper")
        middle.add_edge("deeper", END)
        inner = middle
    graph = AgentGraph("outer")
    graph.add_node("before", before)
    if how == "add_subgraph":
        graph.add_subgraph("sub", inner, input_map={"steps": "steps"})
    else:
        graph.add_node("sub", inner)
    graph.add_node("after", after)
    graph.add_edge("before", "sub")
    graph.add_edge("sub", "after")
    graph.add_edge("after", END)
    return graph


def run(how: str, db: Path, log_path: Path) -> Any:
    """Start or continue run ``"r"``; returns its result."""
    graph = build(how, log_path)
    with SQLiteCheckpointStore(db) as store:
        # A run with a head continues from it; a new one starts from the input.
        start: dict[str, Any] | None = None if store.head("r") is not None else {}
        if how in ("async", "arun"):
            return asyncio.run(graph.arun(start, checkpoint_store=store, run_id="r"))
        return graph.run(start, checkpoint_store=store, run_id="r")


if __name__ == "__main__":
    run(sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]))
