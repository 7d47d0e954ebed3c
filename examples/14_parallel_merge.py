"""Parallel fan-out with MergePolicy: three reviewers at once, their verdicts merged.

Seed 004's example 56. A parallel group runs its members together on the same
state; a key they all write is settled by the group's MergePolicy, a key with a
reducer takes every member's write. A Scatter fan-out does the same for a list
known only at run time.

Run: python examples/14_parallel_merge.py
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from pydantic import BaseModel

from selectgraph import END, AgentGraph, GraphState, MergePolicy, Scatter, append


class Review(BaseModel):
    draft: str = "Graph engines in 300 words."
    verdict: str = ""  # no reducer: the merge policy settles it
    comments: Annotated[list[str], append] = []  # a reducer: every reviewer's comment is kept
    topics: list[str] = []
    notes: Annotated[list[str], append] = []


def reviewer(name: str, verdict: str) -> Any:
    async def review(state: GraphState) -> dict[str, Any]:
        await asyncio.sleep(0.01)  # a model call's shape: the three overlap
        return {"verdict": verdict, "comments": [f"{name}: {verdict}"]}

    return review


def research(state: GraphState) -> dict[str, Any]:
    return {"notes": [f"note on {state['topic']}"]}


def build(policy: MergePolicy) -> AgentGraph:
    graph = AgentGraph(f"review_{policy.value}", state_schema=Review)
    graph.add_node("style", reviewer("style", "approve"))
    graph.add_node("facts", reviewer("facts", "revise"))
    graph.add_node("tone", reviewer("tone", "reject"))
    graph.add_parallel_nodes("reviewers", ["style", "facts", "tone"], merge_policy=policy)
    graph.add_node("plan", lambda state: {"topics": ["tides", "winds"]})
    graph.add_node("research", research)
    graph.add_node("summary", lambda state: {}, next_node=END)
    graph.set_entry("reviewers")
    graph.add_edge("reviewers", "plan")
    # A fan-out over a list only known at run time: one branch per topic.
    graph.add_conditional_edge(
        "plan", lambda state: [Scatter("research", {"topic": t}) for t in state["topics"]]
    )
    graph.add_edge("research", "summary")
    return graph


graph = build(MergePolicy.LAST_WINS)  # what selectgraph run/studio load

if __name__ == "__main__":
    for policy in (MergePolicy.LAST_WINS, MergePolicy.FIRST_WINS):
        result = build(policy).run({})
        print(f"{policy.value}: verdict={result.state['verdict']}")
    print("comments:", result.state["comments"])
    print("notes:", result.state["notes"])
