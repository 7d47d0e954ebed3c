"""Graphs the executor tests run in process and on DBOS workers (``tests.executors.graphs:NAME``).

Every node that does work records it: with ``SG_EFFECTS`` set to a file, each
execution appends one JSON line naming the run, the task (step, node, branch)
and the worker's pid. A test reads the file to count how often each task ran.
``SG_NODE_SECONDS`` makes the work take that long (an LLM call's shape).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import AsyncGenerator, Generator
from typing import Annotated, Any

from pydantic import BaseModel

from selectgraph import (
    END,
    Agent,
    AgentConfig,
    AgentGraph,
    ErrorPolicy,
    InterruptRequest,
    NodeContext,
    Scatter,
    append,
)
from selectgraph.compile._options import GraphInput
from selectgraph.providers import LocalProvider


def record(context: NodeContext, what: str = "") -> None:
    """Append this execution to the effects file (when the test asked for one)."""
    path = os.environ.get("SG_EFFECTS")
    if not path:
        return
    branch = context.branch.task_id if context.branch is not None else ""
    line = {
        "run": context.run_id,
        "task": f"{branch}/{context.step}:{context.node}",
        "node": context.node,
        "what": what,
        "pid": os.getpid(),
        "at": time.time(),
    }
    with open(path, "a", encoding="utf-8") as file:
        file.write(json.dumps(line) + "\n")


async def work(context: NodeContext, seconds: float | None = None) -> None:
    """The node's effect, then its 'model call'; a second record says it finished."""
    record(context)
    if seconds is None:
        seconds = float(os.environ.get("SG_NODE_SECONDS", "0"))
    if seconds:
        await asyncio.sleep(seconds)
    record(context, "done")


# ---------------------------------------------------------------- three nodes
async def _step(state: Any, context: NodeContext) -> dict[str, Any]:
    await work(context)
    return {"trail": [*state.data.get("trail", []), context.node]}


three = AgentGraph("three")
three.add_node("a", _step, next_node="b")
three.add_node("b", _step, next_node="c")
three.add_node("c", _step, next_node=END)


# ------------------------------------------------------------------- approval
class Draft(BaseModel):
    """A typed value in the state: the worker decodes it through the graph's allow-list."""

    title: str
    words: int


async def _draft(state: Any, context: NodeContext) -> dict[str, Any]:
    await work(context)
    topic = state.data["topic"]
    return {"draft": Draft(title=f"On {topic}", words=3)}


def _ask(state: Any, context: NodeContext) -> Generator[InterruptRequest, Any, dict[str, Any]]:
    record(context, "asked")
    verdict = yield InterruptRequest(
        "Publish this draft?", payload={"title": state.data["draft"].title}
    )
    return {"verdict": verdict}


async def _publish(state: Any, context: NodeContext) -> dict[str, Any]:
    await work(context)
    return {"published": state.data["verdict"] == "yes", "__last_output__": "done"}


class ApprovalState(BaseModel):
    topic: str = "the weather"
    draft: Draft | None = None
    verdict: str | None = None
    published: bool = False


approval = AgentGraph("approval", state_schema=ApprovalState)
approval.add_node("draft", _draft, next_node="ask")
approval.add_node("ask", _ask, next_node="publish")
approval.add_node("publish", _publish, next_node=END)


# -------------------------------------------------------------------- fan-out
class FanState(BaseModel):
    topics: list[str] = []
    notes: Annotated[list[str], append] = []
    summary: str = ""


async def _plan(state: Any, context: NodeContext) -> dict[str, Any]:
    await work(context)
    return {"topics": ["tides", "winds", "clouds"]}


def _scatter(state: Any) -> list[Scatter]:
    return [Scatter("research", {"topic": topic}) for topic in state.data["topics"]]


async def _research(state: Any, context: NodeContext) -> dict[str, Any]:
    # One topic can be made slow, so a test can stop a worker while only it runs.
    slow = state.data["topic"] == os.environ.get("SG_SLOW_TOPIC")
    await work(context, 3.0 if slow else None)
    return {"notes": [f"note on {state.data['topic']}"]}


async def _member(state: Any, context: NodeContext) -> dict[str, Any]:
    await work(context)
    return {"notes": [f"check by {context.node}"]}


async def _summarize(state: Any, context: NodeContext) -> dict[str, Any]:
    await work(context)
    return {"summary": "; ".join(sorted(state.data["notes"]))}


fanout = AgentGraph("fanout", state_schema=FanState)
fanout.add_node("plan", _plan)
fanout.add_conditional_edges("plan", _scatter)
fanout.add_node("research", _research, next_node="review")
fanout.add_node("fact_check", _member)
fanout.add_node("style_check", _member)
fanout.add_parallel_nodes("review", ["fact_check", "style_check"])
fanout.add_edge("review", "summarize")
fanout.add_node("summarize", _summarize, next_node=END)


# --------------------------------------------------------------------- agents
def _agents() -> AgentGraph:
    provider = LocalProvider()
    graph = AgentGraph("agents")
    graph.add_node(
        "writer",
        Agent(AgentConfig(instructions="Write one line."), provider=provider, name="writer"),
    )
    graph.add_node(
        "critic",
        Agent(AgentConfig(instructions="Judge the line."), provider=provider, name="critic"),
    )
    graph.add_edge("writer", "critic")
    graph.add_llm_edge("critic", ["writer", END], fallback=END, provider=provider)
    return graph


agents = _agents()


# ------------------------------------------------------------------ subgraph
inner = AgentGraph("inner")
inner.add_node("one", _step, next_node="two")
inner.add_node("two", _step, next_node=END)

nested = AgentGraph("nested")
nested.add_node("before", _step, next_node="inner")
nested.add_subgraph("inner", inner, input_map={"trail": "trail"}, output_map={"trail": "trail"})
nested.add_edge("inner", "after")
nested.add_node("after", _step, next_node=END)


# -------------------------------------------------------------------- failing
async def _boom(state: Any, context: NodeContext) -> dict[str, Any]:
    await work(context)
    raise ConnectionError("the backend is down")


failing = AgentGraph("failing")
failing.add_node("first", _step, next_node="second")
failing.add_node("second", _boom, next_node=END)

skipping = AgentGraph("skipping")
skipping.add_node("first", _step, next_node="flaky")
skipping.add_node("flaky", _boom, next_node="last", error_policy=ErrorPolicy.SKIP)
skipping.add_node("last", _step, next_node=END)


# ------------------------------------------------------------ a streaming node
async def _stream(state: Any, context: NodeContext) -> AsyncGenerator[Any, None]:
    await work(context)
    yield {"trail": ["streamed"]}


EQUIVALENT: dict[str, tuple[AgentGraph, GraphInput]] = {
    "three": (three, {"trail": []}),
    "fanout": (fanout, {}),
    "agents": (agents, "Say something about tides."),
    "nested": (nested, {"trail": []}),
    "skipping": (skipping, {"trail": []}),
}
"""Graphs (and inputs) whose final state must be the same in process and on DBOS."""
