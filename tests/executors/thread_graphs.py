"""A conversation graph for the DBOS executor's thread tests (``thread_graphs:chat``).

``hold`` records that it started, then waits until the test opens its gate (a
file named after the run in ``SG_GATES``), so a test knows a run is busy in it
without guessing how long anything takes. Without ``SG_GATES`` it does not wait.
``reply`` records the conversation so far. A prompt ``"ask"`` makes ``ask``
put a question first.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Generator
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel

from selectgraph import END, AgentGraph, InterruptRequest, NodeContext, append
from tests.executors.graphs import record


class ChatState(BaseModel):
    heard: Annotated[list[str], append] = []
    held: Annotated[list[str], append] = []
    replies: Annotated[list[str], append] = []
    turns: int = 0


def gate(run_id: str) -> Path | None:
    """The file that lets run ``run_id`` out of ``hold`` (None: runs are not held)."""
    folder = os.environ.get("SG_GATES")
    return Path(folder) / run_id if folder else None


def _ask(state: Any, context: NodeContext) -> Generator[InterruptRequest, Any, dict[str, Any]]:
    if not state.messages or state.messages[-1].text != "ask":
        return {}
    record(context, "asked")
    answer = yield InterruptRequest("Go on?", {"turn": state.data["turns"]})
    return {"held": [f"answered {answer}"]}


async def _hold(state: Any, context: NodeContext) -> dict[str, Any]:
    said = state.messages[-1].text if state.messages else ""
    record(context)
    opened = gate(context.run_id)
    while opened is not None and not opened.exists():
        await asyncio.sleep(0.02)
    record(context, "done")
    return {"heard": [said], "turns": state.data["turns"] + 1}


async def _reply(state: Any, context: NodeContext) -> dict[str, Any]:
    record(context)
    return {"replies": [f"after {len(state.data['heard'])} heard"]}


chat = AgentGraph("chat", state_schema=ChatState)
chat.add_node("ask", _ask, next_node="hold")
chat.add_node("hold", _hold, next_node="reply")
chat.add_node("reply", _reply, next_node=END)
