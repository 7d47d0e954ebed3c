"""The graph whose paused run ``legacy.sqlite`` holds, written by selectgraph before the
module layout changed (issue 20): its checkpoints name library classes by their old
module paths (``selectgraph.core._messages:Message``, ``selectgraph.core._result:NodeResult``,
``selectgraph.agents._result:AgentResult``...). ``make_fixture.py`` wrote it; the test
continues it with the current code. Public API only, so both versions import it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any

from pydantic import BaseModel

from selectgraph import Agent, AgentConfig, AgentGraph, GraphState, InterruptRequest, append
from selectgraph.testing import ScriptedProvider


class Draft(BaseModel):
    topic: str = ""
    notes: Annotated[list[str], append] = []
    approved: bool = False


def outline(state: GraphState) -> dict[str, Any]:
    return {"notes": [f"outline of {state.data['topic']}"]}


def review(state: GraphState) -> Iterator[Any]:
    answer = yield InterruptRequest(prompt="Approve the draft?", payload={"notes": 2})
    state.data["approved"] = answer == "yes"
    state.data["notes"] = [f"reviewed: {answer}"]


def build(replies: list[str]) -> AgentGraph:
    writer = Agent(AgentConfig(name="writer"), provider=ScriptedProvider(replies))
    graph = AgentGraph("legacy", state_schema=Draft)
    graph.add_node("outline", outline, next_node="writer")
    graph.add_node("writer", writer, next_node="review")
    graph.add_node("review", review, next_node="publish")
    graph.add_node("publish", lambda state: {"notes": ["published"]})
    graph.add_edge("publish", AgentGraph.END)
    return graph
