"""A graph asking a typed question, for the DBOS executor's tests.

A worker loads it as ``tests.executors.typed_graphs:typed``. Its nodes record their
executions like those of :mod:`tests.executors.graphs`.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from pydantic import BaseModel, Field

from selectgraph import END, AgentGraph, InterruptRequest, NodeContext
from tests.executors.graphs import record, work


class Verdict(BaseModel):
    """What the reviewer answers."""

    approved: bool
    score: int = Field(ge=0)


class TypedState(BaseModel):
    topic: str = ""
    approved: bool = False
    score: int = 0
    answer_type: str = ""
    published: bool = False


async def _draft(state: Any, context: NodeContext) -> dict[str, Any]:
    await work(context)
    return {"topic": state.data["topic"] or "tides"}


def _review(state: Any, context: NodeContext) -> Generator[InterruptRequest, Any, dict[str, Any]]:
    record(context, "asked")
    verdict = yield InterruptRequest("Verdict?", {"topic": state.data["topic"]}, Verdict)
    return {
        "approved": verdict.approved,
        "score": verdict.score,
        "answer_type": type(verdict).__name__,
    }


async def _publish(state: Any, context: NodeContext) -> dict[str, Any]:
    await work(context)
    return {"published": state.data["approved"]}


typed = AgentGraph("typed", state_schema=TypedState)
typed.add_node("draft", _draft, next_node="review")
typed.add_node("review", _review, next_node="publish")
typed.add_node("publish", _publish, next_node=END)
