"""Graphs the studio tests serve."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Generator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

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


def chat_graph() -> AgentGraph:
    """An agent that answers each message of a thread (offline: the local provider)."""
    from selectgraph import Agent, AgentConfig, ContextMode
    from selectgraph.providers import LocalProvider

    assistant = Agent(AgentConfig(name="assistant"), provider=LocalProvider())
    graph = AgentGraph("chat", goal="Chat with the user.")
    graph.add_node("assistant", assistant, context_mode=ContextMode.FULL, next_node=END)
    return graph


class Gate:
    """Holds a node until released: a run stays busy for as long as a test needs.

    ``release`` is a file (so another process can be released) or, in this process,
    ``open()``. The node polls it; nothing waits on a clock.
    """

    def __init__(self, release: Path) -> None:
        self.release = release
        self.entered = threading.Event()

    def open(self) -> None:
        self.release.write_text("go")

    async def __call__(self, state: Any) -> dict[str, Any]:
        self.entered.set()
        while not self.release.exists():
            await asyncio.sleep(0.01)
        said = state.messages[-1].text if state.messages else ""
        return {"__last_output__": f"heard {said}"}


def gated_graph(gate: Gate) -> AgentGraph:
    """``first`` (quick), then ``wait`` (held by ``gate``), then the end."""
    graph = AgentGraph("gated")
    graph.add_node("first", lambda state: {"first": True}, next_node="wait")
    graph.add_node("wait", gate, next_node=END)
    return graph


class Verdict(BaseModel):
    """A reviewer's answer, as a form asks for it."""

    approve: bool
    score: int = Field(ge=1, le=5, description="1 (poor) to 5 (great)")
    tone: Literal["formal", "casual"]
    note: str
    tags: list[str] = []


def review(state: Any) -> Generator[InterruptRequest, Any, dict[str, Any]]:
    verdict = yield InterruptRequest(
        "Review the draft", payload={"draft": state["text"]}, response_schema=Verdict
    )
    assert isinstance(verdict, Verdict)  # the node receives the model, not a dict
    return {"review": verdict.model_dump(), "__last_output__": f"score={verdict.score}"}


def review_graph() -> AgentGraph:
    """A question whose answer must fit :class:`Verdict`."""
    graph = AgentGraph("review")
    graph.add_node("review", review, next_node=END)
    return graph


def fragile_ticket_graph() -> AgentGraph:
    """The ticket graph whose ``approve`` step fails on the category ``refunds``."""

    def approve_or_fail(state: Any) -> dict[str, Any]:
        if state["category"] == "refunds":
            raise RuntimeError("refunds cannot be approved here")
        return {"approved": True}

    graph = AgentGraph("tickets", state_schema=Ticket)
    graph.add_node("classify", classify, next_node="approve")
    graph.add_node("approve", approve_or_fail, next_node=END)
    return graph


def choice_graph() -> AgentGraph:
    """A question whose answer is one of two words (a JSON schema dict, not a model)."""

    def choose(state: Any) -> Generator[InterruptRequest, Any, dict[str, Any]]:
        picked = yield InterruptRequest(
            "Ship it?", response_schema={"type": "string", "enum": ["ship", "hold"]}
        )
        return {"picked": picked, "__last_output__": f"picked {picked}"}

    graph = AgentGraph("choice")
    graph.add_node("choose", choose, next_node=END)
    return graph


def words_graph() -> AgentGraph:
    """``draft`` then ``final``: each changes ``word``; ``draft`` adds ``count``."""
    graph = AgentGraph("words")
    graph.add_node("draft", lambda state: {"word": "draft", "count": 1}, next_node="final")
    graph.add_node("final", lambda state: {"word": "final", "count": 2}, next_node=END)
    return graph


def lookup(query: str) -> str:
    """Look ``query`` up in a one-entry encyclopedia.

    Args:
        query: What to look up.
    """
    return f"{query}: birds of prey that hunt at night"


def nested_tool_graph() -> AgentGraph:
    """``prepare`` (a subgraph whose node ``tidy`` runs inside it), then ``helper``: an
    agent whose model (scripted) calls the ``lookup`` tool once, then answers."""
    from selectgraph import Agent, AgentConfig
    from selectgraph.providers import LocalReply
    from selectgraph.testing import ScriptedProvider

    inner = AgentGraph("inner")
    inner.add_node("tidy", lambda state: {"tidied": True}, next_node=END)
    provider = ScriptedProvider(
        [LocalReply.tool_call("lookup", {"query": "owls"}, call_id="c1"), "Owls hunt at night."]
    )
    helper = Agent(AgentConfig(name="helper"), provider=provider, tools=[lookup])
    graph = AgentGraph("nested")
    graph.add_subgraph("prepare", inner, next_node="helper")
    graph.add_node("helper", helper, next_node=END)
    return graph
