"""The scale-out benchmark's graph: three nodes, each awaiting NODE_SECONDS (an LLM call's shape).

Workers import it by name (``benchmarks.scaleout_graph:chain3``). Each node
appends a start line and a ``done`` line to ``SG_BENCH_EFFECTS`` (one file per
worker process, so concurrent writers never interleave), which the benchmark
reads to count node executions: how many ran twice, and whether any that
finished ran again.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from selectgraph import END, AgentGraph, NodeContext

NODE_SECONDS = float(os.environ.get("SG_BENCH_NODE_SECONDS", "0.2"))
_effects = os.environ.get("SG_BENCH_EFFECTS")
_file = open(_effects, "a", buffering=1, encoding="utf-8") if _effects else None  # noqa: SIM115


def _note(context: NodeContext, what: str) -> None:
    if _file is not None:
        _file.write(f"{context.run_id} {context.node} {what} {time.time():.6f}\n")


async def _node(state: Any, context: NodeContext) -> dict[str, Any]:
    _note(context, "start")
    await asyncio.sleep(NODE_SECONDS)
    _note(context, "done")
    return {"done": state.data.get("done", 0) + 1}


chain3 = AgentGraph("chain3")
chain3.add_node("a", _node, next_node="b")
chain3.add_node("b", _node, next_node="c")
chain3.add_node("c", _node, next_node=END)


def _tick(state: Any) -> dict[str, Any]:
    return {"i": state.data.get("i", 0) + 1}


def _again(state: Any) -> str | Any:
    return "tick" if state.data["i"] < state.data["steps"] else END


loop = AgentGraph("loop", max_steps=None, enable_loop_detection=False, stall_threshold=None)
loop.add_node("tick", _tick)
loop.add_conditional_edge("tick", _again)
