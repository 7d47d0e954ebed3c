"""An agent with a calculator tool computes with it and answers from the result, on SmolLM2.

Both routes: in-process (the call sampled under a grammar built from the tool's
schema) and behind llama.cpp's server (which ignores ``tool_choice="required"``,
so the provider falls back to a prompted JSON call; a named choice it honours).
Before issue 22 no tool was ever called: the in-process provider refused tools,
and the server answered ``required`` in text.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import pytest

from selectgraph import Agent, AgentConfig
from selectgraph.providers import OpenAIProvider

if TYPE_CHECKING:
    from selectgraph.providers._base import Provider, ToolChoice

pytestmark = pytest.mark.real_model


def multiply(a: int, b: int) -> int:
    """Multiply two integers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a * b


@pytest.mark.parametrize(
    "choice", ["required", {"type": "function", "name": "multiply"}], ids=["required", "named"]
)
def test_an_agent_computes_with_its_tool_and_answers_from_the_result(
    provider: Provider, choice: ToolChoice
) -> None:
    agent = Agent(
        AgentConfig(
            name="calc",
            instructions="Use the multiply tool, then give the result.",
            tool_choice=choice,
            max_tokens=32,
            temperature=0.0,
            # llama.cpp's server penalises repeats by default, which garbles copied digits.
            extra={"repeat_penalty": 1.0},
        ),
        provider=provider,
        tools=[multiply],
    )

    started = time.perf_counter()
    result = agent.run("What is 1234 times 5678?")
    elapsed = time.perf_counter() - started

    [call] = result.tool_calls
    assert call.name == "multiply"
    assert call.arguments == {"a": 1234, "b": 5678}
    assert "7006652" in result.content.replace(",", "")
    assert result.iterations == 2
    print(f"tool-calling agent ({choice!r}): {elapsed:.1f} s")


async def test_the_server_route_is_unpriced_under_the_default_model_name(
    llama_server: str,
) -> None:
    # The default model name (gpt-4o-mini) is sent and echoed back by the server.
    async with OpenAIProvider(base_url=llama_server, timeout=60.0) as provider:
        result = await Agent(AgentConfig(max_tokens=4), provider=provider).arun("Hi")

    assert result.usage.unpriced_calls == 1
    assert result.usage.known_cost_usd is None
