"""A run on a thread in a process of its own, for ``test_thread_processes``.

The child runs the same chat graph as the test; its ``wait`` node tells the
test it is there and holds until the test lets it go, so the thread is busy
for exactly as long as the test needs, whatever the machine's speed.
"""

from __future__ import annotations

import traceback
from typing import Annotated, Any

from pydantic import BaseModel

from selectgraph import END, AgentGraph, append
from tests.persistence._worker import open_store

WAIT: float = 120.0
"""Seconds either side waits for the other's signal before giving up (a hung test fails)."""


class Chat(BaseModel):
    turns: int = 0
    heard: Annotated[list[str], append] = []


def chat_graph(hold: Any = None) -> AgentGraph:
    """``first`` counts the turn, ``wait`` (held by ``hold`` when given) hears the message."""

    def wait(state: Any) -> dict[str, Any]:
        if hold is not None:
            entered, release = hold
            entered.set()
            if not release.wait(WAIT):
                raise TimeoutError("the test never released the run")
        return {"heard": [state.messages[-1].text]}

    graph = AgentGraph("chat", state_schema=Chat)
    graph.add_node("first", lambda state: {"turns": state["turns"] + 1}, next_node="wait")
    graph.add_node("wait", wait, next_node=END)
    return graph


def run_held(
    spec: dict[str, str], thread_id: str, text: str, entered: Any, release: Any, results: Any
) -> None:
    """Run ``text`` on the thread, held in ``wait``; report how the run ended."""
    try:
        store = open_store(spec)
        result = chat_graph((entered, release)).run(
            text, thread_id=thread_id, checkpoint_store=store
        )
        results.put(("done", result.run_id, result.stop_reason, result.state.data))
        store.close()
    except BaseException:
        results.put(("error", traceback.format_exc()))
