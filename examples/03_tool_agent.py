"""An agent that calls typed Python functions as tools.

Offline, the local provider is scripted to make the tool calls a real model
would make, so the whole loop (call -> validated arguments -> result -> answer)
runs without a key.

Run: python examples/03_tool_agent.py
"""

from __future__ import annotations

from selectgraph import Agent, AgentConfig, AgentGraph, tool
from selectgraph.agents import default_provider
from selectgraph.providers import CompletionRequest, LocalProvider, LocalReply, Provider


@tool
def get_weather(city: str, unit: str = "celsius") -> dict[str, object]:
    """Current weather for a city.

    Args:
        city: City name, e.g. "Paris".
        unit: "celsius" or "fahrenheit".
    """
    readings = {"paris": 18, "oslo": 4}
    degrees = readings.get(city.lower(), 21)
    if unit == "fahrenheit":
        degrees = round(degrees * 9 / 5 + 32)
    return {"city": city, "temperature": degrees, "unit": unit}


@tool
def compare(a: float, b: float) -> str:
    """Say which of two numbers is larger."""
    return "equal" if a == b else ("first" if a > b else "second")


def answer_from_tools(request: CompletionRequest) -> str:
    results = [m.text for m in request.messages if m.role.value == "tool"]
    return "From the tools: " + "; ".join(results)


def model() -> Provider:
    provider = default_provider()
    if isinstance(provider, LocalProvider):  # offline: play the model's moves
        return LocalProvider(
            script=[
                LocalReply(  # two calls in one turn: they run concurrently
                    tool_calls=[
                        *LocalReply.tool_call("get_weather", {"city": "Paris"}).tool_calls,
                        *LocalReply.tool_call("get_weather", {"city": "Oslo"}).tool_calls,
                    ]
                ),
                LocalReply.tool_call("compare", {"a": 18, "b": 4}),
                answer_from_tools,
            ]
        )
    return provider


agent = Agent(
    AgentConfig(name="weather", instructions="Use the tools; answer in one sentence."),
    provider=model(),
    tools=[get_weather, compare],
)
graph = AgentGraph.chain(agent)  # the agent as a one-node graph, for selectgraph run/studio

if __name__ == "__main__":
    result = agent.run("Is it warmer in Paris or in Oslo right now?")
    for call in result.tool_calls:
        print(f"tool call: {call.name}({call.arguments})")
    print(result.content)
    print(f"model calls: {result.iterations}, tokens: {result.usage.total_tokens}")
