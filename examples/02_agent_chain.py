"""A three-agent pipeline in one line.

Offline it uses the local provider (deterministic echo replies); with
OPENAI_API_KEY or ANTHROPIC_API_KEY set, the same code talks to a real model.

Run: python examples/02_agent_chain.py
Watch it: selectgraph studio examples/02_agent_chain.py (it loads `graph`)
"""

from __future__ import annotations

from selectgraph import Agent, AgentConfig, AgentGraph

planner = Agent(AgentConfig(name="planner", instructions="Outline the post in 3 bullet points."))
writer = Agent(AgentConfig(name="writer", instructions="Write the post from the outline."))
reviewer = Agent(AgentConfig(name="reviewer", instructions="Polish the post; return it whole."))
graph = AgentGraph.chain(planner, writer, reviewer)

if __name__ == "__main__":
    result = graph.run("Write a blog post about AI agents")
    print(result.content)
    print()
    print(f"nodes: {' -> '.join(result.node_order)}")
    usage = result.total_usage
    print(f"tokens: {usage.input_tokens} in, {usage.output_tokens} out, cost ${usage.cost_usd:.4f}")
