"""A real model calls a graph as a tool; a question inside the graph pauses the run.

SmolLM2 is told to call the tool (a named tool choice: it rarely calls one of its
own accord), so what is checked is what only the graph can have made: the tool
result is the graph's answer to the arguments the model wrote, and after the
question is answered the run ends with two model calls in all: the first answer
was replayed on resume, not asked for again.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from selectgraph import END, Agent, AgentConfig, AgentGraph, InterruptRequest, Role
from selectgraph.providers._base import Provider

pytestmark = [pytest.mark.real_model, pytest.mark.slow]


def reviewed_echo() -> AgentGraph:
    """Shouts its input back once a reviewer agrees."""

    def review(state: Any) -> Generator[Any, Any, dict[str, Any]]:
        text = state.messages[0].text
        verdict = yield InterruptRequest(prompt=f"send {text!r}?")
        return {"__last_output__": f"{text.upper()} ({verdict})"}

    graph = AgentGraph(name="shout", description="Shout a word back, once approved")
    graph.add_node("review", review)
    graph.add_edge("review", END)
    return graph


def test_a_real_model_calls_a_graph_tool_that_pauses_and_the_run_resumes(
    provider: Provider,
) -> None:
    agent = Agent(
        AgentConfig(
            name="caller",
            instructions="Call the shout tool with the word, then say what it returned.",
            tool_choice={"type": "function", "name": "shout"},
            max_tokens=32,
            temperature=0.0,
        ),
        provider=provider,
        tools=[reviewed_echo().as_tool()],
    )
    graph = AgentGraph(name="outer")
    graph.add_node("caller", agent)
    graph.add_edge("caller", END)

    paused = graph.run("Shout the word hello.")

    assert paused.stop_reason == "interrupted"
    [question] = paused.interrupts
    assert question.node == "review"

    done = graph.resume(question.id, "approved")

    assert done.stop_reason == "end"
    [result] = done.node_results["caller"]
    assert result.agent_result is not None
    [call] = result.agent_result.tool_calls
    said = call.arguments["input"]
    assert isinstance(said, str)
    assert question.prompt == f"send {said!r}?"
    [answer] = [m for m in result.agent_result.messages if m.role is Role.TOOL]
    assert answer.text == f"{said.upper()} (approved)"
    assert done.total_usage.calls == 2
