"""A tool router with back-edges, in plain functions: analyze picks a tool, tools report back.

Run: python examples/06_tool_router.py
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel

from selectgraph import END, AgentGraph, GraphState, append


class Work(BaseModel):
    question: str = ""
    needed: list[str] = []
    facts: Annotated[list[str], append] = []
    next_tool: str = ""


def analyze(state: GraphState) -> dict[str, Any]:
    missing = [tool for tool in state["needed"] if not any(tool in f for f in state["facts"])]
    return {"next_tool": missing[0] if missing else "done"}


def search(state: GraphState) -> dict[str, Any]:
    return {"facts": [f"search: results for {state['question']!r}"]}


def calculator(state: GraphState) -> dict[str, Any]:
    return {"facts": ["calculator: 6 * 7 = 42"]}


graph = AgentGraph("router", state_schema=Work, max_steps=20)
graph.add_node("analyze", analyze)
graph.add_node("search", search, next_node="analyze")
graph.add_node("calculator", calculator, next_node="analyze")
graph.add_edge("analyze", "search", condition="next_tool == 'search'")
graph.add_edge("analyze", "calculator", condition="next_tool == 'calculator'")
graph.add_edge("analyze", END)
graph.set_entry("analyze")

if __name__ == "__main__":
    result = graph.run({"question": "life", "needed": ["search", "calculator"]})
    print(" -> ".join(result.node_order))
    for fact in result.state["facts"]:
        print("  ", fact)
    print()
    print(graph.to_mermaid(result))
