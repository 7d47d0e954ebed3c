"""A writer/critic loop: a judge retries the writer, and a critic routes back to it.

The writer's judge rejects drafts that are too short (the agent retries with
the feedback, inside the node). The critic then scores the draft; the graph
routes back to the writer until the score is high enough, and the writer is
told on each revisit what it wrote before.

Run: python examples/04_writer_critic.py
"""

from __future__ import annotations

from typing import Any

from selectgraph import END, Agent, AgentConfig, AgentGraph, AgentResult, GraphState, Verdict
from selectgraph.agents import default_provider
from selectgraph.providers import CompletionRequest, LocalProvider, Provider


def long_enough(result: AgentResult) -> Verdict:
    if len(result.content.split()) < 12:
        return Verdict.retry("Too short: write at least twelve words.")
    return Verdict.accept()


def offline_writer(request: CompletionRequest) -> str:
    # A stand-in model whose drafts grow with each judge retry and each visit.
    system = request.messages[0].text
    visit = int(system.split("This is visit ")[1].split()[0]) if "This is visit" in system else 1
    attempt = 1 + sum("A reviewer asked for changes" in m.text for m in request.messages)
    words = ["graphs"] * (3 * attempt + 4 * visit)
    return f"Draft {visit}.{attempt}: " + " ".join(words)


def writer_model() -> Provider:
    provider = default_provider()
    return (
        LocalProvider(script=[offline_writer] * 20)
        if isinstance(provider, LocalProvider)
        else provider
    )


writer = Agent(
    AgentConfig(name="writer", instructions="Write a short paragraph about the topic."),
    provider=writer_model(),
    judge=long_enough,
)


def critic(state: GraphState) -> dict[str, Any]:
    words = len(str(state.last_output).split())
    return {"score": min(10, words // 2), "critiques": state.get("critiques", 0) + 1}


graph = AgentGraph("essay", goal="A paragraph on why graphs suit agent workflows.")
graph.add_node("writer", writer, next_node="critic")
graph.add_node("critic", critic)
graph.add_edge("critic", "writer", condition="score < 8 and critiques < 4")
graph.add_edge("critic", END)
graph.set_entry("writer")

if __name__ == "__main__":
    result = graph.run("Write about graph-based agent workflows")
    for name, node_result in result.state.history:
        if name == "writer":
            attempts = node_result.agent_result.attempts
            print(f"writer visit {node_result.visit}: {attempts} attempt(s)")
    print(f"final score: {result.state['score']} after {result.state['critiques']} critiques")
    print(result.content)
