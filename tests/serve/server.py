"""A served app on a real uvicorn server on a free local port, and the graphs the tests serve."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from typing import Annotated, Any

import uvicorn

from selectgraph import (
    END,
    Agent,
    AgentConfig,
    AgentGraph,
    ContextMode,
    InterruptRequest,
    MessagesState,
    append,
)
from selectgraph.testing import ScriptedProvider


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Server:
    """An ASGI app served by uvicorn in a thread: its URL, stopped on exit."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.port = free_port()
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> Server:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the server did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=20)


class Heard(MessagesState):
    heard: Annotated[list[str], append]


def hearing_graph(name: str = "hearing") -> AgentGraph:
    """Replies with everything it heard on its thread, so a test sees the thread's state."""
    graph = AgentGraph(name, state_schema=Heard, description="Repeats what it heard.")

    def hear(state: Any) -> Any:
        said = state["messages"][-1].text
        heard = [*state.get("heard", []), said]
        return {"heard": [said], "messages": [("assistant", " | ".join(heard))]}

    graph.add_node("hear", hear, next_node=END)
    return graph


def agent_graph(replies: list[str], name: str = "assistant") -> tuple[AgentGraph, ScriptedProvider]:
    """One agent answering from a script, streaming its text."""
    model = ScriptedProvider(replies)
    graph = AgentGraph(name)
    agent = Agent(AgentConfig(name="assistant"), provider=model)
    graph.add_node("assistant", agent, context_mode=ContextMode.FULL, next_node=END)
    return graph, model


def review_graph() -> AgentGraph:
    """Asks whether to publish the user's draft, then says what the answer was."""

    def review(state: Any) -> Any:
        answer = yield InterruptRequest(
            "Publish this draft?", {"draft": state["messages"][-1].text}
        )
        verdict = "published" if answer == "yes" else "kept back"
        return {"messages": [("assistant", f"The draft was {verdict}.")]}

    graph = AgentGraph("review", state_schema=MessagesState)
    graph.add_node("review", review, next_node=END)
    return graph


class Gate:
    """A node that waits until the test opens it, so a run stays busy on its thread."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def graph(self) -> AgentGraph:
        async def wait(state: Any) -> Any:
            self.entered.set()
            while not self.release.is_set():
                await asyncio.sleep(0.01)
            return {"messages": [("assistant", "done waiting")]}

        graph = AgentGraph("gate", state_schema=MessagesState)
        graph.add_node("wait", wait, next_node=END)
        return graph
