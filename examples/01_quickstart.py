"""Quickstart: plain functions in a graph with a conditional back-edge and a reducer.

Run: python examples/01_quickstart.py
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel

from selectgraph import END, AgentGraph, GraphState, append


class Essay(BaseModel):
    topic: str = ""
    draft: str = ""
    revisions: int = 0
    notes: Annotated[list[str], append] = []


def write(state: GraphState) -> dict[str, Any]:
    revision = state["revisions"] + 1
    return {
        "draft": f"{state['topic']}: draft {revision}",
        "revisions": revision,
        "notes": [f"wrote draft {revision}"],
    }


def review(state: GraphState) -> dict[str, Any]:
    return {"notes": [f"reviewed draft {state['revisions']}"]}


graph = AgentGraph("essay", state_schema=Essay)
graph.add_node("write", write, next_node="review")
graph.add_node("review", review)
graph.add_edge("review", "write", condition="revisions < 3")  # loop back until 3 drafts
graph.add_edge("review", END)
graph.set_entry("write")

if __name__ == "__main__":
    result = graph.run({"topic": "Graph engines"})
    print(result.state["draft"])
    print(result.state["notes"])
    print(" -> ".join(result.node_order), f"({result.steps} steps, {result.quality})")
    print()
    graph.visualize(result=result)  # prints the picture (and returns it)
