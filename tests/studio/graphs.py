"""Graphs the studio tests serve."""

from __future__ import annotations

import asyncio
from collections.abc import Generator
from typing import Any

from pydantic import BaseModel

from selectgraph import END, AgentGraph, InterruptRequest, NodeContext


class Ticket(BaseModel):
    """A support ticket's state."""

    text: str = ""
    category: str = ""
    approved: bool | None = None


def classify(state: Any) -> dict[str, Any]:
    return {"category": "billing" if "invoice" in state["text"] else "general"}


def approve(state: Any) -> Generator[InterruptRequest, Any, dict[str, Any]]:
    answer = yield InterruptRequest("Send the reply?", payload={"category": state["category"]})
    return {"approved": answer == "yes", "__last_output__": f"approved={answer == 'yes'}"}


def ticket_graph() -> AgentGraph:
    graph = AgentGraph("tickets", state_schema=Ticket)
    graph.add_node("classify", classify, next_node="approve")
    graph.add_node("approve", approve, next_node=END)
    return graph


def chatty_graph(events: int) -> AgentGraph:
    """One node publishing ``events`` custom events, then finishing."""

    def talk(state: Any, context: NodeContext) -> dict[str, Any]:
        for n in range(events):
            context.emit_custom({"n": n})
        return {"said": events}

    graph = AgentGraph("chatty")
    graph.add_node("talk", talk, next_node=END)
    return graph


def slow_graph(seconds: float) -> AgentGraph:
    async def wait(state: Any) -> dict[str, Any]:
        await asyncio.sleep(seconds)
        return {"waited": seconds}

    graph = AgentGraph("slow")
    graph.add_node("wait", wait, next_node=END)
    return graph
