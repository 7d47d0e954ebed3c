"""Graphs the command-line tests run (imported by name: tests.cli.graphs:<name>)."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, ClassVar

from pydantic import BaseModel

from selectgraph import END, AgentGraph, InterruptRequest


def _ask(state: Any) -> Generator[InterruptRequest, Any, dict[str, Any]]:
    answer = yield InterruptRequest("Ship it?", payload={"version": state.get("version", 1)})
    return {"answer": answer, "__last_output__": f"answered {answer!r}"}


approval = AgentGraph("approval")
approval.add_node("prepare", lambda state: {"version": 2}, next_node="ask")
approval.add_node("ask", _ask, next_node=END)


def _boom(state: Any) -> dict[str, Any]:
    raise ConnectionError("the backend is down")


failing = AgentGraph("failing")
failing.add_node("first", lambda state: {"ok": True}, next_node="second")
failing.add_node("second", _boom, next_node=END)


def shout(state: Any) -> dict[str, Any]:
    """A node a spec file names."""
    return {"__last_output__": str(state.get("text", "")).upper()}


not_a_graph = 42


def _chat_graph() -> AgentGraph:
    from selectgraph import Agent, AgentConfig, ContextMode
    from selectgraph.providers import LocalProvider

    assistant = Agent(AgentConfig(name="assistant"), provider=LocalProvider())
    graph = AgentGraph("chat", goal="Chat with the user.")
    graph.add_node("assistant", assistant, context_mode=ContextMode.FULL, next_node=END)
    return graph


chat = _chat_graph()
"""An agent answering each message of a thread (offline: the local provider)."""


def _vote(state: Any) -> Generator[InterruptRequest, Any, dict[str, Any]]:
    said = state.messages[-1].text if state.messages else ""
    answer = yield InterruptRequest(f"Approve {said!r}?", response_schema={"type": "boolean"})
    return {"__last_output__": f"{said}: {'approved' if answer else 'refused'}"}


vote = AgentGraph("vote")
vote.add_node("vote", _vote, next_node=END)
"""Asks a typed question (a boolean) about each message."""


class Asked(BaseModel):
    """A state whose text input goes to ``question``."""

    input_field: ClassVar[str] = "question"
    question: str = ""
    answer: str = ""


def _answer(state: Any) -> dict[str, Any]:
    reply = f"you asked: {state['question']}"
    return {"answer": reply, "__last_output__": reply}


asker = AgentGraph("asker", state_schema=Asked)
asker.add_node("answer", _answer, next_node=END)
