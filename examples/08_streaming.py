"""Stream a run's events to the terminal as they happen, agent text included.

Run: python examples/08_streaming.py
"""

from __future__ import annotations

import asyncio

from selectgraph import Agent, AgentConfig, AgentGraph
from selectgraph.observe import EdgeFired, NodeChunk, NodeFinished, NodeStarted, RunFinished

graph = AgentGraph.chain(
    Agent(AgentConfig(name="researcher", instructions="List three facts.")),
    Agent(AgentConfig(name="writer", instructions="Turn the facts into a paragraph.")),
)


async def main() -> None:
    async for event in graph.astream("Tell me about octopuses"):
        if isinstance(event, NodeStarted):
            print(f"\n[{event.node}] ", end="", flush=True)
        elif isinstance(event, NodeChunk):
            print(event.delta, end="", flush=True)
        elif isinstance(event, NodeFinished):
            print(f"\n  ({event.duration_ms:.1f} ms)")
        elif isinstance(event, EdgeFired):
            print(f"  -> {event.target}")
        elif isinstance(event, RunFinished) and event.result is not None:
            print(f"\ndone: {event.steps} steps, {event.result.total_usage.total_tokens} tokens")


if __name__ == "__main__":
    asyncio.run(main())
