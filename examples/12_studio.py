"""A newsroom graph to watch in the studio: parallel research, a writer, a human editor.

    intake -> (science, market in parallel) -> write -> editor (asks you) -> publish
                                                  ^------- "revise" -------'

Watch it run in the browser, answer the editor's question in the form:

    selectgraph studio examples/12_studio.py:graph

Or run it in the terminal, answering at the prompt:

    selectgraph run examples/12_studio.py:graph --input '{"topic": "sodium batteries"}'

Offline the agents use the local provider, slowed down a little so the page can show
each node lighting up; with an API key set they ask a real model.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from typing import Annotated, Any

from pydantic import BaseModel

from selectgraph import END, Agent, AgentConfig, AgentGraph, InterruptRequest, append
from selectgraph.agents import default_provider
from selectgraph.providers import LocalProvider, Provider


class Newsroom(BaseModel):
    """The newsroom's state."""

    topic: str = "grid batteries"
    notes: Annotated[list[str], append] = []
    draft: str = ""
    verdict: str = ""
    revisions: int = 0


def _provider() -> Provider:
    chosen = default_provider()
    if isinstance(chosen, LocalProvider) and not os.environ.get("SELECTGRAPH_STUDIO_FAST"):
        return LocalProvider(latency=0.4)  # slow enough to watch
    return chosen


PROVIDER = _provider()
science = Agent(
    AgentConfig(name="science", instructions="Two facts on the science."),
    provider=PROVIDER,
)
market = Agent(
    AgentConfig(name="market", instructions="Two facts on the market."),
    provider=PROVIDER,
)
writer = Agent(
    AgentConfig(name="writer", instructions="Write a short news item."),
    provider=PROVIDER,
)


def intake(state: Any) -> dict[str, Any]:
    """Frame the assignment."""
    return {"notes": [f"assignment: {state['topic']}"]}


def ask(state: Any) -> str:
    """What each researcher is asked."""
    return f"{state['topic']}: what should a reader know?"


def noted(name: str) -> Any:
    """Keep a researcher's answer as a note."""
    return lambda result, state: {"notes": [f"{name}: {result.content}"]}


def drafted(result: Any, state: Any) -> dict[str, Any]:
    """Keep the writer's answer as the draft."""
    return {"draft": result.content, "revisions": state["revisions"] + 1}


def editor(state: Any) -> Generator[InterruptRequest, str, dict[str, Any]]:
    """A person reads the draft: publish or revise."""
    answer = yield InterruptRequest(
        "Publish this draft? (publish / revise)", payload={"draft": state["draft"]}
    )
    return {"verdict": str(answer).strip().lower()}


def publish(state: Any) -> dict[str, Any]:
    """Send it out."""
    return {"__last_output__": f"PUBLISHED: {state['draft']}"}


graph = AgentGraph("newsroom", state_schema=Newsroom)
graph.add_node("intake", intake)
graph.add_node("science", science, input_transform=ask, output_transform=noted("science"))
graph.add_node("market", market, input_transform=ask, output_transform=noted("market"))
graph.add_edge("intake", ["science", "market"])
graph.add_node(
    "write",
    writer,
    input_transform=lambda state: "\n".join(state["notes"]),
    output_transform=drafted,
    next_node="editor",
)
graph.add_edge("science", "write")
graph.add_edge("market", "write")
graph.add_node("editor", editor)
graph.add_edge("editor", "write", condition="verdict == 'revise' and revisions < 3")
graph.add_edge("editor", "publish")
graph.add_node("publish", publish, next_node=END)
graph.set_entry("intake")

if __name__ == "__main__":
    graph.visualize()
    print("Watch it run:  selectgraph studio examples/12_studio.py:graph")
