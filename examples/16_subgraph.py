"""Nested subgraph composition: a research graph inside a writing pipeline.

Seed 004's example 61. ``add_subgraph`` puts a whole graph behind one node with
an explicit boundary: ``input_map`` copies parent fields in, ``output_map`` merges
the subgraph's results out; nothing else crosses. A graph can also be a plain
node (``add_node(name, graph)``), which sees the whole state.

Run: python examples/16_subgraph.py
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from selectgraph import END, AgentGraph, GraphState


class Research(BaseModel):
    query: str = ""
    hits: list[str] = []
    findings: str = ""


class Pipeline(BaseModel):
    topic: str = ""
    results: str = ""
    article: str = ""


def search(state: GraphState) -> dict[str, Any]:
    return {"hits": [f"{state['query']} basics", f"{state['query']} history"]}


def analyze(state: GraphState) -> dict[str, Any]:
    return {"findings": "; ".join(state["hits"])}


research = AgentGraph("research", state_schema=Research)
research.add_node("search", search, next_node="analyze")
research.add_node("analyze", analyze, next_node=END)

pipeline = AgentGraph("pipeline", state_schema=Pipeline)
pipeline.add_node("planner", lambda state: {"topic": state["topic"] or "tide pools"})
pipeline.add_subgraph(
    "research",
    research,
    input_map={"topic": "query"},  # parent topic -> subgraph query
    output_map={"findings": "results"},  # subgraph findings -> parent results
)
pipeline.add_node("writer", lambda state: {"article": f"On {state['topic']}: {state['results']}"})
pipeline.add_edge("planner", "research")
pipeline.add_edge("research", "writer")
pipeline.add_edge("writer", END)
graph = pipeline  # what selectgraph run/studio load

if __name__ == "__main__":
    result = pipeline.run({"topic": "tide pools"})
    print(result.state["article"])
    print("parent nodes:", " -> ".join(result.node_order))
    print("parent keys:", sorted(result.state.data))
