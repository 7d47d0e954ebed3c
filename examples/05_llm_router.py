"""Let a model route: an llm_decide edge picks the team for a support ticket.

The model is told the graph's goal, the triage node's output and each
candidate's description. If its reply cannot be used, the fallback fires.

Run: python examples/05_llm_router.py
"""

from __future__ import annotations

from typing import Any

from selectgraph import END, Agent, AgentConfig, AgentGraph, GraphState
from selectgraph.agents import default_provider
from selectgraph.observe import EdgeFired
from selectgraph.providers import CompletionRequest, LocalProvider, LocalReply, Provider


def offline_router(request: CompletionRequest) -> LocalReply:
    # A stand-in for a fast model: route on a keyword of what triage produced.
    prompt = request.messages[-1].text
    text = prompt.split("just produced:", 1)[1].split("Choose what runs next", 1)[0].lower()
    target = "billing" if "invoice" in text or "charged" in text else "technical"
    return LocalReply.json({"target": target, "reasoning": f"the ticket reads like {target}"})


def router_model() -> Provider:
    provider = default_provider()
    return (
        LocalProvider(script=[offline_router] * 10)
        if isinstance(provider, LocalProvider)
        else provider
    )


def team(name: str) -> Any:
    def handle(state: GraphState) -> dict[str, str]:
        return {"handled_by": name}

    return handle


def build() -> AgentGraph:
    graph = AgentGraph("support", goal="Send each ticket to the team that can solve it.")
    graph.add_node(
        "triage",
        Agent(AgentConfig(name="triage", instructions="Summarise the ticket in one line.")),
    )
    graph.add_node("billing", team("billing"), next_node=END, description="invoices, refunds")
    graph.add_node("technical", team("technical"), next_node=END, description="bugs, outages")
    graph.add_node("general", team("general"), next_node=END, description="anything else")
    graph.add_llm_edge(
        "triage", ["billing", "technical", "general"], fallback="general", provider=router_model()
    )
    graph.set_entry("triage")
    return graph


graph = build()

if __name__ == "__main__":
    for ticket in ("I was charged twice on my last invoice", "The app crashes on login"):
        result = graph.run(ticket)
        decision = next(e for e in result.trace if isinstance(e, EdgeFired) and e.kind == "llm")
        print(f"{ticket!r} -> {result.state['handled_by']} ({decision.reason})")
